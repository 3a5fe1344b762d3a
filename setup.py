"""Builds the CMake project before packaging torch_neuronsim, so that
`pip install --no-build-isolation [-e] .` alone produces a working package:
the C++ library is built into backend/python/torch_neuronsim/lib by CMake
(Ninja, in build/ unless NSIM_BUILD_DIR says otherwise; RelWithDebInfo unless
NSIM_BUILD_TYPE does).  Metadata lives in pyproject.toml.  A self-contained
wheel: scripts/build_wheel.sh."""
import os
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))


class build_with_cmake(build_py):
    def run(self):
        build_dir = os.environ.get("NSIM_BUILD_DIR", os.path.join(ROOT, "build"))
        if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
            build_type = os.environ.get("NSIM_BUILD_TYPE", "RelWithDebInfo")
            subprocess.check_call(["cmake", "-S", ROOT, "-B", build_dir, "-G", "Ninja",
                                   f"-DCMAKE_BUILD_TYPE={build_type}"])
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "torch_neuronsim",
                               "-j", str(os.cpu_count() or 2)])
        super().run()
        # site-packages/neuronsim-standins.pth: Python runs its import line
        # at start-up, putting the stand-in finder last in sys.meta_path
        # (a light module: the stand-ins load when first imported)
        standins.write_pth(self.build_lib)

    def get_outputs(self, include_bytecode=True):
        return super().get_outputs(include_bytecode) + [os.path.join(self.build_lib, standins.PTH_FILE)]


sys.path.insert(0, os.path.join(ROOT, "nki"))
import neuronsim_standins as standins  # noqa: E402  (the stand-ins' own module: no dependencies)

setup(cmdclass={"build_py": build_with_cmake})
