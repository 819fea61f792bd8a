"""The GPU check's timing sections (benchmarks/gpu_check.py runs them).

- ``llama``: the ~0.5 B llama training step (forward + backward) at each of ``--shapes``,
  compiled with each asked mode: the cold compile (first call, empty Inductor cache),
  torchport's median and mean (its own interleaved sampler and device timer, as the perf probe
  uses them) beside the median and mean of a plain loop of the *same* compiled step in the
  same process (an event between back-to-back steps), like for like, and
  ``torch.utils.benchmark``; MFU by 6·N·T and by counted FLOPs.
- ``moe``: a reduced qwen3_moe training step: the same figures, and MFU by 6·N·T over every
  parameter, by 6·N·T over the parameters a token uses (top-k of the experts), and by the
  FLOPs counted as they ran, with what the experts' ``aten._grouped_mm`` contributed.

Every section writes what it measured to the report as it goes; one that fails says why and
the next one runs.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass

from gpu_check_common import H200_BF16_PEAK_TFLOPS, Report, compile_subject, llama_case

AGREEMENT_TARGET = 0.03  # torchport's median within 3 % of the independent timings


@dataclass(frozen=True)
class Shape:
    name: str
    hidden: int
    layers: int
    intermediate: int
    heads: int
    kv_heads: int


SHAPES = {
    # 0.57 B in all, 0.49 B in the layers (the README's earlier figure)
    "h1280x24": Shape("h1280x24", 1280, 24, 3584, 10, 10),
    # wide and shallow: grouped-query attention (16 heads, 8 kv heads)
    "h2048x8": Shape("h2048x8", 2048, 8, 5632, 16, 8),
}


def run_section(report: Report, name: str, fn, *args, **kwargs) -> None:
    """One section; a failure is reported with its traceback's last lines, never raised."""
    report.stamp(f"section {name}")
    try:
        fn(*args, **kwargs)
    except Exception as exc:  # the next section still runs; the report says what failed
        report.add(f"{name}: FAILED {type(exc).__name__}: {str(exc)[:500]}")
        for line in traceback.format_exc().splitlines()[-6:]:
            report.add("    " + line)


# -- timing the same step three ways ---------------------------------------------------------
def loop_steps(step, adapter, n: int) -> tuple[list[float], str]:
    """Per-step durations (seconds) of ``n`` back-to-back steps of a plain loop: on CUDA one
    event recorded between consecutive steps (no synchronisation inside the loop, so each step
    is launched while the one before still runs, as in training); elsewhere the host clock read
    between steps (exact on the CPU, whose kernels finish before they return)."""
    import torch

    if adapter.torch_type == "cuda" and torch.cuda.is_available():
        events = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
        adapter.synchronize()
        events[0].record()
        for i in range(n):
            step()
            events[i + 1].record()
        events[-1].synchronize()
        times = [a.elapsed_time(b) / 1e3 for a, b in zip(events, events[1:], strict=False)]
        return times, "cuda events between back-to-back steps"
    adapter.synchronize()
    marks = [time.perf_counter()]
    for _ in range(n):
        step()
        marks.append(time.perf_counter())
    adapter.synchronize()
    kind = "host clock between back-to-back steps" + (
        "" if adapter.torch_type == "cpu" else " (unsynchronised inside the loop)"
    )
    return [b - a for a, b in zip(marks, marks[1:], strict=False)], kind


def independent_timings(step, adapter, budget_s: float) -> dict:
    """The step timed without torchport's sampler: a plain loop of back-to-back steps with a
    timestamp between steps (three loops; the mean and the median of all their steps: the
    mean is the loop's total over its steps), and torch.utils.benchmark's blocked autorange.
    Both after the warm-up torchport's sampler already gave the step."""
    import torch
    import torch.utils.benchmark as tbench

    from torchport.timing import Summary

    sync = adapter.synchronize
    # A loop long enough for the budget, from one synchronised call's duration.
    sync()
    t0 = time.perf_counter()
    step()
    sync()
    once = max(time.perf_counter() - t0, 1e-6)
    n = max(10, min(1000, int(budget_s / once)))
    steps: list[float] = []
    loop_means = []
    for _ in range(3):
        times, kind = loop_steps(step, adapter, n)
        steps += times
        loop_means.append(statistics.fmean(times))
    pooled = Summary.of(steps)
    # num_threads as this process has: Timer's default of one thread would time another step
    timer = tbench.Timer(
        stmt="step(); sync()",
        globals={"step": step, "sync": sync},
        num_threads=torch.get_num_threads(),
    )
    measured = timer.blocked_autorange(min_run_time=budget_s)
    return {
        "loop_mean_ms": pooled.mean_s * 1e3,  # = the loops' total time over their steps
        "loop_median_ms": pooled.median_s * 1e3,  # of the same per-step samples
        "loop_p10_ms": pooled.p10_s * 1e3,
        "loop_p90_ms": pooled.p90_s * 1e3,
        "loop_means_ms": [m * 1e3 for m in loop_means],
        "loop_steps": n,
        "loop_samples": pooled.n,
        "loop_kind": kind,
        "utils_benchmark_median_ms": measured.median * 1e3,
        "utils_benchmark_runs": len(measured.times),
    }


