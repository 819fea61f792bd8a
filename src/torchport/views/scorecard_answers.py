"""The scorecard's answers, one function per question, each computed from the group's recorded
results (read once, ``Reader``) and carrying the numbers it states (``Answer.figures``)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from torchport.records.words import listed
from torchport.views.coverage import case_passed
from torchport.views.evaluation import DEVICE_SIDE, REFERENCE_SIDE, Group
from torchport.views.headline import BAD, GOOD, INFO, NONE, WARN
from torchport.views.noise import FASTER, SLOWER, WITHIN, judge
from torchport.views.placement import op_classes, ranked_host_ops

# Parts whose cases are models that climb the ladder (runs? compiled? speed?).
MODEL_PARTS = ("smoke", "hf", "flex", "generate")


@dataclass
class Answer:
    question: str
    answer: str
    tone: str
    evidence: list[dict] = field(default_factory=list)  # {run, part, side, view}
    figures: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "question": self.question,
            "answer": self.answer,
            "tone": self.tone,
            "evidence": self.evidence,
            "figures": self.figures,
        }


def more(names: list[str]) -> str:
    return listed(names)


def evidence(group: Group, parts: list[str], view: str, side: str = DEVICE_SIDE) -> list[dict]:
    out = []
    for part in parts:
        run = group.run_of(part, side)
        if run is not None:
            out.append({"run": run["id"], "part": part, "side": side, "view": view})
    return out


class Reader:
    """The group's results, read once per run."""

    def __init__(self, store, group: Group):
        self.group = group
        self.results = {key: store.results(run_id=run["id"]) for key, run in group.runs.items()}

    def of(self, part: str, side: str = DEVICE_SIDE) -> list[dict]:
        return self.results.get((part, side), [])

    def results_by_side(self, side: str) -> dict[str, list[dict]]:
        return {part: rs for (part, s), rs in self.results.items() if s == side}

    def device_parts(self) -> list[str]:
        return [p for p, s in self.group.runs if s == DEVICE_SIDE]

    def model_parts(self) -> list[str]:
        return [p for p in self.device_parts() if p in MODEL_PARTS or p.startswith("workload:")]


def runs_in(reader: Reader, mode: str, stage: str, question: str) -> Answer:
    per_part: list[str] = []
    counted: list[str] = []
    passed = total = 0
    families: dict[str, list[int]] = {}  # tag -> [passed, cases] (cases that recorded tags)
    planned = {
        p.name: p.cases
        for p in reader.group.plan.parts
        if p.side == DEVICE_SIDE and mode in p.modes
    }
    for part in reader.model_parts():
        by_case: dict[str, list[dict]] = {}
        for r in reader.of(part):
            by_case.setdefault(r["case"], []).append(r)
        # The denominator is the plan's (docs/design.md rule 4): a case the run did not reach
        # counts, as not through the stage.
        recorded = [c for c, rs in by_case.items() if any(r["mode"] == mode for r in rs)]
        cases = list(dict.fromkeys([*planned.get(part, []), *recorded]))
        if not cases:
            continue
        n = sum(case_passed(by_case.get(c, []), stage, mode) for c in cases)
        for c in cases:  # by family: the tags the case's results recorded
            ok = case_passed(by_case.get(c, []), stage, mode)
            recorded_tags = (
                (r.get("findings") or {}).get("tags") or () for r in by_case.get(c, [])
            )
            for tag in set().union(*recorded_tags):
                family = families.setdefault(tag, [0, 0])
                family[0] += ok
                family[1] += 1
        per_part.append(f"{part} {n}/{len(cases)}")
        counted.append(part)
        passed, total = passed + n, total + len(cases)
    if not total:
        return Answer(question, f"not evaluated: no {mode} result recorded", NONE)
    tone = GOOD if passed == total else (WARN if passed else BAD)
    word = "yes" if passed == total else ("partly" if passed else "no")
    return Answer(
        question,
        f"{word}: {passed} of {total} cases ran {mode}"
        + (" (compiled and run)" if mode == "compile" else "")
        + f" ({', '.join(per_part)})"
        + (
            "; by family: " + ", ".join(f"{t} {n}/{k}" for t, (n, k) in sorted(families.items()))
            if families
            else ""
        ),
        tone,
        evidence(reader.group, counted, "coverage"),
        {
            "passed": passed,
            "cases": total,
            "by_family": {t: {"passed": n, "cases": k} for t, (n, k) in families.items()},
        },
    )


