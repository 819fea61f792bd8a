"""The dist suite's side of comparing run A with run B: collective status changes (collective ×
op × dtype × size × layout), bus bandwidth per collective and size (B/A), and training parity per
strategy and mode. Read from the dist results of both runs (a few per run), whole."""

from __future__ import annotations

from collections.abc import Iterable

from torchport.views.base import View, columns

CASE_GLOB = "dist/*"
# busbw ratios inside this band are listed but not called a change (timing on a shared host)
BUSBW_BAND = 0.10


def _dist(results: Iterable[dict]) -> dict[tuple[str, str], dict]:
    return {
        (r["case"], r["mode"]): r
        for r in results
        if (r.get("findings") or {}).get("ladder") == "dist"
    }


def _rows(result: dict | None) -> dict[tuple, str]:
    if result is None:
        return {}
    return {
        (row["collective"], row["op"], row["dtype"], row["size"], row["layout"]): row["status"]
        for row in result["findings"].get("dist_rows") or []
    }


def _busbw(result: dict | None) -> dict[tuple, float]:
    if result is None:
        return {}
    return {
        (b["collective"], b["size"]): b["busbw_gbps"]
        for b in result["findings"].get("dist_bandwidth") or []
    }


def _train(result: dict | None) -> dict | None:
    if result is None:
        return None
    info = result["findings"].get("dist_train")
    if not info:  # the world failed before training: its status says why
        return {"status": result["status"], "worst": None, "rel_err": None, "step_s": None}
    worst = info.get("worst") or {}
    return {
        "status": result["status"],
        "worst": worst.get("name"),
        "rel_err": worst.get("rel_err"),
        "step_s": info.get("step_s"),
    }


def dist_changes(results_a: Iterable[dict], results_b: Iterable[dict]) -> dict:
    """JSON-ready: ``collectives`` (rows whose status differs, or present on one side only),
    ``bandwidth`` (every collective and size both runs timed, with B/A), ``training`` (every
    train case of either run)."""
    a, b = _dist(results_a), _dist(results_b)
    collectives, bandwidth, training = [], [], []
    for key in sorted(set(a) | set(b)):
        ra, rb = a.get(key), b.get(key)
        case, mode = key
        rows_a, rows_b = _rows(ra), _rows(rb)
        for row in sorted(set(rows_a) | set(rows_b), key=str):
            sa, sb = rows_a.get(row), rows_b.get(row)
            if sa != sb:
                collective, op, dtype, size, layout = row
                collectives.append(
                    {
                        "case": case,
                        "collective": collective,
                        "op": op,
                        "dtype": dtype,
                        "size": size,
                        "layout": layout,
                        "a": sa,
                        "b": sb,
                    }
                )
        bw_a, bw_b = _busbw(ra), _busbw(rb)
        for collective, size in sorted(set(bw_a) & set(bw_b), key=str):
            x, y = bw_a[(collective, size)], bw_b[(collective, size)]
            ratio = y / x if x else None
            bandwidth.append(
                {
                    "case": case,
                    "collective": collective,
                    "size": size,
                    "a_gbps": x,
                    "b_gbps": y,
                    "ratio": ratio,
                    "changed": ratio is not None and abs(ratio - 1) > BUSBW_BAND,
                }
            )
        if case.count("/") >= 2:  # dist/<strategy>/<model>: a training case
            training.append({"case": case, "mode": mode, "a": _train(ra), "b": _train(rb)})
    return {"collectives": collectives, "bandwidth": bandwidth, "training": training}


def _side(t: dict | None, field: str):
    return None if t is None else t.get(field)


def dist_views(changes: dict) -> list[View]:
    """The dist tables of a comparison; empty ones are left out."""
    views = []
    if rows := changes.get("collectives"):
        views.append(
            View(
                f"Distributed collectives: status changed ({len(rows)})",
                columns("case", "collective", "op", "dtype", ("size", "count"), "layout", "A", "B"),
                [
                    [
                        c["case"],
                        c["collective"],
                        c["op"],
                        c["dtype"],
                        c["size"],
                        c["layout"],
                        c["a"] or "-",
                        c["b"] or "-",
                    ]
                    for c in rows
                ],
            )
        )
    if rows := changes.get("bandwidth"):
        views.append(
            View(
                "Distributed bus bandwidth",
                columns(
                    "case",
                    "collective",
                    ("size", "count"),
                    ("A GB/s", "float"),
                    ("B GB/s", "float"),
                    ("B/A", "ratio"),
                    "changed",
                ),
                [
                    [
                        r["case"],
                        r["collective"],
                        r["size"],
                        r["a_gbps"],
                        r["b_gbps"],
                        r["ratio"],
                        "yes" if r["changed"] else "",
                    ]
                    for r in rows
                ],
                [f"changed: B/A outside 1 +- {BUSBW_BAND:.0%} (median busbw of each run)"],
            )
        )
    if rows := changes.get("training"):
        views.append(
            View(
                "Distributed training parity",
                columns(
                    "case",
                    "mode",
                    "A",
                    "B",
                    "A worst tensor",
                    "B worst tensor",
                    ("A worst rel err", "sci"),
                    ("B worst rel err", "sci"),
                    ("A step ms", "ms"),
                    ("B step ms", "ms"),
                ),
                [
                    [
                        t["case"],
                        t["mode"],
                        _side(t["a"], "status") or "-",
                        _side(t["b"], "status") or "-",
                        _side(t["a"], "worst"),
                        _side(t["b"], "worst"),
                        _side(t["a"], "rel_err"),
                        _side(t["b"], "rel_err"),
                        _ms(_side(t["a"], "step_s")),
                        _ms(_side(t["b"], "step_s")),
                    ]
                    for t in rows
                ],
            )
        )
    return views


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1e3
