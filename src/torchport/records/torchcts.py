"""TorchCTS's verdicts on torchport's status ladder: the status map, the case a test's evidence
lands in, and how the tests of one case make its one result (docs/suites/ops.md, "Side by
side with TorchCTS", holds the map as a table).

TorchCTS (a pytest-based conformance suite) records one verdict per test: ``PASS``; ``FAIL``,
an assertion of the test failed (its check of the output); ``ERROR``, anything else raised, or
the process it was isolated in died or ran past its limit; ``SKIP``, skipped while it ran. Apart
from them it keeps the tests it never ran ("filtered": a capability the manifest does not
declare, a semantic level above the one asked), each with its reason. Every one of them is
kept: a result's findings hold its tests, each with TorchCTS's own status, reason, message and
figures, beside the status it maps to.

An OpInfo test of an op at a dtype lands in torchport's own case for it (``ops/<op>/<dtype>``,
eager), so ``torchport compare`` pairs it with an ``ops`` run; its forward, backward and input
conditions are that case's tests, as torchport's op case runs them all. TorchCTS runs the first
OpInfo entry of each name, so an op whose first entry has a variant
(``max.reduction_with_dim`` in torchport) pairs with nothing: it is shown on its side only.
Any other test is a case of its own, ``torchcts/<its pytest id>``.

Classified by TorchCTS's structured fields (status, phase, the exception's type name, the
isolated process's signal and timeout flag), never by words in a message. No torch, no I/O.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from torchport.records.result import MESSAGE_CHARS, error_note
from torchport.records.status import PASS, SKIP, STAGE_STATUS, STATUS, is_failure

SOURCE = "torchcts"
STATUSES = ("PASS", "FAIL", "ERROR", "SKIP")  # what TorchCTS 0.4 records of a test that ran
FILTERED = "FILTERED"  # a test TorchCTS never ran (its "skips" table only)
# The exception type names TorchCTS records for a test that ran out of memory.
OOM_TYPES = frozenset({"OutOfMemoryError", "MemoryError"})
# TorchCTS's own type name for an isolated test whose process died.
PROCESS_CRASH = "ProcessCrash"
KNOWN_CRASH_PHASE = "known_segfault"  # a reviewed known crash, recorded without running it
SETUP_PHASE = "setup"
CASE_PREFIX = "torchcts/"
OPS_PREFIX = "ops/"
COMPILE_SUITE = "compiler"
TEXT_CHARS = 2000  # a test's message in findings (its first is the case's error, MESSAGE_CHARS)


@dataclass(frozen=True, kw_only=True)
class CtsTest:
    """One TorchCTS test as its report recorded it (kb/torchcts.py checked every field's type).
    ``status`` is one of STATUSES, or FILTERED for a test it never ran."""

    id: str  # its pytest node id
    status: str
    suite: str | None = None
    op: str | None = None
    dtype: str | None = None  # "torch.float32"
    phase: str | None = None
    input_condition: str | None = None
    error_type: str | None = None
    error_message: str | None = None
    skip_reason: str | None = None
    detail: str | None = None
    classification: str | None = None
    duration_ms: float | None = None
    maxerr: float | None = None
    cosim: float | None = None
    finished_at: str | None = None
    timed_out: bool = False
    signal: str | None = None
    returncode: int | None = None
    diagnosis: str | None = None  # its likely cause
    # A PASS within TorchCTS's "usable" tolerance but outside its tighter "golden" one:
    # golden_pass False, with its quality warning (still TorchCTS's PASS, kept as it said).
    golden_pass: bool | None = None
    quality_warning: str | None = None


@dataclass(frozen=True)
class Verdict:
    status: str
    stage: str | None


def verdict(test: CtsTest) -> Verdict:
    """The torchport status of one test (the table in docs/suites/ops.md)."""
    if test.status == "PASS":
        return Verdict(PASS, None)
    if test.status in ("SKIP", FILTERED):
        return Verdict(SKIP, None)
    if test.status == "FAIL":  # an assertion of the test: its check of the op's output
        return Verdict(STAGE_STATUS["parity"], "parity")
    # ERROR: the isolated process ran past its limit or died, or the test raised
    if test.timed_out:
        return Verdict("timeout", "run")
    if test.error_type == PROCESS_CRASH or test.signal or test.phase == KNOWN_CRASH_PHASE:
        return Verdict("crash", "run")
    if test.error_type in OOM_TYPES:
        return Verdict("oom", "run")
    if test.phase == SETUP_PHASE:  # its inputs or fixtures failed before the op was called
        return Verdict(STAGE_STATUS["build"], "build")
    return Verdict(STAGE_STATUS["run"], "run")


def dtype_name(dtype: str) -> str:
    """``torch.float32`` -> ``float32``."""
    return dtype.removeprefix("torch.")


def short_id(node_id: str) -> str:
    """A pytest node id from the TorchCTS package's folder on (``opinfo/test_x.py::t[a]``): the
    site-packages path before it says nothing about the test."""
    path, sep, rest = node_id.partition("::")
    parts = path.split("/")
    if "torchcts" in parts[:-1]:
        at = len(parts) - 1 - parts[::-1].index("torchcts")
        path = "/".join(parts[at + 1 :])
    return path + sep + rest


def case_of(test: CtsTest) -> tuple[str, str]:
    """(case, mode) the test's evidence lands in."""
    if test.suite == "opinfo" and test.op and test.dtype and "/" not in test.op:
        return f"{OPS_PREFIX}{test.op}/{dtype_name(test.dtype)}", "eager"
    return CASE_PREFIX + short_id(test.id), "compile" if test.suite == COMPILE_SUITE else "eager"


def _severity(status: str) -> int:
    severity = STATUS[status].severity
    return 0 if severity is None else severity


def _entry(test: CtsTest, got: Verdict) -> dict:
    """A test as kept in its result's findings: TorchCTS's words beside the mapped status."""
    entry = {
        "test": short_id(test.id),
        "torchcts_status": test.status,
        "status": got.status,
        "phase": test.phase,
        "input_condition": test.input_condition,
        "error_type": test.error_type,
        "message": test.error_message[:TEXT_CHARS] if test.error_message else None,
        "skip_reason": test.skip_reason,
        "detail": test.detail[:TEXT_CHARS] if test.detail else None,
        "classification": test.classification,
        "diagnosis": test.diagnosis,
        "duration_ms": test.duration_ms,
        "maxerr": test.maxerr,
        "cosim": test.cosim,
        "signal": test.signal,
        "returncode": test.returncode,
        "timed_out": test.timed_out or None,
        "golden_pass": test.golden_pass,
        "quality_warning": test.quality_warning[:TEXT_CHARS] if test.quality_warning else None,
    }
    return {k: v for k, v in entry.items() if v is not None}


def skip_reason(test: CtsTest) -> str:
    return test.skip_reason or ("filtered" if test.status == FILTERED else "skip")


def result_of(case: str, mode: str, tests: list[CtsTest]) -> dict:
    """The one result of a case from its tests: its worst failure (by the ladder's severity,
    records/status.py), else ``pass`` if any passed, else ``skip`` with the reasons kept."""
    verdicts = [(verdict(t), t) for t in tests]
    failures = [(v, t) for v, t in verdicts if is_failure(v.status)]
    findings: dict = {"imported": SOURCE, "tests": [_entry(t, v) for v, t in verdicts]}
    error = None
    if failures:
        got, worst = min(failures, key=lambda vt: _severity(vt[0].status))
        head = f"{worst.status} {short_id(worst.id)}"
        more = f" (+{len(failures) - 1} more failed)" if len(failures) > 1 else ""
        message = f"{head}{more}: {worst.error_message or worst.status}"
        error = {
            "type": worst.error_type or worst.status,
            "message": message[:MESSAGE_CHARS],
            "traceback": None,
        }
        status, stage = got.status, got.stage
    elif any(v.status == PASS for v, _ in verdicts):
        status, stage = PASS, None
    else:
        status, stage = SKIP, None
        reasons = Counter(skip_reason(t) for t in tests)
        findings["skip"] = reasons.most_common(1)[0][0]
        first = tests[0]
        error = error_note(
            "Skip",
            f"TorchCTS {'filtered' if first.status == FILTERED else 'skipped'} "
            f"{short_id(first.id)}: {skip_reason(first)}"
            + (f": {first.detail}" if first.detail else "")
            + (f" (+{len(tests) - 1} more tests not run)" if len(tests) > 1 else ""),
        )
    finished = [t.finished_at for t in tests if t.finished_at]
    return {
        "case": case,
        "case_version": 1,
        "mode": mode,
        "status": status,
        "stage": stage,
        "grade": None,  # TorchCTS does not judge placement
        "metrics": {},
        "findings": findings,
        "durations": {},
        "artifacts": [],
        "error": error,
        "probe_versions": {},
        "started_at": None,
        "finished_at": max(finished) if finished else None,
    }


def results(tests: list[CtsTest]) -> list[dict]:
    """One result per case, in the order of each case's first test."""
    by_case: dict[tuple[str, str], list[CtsTest]] = {}
    for test in tests:
        by_case.setdefault(case_of(test), []).append(test)
    return [result_of(case, mode, group) for (case, mode), group in by_case.items()]
