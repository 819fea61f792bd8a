"""GPU check: torchport's evidence on a real accelerator, in parts that each fit a short window.

Sections (``--sections``, in the order given; docs/gpu-check.md has the table):
  first     torchport's perf probe on the ~0.5 B llama (the figure in the README since 11-30)
  llama     the training step at ``--shapes`` x ``--compile-modes``: torchport's median and
            mean beside a plain loop's median and mean (like for like), MFU two ways
  moe       a reduced qwen3_moe: the same, MFU by 6·N·T, 6·N_active·T and counted FLOPs
  autotune  max-autotune(-no-cudagraphs) under a cap on autotuning, one shared Inductor cache
  cache_pack / cache_restore   that cache carried from one window to the next
  smoke     the smoke suite: perf, training-loss parity (--train-steps 10) and profile
  accel     torch.accelerator (synchronize, memory, torch.Event) against torch.cuda
  flex, generate, ops, kernels, dist, hotspots, suites   torchport's suites on the device

``--part NAME`` picks the sections (and their options) of one window of 4-5 minutes; a part
starts no new item past its deadline and lists what it left. Everything goes to OUT:
report.txt (command on the first line), a JSON file per section, views, the knowledge base.

Works from a plain checkout with no installation (no network needed):

    PYTHONPATH=src python3 benchmarks/gpu_check.py --part agree --out /tmp/gc
    PYTHONPATH=src python3 benchmarks/gpu_check.py --part agree --tiny --device cpu \
        --dtype float32 --peak-tflops 1 --out /tmp/g

torchport finds its suites, devices and probes through entry points, which exist only once the
package is installed; when they are missing this script writes the package's metadata (read
from pyproject.toml) into OUT/_meta and puts it on the path of this process and its workers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

from gpu_check_common import (  # noqa: E402  (benchmarks/ is this script's folder)
    H200_BF16_PEAK_TFLOPS,
    SRC,
    Report,
    compile_subject,
    ensure_torchport,
    llama_case,
    smoke_sweep,
)


def llama_check(args, report: Report) -> None:

    from torchport.devices import get_adapter
    from torchport.instruments.flops import flops_6nt
    from torchport.probes.perf import PerfProbe

    adapter = get_adapter(args.device)
    adapter.prepare()
    batch, seq = (2, 32) if args.tiny else (args.batch, args.seq)
    case = llama_case(args, batch, seq, adapter.device())
    subject = compile_subject(args, case, adapter, batch=batch, seq=seq)
    shape = (
        "tiny"
        if args.tiny
        else (
            f"hidden {args.hidden}, {args.layers} layers, "
            f"intermediate {args.intermediate}, vocab 32000"
        )
    )
    report.stamp(
        f"llama ({shape}): batch {batch} x seq {seq}, {args.dtype}, compile backend "
        f"{adapter.default_compile_backend}; building, compiling, timing"
    )
    result = PerfProbe().safe_run(subject)
    m, info = result.metrics, result.findings.get("perf", {})
    with open(os.path.join(args.out, "llama_perf.json"), "w") as f:
        json.dump(
            {"metrics": m, "findings": result.findings, "error": result.error},
            f,
            indent=1,
            default=str,
        )
    if result.error:
        report.add(
            f"llama: the perf probe failed: {result.error['type']}: "
            f"{result.error['message'][:2000]}"
        )
        return
    report.stamp("llama: done")
    n6 = info.get("params_6nt", {})
    median_ms = m.get("perf_median_ms")
    report.add(
        f"  step kind: {info.get('step_kind')}; timer: {info.get('timer')}; "
        f"sides: {json.dumps(info.get('sides'))}"
    )
    for note in info.get("notes", []):
        report.add(f"  note: {note}")
    if median_ms is None:
        report.add("  no compiled step time")
        return
    # The stated rule, computed here from the probe's own figures and the fixed H200 peak.
    tokens = batch * seq
    mfu_6nt_h200 = (
        flops_6nt(n6.get("n", 0), tokens, True) / (median_ms / 1e3) / (H200_BF16_PEAK_TFLOPS * 1e12)
    )
    report.add(
        f"  compiled {median_ms:.2f} ms/step (p10 {m.get('perf_p10_ms', 0):.2f}, p90 "
        f"{m.get('perf_p90_ms', 0):.2f}, n {m.get('perf_samples')}), eager "
        f"{m.get('perf_eager_median_ms', float('nan')):.2f} ms, speedup "
        f"{m.get('perf_speedup', float('nan')):.2f}x"
    )
    report.add(
        f"  tokens/s {m.get('perf_tokens_per_s', 0):,.0f}; peak memory "
        f"{m.get('perf_peak_bytes', 0) / 2**30:.1f} GiB"
    )
    report.add(
        f"  N = {n6.get('n', 0) / 1e6:.1f} M ({n6.get('counts')}); 6·N·T = "
        f"{m.get('perf_flops_6nt_per_step', 0) / 1e12:.2f} TFLOP/step; counted "
        f"{m.get('perf_flops_per_step', 0) / 1e12:.2f} TFLOP/step"
    )
    report.add(
        f"  MFU (6·N·T vs {H200_BF16_PEAK_TFLOPS:.0f} TFLOP/s): {mfu_6nt_h200:.1%}   target >= 50%"
    )
    report.add(
        f"  torchport: perf_mfu_6nt {_pct(m.get('perf_mfu_6nt'))}, perf_mfu (counted) "
        f"{_pct(m.get('perf_mfu'))}, achieved {m.get('perf_achieved_tflops', 0):.1f} "
        f"TFLOP/s, peak {info.get('peak_tflops')} ({info.get('peak_source')})"
    )


def smoke_check(args, report: Report) -> None:
    cases = ("smoke/mlp",) if args.tiny else ()
    if not args.out_of_time("smoke_perf"):
        report.stamp("smoke suite perf, eager and compile")
        smoke_sweep(args, report, "smoke_perf", probes=("perf",), cases=cases)
    if args.out_of_time("smoke_train_profile"):
        return
    report.stamp("training-loss parity (10 AdamW steps) and profile: smoke/mlp, hf/llama")
    smoke_sweep(
        args,
        report,
        "smoke_train_profile",
        probes=("train", "profile"),
        cases=("smoke/mlp",) if args.tiny else ("smoke/mlp", "hf/llama"),
        train_steps=10,
        profile=True,
    )


def _pct(value) -> str:
    return "unavailable" if value is None else f"{value:.1%}"


# -- parts: what one device window of 4-5 minutes holds (docs/gpu-check.md) ------------------
# Each part is one device-tool command; its options are defaults a flag on the command line
# overrides. Minutes are what the part is sized for on an H200, compiles included (estimated
# from the 2026-12-04 window; the deadline stops starting new work past them).
PARTS = {
    "agree": {
        "sections": "llama,moe",
        "shapes": "h1280x24,h2048x8",
        "compile_modes": "default",
        "budget_s": 1.5,  # as on 2026-12-04: the figures stay comparable
        "minutes": 3.5,
    },
    "autotune": {
        "sections": "autotune,cache_pack",
        "shapes": "h2048x8",
        "compile_modes": "max-autotune-no-cudagraphs,max-autotune",
        "budget_s": 1.5,
        "minutes": 4.5,
    },
    "autotune_warm": {
        "sections": "cache_restore,autotune",
        "shapes": "h2048x8",
        "compile_modes": "max-autotune-no-cudagraphs,max-autotune",
        "budget_s": 1.5,
        "minutes": 3.0,
    },
    "smoke": {"sections": "smoke,accel", "shapes": "h2048x8", "budget_s": 0.5, "minutes": 4.5},
    "generate": {"sections": "generate", "minutes": 4.5},
    "kernels": {"sections": "kernels", "minutes": 4.0},
    "checks": {"sections": "ops,dist,hotspots", "minutes": 4.0},
}
DEFAULTS = {
    "sections": "first,llama,moe,suites,smoke",
    "shapes": "h1280x24,h2048x8",
    "compile_modes": "default,max-autotune-no-cudagraphs,max-autotune",
    "budget_s": 2.0,
}


def section_table() -> dict:
    """Every section by name (imported here: they import this module)."""
    from gpu_check_accel import accel_section
    from gpu_check_autotune import autotune_section, cache_pack_section, cache_restore_section
    from gpu_check_sections import llama_section, moe_section
    from gpu_check_suites import (
        dist_section,
        flex_section,
        generate_section,
        hotspots_section,
        kernels_section,
        ops_section,
        suites_section,
    )

    return {
        "first": llama_check,
        "llama": llama_section,
        "moe": moe_section,
        "autotune": autotune_section,
        "cache_pack": cache_pack_section,
        "cache_restore": cache_restore_section,
        "smoke": smoke_check,
        "accel": accel_section,
        "flex": flex_section,
        "generate": generate_section,
        "ops": ops_section,
        "kernels": kernels_section,
        "dist": dist_section,
        "hotspots": hotspots_section,
        "suites": suites_section,
    }


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for every output")
    parser.add_argument(
        "--part",
        choices=sorted(PARTS),
        help="one window's worth: sets --sections and the options it needs (docs/gpu-check.md)",
    )
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--budget-s", type=float, default=None, help="perf budget per side")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--hidden", type=int, default=1280, help="llama width (heads of 128)")
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--intermediate", type=int, default=3584)
    parser.add_argument("--peak-tflops", type=float, default=None)
    parser.add_argument(
        "--task-timeout", type=float, default=300.0, help="seconds per torchport task (suites)"
    )
    parser.add_argument("--tiny", action="store_true", help="tiny models, small samples (CPU)")
    parser.add_argument(
        "--sections",
        default=None,
        help="comma-separated, run in the order given: first, llama, moe, autotune, "
        "cache_pack, cache_restore, smoke, accel, flex, generate, ops, kernels, dist, hotspots, "
        f"suites (default: {DEFAULTS['sections']})",
    )
    parser.add_argument("--shapes", default=None, help="llama shapes (llama, autotune, accel)")
    parser.add_argument(
        "--compile-modes",
        default=None,
        help="compile modes (llama: tried on the first shape; autotune: in order)",
    )
    parser.add_argument(
        "--deadline-s",
        type=float,
        default=None,
        help="start no new item past this many seconds from the start (the report lists what "
        "was left for the next window); default: the part's minutes",
    )
    parser.add_argument(
        "--autotune-cap",
        default="capped",
        choices=("capped", "none"),
        help="autotune: Inductor's autotuning bounded (few configs, short benchmarks) or not",
    )
    parser.add_argument(
        "--inductor-cache",
        default=os.path.join(tempfile.gettempdir(), "gpu_check_inductor_cache"),
        help="autotune, cache_pack, cache_restore: the Inductor cache folder they share",
    )
    parser.add_argument("--cache-pack", default=None, help="cache_pack: where the parts go")
    parser.add_argument(
        "--cache-pack-mib",
        type=float,
        default=56.0,
        help="cache_pack: most MiB packed (uncompressed); the device tool carries 64 MiB",
    )
    parser.add_argument("--cache-from", default=None, help="cache_restore: folder of the parts")
    parser.add_argument(
        "--generate-modes", default="compile", help="generate: modes (eager ran 2026-12-04)"
    )
    parser.add_argument(
        "--ops-sample",
        default="ops/softmax/float32,ops/softmax/bfloat16,ops/matmul/float32,"
        "ops/matmul/bfloat16,ops/cumsum/float32,ops/cumsum/int64,ops/index_select/float32,"
        "ops/index_select/bfloat16",
        help="case globs of suite ops run (eager) in the ops section",
    )
    parser.add_argument(
        "--flex-sample",
        default=",".join(
            f"flex/{v}/b2h4s256d64/fwdbwd"
            for v in ("causal", "sliding_window", "document", "alibi", "softcap", "block_full")
        ),
        help="case globs of suite flex run (compile, perf probe) in the flex section",
    )
    parser.add_argument(
        "--force-shim",
        action="store_true",
        help="use the pyproject.toml entry points even if installed",
    )
    args = parser.parse_args(argv)
    part = PARTS.get(args.part or "", {})
    for key in ("sections", "shapes", "compile_modes", "budget_s"):
        if getattr(args, key) is None:
            setattr(args, key, part.get(key, DEFAULTS[key]))
    if args.deadline_s is None and part:
        args.deadline_s = part["minutes"] * 60
    split = lambda text: [x for x in text.split(",") if x]  # noqa: E731
    args.sections, args.shapes = split(args.sections), split(args.shapes)
    args.compile_modes = tuple(split(args.compile_modes))
    args.generate_modes = tuple(split(args.generate_modes))
    args.ops_sample, args.flex_sample = split(args.ops_sample), split(args.flex_sample)
    args.out = os.path.abspath(args.out)
    return parser, args


def torch_version() -> str:
    """torch's version without importing it (a section that only carries files needs none)."""
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:  # a torch built from source, say
        import torch

        return torch.__version__


