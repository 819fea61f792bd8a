"""Plots as data: each chart is built from a View's typed values and drawn in the browser by
the vendored uPlot (static/uPlot.iife.min.js), so a page's JSON twin carries exactly what is
plotted and nothing is fetched from elsewhere.

A chart has categories or numbers on x and one or more series of numbers (None: no point, e.g.
a failed case has no step time). ``points`` charts draw markers only (categories on x have no
order to join); ``lines`` charts join the points (steps, runs in time order).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from torchport.views.base import Annotated, Fraction, View

LOSS_CHARTS = 12  # loss curves drawn per run page; the table below them has every step


@dataclass
class Series:
    label: str
    values: list[float | None]


@dataclass
class Chart:
    id: str
    title: str
    kind: str  # "points" or "lines"
    x: list[str]  # category labels, one per point
    x_title: str
    y_title: str
    series: list[Series]
    log_y: bool = False
    y_range: tuple[float, float] | None = None  # fixed (shares: 0-100%), else from the data
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def drawn(self) -> int:
        """Points with a value: a chart with none is not drawn at all."""
        return sum(v is not None for s in self.series for v in s.values)


def number(value: Any) -> float | None:
    """The figure in a cell: a number, an annotated number, else None (a reason, a limit)."""
    if isinstance(value, Annotated):
        value = value.value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _kept(chart: Chart) -> list[Chart]:
    """The chart without its empty series (eager has no compile time); none if nothing is left."""
    chart.series = [s for s in chart.series if any(v is not None for v in s.values)]
    return [chart] if chart.drawn else []


def coverage_chart(view: View) -> list[Chart]:
    """Share of cases through each stage, overall and per family (tag)."""
    stages = [c.name for c in view.columns[2:]]
    x = [str(row[0]) for row in view.rows]
    series = [
        Series(
            stage,
            [
                round(100.0 * f.n / f.of, 2) if isinstance(f, Fraction) and f.of else None
                for f in (row[2 + i] for row in view.rows)
            ],
        )
        for i, stage in enumerate(stages)
    ]
    return _kept(
        Chart(
            "coverage",
            "Coverage by family",
            "points",
            x,
            "family",
            "% of cases",
            series,
            y_range=(0.0, 100.0),
        )
    )


def _by_case(view: View, value_column: str, modes: tuple[str, ...]) -> tuple[list[str], dict]:
    """``{mode: {case: value}}`` and the cases in order, from a view with case and mode."""
    idx = view.names.index(value_column)
    cases: list[str] = []
    values: dict[str, dict[str, Any]] = {m: {} for m in modes}
    for row in view.rows:
        case, mode = row[0], row[1]
        if mode not in values:
            continue
        if case not in cases:
            cases.append(case)
        values[mode][case] = row[idx]
    return cases, values


def throughput_chart(perf: View) -> list[Chart]:
    """Steps per second eager vs compiled (1000 / median step ms), per case."""
    cases, medians = _by_case(perf, "median ms", ("eager", "compile"))
    series = [
        Series(
            mode,
            [
                round(1000.0 / ms, 4) if (ms := number(medians[mode].get(c))) else None
                for c in cases
            ],
        )
        for mode in ("eager", "compile")
    ]
    return _kept(
        Chart(
            "throughput",
            "Throughput: eager vs compiled",
            "points",
            cases,
            "case",
            "steps/s",
            series,
            log_y=True,
            notes=["steps/s = 1000 / median step ms"],
        )
    )


def compile_chart(view: View) -> list[Chart]:
    """Cold vs warm first compiled step per case (a compile that failed or ran past its limit
    has no point)."""
    x = [str(row[0]) for row in view.rows]
    series = [
        Series(name, [number(row[view.names.index(name)]) for row in view.rows])
        for name in ("cold", "warm")
    ]
    return _kept(
        Chart("compile", "Compile: cold vs warm", "points", x, "case", "s", series, log_y=True)
    )


def loss_charts(view: View, limit: int = LOSS_CHARTS) -> list[Chart]:
    """One chart per (case, mode): device, reference and baseline loss by step."""
    curves: dict[tuple[str, str], list[list]] = {}
    for row in view.rows:
        curves.setdefault((row[0], row[1]), []).append(row)
    charts = []
    for n, ((case, mode), rows) in enumerate(list(curves.items())[:limit]):
        charts += _kept(
            Chart(
                f"loss-{n}",
                f"Loss: {case} [{mode}]",
                "lines",
                [str(r[2]) for r in rows],
                "step",
                "loss",
                [
                    Series(name, [number(r[3 + i]) for r in rows])
                    for i, name in enumerate(view.names[3:])
                ],
            )
        )
    if len(curves) > limit:
        charts[-1].notes.append(f"{len(curves) - limit} more curves in the table below")
    return charts


def when(started: Any) -> str:
    """``2026-12-03T06:55:18+00:00`` -> ``12-03 06:55`` (a run's start on a date axis)."""
    text = str(started or "?")
    return f"{text[5:10]} {text[11:16]}" if len(text) >= 16 and text[10] == "T" else text


def history_charts(view: View, torch_by_run: dict[str, str] | None = None) -> list[Chart]:
    """Step time and compile times of one case across runs, oldest first, with run start
    dates on x and a series per device and mode (and per torch version where a device's
    runs used more than one): points of different devices are never joined into one line."""
    torch_by_run = torch_by_run or {}
    names = view.names
    at = {n: names.index(n) for n in ("run", "started", "device", "mode")}
    rows = view.rows
    runs = list(dict.fromkeys(row[at["run"]] for row in rows))
    started = {row[at["run"]]: row[at["started"]] for row in rows}
    versions: dict[str, set] = {}
    for row in rows:
        versions.setdefault(str(row[at["device"]]), set()).add(torch_by_run.get(row[at["run"]]))

    def group(row: list) -> str:
        device = str(row[at["device"]])
        torch = torch_by_run.get(row[at["run"]])
        split = len(versions[device]) > 1 and torch
        return f"{device}{f' torch {torch}' if split else ''} [{row[at['mode']]}]"

    groups = list(dict.fromkeys(group(row) for row in rows))

    def series(column: str, name: str, label: str) -> Series:
        by_run = {row[0]: number(row[names.index(column)]) for row in rows if group(row) == name}
        return Series(label, [by_run.get(r) for r in runs])

    x = [when(started.get(r)) for r in runs]
    title = "run start, UTC (oldest first)"
    devices = sorted(versions)
    notes = [f"one line per device and mode ({', '.join(devices)}); x: when each run started"]
    step = Chart(
        "history-step",
        "Step time by run",
        "lines",
        x,
        title,
        "ms",
        [series("step ms", g, g) for g in groups],
        log_y=True,
        notes=list(notes),
    )
    compiles = Chart(
        "history-compile",
        "Compile time by run",
        "lines",
        x,
        title,
        "s",
        [
            series(c, g, f"{g} {c.removesuffix(' compile')}")
            for g in groups
            for c in ("cold compile", "warm compile")
        ],
        log_y=True,
        notes=list(notes),
    )
    return _kept(step) + _kept(compiles)