def matches(reader: Reader) -> Answer:
    question = "numbers match the CPU float64 reference?"
    results = [r for p in reader.device_parts() for r in reader.of(p)]
    ran = [r for r in results if r["status"] != "skip"]
    bad = [r for r in ran if r["status"] == "accuracy_fail"]
    passed = sum(r["status"] == "pass" for r in ran)
    if not ran:
        return Answer(question, "not evaluated: no result recorded", NONE)
    names = [f"{r['case']} [{r['mode']}]" for r in bad]
    answer = (
        f"no: {len(bad)} of {len(ran)} results outside tolerance: {more(names)}"
        if bad
        else f"yes: no result outside tolerance; {passed} of {len(ran)} results passed"
    )
    return Answer(
        question,
        answer,
        BAD if bad else GOOD,
        evidence(reader.group, reader.device_parts(), "matrix"),
        {"accuracy_fail": len(bad), "results": len(ran), "passed": passed},
    )


def on_device(reader: Reader, device: str) -> Answer:
    question = "stays on the device?"
    parts = [p for p in reader.device_parts() if any(r.get("grade") for r in reader.of(p))]
    results = [r for p in parts for r in reader.of(p)]
    if device.split(":")[0] == "cpu":
        return Answer(question, "the CPU is the host: placement is not graded", NONE)
    graded = [r for r in results if r.get("grade")]
    host = [r for r in graded if r["grade"] in ("fallback", "host")]
    if not graded:
        return Answer(question, "not known: no result was graded (placement did not run)", NONE)
    ranked = ranked_host_ops(results)
    classes = op_classes(results)
    if not host:
        return Answer(
            question,
            f"yes: none of {len(graded)} graded results fell back to the host",
            GOOD,
            evidence(reader.group, parts, "placement"),
            {"graded": len(graded), "host_results": 0, "host_ops": 0},
        )
    by_class: dict[str, int] = {}
    for op, _, _ in ranked:
        by_class[classes.get(op, "?")] = by_class.get(classes.get(op, "?"), 0) + 1
    top = [f"{op} ({len(keys)} results, {calls} calls/step)" for op, keys, calls in ranked]
    return Answer(
        question,
        f"no: {len(host)} of {len(graded)} graded results fell back to the host, "
        f"{len(ranked)} distinct ops (class "
        + ", ".join(f"{c}: {n}" for c, n in sorted(by_class.items()))
        + f"); most often: {more(top)}",
        WARN,
        evidence(reader.group, parts, "placement"),
        {"graded": len(graded), "host_results": len(host), "host_ops": len(ranked)},
    )


def compile_wait(reader: Reader) -> Answer:
    question = "wait before the first step (cold / warm compile)?"
    cold, warm = [], []
    for p in reader.device_parts():
        for r in reader.of(p):
            m = r.get("metrics") or {}
            if isinstance(m.get("compile_cold_first_step_s"), (int, float)):
                cold.append((m["compile_cold_first_step_s"], r["case"], p))
            if isinstance(m.get("compile_warm_first_step_s"), (int, float)):
                warm.append(m["compile_warm_first_step_s"])
    if not cold:
        return Answer(question, "not evaluated: no cold compile measured", NONE)
    worst = max(cold)
    answer = (
        f"cold {statistics.median(c[0] for c in cold):.3g} s median over {len(cold)} compiled "
        f"results (longest {worst[0]:.3g} s, {worst[1]})"
        + (f"; warm {statistics.median(warm):.3g} s median over {len(warm)}" if warm else "")
    )
    return Answer(
        question,
        answer,
        INFO,
        evidence(reader.group, sorted({c[2] for c in cold}), "compile"),
        {
            "cold_median_s": statistics.median(c[0] for c in cold),
            "cold_results": len(cold),
            "warm_median_s": statistics.median(warm) if warm else None,
            "warm_results": len(warm),
        },
    )


# Above this many runnable processes per CPU (the 1-minute load average over the CPU count,
# as the perf probe records it) the host was oversubscribed while a side was timed.
OVERSUBSCRIBED_LOAD_PER_CPU = 1.0


