"""What a probe sees and what it gives back."""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(kw_only=True)
class Subject:
    """One (case, mode) placed on its device, ready to step.

    step():      one forward (+ backward when the case trains) through ``runner``; returns the
                 named output tensors. Gradients are zeroed first.
    model:       the placed eager module; ``runner`` is it or its compiled wrapper.
    make_runner: builds a fresh runner for this mode (e.g. a new torch.compile wrapper).
    """

    case: Any
    mode: str
    config: Any
    adapter: Any
    device: str
    dtype: Any
    workload: Any            # device-side Workload (args/kwargs moved)
    model: Any
    runner: Any
    step: Callable[[], dict]
    make_runner: Callable[[], Any]
    emit: Callable[[dict], None] = lambda event: None
    case_deadline: float | None = None  # timing.clock() value when the supervisor kills the case
    # In a cold worker (``Probe.cold_worker``): the ladder's first compiled step, recorded as
    # ``compile_metrics.first_step_record`` does; None elsewhere.
    cold_compile: dict | None = None


@dataclass(kw_only=True)
class ProbeReport:
    metrics: dict = field(default_factory=dict)
    findings: dict = field(default_factory=dict)
    artifacts: list = field(default_factory=list)
    grade: str | None = None
    # A probe may find that the result must not be a pass (e.g. strict mode broke the case).
    status: str | None = None
    stage: str | None = None
    error: dict | None = None


class Probe:
    name: str = ""
    version: int = 1
    # True: give each compile-mode task a fresh worker whose compile caches start empty, so the
    # ladder's own first compiled step is a cold compile (``Subject.cold_compile``).
    cold_worker: bool = False

    def applies(self, subject: Subject) -> bool:
        return True

    def run(self, subject: Subject) -> ProbeReport:  # pragma: no cover - interface
        raise NotImplementedError

    def safe_run(self, subject: Subject) -> ProbeReport:
        """Run the probe; an exception becomes data in the report, never a raise."""
        try:
            return self.run(subject)
        except Exception as exc:
            return ProbeReport(error={"type": type(exc).__name__, "message": str(exc),
                                      "traceback": traceback.format_exc(), "probe": self.name})
