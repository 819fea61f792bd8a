"""Training-loss parity per (case, mode): N optimizer steps on the device vs CPU float64."""


def _fmt(value, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def build(run, results):
    trained = [r for r in results if "train" in (r.get("findings") or {})]
    if not trained:
        return None
    rows, notes = [], []
    for r in trained:
        m, info = r.get("metrics") or {}, r["findings"]["train"]
        verdict = ("diverged" if r.get("stage") == "train" else
                   "-" if "reference_losses" not in info else
                   "no verdict" if info.get("tolerance") is None else "ok")
        rows.append([r["case"], r["mode"], info.get("steps"),
                     _fmt(m.get("train_final_loss"), ".5g"),
                     _fmt(m.get("train_reference_final_loss"), ".5g"),
                     _fmt(m.get("train_max_loss_divergence"), ".2e"),
                     _fmt(info.get("tolerance"), ".2e"), verdict])
        notes.extend(f"{r['case']} [{r['mode']}]: {n}" for n in info.get("notes") or ())
    first = trained[0]["findings"]["train"]
    notes.insert(0, f"{first.get('optimizer')}, {first.get('data')}; divergence is "
                    "|loss - reference| / |reference|, the largest over the steps")
    return {"title": "Training-loss parity", "columns": [
        "case", "mode", "steps", "final loss", "reference final", "max divergence", "tolerance",
        "verdict"], "rows": rows, "notes": notes}
