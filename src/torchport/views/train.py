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
