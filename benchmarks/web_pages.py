"""Server time of every web page on the million-result knowledge base.

Reuses (or fills, with ``tests.synthetic_kb.fill``) the knowledge base of
``benchmarks/kb_scale.py``: 10 runs x 50 000 cases x 2 modes of synthetic results written
through the real schema. Each page (HTML and its JSON twin) is requested through the ASGI
application in-process (Starlette's TestClient: routing, store reads, views and rendering; no
socket, no browser), once to warm the file's pages into the OS cache, then REPEATS times; median
and max are printed.

    python benchmarks/web_pages.py --db /tmp/kb_scale.db --out docs/results/web_pages.txt

The machine is shared: the 1-minute load average is printed next to every figure.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]
from _report import emit  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402
from tests.synthetic_kb import case_ids, fill, whole_run_kb  # noqa: E402

from torchport.interfaces.web import pages as pages_module  # noqa: E402
from torchport.interfaces.web.app import create_app  # noqa: E402
from torchport.kb import open_store  # noqa: E402

TARGET_MS = 300.0


def pages(run_a: str, run_b: str, case: str) -> list[tuple[str, str]]:
    """(label, path) of every page kind, on the knowledge base's own runs and cases."""
    return [
        ("runs", "/"),
        ("runs, filtered (device=cuda)", "/?device=cuda"),
        (f"run {run_b} (summary, first page)", f"/runs/{run_b}"),
        (f"run {run_b} (summary, page at offset 50000)", f"/runs/{run_b}?offset=50000"),
        (f"case {case}", f"/cases/{case}"),
        ("op cumsum on the host", "/ops/cumsum"),
        ("op cumsum, page at offset 10000", "/ops/cumsum?offset=10000"),
        ("search cumsum", "/search?q=cumsum"),
        ("search cumsum, page at offset 10000", "/search?q=cumsum&offset=10000"),
        (
            f"compare {run_a} {run_b}, looked at again (the server's memo)",
            compare_path(run_a, run_b),
        ),
    ]


def compare_path(run_a: str, run_b: str) -> str:
    return f"/compare?a={run_a}&b={run_b}"


def row(label: str, path: str, client: TestClient, repeats: int) -> str:
    html, status, size = time_page(client, path, repeats)
    js, _, _ = time_page(client, json_path(path), repeats)
    return table_row(label, path, html, js, size, status)


def first_look_row(label: str, paths: list[str], client: TestClient) -> str:
    """A comparison's first request: each path a pair of runs this server has not compared
    yet (its memo misses; templates and the file's pages are warm from the earlier rows), the
    first half as HTML, the second as JSON."""
    half = len(paths) // 2
    html = [first_request(client, path) for path in paths[:half]]
    js = [first_request(client, json_path(path)) for path in paths[half:]]
    (_, status, size), *_ = html
    shown = paths[0].replace(paths[0].partition("?")[2].partition("&")[0], "a=A")
    return table_row(label, shown, [ms for ms, _, _ in html], [ms for ms, _, _ in js], size, status)


def first_request(client: TestClient, path: str) -> tuple[float, int, int]:
    """Wall time in ms of one request, its status and its size."""
    start = time.perf_counter()
    response = client.get(path)
    return 1e3 * (time.perf_counter() - start), response.status_code, len(response.content)


def table_row(label: str, path: str, html: list, js: list, size: int, status: int) -> str:
    worst = max(statistics.median(html), statistics.median(js))
    print(f"  {label}: {statistics.median(html):.0f} ms", file=sys.stderr, flush=True)
    return (
        f"| {label} (`{path}`) | {statistics.median(html):.0f} | {max(html):.0f} | "
        f"{statistics.median(js):.0f} | {max(js):.0f} | {size} | {status} | "
        f"{'yes' if worst < TARGET_MS else 'NO'} | {os.getloadavg()[0]:.1f} |"
    )


def time_page(client: TestClient, path: str, repeats: int) -> tuple[list[float], int, int]:
    """Wall times in ms of ``repeats`` requests (after one warm-up), the status and the size."""
    response = client.get(path)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        response = client.get(path)
        samples.append(1e3 * (time.perf_counter() - start))
    return samples, response.status_code, len(response.content)


