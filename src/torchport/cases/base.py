"""Cases: pure definitions of workloads.

To add one: write a ``Case`` subclass (or use ``FunctionCase``) in a module, return it from a
suite function, and register that function under the ``torchport.suites`` entry-point group
(``name = "pkg.module:function"``). Built-in suites register the same way (pyproject.toml).

A case knows nothing of devices, timing or probes. ``build`` returns a ``Workload`` on the CPU in
float32, deterministic from the seed; the runner moves it to the device and dtype, and builds the
float64 reference from the same workload. Heavy imports (torch, transformers) happen in ``build``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, kw_only=True)
class Tolerance:
    """allclose tolerance for parity; floats are relative to float32 on the device."""

    atol: float = 1e-4
    rtol: float = 1e-4

    def __post_init__(self):
        if self.atol < 0 or self.rtol < 0:
            raise ValueError(f"tolerance must be non-negative, got {self}")


@dataclass(kw_only=True)
class Workload:
    """What a case builds: a model, its example inputs and, when it trains, a loss.

    model:    an ``nn.Module`` (float32, on the CPU).
    args:     positional inputs, tensors or plain values.
    kwargs:   keyword inputs.
    loss_fn:  ``loss_fn(output) -> scalar tensor``; None for forward-only cases.
    tolerance: parity tolerance; None for the default of the dtype.
    tokens:   tokens per step for token models (batch * seq), None otherwise.
    samples:  samples per step (the batch).
    meta:     JSON-serialisable facts worth keeping with the result (e.g. a shrunk config).
    reference_model: the same function computed another way (same parameter names), e.g.
              explicit attention for a FlexAttention case: when set, the CPU float64 reference
              and the CPU baseline run it instead of ``model``.
    alternatives: other implementations of the same function, by name (same parameter names,
              same inputs), e.g. {"sdpa": ...}: the perf probe times each as a side of its own.
    """

    model: Any
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    loss_fn: Callable[[Any], Any] | None = None
    tolerance: Tolerance | None = None
    tokens: int | None = None
    samples: int | None = None
    meta: dict = field(default_factory=dict)
    reference_model: Any = None
    alternatives: dict = field(default_factory=dict)

    @property
    def trains(self) -> bool:
        return self.loss_fn is not None


@dataclass(frozen=True, kw_only=True)
class Size:
    """Input size a case is built at. ``None`` fields take the case's own default."""

    batch: int | None = None
    seq: int | None = None
    perf: bool = False  # the case's perf size (larger) instead of its parity size

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


class Case:
    """One workload with a stable id and a version that changes when its definition does."""

    id: str = ""
    version: int = 1
    tags: tuple[str, ...] = ()
    # A case may declare that it cannot run, as data: the runner records ``skip`` with this reason.
    skip_reason: str | None = None
    # Modes the case can run in (None: every mode); a run plans only these for it.
    modes: tuple[str, ...] | None = None
    # Run options this case runs with instead of the run's (e.g. {"timeout_s": 1800} for a
    # slow one): its tasks carry the ones that differ (runner/plan.py Task.changes).
    run_options: dict[str, Any] | None = None

    def build(self, *, seed: int, size: Size) -> Workload:  # pragma: no cover - interface
        raise NotImplementedError

    def skip_reason_for(self, *, mode: str, device: str) -> str | None:
        """Why this case cannot run in ``mode`` on ``device`` (asked in the worker, before the
        build; may ask the device), or None. Default: the static ``skip_reason``."""
        return self.skip_reason

    def describe(self) -> dict:
        """Cheap facts for ``torchport cases`` (no torch import)."""
        return {
            "case": self.id,
            "version": self.version,
            "tags": list(self.tags),
            "skip_reason": self.skip_reason,
        }

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id} v{self.version}>"


class FunctionCase(Case):
    """A case whose workload comes from a plain function ``fn(seed, size) -> Workload``."""

    def __init__(
        self,
        id: str,
        fn: Callable[..., Workload],
        *,
        version: int = 1,
        tags: tuple[str, ...] = (),
        skip_reason: str | None = None,
    ):
        self.id, self.fn, self.version, self.tags = id, fn, version, tuple(tags)
        self.skip_reason = skip_reason

    def build(self, *, seed: int, size: Size) -> Workload:
        return self.fn(seed=seed, size=size)


def cataloged(key: Callable[[], str]) -> Callable[[Callable], Callable]:
    """Mark a suite function whose listing may be cached: ``key()`` names everything its case
    list and ``describe()`` facts depend on (``registry.describe_suite``)."""

    def mark(suite: Callable) -> Callable:
        suite.catalog_key = key  # type: ignore[attr-defined]
        return suite

    return mark
