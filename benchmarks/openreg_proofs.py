"""OpenReg's own behaviour behind each verdict torchport records on it, in plain torch
(no torchport): run with the OpenReg overlay's python (scripts/openreg.py prints it).

    $(python scripts/openreg.py) benchmarks/openreg_proofs.py
"""

import traceback

import torch
import torch_openreg  # noqa: F401  (autoloaded already; named so the proof says what it needs)

dev = "openreg"


def proof(title, fn):
    try:
        print(f"{title}: {fn()}")
    except Exception as exc:
        line = traceback.format_exception_only(type(exc), exc)[-1].strip().splitlines()[0]
        print(f"{title}: raises {line[:200]}")


def conv():
    x, w = torch.randn(1, 1, 4, 4, device=dev), torch.randn(1, 1, 3, 3, device=dev)
    return torch.nn.functional.conv2d(x, w).shape


def dispatch(op):
    table = torch._C._dispatch_dump_table(op)
    return next(line for line in table.splitlines() if line.startswith("PrivateUse1:"))


def sync_api():
    return (
        f"torch.openreg.synchronize exists: {hasattr(torch.openreg, 'synchronize')}; "
        f"torch.accelerator.synchronize(): {torch.accelerator.synchronize()}"
    )


def peak():
    torch.accelerator.memory.reset_peak_memory_stats()
    x = torch.empty(1 << 20, device=dev)  # 4 MiB
    peak = torch.accelerator.memory.max_memory_allocated()
    return f"max_memory_allocated {peak} bytes ({x.numel() * 4} held)"


def generator():
    torch.manual_seed(7)
    a = torch.randn(4, device=dev).cpu()
    torch.manual_seed(7)
    return f"seeded draw on openreg equals the CPU's: {torch.equal(a, torch.randn(4))}"


def collective():
    import os

    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        t = torch.ones(2, device=dev)
        dist.all_reduce(t)
        return t.cpu()
    finally:
        dist.destroy_process_group()


def flex():
    from torch.nn.attention.flex_attention import flex_attention

    q = torch.randn(1, 2, 16, 16, device=dev)
    return flex_attention(q, q, q).shape


def compiled_mutation():
    """A static KV cache's update: an in-place op whose result is unused, the buffer read
    after it. OpenReg's compile backend runs ``gm.graph.eliminate_dead_code()`` on dynamo's
    graph, which drops the call."""

    def update(cache, x, idx):
        cache.index_copy_(0, idx, x)
        return cache * 2

    got = {}
    for backend in ("eager", "openreg"):
        cache = torch.zeros(3, 1, device=dev)
        args = (cache, torch.ones(1, 1, device=dev), torch.tensor([1], device=dev))
        got[backend] = torch.compile(update, backend=backend, fullgraph=True)(*args)
        got[backend] = got[backend].cpu().flatten().tolist()
    return f"backend eager {got['eager']}, backend openreg {got['openreg']}"


proof("convolution", conv)
proof("mm on PrivateUse1", lambda: dispatch("aten::mm.out"))
proof("sub.Tensor on PrivateUse1", lambda: dispatch("aten::sub.Tensor"))
proof("abs float64", lambda: torch.randn(2, dtype=torch.float64, device=dev).abs())
proof("abs int64", lambda: torch.tensor([-1, 2], device=dev).abs().cpu())
proof("synchronize", sync_api)
proof("peak memory", peak)
proof("random ops", generator)
proof("all_reduce through gloo", collective)
proof("flex_attention eager", flex)
proof("compiled in-place update", compiled_mutation)
proof("inductor", lambda: torch.compile(lambda x: x + 1)(torch.ones(2, device=dev)))
