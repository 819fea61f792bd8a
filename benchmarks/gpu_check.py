"""GPU check: torchport's perf evidence on a real accelerator, in one short script.

1. a ~0.5 B-parameter llama (24 layers, vocab 32000, sdpa attention, batch 8 x 1024 tokens),
   compiled training step (forward + backward) in bfloat16, timed by torchport's PerfProbe
   (interleaved with eager) and reported as MFU by the 6·N·T rule against the device's
   datasheet peak (989 TFLOP/s for an H200 in bf16), next to torchport's counted-FLOP MFU;
   first, since it is the figure that matters most;
2. the smoke suite's perf on the device, eager and compile, in bfloat16 (torchport's own
   pipeline: isolated workers, the SQLite knowledge base in OUT), then training-loss parity
   and a profile of smoke/mlp and hf/llama.

About 5 minutes on an H200 (285 s measured), compiles included.

Works from a plain checkout with no installation (no network needed):

    PYTHONPATH=src python3 benchmarks/gpu_check.py --out docs/results/gpu_check
    PYTHONPATH=src python3 benchmarks/gpu_check.py --tiny --device cpu --dtype float32 --out /tmp/g

torchport finds its suites, devices and probes through entry points, which exist only once the
package is installed; when they are missing this script writes the package's metadata (read
from pyproject.toml) into OUT/_meta and puts it on the path of this process and its workers.
Everything goes to OUT: report.txt (the summary, command on the first line), smoke views,
llama JSON, the knowledge base and any traces.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(REPO, "src")
H200_BF16_PEAK_TFLOPS = 989.0


# -- making torchport importable without installing it -------------------------------------
def ensure_torchport(out_dir: str, force_shim: bool = False) -> str:
    """Make ``import torchport`` and its entry points work here and in worker processes."""
    if SRC not in sys.path:
        sys.path.insert(0, SRC)
    paths = [SRC]
    from importlib import metadata

    found = {ep.name for ep in metadata.entry_points(group="torchport.probes")}
    how = "installed package"
    if force_shim or "perf" not in found:
        meta_root = os.path.join(out_dir, "_meta")
        write_metadata(meta_root)
        sys.path.insert(0, meta_root)
        paths.insert(0, meta_root)
        how = f"entry points from pyproject.toml written to {meta_root}"
    os.environ["PYTHONPATH"] = os.pathsep.join(
        paths
        + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in paths]
    )
    import importlib

    importlib.invalidate_caches()
    return how


def write_metadata(root: str) -> None:
    """A minimal torchport .dist-info (METADATA + entry_points.txt) from pyproject.toml."""
    import tomllib

    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    info = os.path.join(root, f"torchport-{project['version']}.dist-info")
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write(f"Metadata-Version: 2.1\nName: torchport\nVersion: {project['version']}\n")
    groups = dict(project.get("entry-points", {}))
    if project.get("scripts"):
        groups["console_scripts"] = project["scripts"]
    with open(os.path.join(info, "entry_points.txt"), "w") as f:
        for group, entries in groups.items():
            f.write(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()) + "\n")


# -- reporting -------------------------------------------------------------------------------
class Report:
    """Lines printed as they come and rewritten to OUT/report.txt each time (a timeout keeps
    everything so far)."""

    def __init__(self, out_dir: str, command: str):
        self.path, self.lines, self.start = os.path.join(out_dir, "report.txt"), [], time.time()
        self.add(command)

    def add(self, line: str = "") -> None:
        print(line, flush=True)
        self.lines.append(line)
        with open(self.path, "w") as f:
            f.write("\n".join(self.lines) + "\n")

    def stamp(self, what: str) -> None:
        self.add(f"[{time.time() - self.start:6.1f} s] {what}")


def write_views(store, run_id: str, path: str) -> dict:
    from torchport.views import build_views

    run, results = store.get_run(run_id), store.results(run_id=run_id)
    built = build_views(run, results)
    views = {name: view.to_dict() for name, view in built.items()}  # typed values, JSON-able
    with open(path, "w") as f:
        try:
            from rich.console import Console

            from torchport.interfaces.render import print_views
        except ImportError:  # a bare GPU machine may lack rich: plain text will do
            for view in views.values():
                f.write(
                    f"{view['title']}\n" + " | ".join(c["name"] for c in view["columns"]) + "\n"
                )
                f.writelines(" | ".join(map(str, row)) + "\n" for row in view["rows"])
                f.writelines(f"  {note}\n" for note in view.get("notes") or ())
                f.write("\n")
        else:
            print_views(Console(file=f, width=220, markup=False), built)
    with open(path.replace(".txt", ".json"), "w") as f:
        json.dump({"views": views, "results": results}, f, indent=1, default=str)
    return views


# -- 1. the smoke suite through torchport's pipeline ------------------------------------------
def smoke_sweep(
    args, report: Report, name: str, workload_folder: str | None = None, **overrides
) -> None:
    from torchport import api
    from torchport.config import RunConfig
    from torchport.records import open_store

    config = RunConfig(
        **{
            "suite": "smoke",
            "device": args.device,
            "dtype": args.dtype,
            "modes": ("eager", "compile"),
            "perf_budget_s": args.budget_s,
            "timeout_s": args.task_timeout,
            "artifacts_dir": os.path.join(args.out, "artifacts"),
            **overrides,
        }
    )
    store = open_store(os.path.join(args.out, "gpu_check.db"), write=True)

    def on_result(result):
        m = result.metrics
        report.stamp(
            f"  {result.case:<16} {result.mode:<8} {result.status:<16} "
            + (f"{m['perf_median_ms']:.4g} ms/step" if "perf_median_ms" in m else "")
        )

    executor = api.make_executor(config, workload_folder=workload_folder)
    outcome = api.run(
        config,
        store,
        labels={"check": name},
        command=f"gpu_check {name}",
        on_result=on_result,
        executor=executor,
        workload_folder=workload_folder,
    )
    run_id, state = outcome.run_id, outcome.state
    views = write_views(store, run_id, os.path.join(args.out, f"{name}.txt"))
    report.add(f"{name}: run {run_id} {state}; views in {name}.txt")
    shown = ("summary", "perf", "serving", "flex", "ops", "train", "profile", "kernels", "dist")
    for view in shown:
        if view in views:
            report.add(
                f"  {views[view]['title']}: "
                + " | ".join(c["name"] for c in views[view]["columns"])
            )
            for row in views[view]["rows"]:
                report.add("    " + " | ".join(cell(v) for v in row))


def cell(value) -> str:
    """A view's typed cell as text: ranges as low-high, figures to four digits."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict) and {"low", "high"} <= set(value):
        return f"{cell(value['low'])}-{cell(value['high'])}"
    if isinstance(value, dict) and {"part", "whole"} <= set(value) and value["whole"]:
        return f"{value['part'] / value['whole']:.0%}"
    if isinstance(value, dict) and "value" in value:
        return cell(value["value"]) + (f" ({value['note']})" if value.get("note") else "")
    return str(value)