def torchport_timing(step, adapter, budget_s: float) -> dict:
    """torchport's own figure: its interleaved sampler and device timer (perf probe's)."""
    from torchport.probes.perf import WARMUP_ROUNDS
    from torchport.timing import Summary, sample_interleaved, step_timer

    timer = step_timer(adapter, steady=True)  # as the perf probe times a training step
    samples = sample_interleaved(
        {"compiled": step}, timer, budget_s=budget_s, warmup=WARMUP_ROUNDS
    )["compiled"]
    summary = Summary.of(samples)
    return {
        "torchport_median_ms": summary.median_s * 1e3,
        "torchport_mean_ms": summary.mean_s * 1e3,  # beside the loop's mean: like for like
        "torchport_p10_ms": summary.p10_s * 1e3,
        "torchport_p90_ms": summary.p90_s * 1e3,
        "torchport_samples": summary.n,
        "torchport_timer": timer.kind,
    }


def peak(args, adapter, config) -> tuple[float | None, str]:
    from torchport.instruments import flops as flops_mod

    if args.peak_tflops:
        return args.peak_tflops, "--peak-tflops"
    if adapter.torch_type == "cuda" and args.dtype == "bfloat16":
        return H200_BF16_PEAK_TFLOPS, "H200 bf16 dense datasheet"
    return flops_mod.peak_for(config, adapter, args.dtype)


def fresh_inductor_cache(tag: str, folder: str | None = None) -> str:
    """A new, empty Inductor cache for this process (the next compile is a cold one), or the
    given one kept (the next compile reuses what an earlier one wrote, autotuning included)."""
    import torch

    folder = folder or tempfile.mkdtemp(prefix=f"gpu_check_{tag}_")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder
    torch._dynamo.reset()
    try:  # Inductor memoises paths under the cache folder (its autotuning results' file)
        from torch._inductor.utils import clear_caches

        clear_caches()
    except (ImportError, AttributeError):  # private: an older torch keeps the first folder
        pass
    return folder


def compiled_step_figures(
    args, report: Report, case, mode: str, tokens: int, cache: str | None = None
) -> dict:
    """Cold compile, the three timings and both MFUs of one case's compiled training step.
    ``cache``: an Inductor cache folder to compile with (default: a new, empty one)."""
    import torch

    from torchport.devices import get_adapter
    from torchport.instruments import flops as flops_mod
    from torchport.probes.perf import perf_setup

    adapter = get_adapter(args.device)
    adapter.prepare()
    subject = compile_subject(args, case, adapter, compile_mode=mode)
    config = subject.config
    cache = fresh_inductor_cache(mode, cache)
    setup = perf_setup(subject)
    compiled = setup.sides["compiled"]
    adapter.synchronize()
    t0 = time.perf_counter()
    compiled()  # the cold compile: dynamo, AOT autograd, Inductor (and autotuning) here
    adapter.synchronize()
    figures: dict = {"mode": mode, "cold_compile_s": time.perf_counter() - t0, "cache": cache}
    figures.update(torchport_timing(compiled, adapter, args.budget_s))
    figures.update(independent_timings(compiled, adapter, args.budget_s))
    ours = figures["torchport_median_ms"]
    # like for like (docs/design.md rule 12): each statistic beside the same statistic
    figures["median_vs_loop_median"] = ours / figures["loop_median_ms"]
    figures["mean_vs_loop_mean"] = figures["torchport_mean_ms"] / figures["loop_mean_ms"]
    figures["ratio_vs_utils_benchmark"] = ours / figures["utils_benchmark_median_ms"]
    n, counts = flops_mod.params_6nt(setup.model)
    figures["params_6nt"], figures["params_counts"] = n, counts
    figures["flops_6nt"] = flops_mod.flops_6nt(n, tokens, True)
    figures["flops_counted"] = flops_mod.count_flops(setup.sides["eager"])
    tflops, source = peak(args, adapter, config)
    figures["peak_tflops"], figures["peak_source"] = tflops, source
    step_s = ours / 1e3
    for key in ("6nt", "counted"):
        flops = figures[f"flops_{key}"]
        figures[f"mfu_{key}"] = flops_mod.mfu(flops, step_s, tflops) if tflops and flops else None
    del setup, compiled
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return figures


