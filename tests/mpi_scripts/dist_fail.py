"""A job in which rank 1 fails (tests/test_distributed.py): `raise` raises an exception
between two collectives, `hang` sleeps past the other ranks' timeout. The other ranks must
stop with a clear error, well before `sleep` seconds."""
import sys
import time

import tracegrad as tg
import tracegrad.distributed as dist
from tracegrad.nn.parallel import DistributedDataParallel as DDP

mode, timeout = sys.argv[1], float(sys.argv[2])
dist.init_process_group("mpi", timeout=timeout)
rank = dist.get_rank()
model = DDP(tg.nn.Linear(4, 3))
model(tg.ones(2, 4)).sum().backward()
print(f"rank {rank}: first step done", flush=True)
if rank == 1:
    if mode == "raise":
        raise ValueError("rank 1 cannot read its shard")
    time.sleep(60)
model(tg.ones(2, 4)).sum().backward()          # the others wait here for rank 1
print(f"rank {rank}: second step done", flush=True)
