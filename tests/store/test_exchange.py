"""Export and import: a round trip keeps every record, a second import adds nothing, a
conflicting duplicate or a damaged file is refused before anything is written. The source is
an SQLite file (a laptop's); the target is each engine (``kb_url``)."""

import io
import json

import pytest

from tests import kb
from torchport.kb import StoreError, open_store
from torchport.kb.exchange import ExchangeError, export_runs, import_file, import_from


@pytest.fixture
def source(tmp_path):
    trace = tmp_path / "trace.json"
    trace.write_text("{}")
    results = kb.results()
    results[0]["artifacts"] = [str(trace)]
    path = kb.build(tmp_path / "a.db", results_=results)
    with open_store(path, write=True) as store:
        store.add_note("r1", "accepted: cumsum on the host costs 2%", author="ana")
        store.add_note("r1", "known tf32 drift", case="smoke/mlp", mode="compile")
        store._put_artifacts("r1", [{"path": "/gone/trace.json", "sha256": "ab" * 32, "bytes": 10}])
    kb.build(
        path,
        run_id="r2",
        labels={"release": "b"},
        environment={"torch": "2.14.0", "python": "3.11"},
    )
    return path


def _export(path, runs) -> str:
    out = io.StringIO()
    with open_store(path, write=False) as store:
        export_runs(store, runs, out)
    return out.getvalue()


def _body(text: str) -> list[dict]:
    return [
        json.loads(line) for line in text.splitlines() if json.loads(line)["kind"] != "header"
    ]  # the header carries the export time


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True)


def _write(tmp_path, text, name="x.jsonl"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _lines_and_results(store, run_id="r1"):
    from torchport.kb.exchange import result_line

    got = list(store._export_lines(run_id))
    want = [
        result_line(run_id, r) for r in store.results(run_id=run_id, with_ops=True, stream=True)
    ]
    assert len(got) == len(want)
    return got, want


def _same_line(line, result, stored_line) -> None:
    from torchport.kb.exchange import result_line

    text = line if line is not None else json.dumps(result_line(stored_line["run_id"], result))
    # compared as canonical text: NaN is not equal to itself
    assert _canonical(json.loads(text)) == _canonical(stored_line)


def test_lines_put_together_read_as_each_stored_result(tmp_path, kb_url):
    """An export line put together from a row's stored texts (records/line_text.py) parses
    to what ``result_line`` makes of the stored result, op table included, on each engine;
    a result whose metrics hold NaN (JSON to Python, not to the database) is written from
    its row."""
    results = kb.results()
    results[1]["metrics"]["perf_cv"] = float("nan")
    results[2]["artifacts"] = [str(tmp_path / "gone.json")]
    results[3]["error"] = {"type": None, "message": '\u00e9\u2603 "q"\n', "traceback": None}
    kb.build(kb_url, results_=results)
    with open_store(kb_url, write=False) as store:
        store.line_span = 3  # several spans of ids, read in order (PostgreSQL: on threads)
        got, want = _lines_and_results(store)
    assert len(got) == len(results)
    built = [line for line, _, _ in got if line is not None]
    assert len(built) == len(results) - 1  # the NaN one from its row
    for (line, result, artifacts), stored in zip(got, want, strict=True):
        _same_line(line, result, stored)
        assert artifacts == stored["artifacts"]
    assert any(stored["ops"] for stored in want) and any(a for _, _, a in got)


def test_only_a_span_holding_nan_is_read_again_guarded(kb_url):
    """The spans are read with the JSON check unguarded (no search for NaN and Infinity);
    a span PostgreSQL refuses for a NaN is read again guarded, its NaN row then written
    from the row: each span once, the NaN one twice (SQLite refuses none)."""
    results = kb.results()
    results[4]["metrics"]["perf_cv"] = float("nan")
    kb.build(kb_url, results_=results)
    with open_store(kb_url, write=False) as store:
        store.line_span, store.line_threads = 2, 0  # spans of ids: 1-2, 3-4, 5-6, 7-8
        reads: list[str] = []
        rows = store._rows

        def counted(conn, sql, args):
            if "plain" in sql:
                reads.append("guarded" if "Infinity" in sql else "unguarded")
            return rows(conn, sql, args)

        store._rows = counted
        got, want = _lines_and_results(store)
    engine_refuses = not store.url.endswith(".db")
    assert reads == ["unguarded"] * 3 + ["guarded"] * engine_refuses + ["unguarded"]
    assert [line is None for line, _, _ in got] == [i == 4 for i in range(len(results))]
    for (line, result, _), stored in zip(got, want, strict=True):
        _same_line(line, result, stored)


@pytest.mark.parametrize("threads", [0, 2])
def test_spans_read_on_threads_or_on_the_callers_come_in_order(source, threads):
    """An export reads its spans of ids on threads of their own (``line_threads``) or, at
    none (SQLite's), on the caller's thread: the same lines, in recorded order."""
    with open_store(source, write=False) as store:
        store.line_span = 2
        store.line_threads = threads
        got, want = _lines_and_results(store)
    assert len(got) > 2 * store.line_span
    for (line, result, _), stored in zip(got, want, strict=True):
        _same_line(line, result, stored)


@pytest.mark.parametrize(
    "column,text,spliced",
    [
        ("metrics", '{"perf_cv": NaN, "x": -Infinity}', False),  # JSON to Python only
        ("metrics", "[1, 2]", False),  # not an object: read as {}
        ("findings", ' {"tags": ["a"]}', False),  # JSON with a space before it
        ("artifacts", '{"a": 1}', False),  # not a list: read as []
        ("case_version", "v3", True),  # a text where a whole number belongs
    ],
)
def test_a_row_not_as_torchport_wrote_it_is_exported_as_it_reads(tmp_path, column, text, spliced):
    """A row changed outside torchport is exported as the store reads it: from its row
    where its texts are not to be spliced."""
    import sqlite3

    path = kb.build(tmp_path / "a.db")
    with sqlite3.connect(path) as conn:
        conn.execute(f"UPDATE results SET {column} = ? WHERE id = 2", (text,))
    with open_store(path, write=False) as store:
        got, want = _lines_and_results(store)
    assert (got[1][0] is not None) == spliced
    assert all(line is not None for line, _, _ in got[2:])
    for (line, result, _), stored in zip(got, want, strict=True):
        _same_line(line, result, stored)


def test_a_column_that_is_not_json_stops_the_export(tmp_path, kb_url):
    kb.build(kb_url)
    with open_store(kb_url, write=True) as store:
        mark = "?" if store.url.endswith(".db") else "%s"
        sql = f"UPDATE results SET findings = {mark} WHERE id = {mark}"
        store._writer().execute(sql, ('{"tags": [oops', 2))
    with open_store(kb_url, write=False) as store, pytest.raises(StoreError, match="(?i)json"):
        list(store._export_lines("r1"))


def test_round_trip_keeps_runs_results_op_tables_notes_and_artifacts(source, tmp_path, kb_url):
    text = _export(source, ["r1", "r2"])
    with open_store(kb_url, write=True) as target:
        report = import_file(target, _write(tmp_path, text))
        assert report.added == {"r1": 8, "r2": 8} and report.notes_added == 2
        assert target.results(fallback_op="aten.cumsum") == open_store(source, write=False).results(
            fallback_op="aten.cumsum"
        )
        empty_sha = "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        assert target._artifacts("r1") == [
            {"path": "/gone/trace.json", "sha256": "ab" * 32, "bytes": 10},
            {"path": str(tmp_path / "trace.json"), "sha256": empty_sha, "bytes": 2},
        ]
        assert target.get_run("r1")["pid"] is None  # the supervisor lived elsewhere
    assert _body(_export(kb_url, ["r1", "r2"])) == _body(text)