def _pct(value) -> str:
    return "n/a" if value is None else f"{value * 100:.3g}%"


def report_figures(report: Report, label: str, f: dict) -> None:
    like = ("median_vs_loop_median", "mean_vs_loop_mean")
    within = all(abs(f[k] - 1) <= AGREEMENT_TARGET for k in like)
    report.add(
        f"  {label} mode {f['mode']}: "
        + ("compile (cache reused) " if f.get("cache_reused") else "cold compile ")
        + f"{f['cold_compile_s']:.1f} s; torchport median {f['torchport_median_ms']:.3f} ms, "
        f"mean {f['torchport_mean_ms']:.3f} (p10 {f['torchport_p10_ms']:.3f}, p90 "
        f"{f['torchport_p90_ms']:.3f}, n {f['torchport_samples']}, {f['torchport_timer']})"
    )
    report.add(
        f"    plain loop median {f['loop_median_ms']:.3f} ms, mean {f['loop_mean_ms']:.3f} "
        f"(p10 {f['loop_p10_ms']:.3f}, p90 {f['loop_p90_ms']:.3f}; {f['loop_kind']}, 3 x "
        f"{f['loop_steps']} steps); torch.utils.benchmark {f['utils_benchmark_median_ms']:.3f} "
        f"ms ({f['utils_benchmark_runs']} blocks)"
    )
    report.add(
        f"    like for like: median / loop median {f['median_vs_loop_median']:.3f}, mean / loop "
        f"mean {f['mean_vs_loop_mean']:.3f}: "
        + ("within" if within else "OUTSIDE")
        + f" {AGREEMENT_TARGET:.0%}; median / torch.utils.benchmark "
        f"{f['ratio_vs_utils_benchmark']:.3f} (that one times step(); sync(), launch included)"
    )
    report.add(
        f"    N {f['params_6nt'] / 1e6:.4g} M; 6·N·T {f['flops_6nt'] / 1e12:.4g} TFLOP, counted "
        f"{f['flops_counted'] / 1e12:.4g} TFLOP per step; MFU 6·N·T {_pct(f['mfu_6nt'])}, "
        f"counted {_pct(f['mfu_counted'])} (peak {f['peak_tflops']} TFLOP/s, "
        f"{f['peak_source']})"
    )


# -- sections ---------------------------------------------------------------------------------
def llama_section(args, report: Report) -> None:
    batch, seq = (2, 32) if args.tiny else (args.batch, args.seq)
    table: list[dict] = []
    # the first mode on every shape first (what matters most if the window is short), then the
    # other modes on the first shape; max-autotune compiles with the cache the
    # max-autotune-no-cudagraphs run left (its autotuning reused, said in the report)
    first, *other_modes = args.compile_modes
    runs = [(name, first) for name in args.shapes] + [(args.shapes[0], m) for m in other_modes]
    autotuned: str | None = None
    for shape_name, mode in runs:
        if args.out_of_time(f"llama {shape_name} mode {mode}"):
            break
        shape = SHAPES[shape_name]
        case = llama_case(args, batch, seq, _device(args), shape)
        reuse = autotuned if mode == "max-autotune" else None
        reused = " (Inductor cache of max-autotune-no-cudagraphs: autotuning reused)"
        report.stamp(
            f"llama {shape_name} batch {batch} x {seq}, compile mode {mode}"
            + (reused if reuse else "")
        )
        try:
            figures = compiled_step_figures(args, report, case, mode, batch * seq, cache=reuse)
        except Exception as exc:  # the next shape or mode still runs; the report says why
            report.add(f"  {shape_name} mode {mode}: FAILED {type(exc).__name__}: {exc}"[:600])
            report.add("    " + traceback.format_exc().splitlines()[-3].strip())
            continue
        figures["cache_reused"] = bool(reuse)
        if mode == "max-autotune-no-cudagraphs":
            autotuned = figures["cache"]
        figures["shape"] = asdict(shape)
        report_figures(report, shape_name, figures)
        table.append(figures)
        _dump(args, "llama_modes.json", table)
    best = max(
        (f for f in table if f["mfu_6nt"] is not None), key=lambda f: f["mfu_6nt"], default=None
    )
    if best:
        report.add(
            f"  best MFU by 6·N·T: {_pct(best['mfu_6nt'])} ({best['shape']['name']}, mode "
            f"{best['mode']}); target >= 50%"
        )


def moe_config(args):
    from transformers import Qwen3MoeConfig

    if args.tiny:
        return Qwen3MoeConfig(
            vocab_size=256,
            hidden_size=64,
            intermediate_size=128,
            moe_intermediate_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            num_experts=4,
            num_experts_per_tok=2,
            max_position_embeddings=256,
            tie_word_embeddings=False,
        )
    return Qwen3MoeConfig(
        vocab_size=32000,
        hidden_size=1024,
        intermediate_size=2816,
        moe_intermediate_size=704,
        num_hidden_layers=8,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=64,
        num_experts=32,
        num_experts_per_tok=4,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
    )


