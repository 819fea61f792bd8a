"""Serving (scenario generate) per (case, mode, batch): time to first token, time per output
token, decode tokens/s, peak memory, compile and recompiles, and generation parity.

Figures are this mode's side (compiled in compile mode) at the first prompt length; the
compile row's eager/compiled decode speedup is from its own measurements.
"""

from __future__ import annotations

from torchport.views.base import Annotated, Fraction, Span, View, columns

COLUMNS = columns(
    "case",
    "mode",
    "cache",
    ("batch", "int"),
    ("TTFT ms", "ms"),
    ("TPOT ms", "ms"),
    ("p10-p90", "ms"),
    ("tokens/s", "rate"),
    ("speedup", "ratio"),
    ("peak mem", "bytes"),
    ("compile s", "s"),
    "recompiles",
    ("tokens match", "count"),
    "status",
)


def tokens_match(result: dict):
    """``n / N`` tokens matching the float64 reference, with where it diverged."""
    found = (result.get("findings") or {}).get("generate_parity") or {}
    if "steps" not in found:
        return None
    steps, divergence = found["steps"], found.get("first_divergence")
    return Fraction(steps if divergence is None else divergence, steps)


def compile_seconds(info: dict):
    """The first compile of prefill + decode (dynamo's seconds); marked when Inductor's cache
    served any of it (then it was not cold)."""
    compiled = info.get("compile") or {}
    phases = compiled.get("phases") or {}
    if not all(isinstance(phases.get(p), dict) for p in ("prefill", "decode")):
        return None
    total = phases["prefill"]["compile_s"] + phases["decode"]["compile_s"]
    cache = compiled.get("cache")
    hits = sum(v for k, v in cache.items() if k.endswith("_hit")) if isinstance(cache, dict) else 0
    return Annotated(total, f"{hits} cache hits") if hits else total


def recompiles(serve: dict) -> str | None:
    """``0 · 1 · 2``: decode across prompt lengths · prefill across them · across batches."""
    found = serve.get("recompiles")
    if not found:
        return None
    if any(isinstance(v, str) for v in found.values()):
        return next(v for v in found.values() if isinstance(v, str))
    batches = sum(v["across_batches"] for v in found.values())
    decode, prefill = (found[p]["across_prompt_lengths"] for p in ("decode", "prefill"))
    return f"{decode} · {prefill} · {batches}"


def rows_of(result: dict) -> list[list]:
    findings = result.get("findings") or {}
    info, serve = findings.get("generate") or {}, findings.get("serve") or {}
    m = result.get("metrics") or {}
    cache = (info.get("cache") or {}).get("kind")
    status = result["status"] + (f" @{result['stage']}" if result.get("stage") else "")
    lengths = serve.get("prompt_lengths") or [None]
    side = serve.get("mode_side")
    mine = [
        r
        for r in serve.get("rows") or ()
        if r["side"] == side and r["prompt_length"] == lengths[0] and "ttft_ms" in r
    ]
    common = [compile_seconds(info), recompiles(serve), tokens_match(result), status]
    if not mine:
        return [[result["case"], result["mode"], cache, None, *[None] * 6, *common]]
    return [
        [
            result["case"],
            result["mode"],
            cache,
            r["batch"],
            r["ttft_ms"],
            r["tpot_median_ms"],
            Span(r["tpot_p10_ms"], r["tpot_p90_ms"]),
            r["decode_tokens_per_s"],
            m.get(f"serve_decode_speedup_b{r['batch']}"),
            m.get(f"serve_peak_bytes_b{r['batch']}"),
            *common,
        ]
        for r in mine
    ]


def build(run: dict, results: list[dict]) -> View | None:
    if (run.get("config") or {}).get("scenario") != "generate":
        return None
    ran = [r for r in results if r["status"] != "skip"]
    rows = [row for r in ran for row in rows_of(r)]
    config = run["config"]
    notes = [
        f"greedy generation: prompts of {', '.join(map(str, config.get('prompt_lengths') or []))}"
        f" tokens, {config.get('new_tokens')} new tokens; figures at the first prompt length; "
        f"compile mode {config.get('compile_mode', 'default')}",
        "TTFT = prefill (median); TPOT = one decode step (median, p10-p90 over every step); "
        "tokens/s = batch x decode steps / decode time; speedup = eager / compiled TPOT",
        "tokens match: generated ids equal to the float64 CPU reference's, up to the first "
        "divergence",
        "compile s: the first compile of the prefill and decode graphs (dynamo's time); "
        "recompiles: decode across prompt lengths · prefill across prompt lengths · both "
        "across batch sizes",
    ]
    skipped = len(results) - len(ran)
    if skipped:
        notes.append(f"{skipped} / {len(results)} results skipped (not causal LMs, or excluded)")
    for r in ran:
        serve = (r.get("findings") or {}).get("serve") or {}
        notes.extend(f"{r['case']} [{r['mode']}]: {n}" for n in serve.get("notes") or ())
        found = serve.get("recompiles") or {}
        decode = found.get("decode")
        generate = (r.get("findings") or {}).get("generate") or {}
        cache = generate.get("cache") or {}
        failed = (generate.get("compile") or {}).get("fullgraph_failed")
        if failed:
            notes.append(
                f"{r['case']} [{r['mode']}]: fullgraph compile failed ({failed[:120]}); "
                "compiled with graph breaks"
            )
        if isinstance(decode, dict) and cache.get("kind") == "static":
            if decode["across_prompt_lengths"]:
                notes.append(
                    f"{r['case']} [{r['mode']}]: the static-cache decode step recompiled "
                    f"{decode['across_prompt_lengths']} time(s) across prompt lengths"
                )
        if serve.get("peak_bytes_is"):
            notes.append("peak memory on the CPU is the worker process's peak resident set")
    return View("Serving (generate)", COLUMNS, rows, list(dict.fromkeys(notes)))
