"""Suite ``planted``: deliberately faulty cases that prove each failure is classified right.

hang        never returns from its forward (timeout)
abort       kills its own process with SIGABRT (crash)
segfault    dereferences NULL (crash)
compile_bomb  raises only while being compiled (compile_fail)
compile_wrong wrong numbers only in compiled code (accuracy_fail in compile mode)
slow_compile  sleeps SLOW_COMPILE_S inside compilation only (compile_timeout under a shorter
              --compile-timeout; passes, slowly, without one)
graph_break  a deliberate graph break (passes; the compile probe reports the break)
host_model   keeps a submodule pinned to the CPU (placement grade host/fallback)
cumsum       uses aten.cumsum, which simdev does not implement (fallback on simdev)
oom          raises an out-of-memory error in its forward (oom)
cpu_oom      asks the CPU allocator for more memory than exists (oom, not eager_fail)
nan_loss     a model whose loss is NaN on every device and in the reference (accuracy_fail:
             a reference that is not finite vouches for nothing)
fp32_grad_error  gradients 1% off in float32 only, on every device, the CPU included
             (accuracy_fail on --device cpu: the CPU's float32 run is no allowance for itself)
orphan       starts a background process in the worker's group, then dies (crash); the
             process must not outlive the task's worker
garbage_event writes a line that is not JSON on the worker's event channel (crash)
forged_result reports a result for another case on the event channel (crash @record)
dist_drop_rank, dist_chunk_order, dist_hang  faulty collectives of simdev's collective backend
             (all_reduce without one rank, reduce_scatter's chunks misordered, a rank that
             never completes): accuracy_fail / timeout naming the collective (cases/dist.py)
last_layer_wrong  a tiny llama whose last decoder layer's output passes through an op whose
             kernel is right on the CPU and off by 2% of a shifted copy of its input on any
             other device (PrivateUse1: simdev, quirkdev): generation parity must catch it
             (accuracy_fail); the CPU passes
"""

# No "from __future__ import annotations": torch.library.custom_op reads real annotations.
import os

from torchport.cases.base import Case, FunctionCase, Size, Workload


def _linear_workload(model_cls, *, seed: int, trains: bool = True, **kwargs) -> Workload:
    import torch

    torch.manual_seed(seed)
    model = model_cls(**kwargs)
    x = torch.randn(4, 16)  # (B, 16)
    return Workload(
        model=model,
        args=(x,),
        samples=4,
        loss_fn=(lambda out: out.float().pow(2).mean()) if trains else None,
    )


def _module(forward):
    """An nn.Module class with one Linear(16, 16) and the given forward(self, x)."""
    import torch

    class Planted(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(16, 16)

    Planted.forward = forward
    return Planted


def _hang(*, seed: int, size: Size) -> Workload:
    import time

    def forward(self, x):
        while True:
            time.sleep(1)

    return _linear_workload(_module(forward), seed=seed)


def _abort(*, seed: int, size: Size) -> Workload:
    def forward(self, x):
        os.abort()

    return _linear_workload(_module(forward), seed=seed)


def _segfault(*, seed: int, size: Size) -> Workload:
    import ctypes

    def forward(self, x):
        ctypes.string_at(0)  # reads address 0: SIGSEGV

    return _linear_workload(_module(forward), seed=seed)


def _tracing_only_op(name: str, on_trace):
    """A custom op ``torchport_planted::<name>``: identity when run, but its fake (tracing)
    kernel calls ``on_trace()`` first, so only compilation meets the planted behaviour."""
    import torch

    if not hasattr(torch.ops.torchport_planted, name):

        @torch.library.custom_op(f"torchport_planted::{name}", mutates_args=())
        def op(x: torch.Tensor) -> torch.Tensor:
            return x.clone()

        @op.register_fake
        def _(x):
            on_trace()
            return torch.empty_like(x)

    return getattr(torch.ops.torchport_planted, name)


def _with_op_when_compiling(op, seed: int) -> Workload:
    """The planted Linear model, passing its output through ``op`` only under compilation."""
    import torch

    def forward(self, x):
        y = self.linear(x)
        if torch.compiler.is_compiling():
            y = op(y)
        return y

    return _linear_workload(_module(forward), seed=seed)


def _compile_bomb(*, seed: int, size: Size) -> Workload:
    def explode():
        raise RuntimeError("planted: this op cannot be compiled")

    return _with_op_when_compiling(_tracing_only_op("compile_bomb", explode), seed)


SLOW_COMPILE_S = 30.0


def _slow_compile(*, seed: int, size: Size) -> Workload:
    import time

    slept: list[bool] = []

    def sleep_once():  # tracing calls the fake kernel several times per compile: wait once
        if not slept:
            slept.append(True)
            time.sleep(SLOW_COMPILE_S)

    return _with_op_when_compiling(_tracing_only_op("slow_compile", sleep_once), seed)


def _compile_wrong(*, seed: int, size: Size) -> Workload:
    import torch

    def forward(self, x):
        y = self.linear(x)
        if torch.compiler.is_compiling():
            y = y * 1.01  # 1% off, only in compiled code
        return y

    return _linear_workload(_module(forward), seed=seed)


def _graph_break(*, seed: int, size: Size) -> Workload:
    import torch

    def forward(self, x):
        y = torch.relu(self.linear(x))
        torch._dynamo.graph_break()  # deliberate: the compile probe must report it
        return self.linear(y)

    return _linear_workload(_module(forward), seed=seed)


def _host_model(*, seed: int, size: Size) -> Workload:
    import torch

    class HostPinned(torch.nn.Module):
        """Moves its input back to the CPU and computes there: the work never reaches the
        device, whatever device the inputs were placed on."""

        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.randn(16, 16))

        def _apply(self, fn, recurse=True):
            # Takes dtype casts but pins every tensor back to the host: .to(device) is a no-op.
            return super()._apply(lambda t: fn(t).cpu(), recurse)

        def forward(self, x):
            return x.cpu() @ self.weight

    return _linear_workload(HostPinned, seed=seed)