def next_link(client: TestClient, path: str) -> str:
    """The path a page's next link leads to."""
    return client.get(json_path(path)).json()["paging"]["next"]


def compare_ms(store, run_a: str, run_b: str, limit: int | None) -> float:
    from torchport.views.compare import compare_runs

    samples = []
    for _ in range(3):
        start = time.perf_counter()
        compare_runs(store, run_a, run_b, limit=limit)
        samples.append(1e3 * (time.perf_counter() - start))
    return statistics.median(samples)


def json_path(path: str) -> str:
    base, _, query = path.partition("?")
    return (base.rstrip("/") or "/runs") + ".json" + (f"?{query}" if query else "")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", default=os.path.join(tempfile.gettempdir(), "kb_scale.db"))
    parser.add_argument("--runs", type=int, default=10, help="Only when the file is filled here.")
    parser.add_argument("--cases", type=int, default=50_000, help="Likewise.")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    lines = [
        f"$ python benchmarks/web_pages.py {' '.join(argv or sys.argv[1:])}",
        f"{os.cpu_count()} logical cores, shared with other engineers' jobs; load average "
        f"(1 min) at start {os.getloadavg()[0]:.2f}",
    ]
    if not os.path.exists(args.db):
        start = time.perf_counter()
        fill(args.db, args.runs, case_ids(args.cases), 5000)
        lines.append(f"filled {args.db} in {time.perf_counter() - start:.0f} s")
    with open_store(args.db, write=False) as store:
        total = store.results(count=True)
        runs = store.runs()
        lines.append(f"knowledge base {args.db}: {total} results in {len(runs)} runs")
        run_b, run_a = runs[0]["id"], runs[2]["id"]  # the newest run and the previous release
        case = store.results(run_id=run_b, limit=1, offset=123)[0]["case"]
        client = TestClient(create_app(store), base_url="http://localhost")
        lines += [
            "",
            "| page | HTML median ms | HTML max ms | JSON median ms | JSON max ms | bytes (HTML) "
            "| status | < 300 ms | load |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for label, path in pages(run_a, run_b, case):
            lines.append(row(label, path, client, args.repeats))
        # First looks: each older run against the newest, one pair per request
        firsts = [compare_path(r["id"], run_b) for r in runs[3:9]]
        label = f"compare A {run_b}, first look (A: 6 other runs, each compared once)"
        lines.append(first_look_row(label, firsts, client))
        deeper = [p + "&list=perf&offset=100" for p in firsts]
        label = f"compare A {run_b}, one list's own page (perf, rows 101-200), first look"
        lines.append(first_look_row(label, deeper, client))
        # Its page 101 as a reader reaches it: the next link of page 100 (read after the last
        # row shown); page 100 itself, reached by offset, is set-up and not timed.
        deepest = [next_link(client, p.replace("offset=100", "offset=9900")) for p in deeper]
        label = f"compare A {run_b}, one list's page 101 (perf, rows 10001-10100), first look"
        lines.append(first_look_row(label, deepest, client))
        inside = {limit: compare_ms(store, run_a, run_b, limit) for limit in (30, None)}
    with tempfile.TemporaryDirectory() as folder:
        size = pages_module.FULL_VIEWS_UP_TO
        with open_store(whole_run_kb(os.path.join(folder, "w.db"), size), write=False) as store:
            label = f"run of {size} results, every view (a separate file)"
            lines.append(
                row(
                    label,
                    "/runs/whole",
                    TestClient(create_app(store), base_url="http://localhost"),
                    args.repeats,
                )
            )
    lines += [
        "",
        f"compare {run_a} {run_b} inside the store and views.compare (no page), median of 3:"
        f" the first 30 rows of each list {inside[30]:.0f} ms, every row {inside[None]:.0f} ms",
    ]
    lines += [
        "",
        f"median and max of {args.repeats} requests after one warm-up, through the ASGI app "
        "in-process (TestClient): routing, store reads, views, templates; no socket or browser;"
        " the compare page's first look: 3 requests for HTML and 3 for JSON, each comparing"
        " another pair of 100 000-result runs (the server's memo misses)",
        f"load average (1 min) at end {os.getloadavg()[0]:.2f}",
    ]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
