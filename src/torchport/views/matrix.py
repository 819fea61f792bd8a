"""Case x mode -> the outcome: status, placement grade, failing stage and one key figure (for
a failure, its message: a parity failure names how many tensors failed and the worst). Notes
say what a step was (kind and train/eval mode), how dropout was matched, and which compile
backend compile mode used, and why."""

from __future__ import annotations

from torchport.views.base import Column, View, outcome


def build(run: dict, results: list[dict]) -> View | None:
    modes = list(
        dict.fromkeys((run.get("config") or {}).get("modes") or [r["mode"] for r in results])
    )
    by_case: dict[str, dict] = {}
    for r in results:
        by_case.setdefault(r["case"], {})[r["mode"]] = r
    rows = [
        [case] + [outcome(row[m]) if m in row else None for m in modes]
        for case, row in by_case.items()
    ]
    notes = [
        f"{r['case']} ({r['mode']}): reference: {r['findings']['reference']['label']}"
        for r in results
        if ((r.get("findings") or {}).get("reference") or {}).get("kind") == "float32"
    ]
    notes += step_notes(results) + compile_notes(results)
    return View(
        "Results", (Column("case"),) + tuple(Column(m, "outcome") for m in modes), rows, notes
    )


def step_notes(results: list[dict]) -> list[str]:
    """What a step was and the mode it ran in (train / eval), with how dropout was matched."""
    kinds: dict[str, int] = {}
    masked: list[str] = []
    drawn: list[str] = []
    seeded: dict[str, list[str]] = {}  # uncontrolled random ops, by whose generator drew them
    for r in results:
        step = (r.get("findings") or {}).get("step")
        if isinstance(step, dict) and step.get("kind"):
            key = f"{step['kind']} in {step.get('mode')} mode"
            kinds[key] = kinds.get(key, 0) + 1
            randomness = step.get("randomness")
            if isinstance(randomness, dict):
                for key, cases in (("masked_dropout_calls", masked), ("drawn_noise_calls", drawn)):
                    if randomness.get(key) and r["case"] not in cases:
                        cases.append(r["case"])
                whose = str(randomness.get("device_generator") or "").split(":")[0]
                if whose and randomness.get("uncontrolled_random_ops"):
                    cases = seeded.setdefault(whose, [])
                    if r["case"] not in cases:
                        cases.append(r["case"])
    notes = ["steps: " + ", ".join(f"{k} ({n})" for k, n in kinds.items())] if kinds else []
    if masked:
        notes.append(
            "dropout masks drawn on the CPU and applied identically on every side: "
            + ", ".join(masked)
        )
    if drawn:
        notes.append(
            "in-model noise (router jitter, Gumbel sampling) drawn on the CPU and used "
            "identically on every side: " + ", ".join(drawn)
        )
    if seeded.get("cpu"):
        notes.append(
            "random ops left to their generator (torch.randn with a shape, ...) draw from the "
            "CPU generator on this device: seeded per step, the same draws on both sides: "
            + ", ".join(seeded["cpu"])
        )
    notes += [
        f"{r['case']} ({r['mode']}): {note}"
        for r in results
        if (
            r.get("status") == "accuracy_fail"
            or ((r.get("findings") or {}).get("randomness_off") or {}).get("judged")
        )
        and (note := ((r.get("findings") or {}).get("parity") or {}).get("note"))
    ]
    return notes


def compile_notes(results: list[dict]) -> list[str]:
    """Which torch.compile backend and mode compile mode used, and why."""
    chosen = {
        (
            str(c.get("name")),
            str(c.get("mode", "default")),
            str(c.get("reason")),
            c.get("mode_note"),
        )
        for r in results
        if isinstance(c := (r.get("findings") or {}).get("compile_backend"), dict)
    }
    return [
        f"compile backend {name}, mode {mode}: {reason}" + (f" ({note})" if note else "")
        for name, mode, reason, note in sorted(chosen, key=str)
    ]
