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
"""

# No "from __future__ import annotations": torch.library.custom_op reads real annotations.
import os

from torchport.cases.base import Case, FunctionCase, Size, Workload


def _linear_workload(model_cls, *, seed: int, trains: bool = True, **kwargs) -> Workload:
    import torch
    torch.manual_seed(seed)
    model = model_cls(**kwargs)
    x = torch.randn(4, 16)                                 # (B, 16)
    return Workload(model=model, args=(x,), samples=4,
                    loss_fn=(lambda out: out.float().pow(2).mean()) if trains else None)


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
    slept = []

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


def planted_suite() -> list[Case]:
    """Deliberately faulty cases (hang, crash, compile-only faults, fallback) for self-tests."""
    fns = {"hang": _hang, "abort": _abort, "segfault": _segfault, "compile_bomb": _compile_bomb,
           "compile_wrong": _compile_wrong, "graph_break": _graph_break,
           "host_model": _host_model, "cumsum": _cumsum, "oom": _oom,
           "slow_compile": _slow_compile}
    return [FunctionCase(f"planted/{name}", fn, tags=("planted",)) for name, fn in fns.items()]
