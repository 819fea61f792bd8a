"""What the GPU check's sections share (benchmarks/gpu_check.py runs them): torchport made
importable from a plain checkout, the report written as it goes, a sweep through torchport's
own pipeline, and the llama the timing sections build.
"""

from __future__ import annotations

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


# -- a sweep through torchport's pipeline ------------------------------------------
def smoke_sweep(
    args, report: Report, name: str, workload_folder: str | None = None, **overrides
) -> None:
    from torchport import api
    from torchport.config import RunConfig
    from torchport.kb import open_store

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
    shown = (
        "summary",
        "perf",
        "serving",
        "flex",
        "ops",
        "train",
        "profile",
        "kernels",
        "kernels_fast_p",
        "dist_bandwidth",  # (the per-collective view, one row per collective x dtype x size,
        # stays in NAME.txt)
        "dist_training",
        "hotspots",
        "hotspots_modules",
    )
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


# -- the ~0.5 B llama ----------------------------------------------------------------------
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
