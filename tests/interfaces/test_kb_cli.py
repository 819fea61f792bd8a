"""The knowledge-base commands end to end with the installed script: compare, baseline and
gate (exit codes), notes, export and import, and the paged and summarised reads."""

import json

import pytest

from tests import kb
from tests.conftest import torchport
from torchport.interfaces.json_text import dumps
from torchport.kb import open_store


def _second_run_results():
    results = kb.results()
    results[0]["metrics"] = dict(
        results[0]["metrics"], perf_median_ms=4.0, perf_p10_ms=3.8, perf_p90_ms=4.2
    )  # mlp eager: slower
    results[2] = {
        "case": "hf/llama",
        "mode": "eager",
        "status": "pass",
        "grade": "on_device",
    }  # newly passing
    results[4] = dict(
        results[4],
        status="crash",
        stage="run",  # newly failing
        error={"type": "Crash", "message": "worker died: signal 11"},
    )
    return results


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kbcli")
    path = kb.build(folder / "kb.db", labels={"release": "a"})
    kb.build(
        path,
        run_id="r2",
        labels={"release": "b"},
        results_=_second_run_results(),
        environment={"torch": "2.14.0", "python": "3.11", "device_name": "cpu"},
    )
    return path


def _ok(proc):
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def _one_line(proc, code, needle):
    assert proc.returncode == code, (proc.stdout[-2000:], proc.stderr[-2000:])
    assert len(proc.stderr.strip().splitlines()) == 1 and needle in proc.stderr, proc.stderr


def test_compare_prints_the_environment_difference_first(two_runs, tmp_path):
    out = _ok(
        torchport(
            "compare", "release=a", "release=b", "--device", "cpu", "--db", two_runs, cwd=tmp_path
        )
    )
    assert out.startswith("Environment difference (A -> B)")
    assert out.index("2.14.0") < out.index("Status transitions")
    for shown in (
        "Newly failing (1)",
        "worker died: signal 11",
        "Newly passing (1)",
        "Step time beyond measured noise (1)",
        "each median lies outside",
    ):
        assert shown in out, shown
    text = _ok(torchport("compare", "r1", "r2", "--json", "--db", two_runs, cwd=tmp_path))
    data = json.loads(text)
    # each list entry on one line, as json_text.dumps writes the whole (its entries are made
    # where each part is shaped, interfaces/cli/compare_cmd.py)
    assert text == dumps(data, indent=2, flat_from=2) + "\n"
    assert data["common"] == 8 and data["transitions"]["pass"] == {"pass": 2, "crash": 1}
    assert data["environment"] == [{"key": "torch", "a": "2.13.0", "b": "2.14.0"}]
    _one_line(
        torchport("compare", "r1", "release=zz", "--db", two_runs, cwd=tmp_path),
        2,
        "no complete run matches release=zz",
    )


