"""Cell values as display text, by column kind: digits, units and trimming live here only.

Stored text is shown as text: control characters are written as escapes (a label cannot move
the cursor or clear the screen), and a huge string is trimmed in the middle so both the start
and the end stay visible. Error messages keep the sentence that names the op and the backend.
"""

from __future__ import annotations

import math
import unicodedata
from typing import Any

from torchport.records.status import NOT_FAILURES
from torchport.views.base import (
    Annotated,
    Breaks,
    Copies,
    Exceeded,
    Fraction,
    Graphs,
    Outcome,
    Share,
    Span,
)
from torchport.views.headline import Headline
from torchport.views.listing import Tally

MISSING = "-"
CELL_CHARS = 240  # any text cell
ERROR_CHARS = 100  # an error message in a table
TOP_OPS = 3  # host ops named per cell
GRAPH_OPS_SHOWN = 4  # ops-per-graph figures named per cell


def safe(text: Any) -> str:
    """``text`` with control and format characters (ESC, CR, BEL, bidi overrides) escaped;
    newlines and tabs are kept."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(
        ch
        if ch in "\n\t" or unicodedata.category(ch) not in ("Cc", "Cf", "Zl", "Zp")
        else ch.encode("unicode_escape").decode("ascii")
        for ch in text
    )


def trim_middle(text: str, limit: int) -> str:
    """Keep the start and the end of a long text: ``head…tail`` of at most ``limit`` chars."""
    if len(text) <= limit:
        return text
    head = (limit - 1) * 2 // 3
    return text[:head] + "…" + text[len(text) - (limit - 1 - head) :]


def brief_error(message: str, limit: int = ERROR_CHARS) -> str:
    """The first line of an error; when too long, its first sentence (which names the op and
    the backend in torch's messages), then trimmed in the middle, never cut at the end."""
    line = next((part.strip() for part in str(message).splitlines() if part.strip()), "")
    if len(line) > limit:
        end = line.find(". ")
        if 0 < end < limit:
            line = line[: end + 1]
    return trim_middle(line, limit)


def text_cell(value: Any, limit: int = CELL_CHARS) -> str:
    return safe(trim_middle(str(value), limit))


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover


def number(value: float, kind: str) -> str:
    """A number in the unit of its column."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if kind == "ms" or kind == "tflops":  # 3 significant digits, never 1.07e+03
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    if kind == "s":
        return f"{value:.2f} s"
    if kind == "percent":  # a tiny 0.0021% must not read as 0.0%
        pct = value * 100
        return f"{pct:.1f}%" if abs(pct) >= 1 else f"{pct:.3g}%"
    if kind == "ratio":
        return f"{value:.2f}x"
    if kind == "rate":
        return f"{value:,.0f}"
    if kind == "float":
        return f"{value:.5g}"
    if kind == "sci":
        return f"{value:.2e}"
    if kind == "bytes":
        return human_bytes(value)
    if isinstance(value, int):
        return f"{value:,}" if kind == "count" else str(value)
    return f"{value:.4g}"


def outcome_metric(o: Outcome) -> str:
    if o.status not in NOT_FAILURES and o.error:  # a failure says why before how fast
        return safe(brief_error(o.error))
    if o.step_ms is not None:
        return f"{number(o.step_ms, 'ms')} ms/step"
    if o.status == "pass" and o.max_rel_err is not None:
        return f"rel err {o.max_rel_err:.1e}"
    return safe(brief_error(o.error)) if o.error else ""


def outcome_cell(o: Outcome) -> str:
    status = safe(o.status)
    if o.grade and o.grade != "on_device":
        status += f" [{safe(o.grade)}]"
    if o.stage and o.status not in NOT_FAILURES:
        status += f" @{safe(o.stage)}"
    metric = outcome_metric(o)
    return f"{status} ({metric})" if metric else status


def _op_counts(ops: dict) -> str:
    shown = ", ".join(f"{text_cell(op, 60)} x{n}" for op, n in list(ops.items())[:TOP_OPS])
    more = len(ops) - TOP_OPS
    return shown + (f" (+{more} more)" if more > 0 else "")


def _copies(c: Copies) -> str:
    if not c.count:
        return "none"
    moved = [
        f"{d} {human_bytes(n)}"
        for d, n in (("h2d", c.h2d_bytes), ("d2h", c.d2h_bytes), ("d2d", c.d2d_bytes))
        if n
    ]
    return f"{c.count}: " + ", ".join(moved) if moved else str(c.count)


def _graphs(g: Graphs) -> str:
    if not g.ops:
        return str(g.count)
    ops = "+".join(str(n) for n in g.ops[:GRAPH_OPS_SHOWN])
    return f"{g.count} ({ops}{'+...' if len(g.ops) > GRAPH_OPS_SHOWN else ''})"


def cell(value: Any, kind: str) -> str:
    """The display text of one cell."""
    if value is None:
        return MISSING
    if isinstance(value, Outcome):
        return outcome_metric(value) if kind == "detail" else outcome_cell(value)
    if isinstance(value, Annotated):
        return f"{cell(value.value, kind)} ({text_cell(value.note)})"
    if isinstance(value, Exceeded):
        if value.limit is None:
            return text_cell(value.status)
        limit = f"{value.limit:g} s" if kind == "s" else number(value.limit, kind)  # as set
        return f"> {limit} ({text_cell(value.status)})"
    if isinstance(value, Span):
        return f"{number(value.low, kind)}-{number(value.high, kind)}"
    if isinstance(value, Fraction):
        return (
            f"{value.n} / {value.of} ({100.0 * value.n / value.of:.1f}%)" if value.of else MISSING
        )
    if isinstance(value, Share):
        share = f" ({value.part / value.whole:.0%})" if value.whole else ""
        return number(value.part, kind) + share
    if isinstance(value, Graphs):
        return _graphs(value)
    if isinstance(value, Breaks):
        distinct = f", {value.distinct} distinct" if value.distinct > 1 else ""
        return f"{value.count}{distinct} @ {text_cell(value.where, 80)}"
    if isinstance(value, Copies):
        return _copies(value)
    if isinstance(value, Headline):
        return safe(value.text())
    if isinstance(value, Tally):
        counts = ", ".join(f"{text_cell(s, 40)} {n}" for s, n in value.by_status.items())
        return f"{value.recorded}/{value.planned}: {counts}"
    if isinstance(value, dict):
        if kind == "op_counts":
            return _op_counts(value)
        return text_cell(", ".join(f"{k}={v}" for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return text_cell(",".join(str(v) for v in value))
    if isinstance(value, str):
        return text_cell(brief_error(value) if kind == "error" else value)
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (int, float)):
        return number(value, kind)
    return text_cell(value)
