"""The GPU check's autotuning sections (benchmarks/gpu_check.py runs them).

- ``autotune``: one llama shape (the first of ``--shapes``) compiled with each of
  ``--compile-modes`` (``max-autotune-no-cudagraphs``, then ``max-autotune``) under a cap on
  Inductor's autotuning (``--autotune-cap``), all in one Inductor cache folder
  (``--inductor-cache``): the first mode's compile is cold (the folder emptied first) unless
  ``cache_restore`` brought a carried one; ``max-autotune`` then reuses the GEMM choices the
  first mode benchmarked. MFU by 6·N·T and by counted FLOPs for each, and what each compile cost.
- ``cache_pack``: that cache folder packed into ``--cache-pack DIR`` (``$OUT`` on the device
  machine) as ``inductor_cache.tgz.NN`` parts of at most 15 MiB (the device tool brings back
  files of at most 16 MiB), the autotuning results and the graph caches first, the compiled
  Triton binaries only while the whole stays under ``--cache-pack-mib`` (they are rebuilt from
  the cached source when missing; the GEMM timings are what costs minutes).
- ``cache_restore``: the parts found in ``--cache-from DIR`` joined and unpacked into the cache
  folder, so the next compile starts warm (the same cap must be set: Inductor's graph cache key
  holds its settings).

The cap's settings are guarded by name: a setting this torch does not have is left out and
the report says so (torch 2.11 on the device, 2.13 here).
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import io
import os
import shutil
import tarfile
import time

from gpu_check_common import Report
from gpu_check_sections import SHAPES, compiled_step_figures, llama_case, report_figures

# Inductor settings that bound autotuning: fewer Triton GEMM configs per shape, shorter
# benchmarking per choice, the backends that compete with cuBLAS limited to Triton, no extra
# coordinate-descent pass. Names from torch/_inductor/config.py (2.11-2.13); any this torch
# lacks is skipped with a note. On 2026-12-04 (H200) an uncapped search spent 5-32 s per GEMM
# shape and cuBLAS beat every Triton config it tried (81-89 % of cuBLAS's speed).
AUTOTUNE_CAPS = {
    "capped": {
        "max_autotune_gemm_backends": "ATEN,TRITON",
        "max_autotune_gemm_search_space": "DEFAULT",
        "test_configs.max_mm_configs": 6,
        "inductor_default_autotune_warmup": 5,
        "inductor_default_autotune_rep": 20,
        "coordinate_descent_tuning": False,
        "autotune_num_choices_displayed": 3,
        "max_epilogue_benchmarked_choices": 1,
    },
    "none": {},
}
PART_BYTES = 15 * 2**20  # under the device tool's 16 MiB per file
# packed first: the GEMM autotuning results (cache/), then the graph caches; Triton binaries last
PACK_ORDER = ("cache", "fxgraph", "aotautograd")


def cap_settings(cap: str) -> tuple[dict, list[str]]:
    """The cap's Inductor settings this torch has, and the names it lacks."""
    import torch._inductor.config as inductor_config

    wanted = AUTOTUNE_CAPS[cap]
    known = inductor_config.get_config_copy()
    present = {k: v for k, v in wanted.items() if k in known}
    return present, sorted(set(wanted) - set(present))


@contextlib.contextmanager
def autotune_cap(cap: str, report: Report):
    """Inductor's settings for the cap, for the compiles inside (restored after)."""
    import torch._inductor.config as inductor_config

    present, missing = cap_settings(cap)
    report.add(
        f"  autotune cap '{cap}': "
        + (", ".join(f"{k}={v!r}" for k, v in present.items()) or "none (Inductor's defaults)")
        + (f"; not in this torch, left out: {', '.join(missing)}" if missing else "")
    )
    with inductor_config.patch(present):
        yield present


def autotune_section(args, report: Report) -> None:
    batch, seq = (2, 32) if args.tiny else (args.batch, args.seq)
    shape = SHAPES[args.shapes[0]]
    cache = os.path.abspath(args.inductor_cache)
    warm = bool(getattr(args, "cache_restored", False))
    if not warm:  # a cold first compile: nothing left from an earlier run on this machine
        shutil.rmtree(cache, ignore_errors=True)
    os.makedirs(cache, exist_ok=True)
    table: list[dict] = []
    with autotune_cap(args.autotune_cap, report) as settings:
        for index, mode in enumerate(args.compile_modes):
            if args.out_of_time(f"autotune {shape.name} mode {mode}"):
                break
            state = (
                "carried cache (restored)"
                if warm
                else "cold (empty cache)"
                if index == 0
                else "autotuning reused from the modes before"
            )
            report.stamp(f"autotune {shape.name} batch {batch} x {seq}, mode {mode}, {state}")
            case = llama_case(args, batch, seq, _device(args), shape)
            started = time.perf_counter()
            try:
                figures = compiled_step_figures(args, report, case, mode, batch * seq, cache=cache)
            except Exception as exc:  # the next mode still runs; the report says why
                report.add(f"  {shape.name} mode {mode}: FAILED {type(exc).__name__}: {exc}"[:600])
                continue
            figures.update(
                shape=vars(shape),
                cache_state=state,
                cache_reused=index > 0 or warm,
                autotune_cap=args.autotune_cap,
                autotune_settings=settings,
                section_s=time.perf_counter() - started,
            )
            report_figures(report, shape.name, figures)
            table.append(figures)
            _dump(args, "autotune_modes.json", table)
    best = max(
        (f for f in table if f["mfu_6nt"] is not None), key=lambda f: f["mfu_6nt"], default=None
    )
    if best:
        report.add(
            f"  best MFU by 6·N·T in this section: {best['mfu_6nt'] * 100:.3g}% (mode "
            f"{best['mode']}, {best['cache_state']}); target >= 50%"
        )


