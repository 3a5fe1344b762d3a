"""Builds the CMake project before packaging torch_neuronsim, so that
`pip install --no-build-isolation [-e] .` alone produces a working package:
the C++ library is built into backend/python/torch_neuronsim/lib by CMake
(Ninja, in build/ unless NSIM_BUILD_DIR says otherwise).  Metadata lives in
pyproject.toml."""
import os
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))


class build_with_cmake(build_py):
    def run(self):
        build_dir = os.environ.get("NSIM_BUILD_DIR", os.path.join(ROOT, "build"))
        if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
            subprocess.check_call(["cmake", "-S", ROOT, "-B", build_dir, "-G", "Ninja",
                                   "-DCMAKE_BUILD_TYPE=RelWithDebInfo"])
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "torch_neuronsim",
                               "-j", str(os.cpu_count() or 2)])
        super().run()


setup(cmdclass={"build_py": build_with_cmake})
