"""The path of one dashboard compare request to SQL, counted (docs/where-rules-live.md, "compare"):
the torchport modules ("rooms") on the call stack of every SQL statement the request runs,
and the store calls the code outside the store makes.

Builds a small knowledge base (two runs of ``--cases`` cases x 2 modes, tests/synthetic_kb.py),
asks the ASGI app in-process for ``/compare?a=A&b=B`` (Starlette's TestClient) twice (the
second look is the one the page's memo keeps), and follows the calls of each with a profile
hook on every thread.

    python benchmarks/compare_path.py
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]
from starlette.testclient import TestClient  # noqa: E402
from tests.synthetic_kb import case_ids, fill  # noqa: E402

from torchport.interfaces.web.app import create_app  # noqa: E402
from torchport.kb import open_store  # noqa: E402

STORE_ROOMS = ("torchport.records.", "torchport.kb.")
SQL_CALLS = {"execute", "executemany", "fetchone", "fetchall", "stream"}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--db", default=None, help="A knowledge base filled before (kept).")
    args = parser.parse_args(argv)
    db = args.db or os.path.join(tempfile.mkdtemp(prefix="compare-path-"), "kb.db")
    if not os.path.exists(db):
        fill(db, 2, case_ids(args.cases), 1000)
    with open_store(db, write=False) as store:
        listed = store.list_runs() if hasattr(store, "list_runs") else store.runs()  # (A/B)
        run_ids = [run["id"] for run in reversed(listed)][-2:]
    with open_store(db, write=False) as store:
        client = TestClient(create_app(store), base_url="http://localhost")
        client.get("/")  # the app started; its first request's imports are not the compare's
        url = f"/compare?a={run_ids[0]}&b={run_ids[1]}"
        first = follow(client, url)
        again = follow(client, url)  # the memo's second look: the runs are as they were
    print(f"GET {url}")
    for words, (rooms, store_calls) in (("", first), (" (a second look)", again)):
        print(f"rooms from the dashboard to SQL{words}: {len(rooms)}: {', '.join(sorted(rooms))}")
        print(
            f"store calls from outside the store{words}: {len(store_calls)}: "
            + ", ".join(store_calls)
        )


def follow(client: TestClient, url: str) -> tuple[set[str], list[str]]:
    """GET ``url``; the rooms on the stack of its SQL statements and its store calls."""
    rooms: set[str] = set()
    store_calls: list[str] = []

    def stack(frame) -> list[str]:
        names = []
        while frame is not None:
            name = frame.f_globals.get("__name__", "")
            if name.startswith("torchport."):
                names.append(name)
            frame = frame.f_back
        return names

    def hook(frame, event, arg):
        if event == "call":
            name = frame.f_globals.get("__name__", "")
            if name.startswith("torchport."):
                caller = frame.f_back.f_globals.get("__name__", "") if frame.f_back else ""
                method = frame.f_code.co_name
                if method == "wrapper" and "method" in frame.f_locals:  # records/sql_common guarded
                    method = frame.f_locals["method"].__name__
                if (
                    name.startswith(STORE_ROOMS)
                    and not caller.startswith(STORE_ROOMS)
                    and type(frame.f_locals.get("self")).__name__.endswith("Store")
                    and not method.startswith("_")
                ):
                    store_calls.append(method)
        elif event == "c_call" and getattr(arg, "__name__", "") in SQL_CALLS:
            rooms.update(stack(frame))

    threading.setprofile(hook)
    sys.setprofile(hook)
    try:
        response = client.get(url)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    assert response.status_code == 200, (response.status_code, response.text[:500])
    return rooms, store_calls


if __name__ == "__main__":
    main()
