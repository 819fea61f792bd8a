"""What a probe sees and what it gives back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from torchport.cases.base import Case, Workload
from torchport.config import RunConfig
from torchport.devices.base import DeviceAdapter
from torchport.records.result import error_value
from torchport.records.status import GRADES, STATUSES

if TYPE_CHECKING:
    import torch


@dataclass(kw_only=True)
class Subject:
    """One (case, mode) placed on its device, ready to step.

    step():      one forward (+ backward when the case trains) through ``runner``; returns the
                 named output tensors. Gradients are zeroed first.
    model:       the placed eager module; ``runner`` is it or its compiled wrapper.
    make_runner: builds a fresh runner for this mode (e.g. a new torch.compile wrapper).
    """

    case: Case
    mode: str
    config: RunConfig
    adapter: DeviceAdapter
    device: str
    dtype: torch.dtype
    workload: Workload  # device-side Workload (args/kwargs moved)
    model: torch.nn.Module
    runner: Callable[..., Any]  # the model, or its torch.compile wrapper
    step: Callable[[], dict]
    make_runner: Callable[[], Any]
    emit: Callable[[dict], None] = lambda event: None
    case_deadline: float | None = None  # timing.clock() value when the supervisor kills the case
    # In a cold worker (``Probe.cold_worker``): the ladder's first compiled step, recorded as
    # ``compile_metrics.first_step_record`` does; None elsewhere.
    cold_compile: dict | None = None
    # Scenario generate: the placed model ready to generate (``execution.generation.Setup``);
    # ``step`` is then one decode step. None in the train scenario.
    generation: Any = None


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

    def check(self) -> None:
        """Raise ValueError naming what does not fit a record (the ladder then records the
        probe as crashed instead of letting a bad value end the sweep)."""
        if self.status is not None and self.status not in STATUSES:
            raise ValueError(f"probe returned unknown status {self.status!r}")
        if self.grade is not None and self.grade not in GRADES:
            raise ValueError(f"probe returned unknown grade {self.grade!r}")
        for key, value in self.metrics.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"probe metric {key!r} is not a number: {value!r}")


class Probe:
    name: str = ""
    version: int = 1
    # True: give each compile-mode task a fresh worker whose compile caches start empty, so the
    # ladder's own first compiled step is a cold compile (``Subject.cold_compile``).
    cold_worker: bool = False
    # The scenarios whose steps this probe measures (config.SCENARIOS); asked for in another,
    # it is refused before the run starts.
    scenarios: tuple[str, ...] = ("train",)
    # True: it observes the step with instruments that can disturb a backend (recorders, the
    # profiler): the ladder runs it after the probes that time or compile (docs/design.md rule 10).
    observes: bool = False

    def applies(self, subject: Subject) -> bool:
        return True

    def run(self, subject: Subject) -> ProbeReport:  # pragma: no cover - interface
        raise NotImplementedError

    def safe_run(self, subject: Subject) -> ProbeReport:
        """Run the probe; an exception becomes data in the report, never a raise."""
        try:
            return self.run(subject)
        except Exception as exc:
            return ProbeReport(error={**error_value(exc), "probe": self.name})
