# Under torchrun (ctest: py_torchrun_n2): symcomm.init() joins from torchrun's environment
# (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), and a collective over it sums every rank's.
import os

import numpy as np

import symcomm

comm = symcomm.init(space="host")
assert (comm.rank, comm.size) == (int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
x = np.full(4, comm.rank + 1.0)
comm.all_reduce(x)
assert (x == sum(range(1, comm.size + 1))).all(), x
comm.finalize()
print(f"rank {int(os.environ['RANK'])}: joined under torchrun, all-reduce right")