def unfit_timing(result: dict) -> str | None:
    """Why one side's step time cannot stand in a comparison with a side timed in another run
    (the two sides of an evaluation are not interleaved: docs/design.md rules 1 and 12), or
    None: the perf probe flagged it noisy, or the host was oversubscribed while it was timed."""
    perf = (result.get("findings") or {}).get("perf") or {}
    if perf.get("noisy"):
        return f"{result['case']} [{result['mode']}] timed noisy"
    load = perf.get("host_load") or {}
    avg, cpus = load.get("load_avg_1min"), load.get("cpu_count")
    if isinstance(avg, (int, float)) and isinstance(cpus, int) and cpus > 0:
        if avg / cpus > OVERSUBSCRIBED_LOAD_PER_CPU:
            return f"host load {avg:g} on {cpus} CPUs"
    return None


def speed_pairs(reader: Reader) -> list[dict]:
    """Each (case, mode) timed on both sides: the reference's step time over the device's
    (above 1: the device is faster) and the noise verdict (views/noise.py). The sides ran in
    separate runs, so each run's own spread does not cover a change of load between them: a
    pair with a side timed noisy or on an oversubscribed host keeps its ratio but no verdict
    (``unfit`` says why)."""
    pairs = []
    for part in reader.device_parts():
        ref = {(r["case"], r["mode"]): r for r in reader.of(part, REFERENCE_SIDE)}
        for r in reader.of(part):
            other = ref.get((r["case"], r["mode"]))
            if other is None or r["status"] != "pass" or other["status"] != "pass":
                continue
            judged = judge(other.get("metrics") or {}, r.get("metrics") or {})
            if judged is None:
                continue
            unfit = unfit_timing(r) or unfit_timing(other)
            pairs.append(
                {
                    "part": part,
                    "case": r["case"],
                    "mode": r["mode"],
                    "reference_ms": judged.before_ms,
                    "device_ms": judged.after_ms,
                    "speedup": judged.before_ms / judged.after_ms,
                    "verdict": None if unfit else judged.verdict,
                    "unfit": unfit,
                }
            )
    return pairs


def speed(reader: Reader, against: str | None) -> Answer:
    question = "speed against the reference device?"
    if not against:
        return Answer(question, "not evaluated: no reference device (--against)", NONE)
    pairs = speed_pairs(reader)
    if not pairs:
        return Answer(question, f"not evaluated: no case timed on both sides ({against})", NONE)
    median = statistics.median(p["speedup"] for p in pairs)
    verdicts = {v: sum(p["verdict"] == v for p in pairs) for v in (FASTER, SLOWER, WITHIN)}
    verdicts["not judged"] = len(pairs) - sum(verdicts.values())
    fastest = max(pairs, key=lambda p: p["speedup"])
    slowest = min(pairs, key=lambda p: p["speedup"])
    answer = (
        f"x{median:.2f} the speed of {against} (median of {len(pairs)} timed pairs; "
        f"faster beyond noise {verdicts[FASTER]}, slower {verdicts[SLOWER]}, within noise "
        f"{verdicts[WITHIN]}, not judged {verdicts['not judged']}); range "
        f"x{slowest['speedup']:.2f} ({slowest['case']} [{slowest['mode']}]) to "
        f"x{fastest['speedup']:.2f} ({fastest['case']} [{fastest['mode']}])"
    )
    unfit = [p["unfit"] for p in pairs if p["unfit"]]
    if unfit:
        answer += (
            f"; {len(unfit)} of {len(pairs)} pairs not judged, the sides being timed in "
            f"separate runs: {more(sorted(set(unfit)))}"
        )
    parts = sorted({p["part"] for p in pairs})
    judged_pairs = len(pairs) - len(unfit)
    return Answer(
        question,
        answer,
        INFO if not judged_pairs else (GOOD if median >= 1 else WARN),
        evidence(reader.group, parts, "perf")
        + evidence(reader.group, parts, "perf", REFERENCE_SIDE),
        {"median_speedup": median, "pairs": len(pairs), **verdicts},
    )


def simple_part(reader: Reader, part: str, question: str, view: str, what: str) -> Answer:
    run = reader.group.run_of(part)
    if run is None:
        return Answer(question, f"not evaluated: the {part} part was not run", NONE)
    results = [r for r in reader.of(part) if r["status"] != "skip"]
    skipped = len(reader.of(part)) - len(results)
    passed = sum(r["status"] == "pass" for r in results)
    failed = [f"{r['case']} ({r['status']})" for r in results if r["status"] != "pass"]
    if not results:
        why = (
            f"every one of {skipped} {what} was skipped"
            if skipped
            else f"run {run['id']} recorded no result ({run['state']})"
        )
        return Answer(question, f"not evaluated: {why}", NONE, evidence(reader.group, [part], view))
    answer = (
        f"{passed} of {len(results)} {what} passed"
        + (f"; failed: {more(failed)}" if failed else "")
        + (f"; {skipped} skipped" if skipped else "")
    )
    tone = GOOD if passed == len(results) else (WARN if passed else BAD)
    return Answer(
        question,
        answer,
        tone,
        evidence(reader.group, [part], view),
        {"passed": passed, "results": len(results), "skipped": skipped},
    )


