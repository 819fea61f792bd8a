"""Probe ``serve`` (scenario generate): time to first token, time per output token, tokens/s.

For each batch size and prompt length, each side (eager; compiled in compile mode) generates
once untimed for figures (its first call: compiles, recompiles, counted per phase), then
``REPEATS`` times timed, every prefill and every decode step between two device
synchronisations (``timing.step_timer``). Figures come from ``timing.serving_figures``.

Recompiles are counted per phase (prefill, decode) from dynamo's compilation metrics around
each call of the first generation at a shape: the ladder's compile stage compiled the first
(batch, prompt length); every compile after it is a recompile, with dynamo's reason. A static
cache's decode step has one shape for every prompt length and should need none: the view says
when it did.

A batch beyond ``LARGEST_ALWAYS`` that runs out of memory is a finding ("did not fit"), not a
failure; peak memory is read per batch from one generation at the longest prompt.
"""

from __future__ import annotations

from typing import Any

from torchport.instruments import compile_metrics as cm
from torchport.probes.base import Probe, ProbeReport, Subject
from torchport.records.result import classify, error_value
from torchport.timing import serving_figures, step_timer

PROBE_VERSION = 1
REPEATS = 3
LARGEST_ALWAYS = 8  # batches up to this must fit; larger ones are tried "where memory allows"
HOST_BATCHES = (1, 8)  # CPU and host-backed devices: keep it small
DEVICE_BATCHES = (1, 8, 64)
PHASES = ("prefill", "decode")


def batches_for(config, adapter) -> tuple[int, ...]:
    """--gen-batches, else the device's default (small on the host, one larger elsewhere)."""
    if config.gen_batches:
        return tuple(config.gen_batches)
    on_host = adapter.torch_type == "cpu" or getattr(adapter, "host_backed", False)
    return HOST_BATCHES if on_host else DEVICE_BATCHES


class CompileCounter:
    """Frames dynamo compiled per phase during wrapped calls (its compilation metrics)."""

    def __init__(self):
        self.entries: dict[str, list] = {phase: [] for phase in PHASES}
        self.unavailable: str | None = None

    def wrap(self, phase: str, fn):
        def counted(*args):
            cm.clear_compilation_metrics()
            try:
                return fn(*args)
            finally:
                found = cm.compilation_metrics()
                if cm.is_unavailable(found):
                    self.unavailable = found
                else:
                    self.entries[phase].extend(found)

        return counted

    def wrap_pair(self, pair: tuple) -> tuple:
        return tuple(self.wrap(phase, fn) for phase, fn in zip(PHASES, pair, strict=True))

    def summary(self) -> dict:
        """Per phase: frames compiled, dynamo's compile seconds, recompile reasons."""
        if self.unavailable:
            return {phase: self.unavailable for phase in PHASES}
        found = {}
        for phase, entries in self.entries.items():
            compiled = [e for e in entries if e["ops"] is not None and not e["fail_type"]]
            found[phase] = {
                "compiles": len(compiled),
                "compile_s": sum(e["phases_us"].get("dynamo", 0) for e in compiled) / 1e6,
                "reasons": sorted(
                    {e["recompile_reason"] for e in entries if e["recompile_reason"]}
                ),
            }
        return found


def measure(setup, side: str, batch: int, length: int, new_tokens: int, timer) -> dict:
    """One (side, batch, prompt length): the first generation, then REPEATS timed ones."""
    counter = CompileCounter()
    first = setup.run(side, batch, length, new_tokens, timer=timer, wrap=counter.wrap_pair)
    timed = [setup.run(side, batch, length, new_tokens, timer=timer) for _ in range(REPEATS)]
    row: dict[str, Any] = {
        "side": side,
        "batch": batch,
        "prompt_length": length,
        "new_tokens": new_tokens,
        **serving_figures([g.prefill_s for g in timed], [g.decode_s for g in timed], batch),
        "first_prefill_ms": first.prefill_s * 1e3,
        "first_decode_ms": first.decode_s[0] * 1e3,
    }
    if side == "compiled":
        row["compiles"] = counter.summary()
    return row


def peak_bytes(setup, adapter, side: str, batch: int, length: int, new_tokens: int) -> dict:
    """Peak memory over one generation at ``batch`` and the longest prompt."""
    adapter.reset_peak_memory()
    adapter.wait_for(setup.run(side, batch, length, new_tokens).tokens)
    peak = adapter.peak_memory_bytes()
    return (
        {"peak_bytes": peak} if peak is not None else {"unavailable": adapter.peak_memory_reason()}
    )


