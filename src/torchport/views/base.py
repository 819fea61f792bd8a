"""What a view returns: a titled table of typed values, and the few composite cell values.

Numbers stay numbers (in the unit of the column's kind), None is a missing value, a string in
a numeric column is a stated reason where no number exists ("no peak", "compile_timeout").
Formatting (digits, units, "x", "%", KiB) belongs to the renderer, which reads the column kind;
``to_dict`` is the ``--json`` form.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any

# Scalar kinds (the unit of the column's numbers) and composite ones (a value type below).
KINDS = (
    "text",
    "error",
    "int",
    "count",
    "float",
    "sci",
    "ms",
    "s",
    "bytes",
    "percent",
    "ratio",
    "rate",
    "tflops",
    "outcome",
    "detail",
    "op_counts",
    "copies",
    "labels",
)


def of_ladder(result: dict, ladder: str) -> bool:
    """Whether ``result`` came from a task of ``ladder`` ("kernel", "dist"): the ladder it
    recorded, or, for a result the supervisor made because the worker never returned one
    (crash, timeout: no ladder recorded), the task's tags. Summaries count those too."""
    findings = result.get("findings") or {}
    if findings.get("ladder"):
        return findings["ladder"] == ladder
    return ladder in (findings.get("tags") or ())


@dataclass(frozen=True)
class Column:
    name: str
    kind: str = "text"

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"column {self.name!r}: unknown kind {self.kind!r}")


def columns(*specs: str | tuple[str, str]) -> tuple[Column, ...]:
    """``columns("case", ("median ms", "ms"))``: a bare name is a text column."""
    return tuple(Column(s) if isinstance(s, str) else Column(*s) for s in specs)


@dataclass
class View:
    title: str
    columns: tuple[Column, ...]
    rows: list[list[Any]]
    notes: list[str] = field(default_factory=list)
    # Views this one stands in for on its kind of run (the ops compatibility table for the
    # per-result matrix and placement rows of thousands of op results).
    supersedes: tuple[str, ...] = ()

    def __post_init__(self):
        width = len(self.columns)
        for row in self.rows:
            if len(row) != width:
                raise ValueError(
                    f"view {self.title!r}: a row of {len(row)} values for {width} columns"
                )

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def records(self) -> list[dict[str, Any]]:
        """Rows keyed by column name."""
        return [dict(zip(self.names, row, strict=True)) for row in self.rows]

    def to_dict(self) -> dict:
        return {
            "title": self.title,
            "columns": [{"name": c.name, "kind": c.kind} for c in self.columns],
            "rows": [[plain(v) for v in row] for row in self.rows],
            "notes": list(self.notes),
        }


def plain(value: Any) -> Any:
    """The JSON form of a cell value (composites become objects)."""
    if is_dataclass(value) and not isinstance(value, type):
        own = getattr(value, "to_dict", None)  # a composite with its own JSON form (Headline)
        return own() if callable(own) else asdict(value)
    return value


# -- composite cell values ------------------------------------------------------------------
@dataclass(frozen=True)
class Annotated:
    """A value with a qualifier: ``1.00 s (3 hits)``, ``fallback (2 tensors off device)``."""

    value: Any
    note: str


@dataclass(frozen=True)
class Exceeded:
    """Ran past a limit, so no figure: ``> 3 s (compile_timeout)``; limit None if unknown."""

    limit: float | None
    status: str


@dataclass(frozen=True)
class Span:
    """A range in the column's unit (p10-p90)."""

    low: float
    high: float


@dataclass(frozen=True)
class Fraction:
    """``n / of (p%)``: aggregates state their denominator."""

    n: int
    of: int


@dataclass(frozen=True)
class Share:
    """A part of a whole, both in the column's unit: ``3.2 (45%)``."""

    part: float
    whole: float


@dataclass(frozen=True)
class Graphs:
    """Graphs compiled and ops per graph (None when only the count is known)."""

    count: int
    ops: list[int] | None = None


@dataclass(frozen=True)
class Breaks:
    """Graph breaks met, distinct ones, and where the first one is."""

    count: int
    distinct: int
    where: str


@dataclass(frozen=True)
class Copies:
    """Cross-device copies per step and the bytes moved each way."""

    count: int
    h2d_bytes: int = 0
    d2h_bytes: int = 0
    d2d_bytes: int = 0


@dataclass(frozen=True)
class Outcome:
    """One (case, mode) in a matrix: status, grade, failing stage and its key figure."""

    status: str
    grade: str | None = None
    stage: str | None = None
    step_ms: float | None = None
    max_rel_err: float | None = None
    error: str | None = None  # the first line of the error message


def outcome(result: dict) -> Outcome:
    metrics = result.get("metrics") or {}
    error = result.get("error") or {}
    message = (error.get("message") or "").strip()
    return Outcome(
        status=result["status"],
        grade=result.get("grade"),
        stage=result.get("stage"),
        step_ms=metrics.get("perf_median_ms"),
        max_rel_err=metrics.get("parity_max_rel_err"),
        error=message.splitlines()[0] if message else None,
    )