def main(argv=None) -> int:
    parser, args = parse_args(argv)
    from gpu_check_sections import SHAPES, run_section

    sections = section_table()
    unknown = [n for n in args.sections if n not in sections]
    unknown += [n for n in args.shapes if n not in SHAPES]
    if unknown:
        parser.error(
            f"unknown section or shape: {', '.join(unknown)} (sections: "
            f"{', '.join(sections)}; shapes: {', '.join(SHAPES)})"
        )
    if "cache_restore" in args.sections and not args.cache_from:
        parser.error("section cache_restore needs --cache-from DIR (the parts cache_pack wrote)")
    if args.budget_s <= 0 or (args.deadline_s is not None and args.deadline_s < 0):
        parser.error("--budget-s must be > 0 and --deadline-s >= 0")
    os.makedirs(args.out, exist_ok=True)
    report = Report(
        args.out, "$ " + " ".join(["python3", os.path.relpath(sys.argv[0])] + sys.argv[1:])
    )
    left: list[str] = []

    def out_of_time(what: str) -> bool:
        """True (and noted) when ``what`` would start past the deadline."""
        if args.deadline_s is None or time.time() - report.start < args.deadline_s:
            return False
        left.append(what)
        report.add(f"LEFT for the next window (past the {args.deadline_s:.0f} s deadline): {what}")
        return True

    args.out_of_time = out_of_time
    how = ensure_torchport(args.out, args.force_shim)
    report.add(
        f"torchport from {SRC} ({how}); torch {torch_version()}, python "
        f"{sys.version.split()[0]}" + (f"; part {args.part}" if args.part else "")
    )
    if args.device.startswith("cuda"):
        import torch

        if torch.cuda.is_available():
            report.add(f"device: {torch.cuda.get_device_name(0)}")
    for name in args.sections:  # in the order given: the first is what matters if time is short
        if out_of_time(f"section {name}"):
            continue
        run_section(report, name, sections[name], args, report)
        torch = sys.modules.get("torch")  # sections that carry files never import it
        if torch is not None and torch.cuda.is_available():
            torch.cuda.empty_cache()  # the next section's workers share the device
    report.stamp("finished" + (f"; left for the next window: {', '.join(left)}" if left else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