def test_import_is_idempotent_and_merges_new_notes(source, tmp_path, kb_url):
    path = _write(tmp_path, _export(source, ["r1"]))
    with open_store(kb_url, write=True) as target:
        import_file(target, path)
        again = import_file(target, path)
        assert again.added == {} and again.present == ["r1"] and again.notes_added == 0
        assert len(target.results()) == 8 and len(target.notes()) == 2
    with open_store(source, write=True) as store:
        store.add_note("r1", "a later decision")
    with open_store(kb_url, write=True) as target:
        report = import_file(target, _write(tmp_path, _export(source, ["r1"]), "y.jsonl"))
        assert report.present == ["r1"] and report.notes_added == 1
        assert len(target.notes(run_id="r1")) == 3


def test_a_conflicting_duplicate_refuses_the_whole_import(source, tmp_path, kb_url):
    text = _export(source, ["r1", "r2"])
    edited = text.replace('"perf_median_ms": 2.71', '"perf_median_ms": 2.72')
    assert edited != text
    with open_store(kb_url, write=True) as target:
        import_file(target, _write(tmp_path, _export(source, ["r1"]), "r1.jsonl"))
        with pytest.raises(
            ExchangeError, match="r1 already in the knowledge base with different content"
        ):
            import_file(target, _write(tmp_path, edited))
        assert [r["id"] for r in target.runs()] == ["r1"]  # r2 was not added either


@pytest.mark.parametrize(
    "damage,needle",
    [
        (lambda t: t.rsplit("\n", 2)[0] + "\n", "cut off"),
        (lambda t: t.replace('"torch":"2.14.0"', '"torch":"2.15.0"'), "does not match its content"),
        (lambda t: t.replace('"status":"skip"', '"status":"skipped"', 1), "unknown status"),
        (lambda t: "{}\n" + t, "line 1 is not a torchport export record"),
        (lambda t: t.split("\n", 1)[1], "does not start with a torchport-export/1 header"),
        (lambda t: t + "not json\n", "is not JSON"),
    ],
)
def test_a_damaged_file_is_refused_and_nothing_is_written(source, tmp_path, kb_url, damage, needle):
    path = _write(tmp_path, damage(_export(source, ["r1", "r2"])))
    with open_store(kb_url, write=True) as target:
        with pytest.raises(StoreError, match=needle):
            import_file(target, path)
        assert target.runs() == [] and target.results() == []