# -- 2. the ~0.5 B llama ----------------------------------------------------------------------
def llama_config(args, shape=None):
    """The llama of the check: ``shape`` (hidden, layers, intermediate, heads, kv heads) or the
    command line's; a tiny one with --tiny."""
    from transformers import LlamaConfig

    if args.tiny:
        return LlamaConfig(
            vocab_size=256,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2 if shape and shape.kv_heads != shape.heads else 4,
            max_position_embeddings=256,
            tie_word_embeddings=False,
        )
    # Default: 24 layers of hidden 1280 (10 heads of 128), SwiGLU 3584: 0.49 B in the layers,
    # 0.57 B in all with an untied 32000-token embedding and output projection.
    hidden = shape.hidden if shape else args.hidden
    heads = shape.heads if shape else hidden // 128
    return LlamaConfig(
        vocab_size=32000,
        hidden_size=hidden,
        intermediate_size=shape.intermediate if shape else args.intermediate,
        num_hidden_layers=shape.layers if shape else args.layers,
        num_attention_heads=heads,
        num_key_value_heads=shape.kv_heads if shape else heads,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
    )


def llama_case(args, batch: int, seq: int, device: str, shape=None):
    from torchport.cases.base import FunctionCase, Workload

    def build(*, seed, size):
        import torch
        from transformers import AutoModelForCausalLM

        torch.manual_seed(seed)
        # Initialised straight on the device: a CPU init of 0.5 B parameters takes longer than
        # everything else here. place() then only copies it.
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(
                llama_config(args, shape), attn_implementation="sdpa", dtype=torch.float32
            )
            ids = torch.randint(0, model.config.vocab_size, (batch, seq))
        return Workload(
            model=model,
            kwargs={"input_ids": ids, "labels": ids, "use_cache": False},
            loss_fn=lambda out: out.loss,
            tokens=batch * seq,
            samples=batch,
        )

    return FunctionCase("gpu_check/llama", build)


