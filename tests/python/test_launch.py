# Joining from a launcher's MASTER_ADDR/MASTER_PORT when MASTER_PORT + 1 (the root's port) is
# taken, as torchrun --standalone's store clients took it in 2 of 4 runs: the root listens on
# the next free port and the ranks find it (symcommInitFromEnv, through Comm.from_env). Run
# once, not under symrun (ctest: py_launch): it starts its two ranks itself.
import os
import socket
import subprocess
import sys

import pytest

RANK_CODE = """
import numpy as np, symcomm
c = symcomm.Comm.from_env("host")
x = np.full(3, c.rank + 1.0)
c.all_reduce(x)
assert (x == 3.0).all(), x
c.finalize()
"""


def free_pair():
    """A port p with p + 1 free too (both probed, then released)."""
    for _ in range(50):
        with socket.socket() as a:
            a.bind(("127.0.0.1", 0))
            p = a.getsockname()[1]
        try:
            with socket.socket() as b:
                b.bind(("127.0.0.1", p + 1))
            return p
        except OSError:
            continue
    pytest.skip("no two consecutive free ports")


@pytest.mark.parametrize("taken", [0, 1, 3])
def test_root_port_taken(taken):
    if "SYMCOMM_RANK" in os.environ:
        pytest.skip("starts its own ranks: run it once, not under symrun")
    master = free_pair()
    holders = []
    for k in range(taken):  # the root's first `taken` ports: bound, not listening
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", master + 1 + k))
        except OSError:
            pytest.skip(f"port {master + 1 + k} is in use already")
        holders.append(s)
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(master), WORLD_SIZE="2",
               SYMCOMM_BOOTSTRAP_ADDR="127.0.0.1", SYMCOMM_BOOTSTRAP_TIMEOUT="60000")
    env.pop("TORCHELASTIC_USE_AGENT_STORE", None)
    ranks = [subprocess.Popen([sys.executable, "-c", RANK_CODE], env=dict(env, RANK=str(r)),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(2)]
    outs = [r.communicate(timeout=120)[0] for r in ranks]
    for s in holders:
        s.close()
    assert [r.returncode for r in ranks] == [0, 0], outs
