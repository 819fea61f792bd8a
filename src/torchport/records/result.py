"""Results as values: the closed status set, the stage names, one classifier, one capture.

Every producer of a result (the ladder, a compile child, the supervisor that saw a worker die,
the sweep that skipped a case) builds a ``Result`` here, and every failure is classified by
``classify(stage, exc)``: by the exception's type, never by words in its message. Like the rest
of records/, this module never imports torch; it recognises torch's exception types only when
torch is already loaded in the process (an exception from torch implies it is).
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from torchport.records.status import GRADES, STAGE_STATUS, STATUSES

# The closed status set, the grades and the stage -> status map live in records/status.py.

MESSAGE_CHARS = 4000
TRACEBACK_CHARS = 20000
# The CPU allocator's failure is a plain RuntimeError (c10 ``enforce fail at alloc_cpu.cpp``,
# errno 12), not torch.OutOfMemoryError: its fixed prefix from c10 is the only structured mark.
_CPU_ALLOC_FAILURE = "DefaultCPUAllocator: can't allocate memory"


class MalformedResult(ValueError):
    """A result that does not fit the record (unknown status, non-numeric metric, ...)."""


def is_oom(exc: BaseException) -> bool:
    """Out of memory: MemoryError, torch.OutOfMemoryError, or the CPU allocator's failure."""
    if isinstance(exc, MemoryError):
        return True
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(exc, getattr(torch, "OutOfMemoryError", ())):
        return True
    return isinstance(exc, RuntimeError) and _CPU_ALLOC_FAILURE in str(exc).split("\n", 1)[0]


def _is_compiler_error(exc: BaseException) -> bool:
    dynamo_exc = sys.modules.get("torch._dynamo.exc")
    base = getattr(dynamo_exc, "TorchDynamoException", None) if dynamo_exc else None
    return base is not None and isinstance(exc, base)


def classify(stage: str, exc: BaseException) -> str:
    """The status of an exception raised in ``stage``.

    In "compile" (the first call through torch.compile), only dynamo's and Inductor's own
    exceptions are compile failures; anything else came from running the compiled code.
    """
    if is_oom(exc):
        return "oom"
    if stage == "compile" and not _is_compiler_error(exc):
        return "compiled_run_fail"
    return STAGE_STATUS.get(stage, "crash")


def error_value(exc: BaseException) -> dict:
    """The recorded form of an exception: type, message and traceback, each bounded."""
    return {
        "type": type(exc).__name__,
        "message": str(exc)[:MESSAGE_CHARS],
        "traceback": "".join(traceback.format_exception(exc))[-TRACEBACK_CHARS:],
    }


def error_note(kind: str, message: str) -> dict:
    """A recorded failure that is not an exception (parity mismatch, a worker's death)."""
    return {"type": kind, "message": message[:MESSAGE_CHARS], "traceback": None}


T = TypeVar("T")


@dataclass
class Captured:
    """What one call did: its value or its exception, with its duration and stage.

    In the spirit of pytest's ``CallInfo.from_call``: callers never see the raise.
    """

    stage: str
    duration_s: float
    value: Any = None
    exc: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.exc is None

    @property
    def status(self) -> str:
        return "pass" if self.exc is None else classify(self.stage, self.exc)


def capture(stage: str, fn: Callable[[], T], clock: Callable[[], float]) -> Captured:
    start = clock()
    try:
        value = fn()
    except Exception as exc:
        return Captured(stage, clock() - start, exc=exc)
    return Captured(stage, clock() - start, value=value)


@dataclass(kw_only=True)
class Result:
    """What one (case, mode) produced. ``to_dict`` is the shape stored and sent between
    processes; ``from_dict`` validates it, so a malformed result is caught where it enters."""

    case: str
    mode: str
    case_version: int = 1
    status: str = "pass"
    stage: str | None = None
    grade: str | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    findings: dict[str, Any] = field(default_factory=dict)
    durations: dict[str, float] = field(default_factory=dict)
    artifacts: list[str] = field(default_factory=list)
    error: dict | None = None
    probe_versions: dict[str, int] = field(default_factory=dict)
    started_at: str | None = None

    def fail(self, status: str, stage: str, error: dict) -> None:
        self.status, self.stage, self.error = status, stage, error

    def fail_at(self, stage: str, error: dict) -> None:
        """Failed at a ladder stage: the status is that stage's (records/status.py)."""
        self.fail(STAGE_STATUS[stage], stage, error)

    def fail_from(self, captured: Captured) -> None:
        assert captured.exc is not None
        self.fail(captured.status, captured.stage, error_value(captured.exc))

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: dict) -> Result:
        """A validated Result; raises MalformedResult naming what is wrong."""
        if not isinstance(data, dict):
            raise MalformedResult(f"a result must be a JSON object, got {type(data).__name__}")
        missing = [k for k in ("case", "mode") if not isinstance(data.get(k), str)]
        if missing:
            raise MalformedResult(f"result without {', '.join(missing)}")
        result = cls._of(data)
        result.validate()
        return result

    @classmethod
    def _of(cls, data: dict) -> Result:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known and v is not None})

    def validate(self) -> None:
        if self.status not in STATUSES:
            raise MalformedResult(f"unknown status {self.status!r}")
        if self.grade is not None and self.grade not in GRADES:
            raise MalformedResult(f"unknown placement grade {self.grade!r}")
        for name in ("metrics", "durations"):
            table = getattr(self, name)
            if not isinstance(table, dict):
                raise MalformedResult(f"{name} must be a mapping")
            for key, value in table.items():
                # a NaN figure is data (e.g. a NaN loss), kept as such
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise MalformedResult(f"{name}[{key!r}] is not a number: {value!r}")
        if not isinstance(self.findings, dict):
            raise MalformedResult("findings must be a mapping")
        if self.error is not None and not isinstance(self.error, dict):
            raise MalformedResult("error must be a mapping")
        if not isinstance(self.probe_versions, dict):
            raise MalformedResult("probe_versions must be a mapping")


@dataclass(frozen=True)
class Recorded:
    """A result as it was recorded elsewhere (an imported line), validated once where it
    entered (kb/exchange_lines.py ``check``, over the whole file before anything is
    written); the store writes it as it is, with the finish time and op-table rows it was
    recorded with."""

    value: Result
    finished_at: str | None = None
    ops: list | None = None

    @classmethod
    def checked_line(cls, line: dict) -> Recorded:
        """An import line that ``check`` already validated (the file read again, its bytes
        held to those checked): the value is built, not validated a second time."""
        value = Result._of(line)
        ops = line["ops"] if "ops" in line else value.findings.get("ops")
        return cls(value, line.get("finished_at"), ops)


def skipped(
    case: str, mode: str, *, case_version: int, reason: str, tags: tuple[str, ...] = ()
) -> Result:
    return Result(
        case=case,
        mode=mode,
        case_version=case_version,
        status="skip",
        findings={"tags": list(tags)},
        error=error_note("Skip", reason),
    )


def crashed(
    case: str, mode: str, *, stage: str, error: dict, case_version: int = 1, status: str = "crash"
) -> Result:
    return Result(
        case=case, mode=mode, case_version=case_version, status=status, stage=stage, error=error
    )
