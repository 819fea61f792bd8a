"""Every ``fallback``/``host`` grade of an ``ops`` run on simdev, replayed against simdev's own
fallback counter: how many grades are false (the replay shows no fallback call)?

For each graded op case of the run (grade ``fallback`` or ``host``), in one simdev child
process: the case's samples again, made as the op ladder makes them (OpInfo on the device,
seeded, ``requires_grad`` where the case ran backward), and each sample's forward (+ backward)
run inside a counting window of simdev's fallback counter
(``devices/simdev_backend.py``: ``clear_op_tracking``, ``get_fallback_ops``); at depth >= 3 the
variants' device calls too (``runner/ops/variants.py``), each in its own window. Cotangents,
copies and the CPU side are made outside the windows: they are the harness's, not the op's. A
grade is *false* when no window saw a fallback call; *backed* otherwise. Cases whose replay
failed are counted apart, with the reason. A case whose plain replay kills simdev (complex
tensors and FFTs crash it outside a dispatch mode) is replayed once more under a pass-through
dispatch mode, and listed as such: a mode can change what autograd calls (docs/suites/ops.md,
the observer's own fallbacks), so those are weaker evidence.

    .venv/bin/python benchmarks/ops_replay_check.py --db RUN.db [--run RUN] [--out report.txt]

The issue's acceptance (docs/suites/ops.md): 0 false ``fallback`` grades.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _report import emit

SCRIPT = os.path.join(os.path.dirname(sys.executable), "torchport")
GRADES = ("fallback", "host")

CHILD = r"""
import json, sys, warnings
warnings.simplefilter("ignore")
import torch
from torchport.cases.ops import ops_suite
from torchport.cases import opinfo
from torchport.devices import get_adapter, simdev_backend as sb
from torchport.runner.ops import samples as ops
from torchport.runner.ops import variants as op_variants

adapter = get_adapter("simdev")
adapter.prepare()
device = adapter.device()
by_id = {c.id: c for c in ops_suite()}
todo = json.loads(sys.stdin.read())


UNDER_MODE = sys.argv[1:] == ["--under-mode"]