class ServeProbe(Probe):
    name = "serve"
    version = PROBE_VERSION
    scenarios = ("generate",)

    def applies(self, subject: Subject) -> bool:
        return subject.generation is not None

    def run(self, subject: Subject) -> ProbeReport:
        config, adapter = subject.config, subject.adapter
        timer = step_timer(adapter)
        batches = batches_for(config, adapter)
        lengths = tuple(config.prompt_lengths)
        mode_side = "compiled" if subject.mode == "compile" else "eager"
        rows: list[dict] = []
        memory: dict[int, dict] = {}
        notes: list[str] = []
        watch = cm.RecompileLimitWatch()
        try:
            self._measure(subject, batches, lengths, mode_side, timer, rows, memory, notes)
        finally:
            watch.close()
        if watch.hits:
            notes.append(
                f"dynamo hit its recompile limit {len(watch.hits)} time(s): those frames ran "
                "eagerly inside the compiled steps"
            )
        info = {
            "batches": list(batches),
            "prompt_lengths": list(lengths),
            "new_tokens": config.new_tokens,
            "repeats": REPEATS,
            "timer": timer.kind,
            "mode_side": mode_side,
            "rows": rows,
            "memory": {str(b): m for b, m in memory.items()},
            "notes": notes,
        }
        if adapter.torch_type == "cpu":
            info["peak_bytes_is"] = "peak resident set of the worker process since it started"
        if any("compiles" in row for row in rows):
            info["recompiles"] = recompiles(rows, batches[0])
        report = ProbeReport(
            metrics=headline(rows, memory, mode_side, lengths[0]), findings={"serve": info}
        )
        # A shape that must fit and failed is the result's failure, never a missing row.
        failed = [r for r in rows if "status" in r and r["batch"] <= LARGEST_ALWAYS]
        if failed:
            report.status, report.stage, report.error = (
                failed[0]["status"],
                "serve",
                failed[0]["error"],
            )
        return report

    def _measure(self, subject, batches, lengths, mode_side, timer, rows, memory, notes):
        """Every (batch, side, prompt length) into ``rows``; peak memory per batch."""
        setup, config, adapter = subject.generation, subject.config, subject.adapter
        for batch in batches:
            fits = True
            for side in setup.sides:
                for length in lengths:
                    subject.emit({"event": "stage", "stage": f"probe:serve:{side}:b{batch}"})
                    try:
                        rows.append(measure(setup, side, batch, length, config.new_tokens, timer))
                    except Exception as exc:  # a shape that cannot run is a row saying why
                        status = classify("run", exc)
                        fits = fits and status != "oom"
                        rows.append(
                            {
                                "side": side,
                                "batch": batch,
                                "prompt_length": length,
                                "status": status,
                                "error": error_value(exc),
                            }
                        )
            if not fits and batch > LARGEST_ALWAYS:
                notes.append(f"batch {batch} did not fit in memory")
            elif fits:
                try:
                    memory[batch] = peak_bytes(
                        setup, adapter, mode_side, batch, max(lengths), config.new_tokens
                    )
                except Exception as exc:  # no figure, and why
                    memory[batch] = {"unavailable": f"{type(exc).__name__}: {str(exc)[:200]}"}


def recompiles(rows: list[dict], first_batch: int) -> dict:
    """Compiles after the ladder's first one, per phase: across prompt lengths (at the first
    batch) and across batch sizes; a string (why) where dynamo's metrics are unavailable."""
    found: dict[str, Any] = {}
    for phase in PHASES:
        across_lengths = across_batches = 0
        for row in rows:
            counted = (row.get("compiles") or {}).get(phase)
            if counted is None:
                continue
            if isinstance(counted, str):
                return {phase: counted for phase in PHASES}
            if row["batch"] == first_batch:
                across_lengths += counted["compiles"]
            else:
                across_batches += counted["compiles"]
        found[phase] = {"across_prompt_lengths": across_lengths, "across_batches": across_batches}
    return found


def headline(rows: list[dict], memory: dict, side: str, length: int) -> dict:
    """Metrics of this mode's side: TTFT/TPOT at the first batch and prompt length, tokens/s
    and peak memory per batch, the speedup of compiled over eager decode per batch."""
    ok = [r for r in rows if "ttft_ms" in r and r["prompt_length"] == length]
    mine = {r["batch"]: r for r in ok if r["side"] == side}
    metrics: dict[str, float] = {}
    if mine:
        first = mine[min(mine)]
        for key in ("ttft_ms", "tpot_median_ms", "tpot_p10_ms", "tpot_p90_ms"):
            metrics[f"serve_{key}"] = first[key]
    for batch, row in mine.items():
        metrics[f"serve_tokens_per_s_b{batch}"] = row["decode_tokens_per_s"]
        eager = next((r for r in ok if r["side"] == "eager" and r["batch"] == batch), None)
        if side == "compiled" and eager is not None:
            metrics[f"serve_decode_speedup_b{batch}"] = (
                eager["tpot_median_ms"] / row["tpot_median_ms"]
            )
    for batch, found in memory.items():
        if "peak_bytes" in found:
            metrics[f"serve_peak_bytes_b{batch}"] = found["peak_bytes"]
    return metrics