def moe_case(args, batch: int, seq: int):
    from torchport.cases.base import FunctionCase, Workload

    device = _device(args)

    def build(*, seed, size):
        import torch
        from transformers import AutoModelForCausalLM

        torch.manual_seed(seed)
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(
                moe_config(args), attn_implementation="sdpa", dtype=torch.float32
            )
            ids = torch.randint(0, model.config.vocab_size, (batch, seq))
        return Workload(
            model=model,
            kwargs={"input_ids": ids, "labels": ids, "use_cache": False},
            loss_fn=lambda out: out.loss,
            tokens=batch * seq,
            samples=batch,
        )

    return FunctionCase("gpu_check/qwen3_moe", build)


def counted_by_op(args, case) -> dict:
    """FLOPs per aten op of one eager step, as torchport counts them (PyTorch's FLOP counter
    with torchport's extra formulas, ``aten._grouped_mm`` among them), largest first."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from torchport.devices import get_adapter
    from torchport.instruments.flops import extra_flop_formulas
    from torchport.probes.perf import perf_setup

    adapter = get_adapter(args.device)
    setup = perf_setup(compile_subject(args, case, adapter))
    with FlopCounterMode(display=False, custom_mapping=extra_flop_formulas()) as counter:
        setup.sides["eager"]()
    counts = counter.get_flop_counts().get("Global", {})
    del setup
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return dict(sorted(((str(k), int(v)) for k, v in counts.items()), key=lambda kv: -kv[1]))


def moe_section(args, report: Report) -> None:
    import torch

    batch, seq = (2, 32) if args.tiny else (args.batch, args.seq)
    cfg = moe_config(args)
    report.stamp(
        f"qwen3_moe ({cfg.num_experts} experts, top {cfg.num_experts_per_tok}, hidden "
        f"{cfg.hidden_size} x {cfg.num_hidden_layers}) batch {batch} x {seq}, compile default"
    )
    figures = compiled_step_figures(
        args, report, moe_case(args, batch, seq), "default", batch * seq
    )
    report_figures(report, "qwen3_moe", figures)
    figures["counted_by_op"] = counted_by_op(args, moe_case(args, batch, seq))
    grouped = {k: v for k, v in figures["counted_by_op"].items() if "grouped_mm" in k}
    report.add(
        "    counted FLOPs by op: "
        + ", ".join(f"{op} {v / 1e12:.4g} T" for op, v in figures["counted_by_op"].items())
        + (
            f"; the experts' grouped matmuls counted: {sum(grouped.values()) / 1e12:.4g} T"
            if grouped
            else "; no aten._grouped_mm ran (this device's experts run as plain matmuls)"
        )
    )
    # The parameters a token uses: everything outside the experts, plus top-k of num_experts
    # of the experts' weights (routing balance decides the real split; the counted FLOPs see it).
    with torch.device("meta"):
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_config(cfg)
    expert = sum(p.numel() for n, p in model.named_parameters() if ".experts." in n)
    total = sum(p.numel() for p in model.parameters())
    embed = model.get_input_embeddings().weight.numel()
    active = total - embed - expert + expert * cfg.num_experts_per_tok / cfg.num_experts
    tokens = batch * seq
    step_s = figures["torchport_median_ms"] / 1e3
    flops_active = 6 * active * tokens
    tflops = figures["peak_tflops"]
    figures.update(
        params_total=total,
        params_experts=expert,
        params_active=active,
        flops_6nt_active=flops_active,
        mfu_6nt_active=flops_active / step_s / (tflops * 1e12) if tflops else None,
    )
    report.add(
        f"    parameters: {total / 1e6:.4g} M in all, {expert / 1e6:.4g} M in experts, "
        f"{active / 1e6:.4g} M used per token (non-embedding, top-{cfg.num_experts_per_tok} of "
        f"{cfg.num_experts}); MFU by 6·N_active·T {_pct(figures['mfu_6nt_active'])}"
    )
    report.add(
        "    6·N·T over all parameters counts every expert for every token, so it overstates the "
        "work by about num_experts / top_k on the expert weights; the counted FLOPs are those "
        "of the expert matmuls that ran (a routing imbalance shows there, not in 6·N_active·T)"
    )
    _dump(args, "moe.json", figures)


def _device(args) -> str:
    from torchport.devices import get_adapter

    return str(get_adapter(args.device).device())


def _dump(args, name: str, data) -> None:
    with open(os.path.join(args.out, name), "w") as f:
        json.dump(data, f, indent=1, default=str)