def test_a_run_still_going_is_not_exported(tmp_path):
    path = str(tmp_path / "a.db")
    with open_store(path, write=True) as store:  # this process is its live supervisor
        store.create_run(
            run_id="live", command="c", suite="smoke", device="cpu", config={}, plan=[], labels={}
        )
        with pytest.raises(ExchangeError, match="live is still running"):
            export_runs(store, ["live"], io.StringIO())


def test_a_whole_knowledge_base_imports_as_its_export_does(source, kb_url):
    """A laptop's SQLite file straight into the target (the team's server): every run, and a
    second import finds them all present."""
    with open_store(kb_url, write=True) as target:
        report = import_from(target, source)
        assert report.added == {"r1": 8, "r2": 8} and report.notes_added == 2
        assert import_from(target, source).present == ["r1", "r2"]
    assert _body(_export(kb_url, ["r1", "r2"])) == _body(_export(source, ["r1", "r2"]))


def test_an_imported_result_is_validated_once_where_it_enters(source, tmp_path, monkeypatch):
    """The check of the whole file validates each result; the import that follows (and the
    store) take it as checked: one validation per result, not four."""
    from torchport.records.result import Result

    path = _write(tmp_path, _export(source, ["r1", "r2"]))
    validated: list[str] = []
    real = Result.validate
    monkeypatch.setattr(Result, "validate", lambda self: validated.append(self.case) or real(self))
    with open_store(str(tmp_path / "t.db"), write=True) as target:
        report = import_from(target, path)
        assert report.added == {"r1": 8, "r2": 8}
    assert len(validated) == 16


def test_a_file_changed_after_its_check_imports_nothing(source, tmp_path):
    """The import reads the bytes the check read: a file edited in between is refused, and
    nothing is written."""
    from torchport.kb.exchange import check_file

    text = _export(source, ["r1"])
    path = _write(tmp_path, text)
    checked = check_file(path)
    _write(tmp_path, text.replace("known tf32 drift", "known tf32 drift, edited"))
    with open_store(str(tmp_path / "t.db"), write=True) as target:
        with pytest.raises(ExchangeError, match="changed while it was imported; nothing"):
            import_file(target, path, checked)
        assert target.runs() == [] and target.results() == [] and target.notes() == []


def _many_results(n: int) -> list[dict]:
    """``n`` results: kb.results() again and again under other case names, in id order."""
    base = kb.results()
    out = []
    for i in range(n):
        result = json.loads(json.dumps(base[i % len(base)]))
        result["case"] = f"{result['case']}-{i:03d}"
        out.append(result)
    return out


def _export_file(store, path, run_ids) -> list[dict]:
    with open(path, "w", encoding="utf-8") as out:
        export_runs(store, run_ids, out)
    return _body(path.read_text())


def test_a_large_run_exports_in_parts_to_the_same_lines(tmp_path, kb_url, monkeypatch):
    """A run large enough is cut in parts of ids, the later ones written by forked children
    (kb/forked.py) into files of their own: the export is line for line what one
    process writes, artifact references and counts included, on each engine; a child that
    fails fails the export with its error, one line."""
    from torchport.kb import exchange, forked
    from torchport.kb.reads import export as export_read

    results = _many_results(45)
    results[30]["artifacts"] = [str(tmp_path / "late.json")]  # named in the second part
    kb.build(kb_url, results_=results)
    monkeypatch.setattr(export_read, "LINE_PART_MIN", 20)  # two parts of ~22 results
    monkeypatch.setattr(forked, "available", lambda: True)  # as on 2 cores or more
    monkeypatch.setattr(forked, "cores", lambda: 2)
    started = []
    monkeypatch.setattr(
        forked, "Child", lambda work, child=forked.Child: started.append(1) or child(work)
    )
    with open_store(kb_url, write=False) as store:
        assert len(store._line_parts("r1", 2)) == 2
        apart = _export_file(store, tmp_path / "apart.jsonl", ["r1"])
        assert started == [1]
        monkeypatch.setattr(forked, "available", lambda: False)
        alone = _export_file(store, tmp_path / "alone.jsonl", ["r1"])
        assert started == [1]
    assert apart == alone and apart[-1]["results"] == 45
    assert [r["case"] for r in apart if r["kind"] == "result"] == [r["case"] for r in results]
    assert any(r["kind"] == "artifact" and r["path"].endswith("late.json") for r in apart)

    def broken(*args):
        raise StoreError("the disk went away")

    monkeypatch.setattr(forked, "available", lambda: True)
    monkeypatch.setattr(exchange, "_spill_part", broken)
    with open_store(kb_url, write=False) as store, pytest.raises(StoreError) as failed:
        _export_file(store, tmp_path / "failed.jsonl", ["r1"])
    assert "helper process" in str(failed.value) and "the disk went away" in str(failed.value)
