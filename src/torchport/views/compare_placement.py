"""What a comparison says about placement, always: run by run, the host-op inventory (every op
some result ran on the host, with its evidence class and how many results), the grades, and
what changed between them.

Where one side has no placement data and is a CPU baseline (the placement probe is off on
the CPU, since everything there runs on the host), the other side's inventory is compared
against "all on the host" and the comparison says so, instead of showing no change; an
ungraded run on any other device (an imported TorchCTS run) has no placement to compare.
Read from the store's grouped headline counts (``store.headline``): no result is loaded.
"""

from __future__ import annotations

from torchport.records.status import HEADLINE_GRADES
from torchport.views.base import View, columns

ALL_ON_HOST = "all on the host"
NO_PLACEMENT = "no placement data"
HOST_DEVICE = "cpu"  # the one device whose ungraded run is taken as ALL_ON_HOST


def _inventory(counts: dict) -> dict[str, dict]:
    classes = counts.get("host_ops") or {}
    results = counts.get("host_op_results") or {}
    return {
        op: {"class": classes.get(op), "results": results.get(op, 0)}
        for op in sorted(classes, key=lambda op: (classes[op] or "e", -results.get(op, 0), op))
    }


def new_counts() -> dict:
    """What ``store.headline`` gives for a run, to tally results into (``tally``)."""
    return {"grades": {}, "host_results": 0, "host_ops": {}, "host_op_results": {}}


def tally(counts: dict, grade: str | None, ops: dict, classes: dict[str, str]) -> None:
    """Add one result (its grade, host ops and their classes) to ``counts``, as the store's
    grouped read counts it: host ops of results graded fallback or host only."""
    if not grade:
        return
    counts["grades"][grade] = counts["grades"].get(grade, 0) + 1
    if grade not in HEADLINE_GRADES:
        return
    counts["host_results"] += 1
    for op in ops:
        cls = classes.get(op)
        have = counts["host_ops"].get(op)
        if op not in counts["host_ops"] or (cls and (have is None or cls < have)):
            counts["host_ops"][op] = cls
        counts["host_op_results"][op] = counts["host_op_results"].get(op, 0) + 1


def placement_summary(store, run_a: dict, run_b: dict) -> dict:
    """The placement side of comparing A with B, from the store's grouped counts."""
    return summarize(
        run_a,
        run_b,
        store.headline(run_a["id"]).get(run_a["id"], {}),
        store.headline(run_b["id"]).get(run_b["id"], {}),
    )


def summarize(run_a: dict, run_b: dict, counts_a: dict, counts_b: dict) -> dict:
    """The placement side of comparing A with B (JSON-ready): each side's grades, inventory,
    and the host ops added and gone; ``basis``: ``graded`` (both graded), or which side was
    taken as ALL_ON_HOST, or ``none`` (neither graded)."""
    sides = {}
    for name, run, counts in (("a", run_a, counts_a), ("b", run_b, counts_b)):
        sides[name] = {
            "run": run["id"],
            "device": run.get("device"),
            "graded": bool(counts.get("grades")),
            "grades": dict(sorted((counts.get("grades") or {}).items())),
            "host_results": counts.get("host_results", 0),
            "host_ops": _inventory(counts),
        }
    a, b = sides["a"], sides["b"]
    ops_a, ops_b = set(a["host_ops"]), set(b["host_ops"])
    out: dict = {"a": a, "b": b, "remarks": []}
    if a["graded"] and b["graded"]:
        out["basis"] = "graded"
        out["added"] = [op for op in b["host_ops"] if op not in ops_a]
        out["gone"] = [op for op in a["host_ops"] if op not in ops_b]
        grades = sorted(set(a["grades"]) | set(b["grades"]))
        out["grades_changed"] = {
            g: [a["grades"].get(g, 0), b["grades"].get(g, 0)]
            for g in grades
            if a["grades"].get(g, 0) != b["grades"].get(g, 0)
        }
        out["remarks"].append(
            f"placement: {len(out['added'])} host ops added, {len(out['gone'])} gone"
            + (
                "; grades changed: "
                + ", ".join(f"{g} {x} -> {y}" for g, (x, y) in out["grades_changed"].items())
                if out["grades_changed"]
                else "; grade counts unchanged"
            )
        )
        return out
    if not a["graded"] and not b["graded"]:
        out["basis"] = "none"
        out["added"], out["gone"], out["grades_changed"] = [], [], {}
        out["remarks"].append(
            "placement: neither run has placement data (the placement probe did not run or "
            "graded nothing): no placement change can be shown"
        )
        return out
    bare, graded = ("a", b) if not a["graded"] else ("b", a)
    bare_side = sides[bare]
    if bare_side["device"] != HOST_DEVICE:
        # Not a CPU baseline (a run whose placement probe did not run, or a TorchCTS report,
        # which grades no placement): what ran where on it is unknown, not "on the host".
        out["basis"] = "none"
        out["added"], out["gone"], out["grades_changed"] = [], [], {}
        out["remarks"].append(
            f"placement: run {bare.upper()} ({bare_side['run']}, device {bare_side['device']}) "
            "has no placement data (its placement probe did not run, or another tool recorded "
            "it): no placement change can be shown"
        )
        return out
    out["basis"] = f"{bare}: {ALL_ON_HOST}"
    on_host = list(graded["host_ops"])
    # Against "all on the host": the graded side's host ops are on the host on both sides;
    # every other op runs on the device on the graded side only.
    out["added"], out["gone"], out["still_on_host"] = [], [], on_host
    out["grades_changed"] = {}
    out["remarks"].append(
        f"placement: run {bare.upper()} ({bare_side['run']}, device {bare_side['device']}) "
        f"has no placement data (on the CPU the work is all on the host, so placement is not "
        f"graded); run {'B' if bare == 'a' else 'A'} on {graded['device']} is compared "
        f"against '{ALL_ON_HOST}': {graded['host_results']} results fell back to the host, "
        f"{len(on_host)} ops ran there"
        + (f" ({', '.join(on_host[:6])}{', ...' if len(on_host) > 6 else ''})" if on_host else "")
    )
    return out


def placement_summary_view(summary: dict) -> View:
    """One row per host op of either side: its class, results on the host in A and in B."""
    a, b = summary["a"], summary["b"]
    unknown = summary.get("basis") == "none"  # an ungraded side that is no CPU baseline
    bare = NO_PLACEMENT if unknown else ALL_ON_HOST
    rows = []
    for op in dict.fromkeys([*a["host_ops"], *b["host_ops"]]):
        in_a, in_b = a["host_ops"].get(op), b["host_ops"].get(op)
        cls = (in_a or in_b or {}).get("class")
        rows.append(
            [
                op,
                cls or "?",
                in_a["results"] if in_a else (bare if not a["graded"] else 0),
                in_b["results"] if in_b else (bare if not b["graded"] else 0),
                "not known"
                if unknown
                else "added"
                if op in summary["added"]
                else "gone"
                if op in summary["gone"]
                else "on the host in both",
            ]
        )
    return View(
        "Placement: host ops by run (evidence class, results on the host)",
        columns("op", "class", "A results", "B results", "change"),
        rows,
        list(summary["remarks"]),
    )
