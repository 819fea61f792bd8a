"""An evaluation's scorecard: one row per question a team asks of a device, its answer in a
sentence, a tone (good, warn, bad, info, none) and the runs that are its evidence.

Every answer is computed from the group's recorded results here, and carries the numbers it
states (``figures``), so a reader (and a test) can check each one against the records. What
was not evaluated (left out of the plan for time, a part that did not finish, a question
nothing in the plan answers) is listed, never dropped. The CLI's summary, the dashboard's
page and the one-file report all render the same ``Scorecard`` (``to_dict`` is its JSON).
"""

from __future__ import annotations

from dataclasses import dataclass

from torchport.views.base import View, columns
from torchport.views.compat import CompatRow, compat_table
from torchport.views.evaluation import DEVICE_SIDE, Group, load_group, wall_s
from torchport.views.scorecard_answers import (
    Answer,
    Reader,
    compile_wait,
    dist,
    hotspots,
    kernels,
    matches,
    on_device,
    runs_in,
    simple_part,
    speed,
)
from torchport.views.scorecard_since import since


@dataclass
class Scorecard:
    evaluation: str
    device: str
    against: str | None
    budget_s: float
    plan_estimate_s: float
    elapsed_s: float
    previous: str | None
    answers: list[Answer]
    not_evaluated: list[dict]  # {what, why}
    compat: list[CompatRow]
    notes: list[dict]
    runs: list[dict]  # {run, part, side, device, state, results}

    def to_dict(self) -> dict:
        return {
            "evaluation": self.evaluation,
            "device": self.device,
            "against": self.against,
            "budget_s": self.budget_s,
            "plan_estimate_s": self.plan_estimate_s,
            "elapsed_s": self.elapsed_s,
            "previous": self.previous,
            "answers": [a.to_dict() for a in self.answers],
            "not_evaluated": self.not_evaluated,
            "compat": [c.to_dict() for c in self.compat],
            "notes": self.notes,
            "runs": self.runs,
        }

    def view(self) -> View:
        rows = [
            [a.question, a.answer, a.tone, ", ".join(sorted({e["run"] for e in a.evidence}))]
            for a in self.answers
        ]
        return View(
            f"Scorecard: {self.device}"
            + (f" against {self.against}" if self.against else "")
            + f" ({self.evaluation})",
            columns("question", "answer", "tone", "evidence (runs)"),
            rows,
            [
                f"budget {self.budget_s:.0f} s, plan {self.plan_estimate_s:.0f} s, ran "
                f"{self.elapsed_s:.0f} s; 'torchport show RUN' for a run's evidence"
            ],
        )

    def not_evaluated_view(self) -> View:
        return View(
            "Not evaluated",
            columns("what", "why"),
            [[n["what"], n["why"]] for n in self.not_evaluated],
        )

    def runs_view(self) -> View:
        return View(
            "Runs of the evaluation",
            columns("run", "part", "side", "device", "state", ("results", "count")),
            [
                [r["run"], r["part"], r["side"], r["device"], r["state"], r["results"]]
                for r in self.runs
            ],  # fmt: skip
        )


def _not_evaluated(group: Group, answers: list[Answer]) -> list[dict]:
    out = []
    for left in group.plan.left_out:
        out.append({"what": f"{left['part']} ({left['side']})", "why": left["why"]})
    for part in group.plan.parts:
        run = group.run_of(part.name, part.side)
        if run is None:
            out.append(
                {
                    "what": f"{part.name} ({part.side})",
                    "why": "not started: the evaluation stopped before it (resume it)",
                }
            )
        elif run["state"] != "complete":
            out.append(
                {
                    "what": f"{part.name} ({part.side})",
                    "why": f"run {run['id']} {run['state']}: only what it recorded counts "
                    "(resume it)",
                }
            )
        if part.left_out and part.side == DEVICE_SIDE:
            out.append(
                {
                    "what": f"{part.name}: {len(part.left_out)} more cases",
                    "why": "left out for time (the plan took the first of its sample)",
                }
            )
    for a in answers:
        if a.answer.startswith("not evaluated"):
            out.append({"what": a.question, "why": a.answer.removeprefix("not evaluated: ")})
    return out


def scorecard(store, evaluation: str) -> Scorecard:
    """The scorecard of ``evaluation`` (LookupError when the knowledge base has no such
    evaluation)."""
    group = load_group(store, evaluation)
    reader = Reader(store, group)
    plan = group.plan
    compat = compat_table(reader.results_by_side(DEVICE_SIDE), plan)
    answers = [
        runs_in(reader, "eager", "run", "runs eager?"),
        runs_in(reader, "compile", "compiled_run", "runs compiled?"),
        matches(reader),
        on_device(reader, plan.device),
        compile_wait(reader),
        speed(reader, plan.against),
        simple_part(reader, "ops", "operators (OpInfo sample)?", "ops", "op x dtype results"),
        simple_part(
            reader,
            "generate",
            "generates (prefill + decode, token parity)?",
            "serving",
            "generate results",
        ),
        dist(reader),
        kernels(reader),
        hotspots(reader),
    ]
    for part in reader.device_parts():
        if part.startswith("workload:"):
            answers.insert(
                2,
                simple_part(
                    reader,
                    part,
                    f"your workload {part.removeprefix('workload:')}?",
                    "matrix",
                    "results",
                ),
            )
    changed, previous = since(store, reader, group, compat)
    answers.append(changed)
    runs = [
        {
            "run": run["id"],
            "part": part,
            "side": side,
            "device": run["device"],
            "state": run["state"],
            "results": len(reader.results[(part, side)]),
        }
        for (part, side), run in group.runs.items()
    ]
    started = [run["started_at"] for run in group.runs.values()]
    finished = [run.get("finished_at") or run["started_at"] for run in group.runs.values()]
    elapsed = wall_s({"started_at": min(started), "finished_at": max(finished)}) or 0.0
    return Scorecard(
        evaluation=evaluation,
        device=plan.device,
        against=plan.against,
        budget_s=plan.budget_s,
        plan_estimate_s=plan.estimate_s,
        elapsed_s=elapsed,
        previous=previous,
        answers=answers,
        not_evaluated=_not_evaluated(group, answers),
        compat=compat,
        notes=[
            {k: n.get(k) for k in ("run_id", "case", "mode", "author", "text", "created_at")}
            for n in group.notes
        ],
        runs=runs,
    )