def compile_subject(args, case, adapter, **overrides):
    """A compile-mode probe subject for ``case`` on the check's device, as the ladder makes one
    (the probes build their own steps from the case)."""
    import torch

    from torchport.config import RunConfig
    from torchport.probes.base import Subject

    config = RunConfig(
        **{
            "device": args.device,
            "dtype": args.dtype,
            "perf_budget_s": args.budget_s,
            "peak_tflops": args.peak_tflops,
            "artifacts_dir": os.path.join(args.out, "artifacts"),
            **overrides,
        }
    )
    return Subject(
        case=case,
        mode="compile",
        config=config,
        adapter=adapter,
        device=adapter.device(),
        dtype=getattr(torch, args.dtype),
        workload=None,
        model=None,
        runner=None,
        step=lambda: {},
        make_runner=lambda: None,
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
    report.stamp("smoke suite perf, eager and compile")
    smoke_sweep(args, report, "smoke_perf", probes=("perf",), cases=cases)
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for every output")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--budget-s", type=float, default=2.0, help="perf budget per side")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--hidden", type=int, default=1280, help="llama width (heads of 128)")
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--intermediate", type=int, default=3584)
    parser.add_argument("--peak-tflops", type=float, default=None)
    parser.add_argument(
        "--task-timeout", type=float, default=300.0, help="seconds per torchport task (suites)"
    )
    parser.add_argument("--tiny", action="store_true", help="tiny llama, smoke/mlp only (CPU)")
    parser.add_argument(
        "--sections",
        default="first,llama,moe,suites,smoke",
        help="comma-separated, in order: first (the probe's figure on the default llama), "
        "llama (two shapes x compile modes, timing agreement), moe, suites, smoke",
    )
    parser.add_argument("--shapes", default="h1280x24,h2048x8", help="llama shapes (llama)")
    parser.add_argument(
        "--compile-modes",
        default="default,max-autotune-no-cudagraphs,max-autotune",
        help="compile modes tried on the first shape (llama)",
    )
    parser.add_argument(
        "--ops-sample",
        default="ops/softmax/float32,ops/softmax/bfloat16,ops/matmul/float32,"
        "ops/matmul/bfloat16,ops/cumsum/float32,ops/cumsum/int64,ops/index_select/float32,"
        "ops/index_select/bfloat16",
        help="case globs of suite ops run (eager) in the suites section",
    )
    parser.add_argument(
        "--flex-sample",
        default=",".join(
            f"flex/{v}/b2h4s256d64/fwdbwd"
            for v in ("causal", "sliding_window", "document", "alibi", "softcap", "block_full")
        ),
        help="case globs of suite flex run (compile, perf probe) in the suites section",
    )
    parser.add_argument(
        "--force-shim",
        action="store_true",
        help="use the pyproject.toml entry points even if installed",
    )
    args = parser.parse_args(argv)
    args.sections = [s for s in args.sections.split(",") if s]
    args.shapes = [s for s in args.shapes.split(",") if s]
    args.compile_modes = tuple(m for m in args.compile_modes.split(",") if m)
    args.ops_sample = [c for c in args.ops_sample.split(",") if c]
    args.flex_sample = [c for c in args.flex_sample.split(",") if c]
    args.out = os.path.abspath(args.out)
    os.makedirs(args.out, exist_ok=True)
    report = Report(
        args.out, "$ " + " ".join(["python3", os.path.relpath(sys.argv[0])] + sys.argv[1:])
    )
    how = ensure_torchport(args.out, args.force_shim)
    import torch

    report.add(
        f"torchport from {SRC} ({how}); torch {torch.__version__}, python {sys.version.split()[0]}"
    )
    if args.device.startswith("cuda") and torch.cuda.is_available():
        report.add(f"device: {torch.cuda.get_device_name(0)}")
    from gpu_check_sections import SECTIONS, SHAPES, run_section

    unknown = [n for n in args.sections if n not in {"first", "smoke", *SECTIONS}]
    unknown += [n for n in args.shapes if n not in SHAPES]
    if unknown:
        parser.error(f"unknown section or shape: {', '.join(unknown)}")
    for name in args.sections:  # in the order given: the first is what matters if time is short
        if name == "first":
            run_section(report, name, llama_check, args, report)
        elif name == "smoke":
            run_section(report, name, smoke_check, args, report)
        else:
            run_section(report, name, SECTIONS[name], args, report)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()  # the next section's workers share the device
    report.stamp("finished")
    return 0


if __name__ == "__main__":
    sys.exit(main())
