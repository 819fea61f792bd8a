"""`torchport import` of a TorchCTS JSON report end to end: the installed script from another
folder (import, import again, runs, show, compare with a real ops run, bad input), the
dashboard's run and compare pages, and a Hypothesis fuzz of malformed and hostile reports,
each refused in one line with exit 2 and the knowledge base's bytes unchanged, or imported
whole and shown."""

from __future__ import annotations

import hashlib
import json
import shutil
from datetime import timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from tests.conftest import torchport
from tests.interfaces.inproc import invoke, one_line
from torchport.interfaces.web.app import create_app
from torchport.kb import open_store
from torchport.kb import torchcts as reader

DATA = Path(__file__).resolve().parents[1] / "data" / "torchcts"
REPORT = DATA / "simdev_report.json"
OPS_RUN = DATA / "simdev_ops_run.jsonl"
OPS_RUN_ID = "20261207-155441-f18a"
RUN_ID = "20261207-155028-cts" + hashlib.sha256(REPORT.read_bytes()).hexdigest()[:6]
LOCAL = "http://localhost"


def _ok(proc) -> str:
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def _refused(proc, needle: str) -> None:
    assert proc.returncode == 2, (proc.stdout[-2000:], proc.stderr[-2000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("torchport: error: "), proc.stderr
    assert needle in lines[0], lines[0]


def _sha(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A knowledge base holding the real ops run and the TorchCTS report, both imported by
    the installed script run from a folder outside the repository."""
    folder = tmp_path_factory.mktemp("ctscli")
    db = folder / "kb.db"
    shutil.copy(REPORT, folder / "report.json")
    out = _ok(torchport("import", "report.json", "--db", db, cwd=folder))
    assert out.splitlines() == [
        "TorchCTS report 'report.json' (simdev, torch 2.13.0+cpu): 22 tests ran (16 PASS, "
        "5 FAIL, 1 ERROR; 1 PASS within its usable tolerance only), 15 filtered (never ran) "
        "-> 24 results (16 pass, 5 accuracy_fail, 2 skip, 1 eager_fail)",
        f"added run {RUN_ID} (24 results)",
        "1 runs added, 0 already present, 0 notes added",
    ]
    _ok(torchport("import", OPS_RUN, "--db", db, cwd=folder))
    return folder, db


def test_the_same_report_again_is_skipped(base):
    folder, db = base
    before = _sha(db)
    again = _ok(torchport("import", "report.json", "--format", "torchcts", "--db", db, cwd=folder))
    assert f"run {RUN_ID} already present with the same content: skipped" in again
    assert _sha(db) == before


def test_runs_and_show_list_it_as_a_torchcts_run(base):
    folder, db = base
    runs = _ok(torchport("runs", "--db", db, cwd=folder))
    assert RUN_ID in runs and "source=torchcts" in runs
    shown = _ok(torchport("show", RUN_ID, "--db", db, cwd=folder))
    assert "suite torchcts  device simdev" in shown
    assert "Operator compatibility on simdev (9 ops)" in shown
    assert "24 results: 16 passed, 6 failed (accuracy 5, error 1), 2 skipped " in shown
    assert "(capability_not_declared 2)" in shown
    failed = _ok(
        torchport("results", "--run", RUN_ID, "--status", "accuracy_fail", "--db", db, cwd=folder)
    )
    assert "ops/exp/float32" in failed and "ops/add/float32" not in failed


def test_compare_with_a_torchport_ops_run(base):
    folder, db = base
    out = _ok(torchport("compare", OPS_RUN_ID, RUN_ID, "--db", db, cwd=folder))
    assert "compared 21 (case, mode) pairs recorded in both runs; 0 only in A, 3 only in B" in out
    assert "different suites (ops vs torchcts)" in out
    assert "Newly passing (1)" in out and "ops/logsumexp/bfloat16" in out
    assert "has no placement data" in out and "on the host in both" not in out
    data = json.loads(
        _ok(torchport("compare", OPS_RUN_ID, RUN_ID, "--json", "--db", db, cwd=folder))
    )
    assert data["transitions"] == {
        "pass": {"pass": 15},
        "accuracy_fail": {"accuracy_fail": 5, "pass": 1},
    }


def test_the_dashboard_shows_the_run_and_its_comparison(base):
    _, db = base
    with open_store(str(db), write=False) as store:
        client = TestClient(create_app(store), base_url=LOCAL)
        page = client.get(f"/runs/{RUN_ID}")
        assert page.status_code == 200
        assert "Operator compatibility on simdev" in page.text and "torchcts" in page.text
        twin = client.get(f"/runs/{RUN_ID}.json")
        assert twin.status_code == 200 and RUN_ID in twin.text
        compared = client.get(f"/compare?a={OPS_RUN_ID}&b={RUN_ID}")
        assert compared.status_code == 200 and "ops/logsumexp/bfloat16" in compared.text


BAD = {
    "not JSON": (b'{"metadata": nope', "is not JSON"),
    "cut off": (REPORT.read_bytes()[: len(REPORT.read_bytes()) // 2], "is not JSON"),
    "a list": (b'{"results": {}}', "has no 'metadata' and 'results'"),
    "unknown status": (
        json.dumps(
            {
                "metadata": {
                    "device_name": "x",
                    "pytorch_version": "2",
                    "timestamp": "2026-01-01T00:00:00Z",
                },
                "results": {"t::a": {"status": "MAYBE"}},
            }
        ).encode(),
        "has the status 'MAYBE'",
    ),
}


_DEEP: dict = {"device_name": "x", "pytorch_version": "2", "timestamp": "2026-01-01T00:00:00Z"}
_NEST: object = 1
for _ in range(40):
    _NEST = {"a": _NEST}
BAD["deep metadata"] = (
    json.dumps(
        {"metadata": dict(_DEEP, deep=_NEST), "results": {"t::a": {"status": "PASS"}}}
    ).encode(),
    "has metadata nested deeper than 16 levels",
)


@pytest.mark.parametrize("bad", list(BAD))
def test_bad_input_is_one_line_exit_2_and_the_base_unchanged(base, tmp_path, bad):
    _, db = base
    content, needle = BAD[bad]
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    before = _sha(db)
    _refused(torchport("import", path, "--db", db, cwd=tmp_path), needle)
    assert _sha(db) == before


def test_a_huge_report_is_refused_before_it_is_read(base, tmp_path):
    _, db = base
    path = tmp_path / "huge.json"
    with open(path, "wb") as f:  # sparse: no disk written
        f.write(b'{"metadata": {}')
        f.truncate(reader.MAX_BYTES + 1)
    before = _sha(db)
    _refused(
        torchport("import", path, "--db", db, cwd=tmp_path),
        f"past the {reader.MAX_BYTES // 2**20} MiB",
    )
    assert _sha(db) == before
    export = tmp_path / "new.db"
    _refused(
        torchport("import", OPS_RUN, "--format", "torchcts", "--db", export, cwd=tmp_path),
        "is not JSON",
    )
    assert not export.exists()


# -- fuzz: malformed and hostile reports, in this process -----------------------------------
SEED = reader._document(str(REPORT))[1]
SMALL = dict(
    SEED,
    results=dict(list(SEED["results"].items())[:3] + list(SEED["results"].items())[-2:]),
    skips=dict(list(SEED["skips"].items())[:2]),
)
HOSTILE_TEXT = st.text(
    alphabet=st.sampled_from(list('ab/:[]-.\x00\x1b\u202e\n\r\t"\\') + ["\ud800", "é", "∑"]),
    max_size=20,
)
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | HOSTILE_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(HOSTILE_TEXT, inner, max_size=3),
    max_leaves=8,
)


def _paths(value, here=()):
    """Every place in a JSON tree: the path of keys and indexes to it."""
    yield here
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*here, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*here, i))


PLACES = list(_paths(SMALL))[1:]


def _replaced(tree, path, new):
    if not path:
        return new
    copy = dict(tree) if isinstance(tree, dict) else list(tree)
    copy[path[0]] = _replaced(tree[path[0]], path[1:], new)
    return copy


def _import_and_hold(tmp_path, content: bytes, name: str) -> None:
    """Imported whole (exit 0, the run shown) or refused in one line (exit 2, no base made)."""
    path = tmp_path / f"{name}.json"
    path.write_bytes(content)
    db = tmp_path / f"{name}.db"
    if db.exists():
        db.unlink()
    got = invoke("import", path, "--format", "torchcts", "--db", db)
    if got.code == 0:
        assert "1 runs added" in got.stdout or "already present" in got.stdout
        shown = invoke("show", "--db", db)
        assert shown.code == 0, shown.stderr[-2000:]
    else:
        one_line(got)
        assert not db.exists()


FUZZ = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@FUZZ
@given(place=st.sampled_from(PLACES), value=JSON_VALUES)
def test_fuzz_any_field_replaced_by_any_value(tmp_path, place, value):
    doc = _replaced(SMALL, place, value)
    _import_and_hold(
        tmp_path, json.dumps(doc, allow_nan=True).encode("utf-8", "surrogatepass"), "field"
    )


@FUZZ
@given(cut=st.integers(min_value=0, max_value=len(json.dumps(SMALL)) - 1))
def test_fuzz_a_report_cut_anywhere_is_refused(tmp_path, cut):
    content = json.dumps(SMALL).encode()[:cut]
    path = tmp_path / "cut.json"
    path.write_bytes(content)
    one_line(invoke("import", path, "--format", "torchcts", "--db", tmp_path / "cut.db"))
    assert not (tmp_path / "cut.db").exists()


@FUZZ
@given(node=HOSTILE_TEXT.filter(bool), message=HOSTILE_TEXT, op=HOSTILE_TEXT)
def test_fuzz_hostile_ids_and_messages_are_kept_or_refused(tmp_path, node, message, op):
    record = dict(
        next(iter(SMALL["results"].values())), status="ERROR", error_message=message, op=op
    )
    doc = dict(SMALL, results={node: record}, skips={})
    _import_and_hold(tmp_path, json.dumps(doc).encode("utf-8", "surrogatepass"), "hostile")


@FUZZ
@given(
    keys=st.lists(HOSTILE_TEXT, max_size=4),
    strings=st.lists(HOSTILE_TEXT, max_size=4),
    payload=JSON_VALUES,
)
def test_fuzz_compact_tables_and_payloads(tmp_path, keys, strings, payload):
    doc = {
        "format": "torchcts_compact_results",
        "format_version": 1,
        "key_table": keys,
        "string_table": strings,
        "payload": payload,
    }
    _import_and_hold(tmp_path, json.dumps(doc).encode("utf-8", "surrogatepass"), "compact")


@FUZZ
@given(
    when=st.datetimes(),
    offset_min=st.integers(min_value=-1439, max_value=1439),
    elapsed=st.none() | st.floats(min_value=-1e9, max_value=1e12),
    tested=st.datetimes(),
)
def test_fuzz_any_time_and_duration(tmp_path, when, offset_min, elapsed, tested):
    zone = timezone(timedelta(minutes=offset_min))
    first, *rest = SMALL["results"].items()
    results = dict([(first[0], dict(first[1], last_tested=tested.isoformat())), *rest])
    meta = dict(SMALL["metadata"], timestamp=when.replace(tzinfo=zone).isoformat())
    doc = dict(SMALL, metadata=dict(meta, elapsed_sec=elapsed), results=results)
    _import_and_hold(tmp_path, json.dumps(doc).encode(), "time")


def test_figures_that_are_not_finite_never_reach_a_page_as_nan(tmp_path):
    """JSON has no NaN: the dashboard's JSON twin refuses one, so none may be stored."""
    (node, record), *_ = SMALL["results"].items()
    doc = dict(
        SMALL,
        metadata=dict(SMALL["metadata"], elapsed_sec=float("nan"), odd=[float("inf")]),
        results={node: dict(record, status="PASS", maxerr=float("nan"), cosim=float("-inf"))},
        skips={},
    )
    path = tmp_path / "nan.json"
    path.write_text(json.dumps(doc, allow_nan=True))
    db = tmp_path / "kb.db"
    assert invoke("import", path, "--db", db).code == 0
    with open_store(str(db), write=False) as store:
        (run,) = store.runs()
        (result,) = store.results(run_id=run["id"])
        assert run["config"]["torchcts"]["metadata"]["odd"] == ["inf"]
        assert "maxerr" not in result["findings"]["tests"][0]
        twin = TestClient(create_app(store), base_url=LOCAL).get(f"/runs/{run['id']}.json")
    assert twin.status_code == 200, twin.text[:500]
