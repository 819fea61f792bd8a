"""The status ladder in one place: the closed status set, the stages in order, how far each
status got, which failures are worst, how each is shown, and the placement grade rule.

Every ladder, view, query (its SQL literals are made from these tables) and page (its status
colours, ``interfaces/web/html.py: status_css``) reads them here. Like the rest of records/,
this module never imports torch.

To add a status: one ``Status`` row in ``STATUS`` (name, how far up the ladder it got, its rank
among failures, its look, its short label) and, if a stage fails with it, its entry in
``STAGE_STATUS``. To change the grade rule: ``grade`` below.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Status:
    """One status of the closed set.

    depth:    how far up the ladder it got (a higher number got further; ``pass`` is the top);
              None for a status that stops at no fixed stage (a death, a hang, a skip): such a
              result counts by the stage it stopped at (``depth``).
    severity: its rank among failures, 0 the worst; None for what is not a failure.
    look:     its colour class on a page: pass, skip, fail, warn (a limit was hit), dead.
    label:    the short word a compact table shows for it, when not its name.
    """

    name: str
    depth: int | None
    severity: int | None
    look: str
    label: str = ""

    @property
    def short(self) -> str:
        return self.label or self.name


# In the order tables list them. Severity, worst first: a worker that died or hung leaves no
# diagnosis; an early stop on the ladder hides everything after it; an accuracy failure at
# least ran. Pass and skip are not failures.
STATUS = {
    s.name: s
    for s in (
        Status(name="pass", depth=6, severity=None, look="pass"),
        Status(name="build_fail", depth=0, severity=3, look="fail", label="build"),
        Status(name="place_fail", depth=1, severity=4, look="fail", label="place"),
        Status(name="eager_fail", depth=2, severity=5, look="fail", label="error"),
        Status(name="compile_fail", depth=3, severity=7, look="fail"),
        Status(name="compile_timeout", depth=3, severity=6, look="warn"),
        Status(name="compiled_run_fail", depth=4, severity=8, look="fail"),
        Status(name="accuracy_fail", depth=5, severity=9, look="fail", label="accuracy"),
        Status(name="oom", depth=None, severity=2, look="warn"),
        Status(name="timeout", depth=None, severity=1, look="warn"),
        Status(name="crash", depth=None, severity=0, look="dead"),
        Status(name="skip", depth=None, severity=None, look="skip"),
    )
}
STATUSES = tuple(STATUS)
PASS, SKIP, COMPILE_TIMEOUT = "pass", "skip", "compile_timeout"
# Failures, worst first (kb/sql_kb.py ranks failure groups by it).
FAILURE_SEVERITY = tuple(
    s.name
    for s in sorted(STATUS.values(), key=lambda s: -1 if s.severity is None else s.severity)
    if s.severity is not None
)
# What is not a failure ("pass", "skip"): every view, query and format reads it here.
NOT_FAILURES = tuple(s.name for s in STATUS.values() if s.severity is None)

# The ladder's stages, in order (docs/design.md: build -> place -> run -> compile -> compiled_run ->
# parity), and the status a failure at each one gets. "reference" is the CPU float64 run of the
# same case: a case whose reference cannot run is not checkable (build_fail @reference). "run"
# is the eager step ("eager" its older name).
STAGES = ("build", "place", "run", "compile", "compiled_run", "parity")
STAGE_STATUS = {
    "build": "build_fail",
    "reference": "build_fail",
    "place": "place_fail",
    "run": "eager_fail",
    "eager": "eager_fail",
    "compile": "compile_fail",
    "compiled_run": "compiled_run_fail",
    "parity": "accuracy_fail",
}
# How far up the ladder a result got, by status, and for a status with no fixed stage, by the
# stage it stopped at (a stage's depth is that of the status its failure gets).
LADDER_DEPTH = {s.name: s.depth for s in STATUS.values() if s.depth is not None}
STAGE_DEPTH = {stage: LADDER_DEPTH[status] for stage, status in STAGE_STATUS.items()}
# The statuses of a result stopped at the compile stage (a compile that failed, or ran past
# its limit).
COMPILE_STOPS = tuple(name for name, got in LADDER_DEPTH.items() if got == STAGE_DEPTH["compile"])

# The placement grade, orthogonal to status (docs/design.md: "the placement grade").
GRADES = ("on_device", "fallback", "host", "host_kernel")
# The grades whose host-op table a run's headline counts (views/headline.py), and that
# run_tallies keeps (the trigger of migrations/0008 and migrations_pg/0008 spells them in its
# SQL; tests/records/test_status_literals.py holds it equal to this).
HEADLINE_GRADES = ("fallback", "host")


def depth(status: str, stage: str | None) -> int | None:
    """How far up the ladder a result got; None for skip and for a death at an unknown stage."""
    if status in LADDER_DEPTH:
        return LADDER_DEPTH[status]
    return STAGE_DEPTH.get(stage or "")


def is_failure(status: str) -> bool:
    return status not in NOT_FAILURES


def sql_list(names: tuple[str, ...]) -> str:
    """``('pass', 'skip')``: names as an SQL list (they are identifiers of this module, never
    user text)."""
    return "(" + ", ".join(f"'{n}'" for n in names) + ")"


def grade(
    *,
    fallback: bool,
    host_calls: int,
    device_calls: int,
    host_kernel: bool = False,
    all_on_host: bool = False,
) -> str:
    """The placement grade of one result, from its evidence.

    fallback:     some op was served on the host, or a parameter or buffer was left there
                  (evidence classes a, b, c);
    host_calls:   calls of host ops that are fallbacks; device_calls: calls that reached the
                  device;
    host_kernel:  host work nested inside a device kernel (class d), alone its own grade;
    all_on_host:  every parameter, buffer and input stayed on the host.
    """
    if all_on_host or (host_calls and not device_calls):
        return "host"
    if fallback:
        return "fallback"
    return "host_kernel" if host_kernel else "on_device"
