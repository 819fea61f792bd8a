"""A run's headline: one line a reader takes in at a glance, with a badge colour per part.

Results passed, accuracy failures, host fallbacks (results graded ``fallback`` or ``host`` and
the distinct ops they ran on the host, by evidence class), the wait before the first compiled
step and the median compiled speedup. The counts come from the store's status index and its
index of graded results (``store.headline``); the two medians are ranked in the
database (``store.headline(figures=True)``), for runs up to FIGURES_UP_TO results in a listing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torchport.views.base import View, columns

# Past this many results a listing leaves the medians to the run's own page (reading 100 000
# step times for each of a dozen runs would make the list slow).
FIGURES_UP_TO = 20_000
GOOD, WARN, BAD, INFO, NONE = "good", "warn", "bad", "info", "none"
# Evidence classes (docs/design.md): (a) served by the backend's fallback, (b) named by the backend,
# (c) parameters or buffers left on the host; None: a row recorded before classes were stored.
CLASS_ORDER = ("a", "b", "c")


@dataclass(frozen=True)
class Part:
    """One badge: what it says and its tone (good, warn, bad, info, none)."""

    name: str
    text: str
    tone: str


@dataclass(frozen=True)
class Headline:
    recorded: int
    planned: int
    passed: int
    accuracy_fail: int
    other_fail: int
    skipped: int
    host_results: int
    host_ops: dict[str, str | None] = field(default_factory=dict)
    graded: int = 0  # results with a placement grade (none: placement was not graded)
    compile_wait_s: float | None = None
    compiled: int = 0
    speedup: float | None = None
    timed_pairs: int = 0
    figures_read: bool = True

    def ops_by_class(self) -> dict[str, list[str]]:
        """Distinct host ops by evidence class, strongest first (``?``: class not recorded)."""
        out: dict[str, list[str]] = {}
        for op, cls in sorted(self.host_ops.items()):
            out.setdefault(cls or "?", []).append(op)
        return {k: out[k] for k in (*CLASS_ORDER, *sorted(set(out) - set(CLASS_ORDER))) if k in out}

    def parts(self) -> list[Part]:
        ran = self.recorded - self.skipped
        complete = self.recorded >= self.planned
        tone = GOOD if self.passed == ran and complete and ran else (WARN if self.passed else BAD)
        failed = self.recorded - self.passed - self.skipped
        passed = f"{self.passed}/{self.planned} pass" + (f", {failed} failed" if failed else "")
        parts = [Part("passed", passed, tone)]
        parts.append(
            Part(
                "accuracy",
                f"{self.accuracy_fail} accuracy fail",
                BAD if self.accuracy_fail else GOOD,
            )
        )
        if self.host_results:
            classes = ", ".join(f"{c}: {len(ops)}" for c, ops in self.ops_by_class().items())
            n = len(self.host_ops)
            host = (
                f"{self.host_results} host fallback ({n} op{'s' if n != 1 else ''}"
                + (f"; class {classes}" if classes else "")
                + ")"
            )
            parts.append(Part("fallback", host, WARN))
        elif not self.graded:  # a CPU run, or the placement probe off: no evidence either way
            parts.append(Part("fallback", "placement not graded", NONE))
        else:
            parts.append(Part("fallback", "0 host fallback", GOOD))
        if not self.figures_read:
            parts.append(Part("compile_wait", "compile wait: on the run's page", NONE))
            parts.append(Part("speedup", "speedup: on the run's page", NONE))
            return parts
        parts.append(
            Part(
                "compile_wait",
                f"compile wait {self.compile_wait_s:.3g} s (median of {self.compiled})"
                if self.compile_wait_s is not None
                else "no compile wait measured",
                INFO if self.compile_wait_s is not None else NONE,
            )
        )
        parts.append(
            Part(
                "speedup",
                f"compiled x{self.speedup:.2f} (median of {self.timed_pairs})"
                if self.speedup is not None
                else "no speedup measured",
                NONE if self.speedup is None else GOOD if self.speedup >= 1.0 else WARN,
            )
        )
        return parts

    def text(self) -> str:
        return " · ".join(p.text for p in self.parts())

    def to_dict(self) -> dict:
        return {
            "recorded": self.recorded,
            "planned": self.planned,
            "passed": self.passed,
            "accuracy_fail": self.accuracy_fail,
            "other_fail": self.other_fail,
            "skipped": self.skipped,
            "host_results": self.host_results,
            "graded": self.graded,
            "host_ops": dict(sorted(self.host_ops.items())),
            "host_ops_by_class": self.ops_by_class(),
            "compile_wait_s": self.compile_wait_s,
            "compiled": self.compiled,
            "speedup": self.speedup,
            "timed_pairs": self.timed_pairs,
            "badges": {p.name: {"text": p.text, "tone": p.tone} for p in self.parts()},
        }


def headline(counts: dict, planned: int, figures: dict | None) -> Headline:
    """``counts``: one run's ``store.headline`` entry (empty for a run with no
    results); ``figures``: its ``store.headline(figures=True)``, None when not read."""
    statuses = counts.get("statuses") or {}
    recorded = sum(statuses.values())
    passed = statuses.get("pass", 0)
    accuracy = statuses.get("accuracy_fail", 0)
    skipped = statuses.get("skip", 0)
    figures_ = figures or {}
    return Headline(
        recorded=recorded,
        planned=max(planned, recorded),
        passed=passed,
        accuracy_fail=accuracy,
        other_fail=recorded - passed - accuracy - skipped,
        skipped=skipped,
        host_results=counts.get("host_results", 0),
        host_ops=dict(counts.get("host_ops") or {}),
        graded=sum((counts.get("grades") or {}).values()),
        compile_wait_s=figures_.get("compile_wait_s"),
        compiled=figures_.get("compiled", 0),
        speedup=figures_.get("speedup"),
        timed_pairs=figures_.get("timed_pairs", 0),
        figures_read=figures is not None,
    )


def run_headline(store, run: dict) -> Headline:
    """One run's headline, medians included (a run's own page, ``show``, the report)."""
    counts = store.headline(run["id"]).get(run["id"], {})
    planned = run.get("planned", len(run.get("plan") or []))
    return headline(counts, planned, store.headline(run["id"], figures=True))


def run_headlines(store, runs: list[dict]) -> dict[str, Headline]:
    """Every listed run's headline from one grouped read; medians for runs up to
    FIGURES_UP_TO results."""
    counts = store.headline()
    out = {}
    for run in runs:
        c = counts.get(run["id"], {})
        recorded = sum((c.get("statuses") or {}).values())
        planned = run["planned"] if "planned" in run else len(run.get("plan") or [])
        figures = store.headline(run["id"], figures=True) if recorded <= FIGURES_UP_TO else None
        out[run["id"]] = headline(c, planned, figures)
    return out


def verdict_view(head: Headline, *, device: str | None = None) -> View:
    """The five questions a reader asks of a run, answered from its headline, before any
    detail table: does it run, does it match, does it stay on the device, how long is the
    wait before the first step, how fast is it."""
    ran = head.recorded - head.skipped
    broke = head.other_fail
    runs = (
        f"{ran - broke} / {ran} results ran"
        + (f"; {broke} stopped with an error" if broke else "")
        + (f"; {head.skipped} skipped" if head.skipped else "")
        + (
            f"; {head.planned - head.recorded} planned not recorded"
            if head.planned > head.recorded
            else ""
        )
    )
    matches = (
        f"{head.accuracy_fail} outside tolerance of the reference (accuracy_fail)"
        if head.accuracy_fail
        else "no accuracy failure"
    ) + f"; {head.passed} passed"
    if head.host_results:
        classes = "; ".join(
            f"class {c}: {', '.join(ops[:4])}{', ...' if len(ops) > 4 else ''}"
            for c, ops in head.ops_by_class().items()
        )
        on_device = (
            f"no: {head.host_results} results fell back to the host, "
            f"{len(head.host_ops)} distinct ops ({classes})"
        )
    elif head.graded:
        on_device = f"yes: no result fell back to the host ({head.graded} graded)"
    else:
        on_device = "not known: placement was not graded (the placement probe did not run)"
    if device == "cpu" and not head.host_results:
        on_device = "the CPU is the host: placement is not graded"
    parts = {p.name: p for p in head.parts()}
    rows = [
        ["runs?", runs, parts["passed"].tone],
        ["matches?", matches, parts["accuracy"].tone],
        ["on the device?", on_device, NONE if device == "cpu" else parts["fallback"].tone],
        ["wait before the first step?", parts["compile_wait"].text, parts["compile_wait"].tone],
        ["how fast?", parts["speedup"].text, parts["speedup"].tone],
    ]
    return View(
        "Verdict",
        columns("question", "answer", "badge"),
        rows,
        [
            "compile wait: median cold first compiled step; speedup: median over cases of eager "
            "/ compiled median step time, both modes passed"
        ],
    )
