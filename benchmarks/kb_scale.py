"""The knowledge base at the field's volume: 1 000 000 results, then every read command timed
end to end with the installed ``torchport`` script.

Fills a knowledge base through the store (``Store.add_results``, one transaction per batch:
a commit per result costs a disk sync each; the one-by-one rate is measured too and printed)
with synthetic results written through the real schema: RUNS runs (CPU and CUDA, five
releases) x CASES cases (the hf suite's real ids, then ``hf/<type>-<n>`` variants) x 2 modes,
with realistic statuses, error messages, tracebacks, metrics, host-op tables and run-to-run
changes. Then each command runs REPEATS times (after one warm-up) as a user runs it, its wall
time taken around the process and its peak resident set from ``/usr/bin/time -v``. A few
figures are also taken inside the store (search first page p95).

    python benchmarks/kb_scale.py --db /tmp/kb_scale.db --out docs/results/kb_scale.txt
    python benchmarks/kb_scale.py --db postgresql://postgres@/kb_scale?host=/tmp/pg&port=55432 \
        --out docs/results/kb_scale_pg.txt

With a PostgreSQL URL the database is dropped and created again on its server (the URL's user
must be allowed to), the one-by-one rate and the import use scratch databases beside it, and
the size is the server's pg_database_size.

The machine is shared: the 1-minute load average is printed next to every figure.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _report import emit  # noqa: E402

from torchport.records import open_store  # noqa: E402

TORCHPORT = os.path.join(os.path.dirname(sys.executable), "torchport")
MODES = ("eager", "compile")
OPS = ("cumsum",) * 7 + (
    "sort",
    "flip",
    "_index_put_impl_",
    "nonzero",
    "unique",
    "searchsorted",
    "bincount",
    "repeat_interleave",
    "masked_scatter",
    "linalg_eigh",
    "polar",
    "istft",
)
FAMILIES = ("dense", "moe", "hybrid", "ssm", "multimodal", "encoder")
TRACE_FRAMES = (
    '  File "/opt/torchport/src/torchport/execution/ladder.py", line {n}, in run_stage\n'
    "    value = fn()\n"
    '  File "/opt/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1775, '
    "in _call_impl\n    return forward_call(*args, **kwargs)\n"
    '  File "/opt/venv/lib/python3.11/site-packages/transformers/models/{arch}/modeling_{arch}'
    '.py", line {m}, in forward\n    hidden_states = self.mlp(hidden_states)\n'
)


def _case_ids(n_cases: int) -> list[str]:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    types = sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    ids = [f"hf/{t}" for t in types]
    k = 0
    while len(ids) < n_cases:
        ids.extend(f"hf/{t}-{k}" for t in types[: n_cases - len(ids)])
        k += 1
    return ids[:n_cases]


def _seed(*parts) -> int:
    return int(hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=8).hexdigest(), 16)


def _failure(rng: random.Random, arch: str, mode: str) -> tuple[str, str, str, str]:
    """(status, stage, error type, message), in proportions like a real hf sweep's."""
    op = rng.choice(OPS)
    roll = rng.random()
    if roll < 0.30:
        return (
            "eager_fail",
            "run",
            "NotImplementedError",
            f"Could not run 'aten::{op}' with arguments from the 'neuron' backend. This "
            "could be because the operator doesn't exist for this backend",
        )
    if roll < 0.42:
        a, b = rng.choice((2, 4, 8)), rng.choice((16, 32, 64, 128))
        return (
            "eager_fail",
            "run",
            "RuntimeError",
            f"shape '[{a}, {b}, -1]' is invalid for input of size {a * b * 3 + 1}",
        )
    if roll < 0.52 and mode == "compile":
        return (
            "compile_fail",
            "compile",
            "BackendCompilerFailed",
            f"backend='inductor' raised:\nLoweringException: NotImplementedError: "
            f"aten.{op}.default",
        )
    if roll < 0.60 and mode == "compile":
        return (
            "compiled_run_fail",
            "compiled_run",
            "RuntimeError",
            f"Expected all tensors to be on the same device, but found at least two "
            f"devices, cpu and neuron:{rng.randint(0, 7)}",
        )
    if roll < 0.70:
        layer = rng.randint(0, 3)
        return (
            "accuracy_fail",
            "parity",
            "AccuracyError",
            f"outside tolerance: grad.model.layers.{layer}.mlp.down_proj.weight max rel "
            f"err {rng.uniform(1e-3, 1e-1):.2e}",
        )
    if roll < 0.80:
        heads = rng.choice((3, 5, 7))
        return (
            "build_fail",
            "build",
            "ValueError",
            f"{arch} requires num_key_value_heads ({heads}) to divide num_attention_heads (4)",
        )
    if roll < 0.85:
        return "timeout", "run", "Timeout", f"worker ran past {rng.choice((300, 600))} s"
    if roll < 0.92:
        return (
            "oom",
            "run",
            "OutOfMemoryError",
            f"Out of memory: tried to allocate {rng.randint(64, 4096)} MiB",
        )
    return "crash", "run", "Crash", f"worker died: signal {rng.choice((6, 11))}"