def _cumsum(*, seed: int, size: Size) -> Workload:
    import torch

    def forward(self, x):
        return torch.cumsum(self.linear(x), dim=-1)

    return _linear_workload(_module(forward), seed=seed)


def _oom(*, seed: int, size: Size) -> Workload:
    import torch

    def forward(self, x):
        raise torch.OutOfMemoryError("planted: out of memory")

    return _linear_workload(_module(forward), seed=seed)


def _cpu_oom(*, seed: int, size: Size) -> Workload:
    import torch

    def forward(self, x):
        return torch.empty(2**50, dtype=torch.uint8)  # 1 PiB: the allocator refuses

    return _linear_workload(_module(forward), seed=seed)


def _nan_loss(*, seed: int, size: Size) -> Workload:
    def forward(self, x):
        return self.linear(x) * float("nan")

    return _linear_workload(_module(forward), seed=seed)


def _fp32_grad_error(*, seed: int, size: Size) -> Workload:
    import torch

    class OnePercentOffInFloat32(torch.autograd.Function):
        """Identity forward; the backward scales float32 gradients by 1.01 (float64 is
        right), as a float32-only kernel bug would."""

        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            return grad * 1.01 if grad.dtype == torch.float32 else grad

    def forward(self, x):
        return OnePercentOffInFloat32.apply(self.linear(x))

    return _linear_workload(_module(forward), seed=seed)


ORPHAN_MARKER = "torchport-planted-orphan"


def _orphan(*, seed: int, size: Size) -> Workload:
    import subprocess
    import sys

    def forward(self, x):
        # A grandchild in the worker's process group, named so a test can look for it.
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", ORPHAN_MARKER])
        os.abort()

    return _linear_workload(_module(forward), seed=seed)


def _worker_channel():
    """The worker's event channel (its ``--fd``): what a rogue case could write to."""
    import sys

    fd = int(sys.argv[sys.argv.index("--fd") + 1])
    return os.fdopen(os.dup(fd), "w", buffering=1)


def _garbage_event(*, seed: int, size: Size) -> Workload:
    def forward(self, x):
        _worker_channel().write("this is not an event\n")
        return self.linear(x)

    return _linear_workload(_module(forward), seed=seed)


def _forged_result(*, seed: int, size: Size) -> Workload:
    import json

    def forward(self, x):
        forged = {"case": "planted/somebody_else", "mode": "eager", "status": "pass"}
        _worker_channel().write(json.dumps({"event": "result", "result": forged}) + "\n")
        return self.linear(x)

    return _linear_workload(_module(forward), seed=seed)


def _off_device_op():
    """``torchport_planted::last_layer``: identity on the CPU; on a PrivateUse1 device (a wrong
    device kernel) x + 0.02 * x shifted by one channel, a change of direction that the final
    norm does not remove (a plain scale would be normalised away)."""
    import torch

    if not hasattr(torch.ops.torchport_planted, "last_layer"):

        @torch.library.custom_op("torchport_planted::last_layer", mutates_args=())
        def op(x: torch.Tensor) -> torch.Tensor:
            return x.clone()

        @op.register_kernel("privateuseone")
        def _(x):
            return x + 0.02 * x.roll(1, dims=-1)

        @op.register_fake
        def _(x):
            return torch.empty_like(x)

    return torch.ops.torchport_planted.last_layer


def _last_layer_wrong(*, seed: int, size: Size) -> Workload:
    from torchport.cases.hf import HFCase

    workload = HFCase("llama").build(seed=seed, size=size)
    op = _off_device_op()

    def planted(module, args, output):
        if isinstance(output, tuple):
            return (op(output[0]), *output[1:])
        return op(output)

    workload.model.model.layers[-1].register_forward_hook(planted)
    return workload


def planted_suite() -> list[Case]:
    """Deliberately faulty cases (hang, crash, compile-only faults, fallback) for self-tests."""
    fns = {
        "hang": _hang,
        "abort": _abort,
        "segfault": _segfault,
        "compile_bomb": _compile_bomb,
        "compile_wrong": _compile_wrong,
        "graph_break": _graph_break,
        "host_model": _host_model,
        "cumsum": _cumsum,
        "oom": _oom,
        "slow_compile": _slow_compile,
        "cpu_oom": _cpu_oom,
        "nan_loss": _nan_loss,
        "orphan": _orphan,
        "garbage_event": _garbage_event,
        "forged_result": _forged_result,
        "fp32_grad_error": _fp32_grad_error,
        "last_layer_wrong": _last_layer_wrong,
    }
    from torchport.cases.dist import planted_dist_cases  # faulty collectives (dist ladder)

    return [
        FunctionCase(f"planted/{name}", fn, tags=("planted",)) for name, fn in fns.items()
    ] + planted_dist_cases()