# -- carrying the cache between windows -----------------------------------------------------
def _members(cache: str) -> list[str]:
    """The cache's files, relative, in packing order."""
    files = [
        os.path.relpath(os.path.join(root, name), cache)
        for root, _, names in os.walk(cache)
        for name in names
    ]

    def rank(rel: str) -> tuple[int, str]:
        top = rel.split(os.sep, 1)[0]
        order = PACK_ORDER.index(top) if top in PACK_ORDER else len(PACK_ORDER)
        return (order + (1 if top == "triton" else 0), rel)

    return sorted(files, key=rank)


def pack_cache(cache: str, dest: str, limit_bytes: int) -> dict:
    """Pack ``cache`` into ``dest/inductor_cache.tgz.NN`` parts; files past ``limit_bytes``
    (uncompressed, in packing order) are left out and counted."""
    files = _members(cache)
    kept, left, total = [], [], 0
    for rel in files:
        size = os.path.getsize(os.path.join(cache, rel))
        if total + size > limit_bytes:
            left.append(rel)
            continue
        kept.append(rel)
        total += size
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for rel in kept:
            tar.add(os.path.join(cache, rel), arcname=rel)
    data = buffer.getvalue()
    os.makedirs(dest, exist_ok=True)
    for old in glob.glob(os.path.join(dest, "inductor_cache.tgz.*")):
        os.remove(old)
    parts = []
    for index, offset in enumerate(range(0, max(len(data), 1), PART_BYTES)):
        path = os.path.join(dest, f"inductor_cache.tgz.{index:02d}")
        with open(path, "wb") as f:
            f.write(data[offset : offset + PART_BYTES])
        parts.append(os.path.basename(path))
    return {
        "files": len(kept),
        "left_out": len(left),
        "left_out_tops": sorted({rel.split(os.sep, 1)[0] for rel in left}),
        "bytes_in": total,
        "bytes_packed": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "parts": parts,
    }


def restore_cache(source: str, cache: str) -> dict:
    """Join ``source/inductor_cache.tgz.NN`` and unpack into ``cache`` (emptied first)."""
    parts = sorted(glob.glob(os.path.join(source, "inductor_cache.tgz.*")))
    if not parts:
        raise FileNotFoundError(
            f"no inductor_cache.tgz.NN in {source}: copy the parts the autotune part brought "
            "back into it (see docs/gpu-check.md)"
        )
    data = b"".join(open(p, "rb").read() for p in parts)
    shutil.rmtree(cache, ignore_errors=True)
    os.makedirs(cache)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        names = tar.getnames()
        if any(n.startswith(("/", "..")) or "/../" in n for n in names):
            raise ValueError(f"{source}: a packed path leaves the cache folder")
        tar.extractall(cache)
    return {"parts": len(parts), "files": len(names), "sha256": hashlib.sha256(data).hexdigest()}


def cache_pack_section(args, report: Report) -> None:
    if not args.cache_pack:
        report.add("cache_pack: no --cache-pack folder given; nothing packed")
        return
    cache = os.path.abspath(args.inductor_cache)
    packed = pack_cache(cache, args.cache_pack, int(args.cache_pack_mib * 2**20))
    report.add(
        f"  packed {packed['files']} files ({packed['bytes_in'] / 2**20:.1f} MiB) of {cache} "
        f"into {len(packed['parts'])} part(s), {packed['bytes_packed'] / 2**20:.1f} MiB, in "
        f"{args.cache_pack}: {', '.join(packed['parts'])}; sha256 {packed['sha256'][:16]}"
    )
    if packed["left_out"]:
        report.add(
            f"  left out past {args.cache_pack_mib:g} MiB: {packed['left_out']} files (under "
            f"{', '.join(packed['left_out_tops'])}; rebuilt from source when the cache is used)"
        )
    _dump(args, "cache_pack.json", packed)


def cache_restore_section(args, report: Report) -> None:
    if not args.cache_from:
        raise ValueError("cache_restore needs --cache-from DIR (the parts cache_pack wrote)")
    cache = os.path.abspath(args.inductor_cache)
    restored = restore_cache(args.cache_from, cache)
    args.cache_restored = True
    report.add(
        f"  restored {restored['files']} files from {restored['parts']} part(s) of "
        f"{args.cache_from} into {cache}; sha256 {restored['sha256'][:16]}"
    )


def _device(args) -> str:
    from torchport.devices import get_adapter

    return str(get_adapter(args.device).device())


def _dump(args, name: str, data) -> None:
    import json

    with open(os.path.join(args.out, name), "w") as f:
        json.dump(data, f, indent=1, default=str)