def dist(reader: Reader) -> Answer:
    answer = simple_part(
        reader, "dist", "distributed (collectives, DDP / FSDP2 / TP)?", "dist", "dist checks"
    )
    rows = [
        row for r in reader.of("dist") for row in (r.get("findings") or {}).get("dist_rows") or []
    ]
    if rows:
        ok = sum(row.get("status") == "pass" for row in rows)
        refused = sum(row.get("status") == "skip" for row in rows)
        tried = len(rows) - refused
        answer.answer += f"; collectives: {ok} of {tried} checks match float64" + (
            f", {refused} refused by the backend" if refused else ""
        )
        answer.figures.update(
            {"collective_checks": tried, "collective_pass": ok, "collective_refused": refused}
        )
        if ok < tried and answer.tone == GOOD:
            answer.tone = WARN
    return answer


def kernels(reader: Reader) -> Answer:
    """Replacement kernels given through ``--workload`` (a ``@replacement`` factory runs on the
    kernel ladder inside its workload part): each one's verdict against the float64 truth and
    its step-time A/B (views/kernels.py's verdicts)."""
    question = "your replacement kernels: correct, and faster?"
    found = [
        (part, r)
        for part in reader.device_parts()
        for r in reader.of(part)
        if ((r.get("findings") or {}).get("kernel") or {}).get("verdict")
    ]
    if not found:
        return Answer(question, "not evaluated: no replacement kernel given (--workload)", NONE)
    correct = [(p, r) for p, r in found if r["status"] == "pass"]
    faster = [(p, r) for p, r in correct if r["findings"]["kernel"]["verdict"] == "correct_faster"]
    wrong = [f"{r['case']} [{r['mode']}] {r['status']}" for _, r in found if r["status"] != "pass"]

    def shown(r: dict) -> str:
        speedup = (r.get("metrics") or {}).get("kernel_step_speedup")
        step = f", step x{speedup:.2f}" if isinstance(speedup, (int, float)) else ""
        return f"{r['case']} [{r['mode']}] {r['findings']['kernel']['verdict']}{step}"

    answer = f"{len(correct)} of {len(found)} correct, {len(faster)} faster beyond noise: " + more(
        [shown(r) for _, r in correct] + wrong
    )
    return Answer(
        question,
        answer,
        BAD if wrong else GOOD if faster else INFO,
        evidence(reader.group, sorted({p for p, _ in found}), "kernels"),
        {"tried": len(found), "correct": len(correct), "faster": len(faster)},
    )


def hotspots(reader: Reader) -> Answer:
    question = "where would custom kernels pay (hot spots)?"
    found, kind = [], "op"
    for key in ("ops", "modules"):  # ops, else modules (a backend with no op device time)
        for p in reader.device_parts():
            for r in reader.of(p):
                info = (r.get("findings") or {}).get("hotspots") or {}
                for op in info.get(key) or []:
                    if isinstance(op.get("saving_ms"), (int, float)):
                        found.append(
                            (op["saving_ms"], op["op"], r["case"], r["mode"], op.get("share"), p)
                        )
        if found:
            kind = key.removesuffix("s")
            break
    if not found:
        return Answer(question, "not evaluated: no hot spots measured", NONE)
    found.sort(reverse=True)
    top = [
        f"{op} in {case} [{mode}] ({saving:.3g} ms/step to save"
        + (f", {share:.0%} of the op time" if isinstance(share, (int, float)) else "")
        + ")"
        for saving, op, case, mode, share, _ in found[:3]
    ]
    return Answer(
        question,
        f"the {kind}s with most time to save at the roofline: " + "; ".join(top),
        INFO,
        evidence(
            reader.group,
            sorted({f[5] for f in found}),
            "hotspots" if kind == "op" else "hotspots_modules",
        ),
        {"ranked": len(found), "by": kind, "top_saving_ms": found[0][0]},
    )
