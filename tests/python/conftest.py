import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# torch.compile's disk cache: one per test session, never the user's
if "NEURON_SIM_COMPILE_CACHE_DIR" not in os.environ:
    import tempfile
    os.environ["NEURON_SIM_COMPILE_CACHE_DIR"] = tempfile.mkdtemp(prefix="neuronsim-compile-")


@pytest.fixture(scope="session")
def neuronsim():
    """Path of the built CLI (scripts/run_tests.sh exports NEURONSIM_BIN)."""
    path = pathlib.Path(os.environ.get("NEURONSIM_BIN", ROOT / "build" / "bin" / "neuronsim"))
    if not path.exists():
        pytest.fail(f"{path} not built; run scripts/setup.sh first")
    return path


@pytest.fixture(scope="session")
def examples():
    return sorted((ROOT / "examples" / "programs").glob("*.nsasm"))
