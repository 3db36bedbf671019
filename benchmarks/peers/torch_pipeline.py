"""What kpipe's PyTorch pipeline peers share (torch_mlp_pipeline.py,
torch_char_gpt.py): one thread per process, as kpipe's ranks run; the
processes of one pipeline on this host over gloo; the non-interleaved 1F1B
order of a stage's forwards and backwards. Needs Debian's python3-torch."""
import datetime
import os
import socket

# One BLAS and one OpenMP thread per process, as kpipe's ranks run
# (scripts/mpi-env.sh); OpenBLAS reads these when torch loads it.
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["OMP_NUM_THREADS"] = "1"

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402


def set_threads():
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(stage_main, stages, *args):
    """stage_main(rank, *args, port) in `stages` processes, joined."""
    mp.spawn(stage_main, args=(*args, free_port()), nprocs=stages, join=True)


def join(rank, stages, port):
    """This process's place in the gloo group of the pipeline's processes."""
    set_threads()
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=stages,
                            timeout=datetime.timedelta(minutes=5))


def one_f_one_b(rank, stages, m, forward, backward):
    """Non-interleaved 1F1B for stage `rank` of `stages` over m microbatches:
    p - rank - 1 warm-up forwards, then one forward and one backward in turn,
    then the remaining backwards. forward(j) and backward(j) do microbatch j."""
    warmup = min(stages - rank - 1, m)
    for j in range(warmup):
        forward(j)
    for i in range(m - warmup):
        forward(warmup + i)
        backward(i)
    for j in range(m - warmup, m):
        backward(j)