def _result(case: str, mode: str, run_index: int, device: str) -> dict:
    base = random.Random(_seed(case, mode))  # what the case is, in every run
    rng = random.Random(_seed(case, mode, run_index))  # what changed in this run
    arch = case.split("/", 1)[1].split("-", 1)[0]
    findings: dict = {"tags": [FAMILIES[_seed(arch) % len(FAMILIES)]]}
    fails = base.random() < 0.25
    if rng.random() < 0.03:  # a transition between releases or devices
        fails = not fails
    if base.random() < 0.01:
        return {
            "case": case,
            "mode": mode,
            "status": "skip",
            "findings": findings,
            "error": {"type": "Skip", "message": f"needs {base.choice((80, 160))} GB"},
        }
    if fails:
        status, stage, kind, message = _failure(base if rng.random() < 0.9 else rng, arch, mode)
        trace = (
            "Traceback (most recent call last):\n"
            + "".join(TRACE_FRAMES.format(n=100 + i, m=200 + 37 * i, arch=arch) for i in range(2))
            + f"{kind}: {message}\n"
        )
        return {
            "case": case,
            "mode": mode,
            "status": status,
            "stage": stage,
            "findings": findings,
            "error": {"type": kind, "message": message, "traceback": trace},
        }
    median = (
        base.lognormvariate(1.5, 1.0)
        * (0.12 if device == "cuda" else 1.0)
        * (1.0 - 0.02 * (run_index // 2))
        * rng.uniform(0.97, 1.03)
    )
    spread = base.uniform(0.02, 0.15)
    metrics = {
        "perf_median_ms": median,
        "perf_p10_ms": median * (1 - spread / 2),
        "perf_p90_ms": median * (1 + spread / 2),
        "perf_cv": spread / 2.56,
        "perf_samples": base.randint(20, 200),
        "perf_peak_bytes": base.randint(1, 64) << 24,
        "parity_max_rel_err": base.uniform(1e-7, 1e-5),
        "parity_rmse_ratio": base.uniform(0.5, 2.0) * (20 if rng.random() < 0.005 else 1),
        "parity_cosine": 1.0 - base.uniform(0, 1e-7),
    }
    if mode == "compile":
        metrics.update(
            compile_cold_first_step_s=base.uniform(2, 60) * rng.uniform(0.9, 1.3),
            compile_warm_first_step_s=base.uniform(0.2, 4),
            perf_speedup=base.uniform(0.8, 2.5),
        )
    grade = "on_device"
    if base.random() < 0.10 or rng.random() < 0.01:
        op = base.choice(OPS)
        grade = "fallback"
        findings["fallback_ops"] = {f"aten.{op}.default": base.randint(1, 4)}
        findings["ops"] = [
            {"op": f"aten.{op}.default", "device": "cpu", "count": 2, "fallback": True},
            {"op": "aten.mm.default", "device": device, "count": 12, "fallback": False},
        ]
    return {
        "case": case,
        "mode": mode,
        "status": "pass",
        "grade": grade,
        "metrics": metrics,
        "findings": findings,
    }


def fill(path: str, runs: int, cases: list[str], batch: int) -> list[str]:
    run_ids = []
    with open_store(path, write=True) as store:
        for r in range(runs):
            device = ("cpu", "cuda")[r % 2]
            release = f"2.{9 + r // 2}"
            run_id = f"{device}-{release}"
            env = {
                "torch": f"{release}.0",
                "device": device,
                "python": "3.11.9",
                "device_name": "synthetic " + device,
                "torchport": "0.1.0",
            }
            store.create_run(
                run_id=run_id,
                command=f"torchport run --suite hf --device {device} --label release={release}",
                suite="hf",
                device=device,
                config={"modes": list(MODES), "device": device},
                plan=[[c, m] for c in cases for m in MODES],
                labels={"release": release},
            )
            store.set_environment(run_id, store.put_environment(env))
            items = ((c, m) for c in cases for m in MODES)
            while chunk := [_result(c, m, r, device) for c, m in itertools.islice(items, batch)]:
                store.add_results(run_id, chunk)
            store.finish_run(run_id, "complete")
            run_ids.append(run_id)
            print(f"  filled {run_id}", file=sys.stderr, flush=True)
    return run_ids


def _is_pg(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def _pg_admin(url: str):
    """A connection to the maintenance database of ``url``'s server, and ``url``'s database."""
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    parts = urlsplit(url)
    admin = urlunsplit(parts._replace(path="/postgres"))
    return psycopg.connect(admin, autocommit=True), parts.path.lstrip("/")


def _pg_url(url: str, name: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    return urlunsplit(urlsplit(url)._replace(path="/" + name))


def reset(url: str) -> None:
    """An empty knowledge base at ``url``: the file removed, or the database made again."""
    if not _is_pg(url):
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(url + suffix):
                os.unlink(url + suffix)
        return
    conn, name = _pg_admin(url)
    with conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')


def size_bytes(url: str) -> int:
    if _is_pg(url):
        conn, name = _pg_admin(url)
        with conn:
            return int(conn.execute("SELECT pg_database_size(%s)", (name,)).fetchone()[0])
    wal = url + "-wal"
    return os.path.getsize(url) + (os.path.getsize(wal) if os.path.exists(wal) else 0)


@contextlib.contextmanager
def scratch(url: str, name: str):
    """A new knowledge base beside ``url`` (a file in a temporary folder, or a database on the
    same server), removed afterwards."""
    if _is_pg(url):
        other = _pg_url(url, f"{_pg_admin(url)[1]}_{name}")
        reset(other)
        try:
            yield other
        finally:
            conn, db = _pg_admin(other)
            with conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        return
    folder = tempfile.mkdtemp(prefix=f"kb-{name}-")
    try:
        yield os.path.join(folder, "kb.db")
    finally:
        shutil.rmtree(folder)


def engine_line(url: str) -> str:
    if _is_pg(url):
        conn, _ = _pg_admin(url)
        with conn:
            return "PostgreSQL " + conn.execute("SHOW server_version").fetchone()[0]
    return f"sqlite {__import__('sqlite3').sqlite_version}"


def one_by_one_rate(url: str, cases: list[str], n: int = 300) -> float:
    """Results per second through ``add_result`` (a commit each), on a fresh knowledge base."""
    with scratch(url, "one") as fresh:
        with open_store(fresh, write=True) as store:
            store.create_run(
                run_id="r", command="c", suite="hf", device="cpu", config={}, plan=[], labels={}
            )
            items = [_result(c, "eager", 0, "cpu") for c in cases[:n]]
            start = time.perf_counter()
            for item in items:
                store.add_result("r", item)
            took = time.perf_counter() - start
            store.finish_run("r", "complete")
            return n / took


_RSS = re.compile(r"Maximum resident set size \(kbytes\): (\d+)")


def run_command(args: list[str], cwd: str) -> tuple[float, int, int, int]:
    """(wall s, peak RSS bytes, stdout lines, exit code) of one run of the installed script."""
    start = time.perf_counter()
    proc = subprocess.run(
        ["/usr/bin/time", "-v", TORCHPORT, *args], capture_output=True, text=True, cwd=cwd
    )
    wall = time.perf_counter() - start
    rss = int(_RSS.search(proc.stderr).group(1)) * 1024
    return wall, rss, proc.stdout.count("\n"), proc.returncode


def time_command(label: str, args: list[str], repeats: int, cwd: str) -> list:
    run_command(args, cwd)  # warm-up: the file's pages in the OS cache, as for a user's
    samples, loads = [], []
    for _ in range(repeats):
        samples.append(run_command(args, cwd))
        loads.append(os.getloadavg()[0])
    walls = [s[0] for s in samples]
    print(f"  {label}: {statistics.median(walls):.2f} s", file=sys.stderr, flush=True)
    return [
        label,
        statistics.median(walls),
        max(walls),
        max(s[1] for s in samples),
        samples[-1][2],
        samples[-1][3],
        statistics.median(loads),
    ]


def store_figures(path: str, run_a: str, run_b: str, hf_ids: list[str]) -> list[str]:
    """Figures inside the store (no process start, no rendering)."""
    lines = []
    with open_store(path, write=False) as store:
        times = []
        terms = (
            "cumsum",
            "llama",
            "signal",
            "NotImplementedError",
            "memory",
            "neuron backend",
            "qwen3",
            "tolerance",
            "shape invalid",
            "index_put_impl_",
        )
        for _ in range(5):
            for term in terms:
                start = time.perf_counter()
                store.search(term, limit=50)
                times.append(time.perf_counter() - start)
        times.sort()
        p95 = times[int(0.95 * (len(times) - 1))]
        lines.append(
            f"search first page (50, ranked) inside the store: p50 "
            f"{statistics.median(times) * 1e3:.1f} ms, p95 {p95 * 1e3:.1f} ms over "
            f"{len(times)} queries ({len(terms)} terms x 5)"
        )
        start = time.perf_counter()
        total = store.count_search("cumsum")
        took_ms = 1e3 * (time.perf_counter() - start)
        lines.append(f"count of 'cumsum' matches: {total} in {took_ms:.1f} ms")
        start = time.perf_counter()
        found = store.last_status_by_case(cases=hf_ids)
        lines.append(
            f"last status of the {len(hf_ids)} hf suite cases (2 indexed lookups "
            f"each): {1e3 * (time.perf_counter() - start):.1f} ms, {len(found)} found"
        )
        from torchport.views.compare import compare_runs

        start = time.perf_counter()
        cmp = compare_runs(store, run_a, run_b)
        lines.append(
            f"compare {run_a} {run_b} inside the store: "
            f"{time.perf_counter() - start:.2f} s ({cmp.common} pairs, "
            f"{len(cmp.newly_failing)} newly failing, {len(cmp.newly_passing)} newly "
            f"passing, {len(cmp.perf)} step-time changes beyond noise)"
        )
    return lines


def main(argv=None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", default=os.path.join(tempfile.gettempdir(), "kb_scale.db"))
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--cases", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=5000, help="Results per transaction.")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--reuse", action="store_true", help="Keep an existing --db.")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    cases = _case_ids(args.cases)
    hf_ids = cases[:196]
    lines = [
        f"$ python benchmarks/kb_scale.py {' '.join(argv or sys.argv[1:])}",
        f"{os.cpu_count()} logical cores, shared with other engineers' jobs; "
        f"{engine_line(args.db)}; load average (1 min) at start "
        f"{os.getloadavg()[0]:.2f}",
    ]
    rate = one_by_one_rate(args.db, cases)
    lines.append(
        f"add_result one by one (a commit each): {rate:.0f} results/s, so 1 000 000 "
        f"would take {1e6 / rate / 3600:.1f} h; the fill uses add_results, "
        f"{args.batch} per transaction"
    )
    if not args.reuse:
        reset(args.db)
        start = time.perf_counter()
        run_ids = fill(args.db, args.runs, cases, args.batch)
        took = time.perf_counter() - start
        n = args.runs * len(cases) * len(MODES)
        lines.append(
            f"fill: {n} results in {args.runs} runs, {took:.0f} s "
            f"({n / took:.0f} results/s), load average at end "
            f"{os.getloadavg()[0]:.2f}"
        )
    else:
        with open_store(args.db, write=False) as store:
            run_ids = [r["id"] for r in reversed(store.list_runs())]
        lines.append("fill: reused the existing file")
    size = size_bytes(args.db)
    with open_store(args.db, write=False) as store:
        total = store.count_results()
    lines.append(f"knowledge base: {total} results, {size / 2**30:.2f} GiB")
    run_a, run_b = run_ids[-3], run_ids[-1]  # the same device, two releases
    per_run = len(cases) * len(MODES)
    cwd = tempfile.mkdtemp(prefix="kb-scale-")
    db = ["--db", args.db]
    expected = os.path.join(cwd, "expected.json")
    exported = os.path.join(cwd, "run.jsonl")
    commands = [
        ("runs", ["runs", *db], args.repeats),
        ("search cumsum", ["search", "cumsum", *db], args.repeats),
        (
            "search cumsum --offset 10000",
            ["search", "cumsum", "--offset", "10000", *db],
            args.repeats,
        ),
        (f"show {run_b} (summary)", ["show", run_b, *db], args.repeats),
        (
            "results --case 'hf/llama-123*'",
            ["results", "--case", "hf/llama-123*", *db],
            args.repeats,
        ),
        (f"results --run {run_b} (first page)", ["results", "--run", run_b, *db], args.repeats),
        ("cases hf", ["cases", "hf", *db], 3),
        (f"compare {run_a} {run_b}", ["compare", run_a, run_b, *db], 3),
        (f"compare {run_a} {run_b} --json", ["compare", run_a, run_b, "--json", *db], 3),
        (f"baseline save {run_b}", ["baseline", "save", run_b, "-o", expected, *db], 3),
        (f"gate {run_b} --baseline", ["gate", run_b, "--baseline", expected, *db], 3),
        (f"export {run_b} ({per_run} results)", ["export", run_b, "-o", exported, *db], 3),
    ]
    rows = [time_command(label, argv_, repeats, cwd) for label, argv_, repeats in commands]
    # The suite listing alone (no knowledge base): what 'cases hf' costs before any lookup.
    empty = os.path.join(cwd, "none")
    os.makedirs(empty)
    rows.append(time_command("cases hf (no knowledge base)", ["cases", "hf"], 3, empty))
    # Writes on the big file: a note (the write open checks the file first), an import.
    rows.append(time_command(f"note {run_b} (write)", ["note", run_b, "bench note", *db], 1, cwd))
    with scratch(args.db, "import") as target:
        rows.append(
            [
                f"import ({per_run} results) into a new knowledge base",
                *_once(["import", exported, "--db", target], cwd),
            ]
        )
    lines.append("")
    lines.append("| command | median s | max s | peak RSS MB | output lines | exit | load |")
    lines.append("| --- | --- | --- | --- | --- | --- | --- |")
    for label, median, worst, rss, out_lines, code, load in rows:
        lines.append(
            f"| `{label}` | {median:.2f} | {worst:.2f} | {rss / 2**20:.0f} | "
            f"{out_lines} | {code} | {load:.1f} |"
        )
    lines.append("")
    lines.append(
        f"median and max of {args.repeats} timed runs after one warm-up (3 for the "
        "slower commands, 1 for writes), wall time around the process, peak RSS from "
        "/usr/bin/time -v; the gate holds a run to its own baseline (exit 0)"
    )
    lines.extend(store_figures(args.db, run_a, run_b, hf_ids))
    lines.append(f"load average (1 min) at end {os.getloadavg()[0]:.2f}")
    shutil.rmtree(cwd)
    emit(lines, args.out)


def _once(args: list[str], cwd: str) -> list:
    wall, rss, out_lines, code = run_command(args, cwd)
    return [wall, wall, rss, out_lines, code, os.getloadavg()[0]]


if __name__ == "__main__":
    main()