class Passthrough(torch.utils._python_dispatch.TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def window(fn):
    before = dict(sb.get_fallback_ops())
    try:
        if UNDER_MODE:
            with Passthrough():
                fn()
        else:
            fn()
    except Exception:
        pass  # an error is the case's verdict, not this check's: the calls made still count
    after = sb.get_fallback_ops()
    return {k: n - before.get(k, 0) for k, n in after.items() if n - before.get(k, 0) > 0}


for case_id, spec in todo.items():
    out = {"fallback_calls": {}, "windows": 0}
    try:
        case = by_id[case_id]
        op = case.opinfo()
        samples = opinfo.samples(op, device, case.dtype, requires_grad=spec["backward"], seed=0)
        calls = out["fallback_calls"]
        for i, sample in enumerate(samples):
            if ops.non_strided(sample):
                continue
            holder = {}
            got = window(lambda: holder.setdefault("side", ops.forward(op, sample)))
            out["windows"] += 1
            for k, n in got.items():
                calls[k] = calls.get(k, 0) + n
            side = holder.get("side")
            if spec["backward"] and side is not None and side.forward_error is None:
                cots = ops.cotangents(side, sample, i)  # the ladder's seed: 0 * 100_003 + i
                if cots is not None:
                    placed = ops.placed_cotangents(side, sample, cots)
                    got = window(lambda: ops.backward(side, sample, placed))
                    out["windows"] += 1
                    for k, n in got.items():
                        calls[k] = calls.get(k, 0) + n
        if spec["depth"] >= 3:
            strided = [s for s in samples if not ops.non_strided(s)][: op_variants.SAMPLES_SEARCHED]
            host = [
                ops.convert(s, lambda t: op_variants.mark_host(
                    ops.leaf(t.detach(), device="cpu"), t.device.type == "cpu"))
                for s in strided
            ]
            chosen = {}
            for s in host:
                for v in op_variants.make(op, s, case.dtype, "simdev"):
                    chosen.setdefault(v.kind, v)
            for v in chosen.values():
                dev = op_variants._plain_copy(ops, v.sample, device=device)
                if v.kind == "mixed_device":
                    dev.args = (op_variants._plain_copy(ops, v.sample, device="cpu").args[0],
                                *dev.args[1:])
                got = window(lambda: op_variants.run(v, dev, device))
                out["windows"] += 1
                for k, n in got.items():
                    calls[k] = calls.get(k, 0) + n
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"[:300]
    print(json.dumps({case_id: out}), flush=True)
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True, help="the knowledge base holding the run")
    parser.add_argument("--run", default=None, help="run id (default: the newest)")
    parser.add_argument("--out", default=None, help="report path")
    parser.add_argument("--limit", type=int, default=None, help="at most this many grades")
    args = parser.parse_args()
    run_id = (
        args.run
        or json.loads(
            subprocess.run(
                [SCRIPT, "runs", "--db", args.db, "--json"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )[0]["id"]
    )
    shown = json.loads(
        subprocess.run(
            [SCRIPT, "show", run_id, "--db", args.db, "--json", "--all"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    if not str(shown["run"].get("device") or "").startswith("simdev"):
        sys.exit(f"run {run_id} is not a simdev run: the replay needs simdev's fallback counter")
    graded = {
        r["case"]: {
            "grade": r["grade"],
            "backward": bool((r.get("findings") or {}).get("backward")),
            "depth": int((r.get("findings") or {}).get("depth") or 2),
            "fallback_ops": sorted((r.get("findings") or {}).get("fallback_ops") or {}),
        }
        for r in shown["results"]
        if r.get("grade") in GRADES and (r.get("findings") or {}).get("ladder") == "op"
    }
    if args.limit:
        graded = dict(list(graded.items())[: args.limit])
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHPORT_SIMDEV_BUGS")}
    start = time.perf_counter()
    replayed: dict = {}
    children, left = 0, dict(graded)
    under_mode: list[str] = []
    for extra in ([], ["--under-mode"]):
        # the second round: the cases whose plain replay killed simdev (complex tensors, FFTs
        # crash it outside a dispatch mode) again under a pass-through dispatch mode, said so
        if extra:
            left = {
                k: graded[k]
                for k, v in replayed.items()
                if "the child died" in (v.get("error") or "")
            }
            under_mode = list(left)
            for k in left:
                replayed.pop(k)
        while left:  # a child that dies (a crash in one case) is restarted after that case
            children += 1
            proc = subprocess.run(
                [sys.executable, "-c", CHILD, *extra],
                input=json.dumps(left),
                capture_output=True,
                text=True,
                env=env,
            )
            for line in proc.stdout.splitlines():
                if line.startswith("{"):
                    replayed.update(json.loads(line))
            left = {k: v for k, v in left.items() if k not in replayed}
            if left:
                first = next(iter(left))
                tail = proc.stderr.strip().splitlines()[-1:] or [""]
                replayed[first] = {"error": f"the child died (exit {proc.returncode}): {tail[0]}"}
                left.pop(first)
    wall = time.perf_counter() - start
    false, backed, failed, missing = [], [], [], []
    for case_id, spec in graded.items():
        got = replayed.get(case_id)
        if got is None:
            missing.append(case_id)
        elif "error" in got:
            failed.append((case_id, got["error"]))
        elif got["fallback_calls"]:
            backed.append(case_id)
        else:
            false.append((case_id, spec))
    by_grade = ", ".join(
        f"{g} {sum(1 for spec in graded.values() if spec['grade'] == g)}" for g in GRADES
    )
    lines = [
        f"$ {' '.join([os.path.basename(sys.executable), *sys.argv])}",
        f"run {run_id} on {shown['run'].get('device')}; {children} replay children, "
        f"{wall:.0f} s wall",
        f"grades checked: {len(graded)} ({by_grade})",
        f"backed by simdev's fallback counter: {len(backed)}",
        f"FALSE (no fallback call in the replay): {len(false)}",
        f"replay failed: {len(failed)}; not replayed (the child stopped): {len(missing)}",
        f"replayed under a pass-through dispatch mode (their plain replay killed simdev): "
        f"{len(under_mode)}" + (f" ({', '.join(under_mode[:12])})" if under_mode else ""),
    ]
    for case_id, spec in false:
        lines.append(f"  false: {case_id} graded {spec['grade']}, named {spec['fallback_ops']}")
    for case_id, why in failed[:20]:
        lines.append(f"  replay failed: {case_id}: {why}")
    if missing:
        lines.append(f"  not replayed: {', '.join(missing[:20])}")
    emit(lines, args.out)


if __name__ == "__main__":
    main()
