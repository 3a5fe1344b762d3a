// tests/example_programs.h -- the example programs (examples/programs/
// *.nsasm) as the directory holds them, sorted: every C++ test that runs
// "every example" runs the same set, and a new example joins them all (the
// Python suites glob the same directory, tests/python/conftest.py).
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

inline std::vector<std::string> nsim_example_paths()
{
	std::vector<std::string> v;
	for (const auto &e : std::filesystem::directory_iterator(NSIM_EXAMPLES_DIR))
		if (e.path().extension() == ".nsasm")
			v.push_back(e.path().string());
	std::sort(v.begin(), v.end());
	return v;
}
