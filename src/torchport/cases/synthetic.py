"""Suite ``synthetic``: many identical small cases, for measuring torchport itself.

noop_NNN     a Linear(4, 4) on one row: the ladder's own cost, so a run of these measures the
             driver, the worker loop and the store, not a model (driver overhead, results/s)
busy50_NNN   each forward burns BUSY_FORWARD_MS of CPU time in Python (one core, whatever else
             runs on the host); an eager task calls it three times (the run, the float64
             reference and the float32 baseline), so one task is about 50 ms of CPU work: the
             case for --jobs throughput
"""

from __future__ import annotations

from torchport.cases.base import Case, FunctionCase, Size, Workload

NOOP_CASES = 200
BUSY_CASES = 100
BUSY_FORWARD_MS = 50.0 / 3


def _tiny(forward=None):
    import torch

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 4)

        def forward(self, x):
            if forward is not None:
                forward()
            return self.linear(x)

    return Tiny


def _noop(*, seed: int, size: Size) -> Workload:
    import torch

    torch.manual_seed(seed)
    return Workload(model=_tiny()(), args=(torch.randn(1, 4),), samples=1)  # x: (1, 4)


def _burn() -> None:
    """Spend BUSY_FORWARD_MS of this thread's CPU time (not wall time: a busy host makes it
    take longer, as real work would)."""
    import time

    end = time.thread_time() + BUSY_FORWARD_MS / 1000
    while time.thread_time() < end:
        pass


def _busy(*, seed: int, size: Size) -> Workload:
    import torch

    torch.manual_seed(seed)
    return Workload(model=_tiny(_burn)(), args=(torch.randn(1, 4),), samples=1)


def synthetic_suite() -> list[Case]:
    """Many identical small cases (noop, 50 ms of CPU) for measuring torchport's own costs."""
    cases: list[Case] = [
        FunctionCase(f"synthetic/noop_{i:03d}", _noop, tags=("synthetic",))
        for i in range(NOOP_CASES)
    ]
    return cases + [
        FunctionCase(f"synthetic/busy50_{i:03d}", _busy, tags=("synthetic",))
        for i in range(BUSY_CASES)
    ]
