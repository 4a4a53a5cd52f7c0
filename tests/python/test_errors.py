# Bad arguments fail on every rank alike with symcomm.Error (its code and the library's or
# the binding's message) and leave the communicator usable; none of them reaches a
# collective that another rank would wait in.
import numpy as np
import pytest

import symcomm


def fails(name, *words):
    return pytest.raises(symcomm.Error, match=".*".join(words) if words else None)


def test_error_carries_code_and_message(comm):
    with pytest.raises(symcomm.Error) as e:
        comm.all_reduce(np.zeros(4, np.float32), np.zeros(5, np.float32))
    assert e.value.code == 1 and e.value.name == "symcommInvalidArgument"
    assert "recv holds 5 elements, not 4" in str(e.value)
    assert isinstance(e.value, RuntimeError)


def test_bad_arguments(comm):
    x = np.zeros(8, np.float32)
    with fails("dtype", "no symcomm type"):
        comm.all_reduce(np.zeros(4, np.complex64))
    with fails("types differ", "dtypes differ"):
        comm.all_reduce(x, np.zeros(8, np.float64))
    with fails("op", "reduction 'mean'"):
        comm.all_reduce(x, op="mean")
    with fails("algorithm", "no-such-algorithm"):
        comm.all_reduce(x, algorithm="no-such-algorithm")
    with fails("gather size", "recv .team size x send. holds 8 elements"):
        comm.all_gather(x, np.zeros(8, np.float32))  # runs with 2 and 4 ranks
    with fails("stream"):
        comm.barrier(stream="a string")
    with fails("dtype name", "float128"):
        comm.empty(4, "float128")
    with fails("framework", "framework 'tensorflow'"):
        comm.empty(4, "float32", framework="tensorflow")
    with fails("signal", "uint64 array of one element"):
        comm.signal_wait(np.zeros(2, np.uint64), "eq", 0)
    with fails("cmp", "comparison 'equal'"):
        comm.signal_wait(comm_word(comm), "equal", 0)
    with fails("engine", "engine 'dma'"):
        comm.put(x, x, 0, engine="dma")
    with fails("layout", "not C-contiguous", "dimension 1 has stride 2"):
        comm.all_reduce(np.zeros((4, 4), np.float32)[:, ::2])  # no silent copy
    # Still usable.
    y = np.ones(8, np.float32)
    comm.all_reduce(y)
    assert (y == comm.size).all()


_word = {}


def comm_word(comm):
    if "w" not in _word:
        _word["w"] = comm.empty(1, "uint64")
    return _word["w"]


def test_library_errors(comm):
    # The library's own checks: not a heap address, a rank out of range.
    x = np.zeros(8, np.float32)
    with fails("not heap", "heap"):
        comm.put(x, x, 0)
    with fails("rank", str(comm.size)):
        comm.put(comm_word(comm), np.zeros(1, np.uint64), comm.size)
    with fails("bad id"):
        symcomm.Comm(2, 0, "not-a-unique-id")


def test_register_is_the_cuda_spaces(comm):
    if comm.space != "host":
        pytest.skip("the host space's refusal")
    with pytest.raises(symcomm.Error) as e:
        comm.register(np.zeros(1024, np.float32))  # collective: every rank fails alike
    assert e.value.name == "symcommNotSupported"


def test_repr_and_with_block(comm):
    assert repr(comm) == f"<symcomm.Comm rank {comm.rank} of {comm.size}, host space>" or \
        comm.space == "cuda"
    with comm.split(0) as sub:  # every rank: color 0
        assert sub.size == comm.size
        x = np.ones(2)
        sub.all_reduce(x)
        assert (x == comm.size).all()
    assert sub.finalized and repr(sub) == "<symcomm.Comm (finalized)>"
