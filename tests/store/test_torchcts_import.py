"""A TorchCTS JSON report imported as one run (kb/torchcts.py, records/torchcts.py): the real
report of a simdev run (tests/data/torchcts/README.md says how it was made and trimmed) read
in TorchCTS's compact form, its plain form and through its ``latest`` reference; its tests'
statuses mapped, reasons, messages and environment kept; the same report imported once; and
compared with a real torchport ``ops`` run of the same ops on the same device."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from torchport.kb import open_store
from torchport.kb import torchcts as reader
from torchport.kb.exchange import import_from, source_format
from torchport.views.compare import compare_runs

DATA = Path(__file__).resolve().parents[1] / "data" / "torchcts"
REPORT = DATA / "simdev_report.json"
OPS_RUN = DATA / "simdev_ops_run.jsonl"  # `torchport export` of a real ops run (README.md)
OPS_RUN_ID = "20261207-155441-f18a"
RUN_ID = "20261207-155028-cts" + hashlib.sha256(REPORT.read_bytes()).hexdigest()[:6]


def plain(path: Path = REPORT) -> dict:
    """The report as one plain object (what TorchCTS writes before its compact form)."""
    return reader._document(str(path))[1]


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    db = str(tmp_path_factory.mktemp("cts") / "kb.db")
    with open_store(db, write=True) as store:
        report = import_from(store, str(REPORT))
        ops = import_from(store, str(OPS_RUN))
    assert list(ops.added) == [OPS_RUN_ID]
    return db, report


def _results(db: str, run_id: str) -> dict[str, dict]:
    with open_store(db, write=False) as store:
        return {r["case"]: r for r in store.results(run_id=run_id)}


def test_the_real_report_reads_as_torchcts_wrote_it():
    report = reader.read(str(REPORT))
    assert report.counts == {"PASS": 16, "FAIL": 5, "ERROR": 1, "FILTERED": 15}
    assert report.metadata["device_name"] == "simdev"
    assert report.metadata["pytorch_version"] == "2.13.0+cpu"
    assert reader.run_id(report) == RUN_ID  # its finish time and the start of its sha256
    assert source_format(str(REPORT)) == "torchcts"
    assert source_format(str(OPS_RUN)) == "torchport"


def test_its_tests_become_one_run_with_statuses_mapped(imported):
    db, report = imported
    assert report.added == {RUN_ID: 24}  # 21 op x dtype cases, sparse.sampled_addmm, H x 2
    assert report.origin["tests"] == {"PASS": 16, "FAIL": 5, "ERROR": 1, "SKIP": 0, "FILTERED": 15}
    assert report.origin["results"] == {"pass": 16, "accuracy_fail": 5, "eager_fail": 1, "skip": 2}
    with open_store(db, write=False) as store:
        run = store.get_run(RUN_ID)
        environment = store._environment(run["environment_ids"][0])
    assert (run["suite"], run["device"], run["state"]) == ("torchcts", "simdev", "complete")
    assert run["labels"] == {"source": "torchcts"}
    assert (run["started_at"], run["finished_at"]) == (
        "2026-12-07T15:46:54+00:00",  # its finish time less its elapsed_sec (214.0 s)
        "2026-12-07T15:50:28+00:00",
    )
    assert environment["torch"] == "2.13.0+cpu" and environment["device"] == "simdev"
    assert run["config"]["torchcts"]["metadata"]["hardware_key"] == "simdev_vm_23gb"
    results = _results(db, RUN_ID)
    exp = results["ops/exp/float32"]
    assert (exp["status"], exp["stage"]) == ("accuracy_fail", "parity")
    assert exp["error"]["message"].startswith(
        "FAIL opinfo/test_opinfo_forward.py::test_op_forward[clean-exp-torch.float32]: "
        "Tensor-likes are not close!"
    )
    sparse = results["ops/sparse.sampled_addmm/float32"]
    assert (sparse["status"], sparse["error"]["type"]) == ("eager_fail", "RuntimeError")
    kept, backward = sparse["findings"]["tests"]
    assert backward["torchcts_status"] == "FILTERED"
    assert kept["classification"] == "backend_runtime_unsupported"
    assert kept["diagnosis"] == "Operator not registered for the target backend device."
    assert "Could not run 'aten::sparse_sampled_addmm'" in kept["message"]
    add = results["ops/add/float32"]  # its forward ran; its backward was filtered
    assert add["status"] == "pass" and add["grade"] is None
    assert [t["torchcts_status"] for t in add["findings"]["tests"]] == ["PASS", "FILTERED"]
    assert add["findings"]["tests"][1]["skip_reason"] == "capability_not_declared"
    usable = results["ops/logsumexp/bfloat16"]  # TorchCTS's PASS, its warning kept
    (forward, _) = usable["findings"]["tests"]
    assert usable["status"] == "pass" and forward["golden_pass"] is False
    assert forward["quality_warning"].startswith("Quality warning: passed usable tolerance")
    assert report.origin["usable_only"] == 1
    never = results["ops/H/bfloat16"]
    assert never["status"] == "skip" and never["findings"]["skip"] == "capability_not_declared"
    assert never["error"]["message"].endswith(
        "capability_not_declared: requires capabilities: training"
    )


def test_the_same_report_imports_once(imported, tmp_path):
    db, _ = imported
    copy = tmp_path / "db.db"
    shutil.copy(db, copy)
    with open_store(str(copy), write=True) as store:
        again = import_from(store, str(REPORT), "torchcts")
    assert again.added == {} and again.present == [RUN_ID]


def test_the_plain_form_and_a_latest_reference_read_as_the_compact_one(tmp_path):
    expanded = tmp_path / "plain.json"
    expanded.write_text(json.dumps(plain(), indent=2))
    history = tmp_path / "results" / "simdev_vm_23gb_history"
    history.mkdir(parents=True)
    shutil.copy(REPORT, history / "2026-12-07T15-50-28Z.json")
    latest = tmp_path / "results" / "simdev_vm_23gb_latest.json"
    latest.write_text(
        '{"artifact":"simdev_vm_23gb_history/2026-12-07T15-50-28Z.json",'
        '"format":"torchcts_result_reference","format_version":1}\n'
    )
    compact = reader.read(str(REPORT))
    assert reader.read(str(expanded)).tests == compact.tests
    followed = reader.read(str(latest))
    assert followed.tests == compact.tests and followed.sha256 == compact.sha256
    assert followed.path.endswith("simdev_vm_23gb_history/2026-12-07T15-50-28Z.json")
    assert source_format(str(latest)) == source_format(str(expanded)) == "torchcts"


@pytest.mark.parametrize("target", ["../outside.json", "/etc/passwd", "a/../../b.json"])
def test_a_reference_is_followed_inside_its_own_folder_only(tmp_path, target):
    latest = tmp_path / "latest.json"
    latest.write_text(
        json.dumps({"artifact": target, "format": "torchcts_result_reference", "format_version": 1})
    )
    with pytest.raises(reader.TorchctsError, match="names a report outside its own folder"):
        reader.read(str(latest))


def test_a_reference_loop_is_refused(tmp_path):
    (tmp_path / "a.json").write_text(
        json.dumps(
            {"artifact": "a.json", "format": "torchcts_result_reference", "format_version": 1}
        )
    )
    with pytest.raises(reader.TorchctsError, match="more than 8 references in a row"):
        reader.read(str(tmp_path / "a.json"))


def test_compared_with_a_torchport_ops_run_of_the_same_ops(imported):
    """Both find the planted exp and what calls it; torchport's float64 reference also fails
    logsumexp at bfloat16, which TorchCTS's same-dtype tolerance passes; TorchCTS grades no
    placement, so none is compared (not 'all on the host')."""
    db, _ = imported
    with open_store(db, write=False) as store:
        comparison = compare_runs(store, OPS_RUN_ID, RUN_ID)
    assert comparison.common == 21
    assert sorted(comparison.only_b) == [
        ["ops/H/bfloat16", "eager"],
        ["ops/H/float32", "eager"],
        ["ops/sparse.sampled_addmm/float32", "eager"],
    ]
    assert comparison.transitions == {
        "pass": {"pass": 15},
        "accuracy_fail": {"accuracy_fail": 5, "pass": 1},
    }
    assert [(c["case"], c["before"], c["after"]) for c in comparison.newly_passing] == [
        ("ops/logsumexp/bfloat16", "accuracy_fail", "pass")
    ]
    assert comparison.placement_summary["basis"] == "none"
    assert "no placement data" in comparison.placement_summary["remarks"][0]


def test_hostile_text_is_kept_escaped_on_both_engines(kb_url, tmp_path):
    """A NUL and a lone surrogate (neither fits a knowledge base) arrive escaped; ESC and a
    bidi override are kept as recorded (escaped where shown: interfaces/formats.py)."""
    doc = plain()
    node, record = next(iter(doc["results"].items()))
    hostile = "a\x00b\ud800c\x1b[31m\u202e"
    doc["results"] = {
        node + hostile: dict(record, status="ERROR", error_message=hostile, op=hostile)
    }
    doc["skips"] = {}
    path = tmp_path / "hostile.json"
    path.write_bytes(json.dumps(doc).encode("utf-8", "surrogatepass"))
    escaped = "a\\x00b\\ud800c\x1b[31m\u202e"
    with open_store(kb_url, write=True) as store:
        (run_id,) = import_from(store, str(path)).added
        (result,) = store.results(run_id=run_id)
    assert result["case"] == f"ops/{escaped}/{record['dtype'].removeprefix('torch.')}"
    assert result["error"]["message"].endswith(f"]{escaped}: {escaped}")
    assert result["findings"]["tests"][0]["test"].endswith(escaped)


def test_a_run_the_report_made_that_the_import_refuses_names_the_report(tmp_path, monkeypatch):
    """The export file made from a report is checked as any other; should it be refused (a
    mapping bug), the error names the report, not the temporary file, and nothing is written."""
    made = reader.lines

    def broken(report, results):
        for obj in made(report, results):
            yield dict(obj, status="sideways") if obj["kind"] == "result" else obj

    monkeypatch.setattr(reader, "lines", broken)
    db = tmp_path / "kb.db"
    with open_store(str(db), write=True) as store:
        with pytest.raises(reader.TorchctsError, match="made a record torchport refuses") as caught:
            import_from(store, str(REPORT))
        assert store.runs() == []
    assert str(caught.value).startswith(f"'{REPORT}' (a TorchCTS report) made a record")
    assert "(line 4: unknown status 'sideways')" in str(caught.value)
    assert "runs.jsonl" not in str(caught.value)


@pytest.mark.parametrize(
    "stamp,elapsed,started",
    [
        ("0001-01-01T00:30:00+00:00", 1e7, "0001-01-01T00:30:00+00:00"),  # a start before year 1
        ("9999-12-31T23:00:00+00:00", 0.5, "9999-12-31T22:59:59+00:00"),
    ],
)
def test_a_run_at_the_edges_of_time_keeps_its_finish(tmp_path, stamp, elapsed, started):
    doc = dict(plain(), metadata=dict(plain()["metadata"], timestamp=stamp, elapsed_sec=elapsed))
    path = tmp_path / "edge.json"
    path.write_text(json.dumps(doc))
    with open_store(str(tmp_path / "kb.db"), write=True) as store:
        (run_id,) = import_from(store, str(path)).added
        run = store.get_run(run_id)
    assert (run["started_at"], run["finished_at"]) == (started, stamp)


@pytest.mark.parametrize("stamp", ["yesterday", "0001-01-01T00:00:00+01:00", ""])
def test_a_report_whose_time_is_no_time_is_refused(tmp_path, stamp):
    doc = dict(plain(), metadata=dict(plain()["metadata"], timestamp=stamp))
    path = tmp_path / "when.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(reader.TorchctsError, match="timestamp"):
        reader.read(str(path))


def test_a_forward_and_a_backward_test_are_one_op_case(tmp_path):
    """The real CPU report: forward and backward of an op at a dtype make one result."""
    with open_store(str(tmp_path / "kb.db"), write=True) as store:
        (run_id,) = import_from(store, str(DATA / "cpu_report.json")).added
        results = {r["case"]: r for r in store.results(run_id=run_id)}
        run = store.get_run(run_id)
    assert run["device"] == "cpu" and len(results) == 7
    assert {r["status"] for r in results.values()} == {"pass"}
    tests = [t["test"] for t in results["ops/cumsum/float32"]["findings"]["tests"]]
    assert sorted(tests) == [
        "opinfo/test_opinfo_backward.py::test_op_backward[cumsum-torch.float32]",
        "opinfo/test_opinfo_forward.py::test_op_forward[clean-cumsum-torch.float32]",
    ]