def test_baseline_and_gate_exit_codes(two_runs, tmp_path):
    expected = tmp_path / "expected.json"
    _ok(torchport("baseline", "save", "r1", "-o", expected, "--db", two_runs, cwd=tmp_path))
    assert json.loads(expected.read_text())["entries"]["hf/llama|eager"] == {
        "status": "eager_fail",
        "stage": "run",
    }
    # One entry a line (written by the C encoder, interfaces/json_text.py), readable in a diff
    lines = [line.strip().rstrip(",") for line in expected.read_text().splitlines()]
    assert '"hf/llama|eager": {"status": "eager_fail", "stage": "run"}' in lines
    assert "0 regressions" in _ok(
        torchport("gate", "r1", "--baseline", expected, "--db", two_runs, cwd=tmp_path)
    )
    proc = torchport("gate", "release=b", "--baseline", expected, "--db", two_runs, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "hf/gpt2 [eager]: now fails: expected pass, got crash @run" in proc.stdout
    assert "smoke/mlp [eager]: step slower" in proc.stdout
    assert "hf/llama [eager]: now passes" in proc.stdout  # improvements are listed too
    text = torchport(
        "gate", "r2", "--baseline", expected, "--json", "--db", two_runs, cwd=tmp_path
    ).stdout
    report = json.loads(text)
    assert report["ok"] is False and report["regressions"]
    assert text == json.dumps(report, indent=2) + "\n"  # findings made apart, the same text
    expected.write_text("{}")
    _one_line(
        torchport("gate", "r2", "--baseline", expected, "--db", two_runs, cwd=tmp_path),
        2,
        "is not a torchport baseline",
    )


def test_notes_are_shown_searched_and_validated(tmp_path):
    db = kb.build(tmp_path / "kb.db")
    _ok(
        torchport(
            "note",
            "r1",
            "hf/llama",
            "the jax backend lacks empty_strided: rejected",
            "--author",
            "ana",
            "--db",
            db,
            cwd=tmp_path,
        )
    )
    found = json.loads(_ok(torchport("search", "strided", "--json", "--db", db, cwd=tmp_path)))
    assert [(n["case"], n["author"]) for n in found["notes"]] == [("hf/llama", "ana")]
    assert [r["case"] for r in found["results"]] == ["hf/llama"]  # the error says it too
    assert "the jax backend lacks empty_strided: rejected" in _ok(
        torchport("show", "r1", "--db", db, cwd=tmp_path)
    )
    _one_line(
        torchport("note", "r1", "hf/nope", "x", "--db", db, cwd=tmp_path),
        2,
        "run r1 has no result for case 'hf/nope'",
    )


def test_export_import_round_trip_idempotent_and_conflict(two_runs, tmp_path):
    exported = tmp_path / "out.jsonl"
    assert "exported 2 runs, 16 results" in _ok(
        torchport("export", "r1", "release=b", "-o", exported, "--db", two_runs, cwd=tmp_path)
    )
    target = tmp_path / "team-b.db"
    assert "2 runs added" in _ok(torchport("import", exported, "--db", target, cwd=tmp_path))
    assert "0 runs added, 2 already present" in _ok(
        torchport("import", exported, "--db", target, cwd=tmp_path)
    )
    again = tmp_path / "again.jsonl"
    _ok(torchport("export", "r1", "r2", "-o", again, "--db", target, cwd=tmp_path))
    assert exported.read_text().split("\n", 1)[1] == again.read_text().split("\n", 1)[1]
    exported.write_text(exported.read_text().replace('"release":"a"', '"release":"c"'))
    _one_line(
        torchport("import", exported, "--db", target, cwd=tmp_path),
        2,
        "r1 already in the knowledge base with different content",
    )


@pytest.fixture(scope="module")
def large_run(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("large") / "kb.db")
    with open_store(path, write=True) as store:
        store.create_run(
            run_id="big", command="c", suite="hf", device="cpu", config={}, plan=[], labels={}
        )
        store.add_results(
            "big",
            (
                {
                    "case": f"hf/m{i:04d}",
                    "mode": "eager",
                    "status": "eager_fail" if i % 4 == 0 else "crash" if i % 50 == 1 else "pass",
                    "stage": "run" if i % 4 == 0 or i % 50 == 1 else None,
                    "error": {"type": "RuntimeError", "message": f"size {i} != {i + 1}"}
                    if i % 4 == 0
                    else {"type": "Crash", "message": "signal 11"}
                    if i % 50 == 1
                    else None,
                }
                for i in range(1200)
            ),
        )
        store.update_run("big", state="complete")
    return path


SUMMARY_AT_1000 = {"TORCHPORT_SHOW_SUMMARY_ABOVE": "1000"}


def test_show_of_a_large_run_is_a_summary_unless_all(large_run, tmp_path):
    out = _ok(torchport("show", "big", "--db", large_run, cwd=tmp_path, env=SUMMARY_AT_1000))
    assert "Most common failures" in out and "Worst failures" in out
    assert "RuntimeError: size N != N" in out and "hf/m0000 [eager], hf/m0004 [eager]" in out
    assert "1200 results: a summary; --all for every row" in out
    assert "hf/m0002" not in out  # no per-result rows
    assert len(out.splitlines()) < 80
    data = json.loads(
        _ok(
            torchport("show", "big", "--json", "--db", large_run, cwd=tmp_path, env=SUMMARY_AT_1000)
        )
    )
    assert data["summary"] is True and data["results_total"] == 1200 and "results" not in data
    assert data["run"]["plan"] == [] and "planned" not in data["run"]  # the whole run, as before
    assert "1200 / 1200 planned results recorded" in out  # the text read the run without it
    worst = data["views"]["worst_failures"]["rows"]
    assert worst[0][0] == "crash @run" and worst[0][1] == 24
    full = _ok(
        torchport("show", "big", "--all", "--db", large_run, cwd=tmp_path, env=SUMMARY_AT_1000)
    )
    assert "hf/m0002" in full


def test_results_and_search_are_paged(large_run, tmp_path):
    out = _ok(torchport("results", "--run", "big", "--db", large_run, cwd=tmp_path))
    assert "results 1-200 of 1200" in out and "--offset 200 for the next page" in out
    page = json.loads(
        _ok(
            torchport(
                "results",
                "--case",
                "hf/m1*",
                "--limit",
                "5",
                "--offset",
                "5",
                "--json",
                "--db",
                large_run,
                cwd=tmp_path,
            )
        )
    )
    assert [r["case"] for r in page] == [f"hf/m{i}" for i in range(1005, 1010)]
    assert (
        len(json.loads(_ok(torchport("results", "--json", "--db", large_run, cwd=tmp_path))))
        == 1200
    )  # --json: all, streamed
    found = json.loads(
        _ok(
            torchport(
                "search",
                "size",
                "--limit",
                "10",
                "--offset",
                "10",
                "--json",
                "--db",
                large_run,
                cwd=tmp_path,
            )
        )
    )
    assert found["total"] == 300 and len(found["results"]) == 10
    assert "results 1-50 of 300, best match first" in _ok(
        torchport("search", "size", "--db", large_run, cwd=tmp_path)
    )


def test_stored_text_prints_as_text_in_compare_gate_and_notes(tmp_path):
    from tests.interfaces.test_hostile import HUGE, _hostile_results

    db = kb.build(
        tmp_path / "kb.db",
        results_=[dict(r, status="pass", stage=None, error=None) for r in _hostile_results()],
    )
    kb.build(
        db,
        run_id="bad\x1b[2J",
        results_=_hostile_results(),
        labels={"x": "[/bold]"},
        environment={"torch": "[red]2.14[/red]", "cpu": "\x1b[31mred"},
    )
    expected = tmp_path / "expected.json"
    _ok(torchport("baseline", "save", "r1", "-o", expected, "--db", db, cwd=tmp_path))
    outputs = [
        _ok(torchport("compare", "r1", "bad\x1b[2J", "--db", db, cwd=tmp_path)),
        torchport("gate", "bad\x1b[2J", "--baseline", expected, "--db", db, cwd=tmp_path).stdout,
        _ok(
            torchport(
                "note", "bad\x1b[2J", "hf/[bold]gpt2[/bold]", "ok [/red]", "--db", db, cwd=tmp_path
            )
        ),
    ]
    for out in outputs:
        assert "\x1b" not in out and "\x07" not in out and len(out) < 100_000
    assert "[red]2.14[/red]" in outputs[0] and "\\x1b[31mred" in outputs[0]
    assert "hf/llama [eager]: now fails" in outputs[1] and HUGE not in outputs[1]
    assert "hf/[bold]gpt2[/bold]" in outputs[2]
