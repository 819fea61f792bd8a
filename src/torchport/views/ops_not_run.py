"""What an ``ops`` run did not run, and why: a fixed list of kinds
(``cases.ops_reasons.NOT_RUN_KINDS``), counted apart from failures, as data.

Two levels, each counted once: a whole case not run (a skip, with its reason; a case whose
worker died: ``crash`` -> crash_isolated, ``timeout`` -> time_budget, which are failures too
and stay counted as such), and single samples of a case that ran (findings["sample_skips"]).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from torchport.cases.ops_reasons import NOT_RUN_KINDS, REASON_KIND
from torchport.views.base import View, columns

DIED = {"crash": "crash_isolated", "timeout": "time_budget"}


def kind_of(reason: str) -> str:
    return REASON_KIND.get(reason, "excluded_family")


def not_run(results: list[dict]) -> dict[str, dict]:
    """kind -> {"cases": n, "samples": n, "reasons": {reason: n}} for every kind (zeros
    included: an empty kind is a statement too)."""
    out: dict[str, dict[str, Any]] = {
        k: {"cases": 0, "samples": 0, "reasons": Counter()} for k in NOT_RUN_KINDS
    }
    for r in results:
        findings = r.get("findings") or {}
        if r["status"] == "skip":
            reason = findings.get("skip") or "skip"
            entry = out[kind_of(reason)]
            entry["cases"] += 1
            entry["reasons"][reason] += 1
        elif r["status"] in DIED:
            entry = out[DIED[r["status"]]]
            entry["cases"] += 1
            entry["reasons"][r["status"]] += 1
        for reason, n in (findings.get("sample_skips") or {}).items():
            entry = out[kind_of(reason)]
            entry["samples"] += n
            entry["reasons"][f"sample:{reason}"] += n
    return {k: dict(v, reasons=dict(v["reasons"])) for k, v in out.items()}


def note(counted: dict[str, dict]) -> str:
    parts = [
        f"{k} {v['cases']} cases" + (f" + {v['samples']} samples" if v["samples"] else "")
        for k, v in counted.items()
        if v["cases"] or v["samples"]
    ]
    return "not run (apart from failures): " + ("; ".join(parts) if parts else "nothing")


def view(counted: dict[str, dict]) -> View:
    """One row per kind (``show RUN --csv ops-not-run``)."""
    return View(
        "Not run, by kind",
        columns("kind", ("cases", "count"), ("samples", "count"), "reasons", "meaning"),
        [
            [
                k,
                v["cases"],
                v["samples"],
                ", ".join(f"{r} {n}" for r, n in sorted(v["reasons"].items())),
                NOT_RUN_KINDS[k],
            ]
            for k, v in counted.items()
        ],
        [note(counted)],
    )
