"""The GPU check's suite sections: torchport's own pipeline on the device (benchmarks/gpu_check.py
runs them). Each goes through ``api.run`` as a user's ``torchport run`` does, so what other
parts of torchport change (kernels judged against the float64 truth, hot spots over several
steps, the accelerator API in the device adapters) is what these sections measure.

- ``flex``: FlexAttention variants, compiled, perf probe (``--flex-sample``).
- ``generate``: the generate scenario on ``benchmarks/workloads/llama_500m.py`` (batch 1 and
  8), compiled (``--generate-modes``), and with CUDA graphs (``reduce-overhead``) on CUDA.
- ``ops``: a sample of suite ``ops`` (``--ops-sample``), eager.
- ``kernels``: suite ``kernels``' right and right-but-slow fused RMSNorm replacements, and on
  CUDA the Triton RMSNorm of ``benchmarks/workloads/triton_rmsnorm.py`` through the same A/B
  path, eager and compiled.
- ``dist``: suite ``dist`` at world size 1 on the device's own collective backend (NCCL).
- ``hotspots``: the hot spots of the llama training step (``llama_500m:make_train``, batch 2 x
  512 on a GPU), and how stable they are on identical layers: the shares of the same module in
  each of the model's layers, side by side.
- ``suites``: flex, generate, ops, kernels and dist in one go (the 2026-12-04 section).
"""

from __future__ import annotations

import json
import os
import re

from gpu_check_common import Report, smoke_sweep
from gpu_check_sections import run_section

WORKLOADS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workloads")
LAYER_INDEX = re.compile(r"\.\d+\.")


def _sweep(args, report: Report, name: str, **overrides) -> None:
    if args.out_of_time(name):
        return
    run_section(report, name, smoke_sweep, args, report, name, **overrides)


def flex_section(args, report: Report) -> None:
    cases = ("flex/causal/*/fwd",) if args.tiny else tuple(args.flex_sample)
    compiled = {"probes": ("perf",), "modes": ("compile",)}
    _sweep(args, report, "suite_flex", suite="flex", cases=cases, **compiled)


def _generate(args) -> dict:
    return {
        "workload_folder": WORKLOADS,
        "suite": "workload",
        "workload": "llama_500m:make_tiny" if args.tiny else "llama_500m:make",
        "scenario": "generate",
        "prompt_lengths": (16,) if args.tiny else (128,),
        "new_tokens": 8 if args.tiny else 32,
        "gen_batches": (1, 8),
        "probes": ("serve",),
    }


def generate_section(args, report: Report) -> None:
    _sweep(args, report, "suite_generate", **_generate(args), modes=args.generate_modes)
    if args.device.startswith("cuda"):
        _sweep(
            args,
            report,
            "suite_generate_cudagraphs",
            **_generate(args),
            modes=("compile",),
            compile_mode="reduce-overhead",
        )
    else:
        report.add("suite_generate_cudagraphs: reduce-overhead (CUDA graphs) runs on CUDA only")


def ops_section(args, report: Report) -> None:
    cases = ("ops/softmax/float32", "ops/cumsum/float32") if args.tiny else tuple(args.ops_sample)
    _sweep(args, report, "suite_ops_sample", suite="ops", cases=cases, modes=("eager",))


def kernels_section(args, report: Report) -> None:
    # the right replacement and the right-but-slow one, which the kernel ladder must pass with
    # its slowdown (the planted faulty ones are the CPU tests' business)
    cases = ("kernels/rms_norm", "kernels/rms_norm_slow")
    _sweep(args, report, "suite_kernels", suite="kernels", cases=cases)
    if args.device.startswith("cuda"):  # a Triton kernel through the kernel ladder's A/B path
        _sweep(
            args,
            report,
            "suite_kernels_triton",
            workload_folder=WORKLOADS,
            suite="workload",
            workload="triton_rmsnorm:triton_rmsnorm",
        )
    else:
        report.add("suite_kernels_triton: the Triton RMSNorm runs on CUDA only (Triton's GPU)")


def dist_section(args, report: Report) -> None:
    # one GPU: world size 1, the device's own collective backend (NCCL on CUDA, gloo on CPU)
    cases = ("dist/collectives", "dist/ddp/mlp")
    _sweep(args, report, "suite_dist", suite="dist", cases=cases, world_size=1)


def hotspots_section(args, report: Report) -> None:
    name = "suite_hotspots"
    overrides = {
        "workload_folder": WORKLOADS,
        "suite": "workload",
        "workload": "llama_500m:make_train_tiny" if args.tiny else "llama_500m:make_train",
        "probes": ("hotspots",),
        "modes": ("eager",),
    }
    if not args.tiny:
        overrides.update(batch=2, seq=512)
    _sweep(args, report, name, **overrides)
    path = os.path.join(args.out, f"{name}.json")
    if not os.path.exists(path):
        return
    with open(path) as f:
        results = json.load(f)["results"]
    for result in results:
        info = (result.get("findings") or {}).get("hotspots") or {}
        for key, value in info.items():  # what the probe says of itself (notes, checks)
            if key in ("ops", "modules", "peaks", "uncounted_ops"):
                continue
            report.add(f"  hotspots {key}: {json.dumps(value, default=str)[:600]}")
        for line in layer_stability(info.get("modules") or []):
            report.add("  " + line)


def layer_stability(rows: list[dict]) -> list[str]:
    """The same module in each of the model's identical layers (names that differ only in the
    layer index): the spread of their shares of the step, widest first. Judged from the module
    rows the probe kept (its top ones), so a group may hold fewer layers than the model has."""
    groups: dict[str, list[tuple[str, float]]] = {}
    for row in rows:
        share = row.get("share")
        if share is None or not LAYER_INDEX.search(row["op"]):
            continue
        groups.setdefault(LAYER_INDEX.sub(".*.", row["op"]), []).append((row["op"], share))
    lines = []
    spreads = []
    for module, members in groups.items():
        if len(members) < 2:
            continue
        shares = [s for _, s in members]
        low, high = min(shares), max(shares)
        ratio = high / low if low > 0 else float("inf")
        spreads.append((ratio, module, len(members), low, high))
    for ratio, module, n, low, high in sorted(spreads, reverse=True):
        lines.append(
            f"identical layers {module}: {n} layers in the kept rows, share {low:.2%}-"
            f"{high:.2%} of the step, max/min {ratio:.2f}"
            + (" (within 1.5x)" if ratio <= 1.5 else " (WIDER than 1.5x)")
        )
    if not lines:
        lines.append("identical layers: no module of two layers among the kept rows")
    return lines


def suites_section(args, report: Report) -> None:
    for section in (flex_section, generate_section, ops_section, kernels_section, dist_section):
        section(args, report)
