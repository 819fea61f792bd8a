"""Training-loss parity per (case, mode): N optimizer steps on the device vs CPU float64."""

from __future__ import annotations

from torchport.views.base import View, columns

COLUMNS = columns(
    "case",
    "mode",
    ("steps", "count"),
    ("final loss", "float"),
    ("reference final", "float"),
    ("max divergence", "sci"),
    ("tolerance", "sci"),
    "verdict",
)


def verdict(result: dict, info: dict) -> str:
    if result.get("stage") == "train":
        return "diverged"
    if "reference_losses" not in info:
        return "-"
    return "no verdict" if info.get("tolerance") is None else "ok"


def build(run: dict, results: list[dict]) -> View | None:
    trained = [r for r in results if "train" in (r.get("findings") or {})]
    if not trained:
        return None
    rows: list[list] = []
    notes: list[str] = []
    for r in trained:
        m, info = r.get("metrics") or {}, r["findings"]["train"] or {}
        rows.append(
            [
                r["case"],
                r["mode"],
                info.get("steps"),
                m.get("train_final_loss"),
                m.get("train_reference_final_loss"),
                m.get("train_max_loss_divergence"),
                info.get("tolerance"),
                verdict(r, info),
            ]
        )
        notes.extend(f"{r['case']} [{r['mode']}]: {n}" for n in info.get("notes") or ())
    first = trained[0]["findings"]["train"] or {}
    notes.insert(
        0,
        f"{first.get('optimizer')}, {first.get('data')}; divergence is "
        "|loss - reference| / |reference|, the largest over the steps",
    )
    return View("Training-loss parity", COLUMNS, rows, notes)


def loss_curves(run: dict, results: list[dict]) -> View | None:
    """Loss per optimizer step on the device, in the CPU float64 reference and in the CPU
    baseline at the run's dtype: one row per (case, mode, step), for plotting."""
    rows: list[list] = []
    for r in results:
        info = (r.get("findings") or {}).get("train") or {}
        device = info.get("device_losses") or []
        reference = info.get("reference_losses") or []
        baseline = info.get("baseline_losses") or []
        for step in range(max(len(device), len(reference), len(baseline))):
            rows.append(
                [
                    r["case"],
                    r["mode"],
                    step + 1,
                    _at(device, step),
                    _at(reference, step),
                    _at(baseline, step),
                ]
            )
    if not rows:
        return None
    return View(
        "Training loss per step",
        columns(
            "case",
            "mode",
            ("step", "int"),
            ("device", "float"),
            ("reference", "float"),
            ("baseline", "float"),
        ),
        rows,
        ["reference: CPU float64; baseline: CPU at the run's dtype; same data and seed"],
    )


def _at(losses: list, step: int):
    return losses[step] if step < len(losses) else None
