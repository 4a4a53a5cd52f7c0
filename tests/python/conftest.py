# The Python tests run on every rank at once under symrun (tests/CMakeLists.txt: py_n2,
# py_n4): one communicator for the session, every test a collective in the same order on
# every rank.
import ctypes
import os

import numpy as np
import pytest

import symcomm


def gpu_count():
    """The GPUs the driver sees (0 without a driver)."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    n = ctypes.c_int(0)
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(n)) != 0:
        return 0
    return n.value


def pytest_configure(config):
    # The cuda space needs a GPU per rank (or SYMCOMM_TEST_SHARED_GPUS=1 under MPS): without
    # them the run checked nothing and says so to ctest (SKIP_RETURN_CODE 77), as the C++
    # suites do.
    if os.environ.get("SYMCOMM_MEMORY_SPACE") == "cuda":
        ranks = int(os.environ.get("SYMCOMM_NRANKS", "1"))
        have = gpu_count()
        if have == 0 or (have < ranks and os.environ.get("SYMCOMM_TEST_SHARED_GPUS") != "1"):
            pytest.exit(f"SKIP: the cuda space needs {ranks} GPUs, {have} here", returncode=77)


def pytest_sessionfinish(session, exitstatus):
    # Every test that was to run skipped itself (no torch, or the cuda space's tests in the
    # host space): the run checked nothing, and says so to ctest (SKIP_RETURN_CODE 77).
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if exitstatus == 0 and reporter is not None:
        ran = sum(len(reporter.stats.get(k, [])) for k in ("passed", "failed", "error"))
        if ran == 0 and reporter.stats.get("skipped"):
            session.exitstatus = 77


@pytest.fixture(scope="session")
def comm():
    c = symcomm.init()
    yield c
    c.finalize()


@pytest.fixture
def rng(comm):
    # Fresh data per test, the same seed on every rank (the reference recomputes the peers').
    seed = int(os.environ.get("SYMCOMM_TEST_SEED", "12345"))
    return np.random.default_rng(seed)


def rank_data(seed, rank, n, dtype):
    """Rank `rank`'s input: small integers, exact in every type and in their sums."""
    g = np.random.default_rng(seed * 1000 + rank)
    return g.integers(-8, 9, size=n).astype(dtype)
