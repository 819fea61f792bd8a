"""torchport matrix: the spec, the environments (uv), the runs in them, resume, the note.

The fast tests stand an environment up by hand where ``build_env`` would find a finished one
(its digest's folder, ``env.json``, a lock, and a ``bin/torchport`` that runs this install),
so the runs, resume, comparison and release note are exercised without a uv build; the slow
test builds two real environments with uv from /opt/wheels and the registry.
"""

from __future__ import annotations

import json
import os
import re
import sys

import pytest

from tests.conftest import torchport
from torchport.matrix.envs import (
    MARKER,
    EnvSpec,
    Indexes,
    build_env,
    lock_digest,
    torchport_requirements,
)
from torchport.matrix.run import (
    MatrixError,
    load_matrix,
    parse_env,
    run_groups,
    select_checks,
    select_runs,
    with_overrides,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "benchmarks")


def test_benchmark_matrix_files_load():
    torch_matrix = load_matrix(os.path.join(BENCH, "matrix_torch.toml"))
    assert [e.name for e in torch_matrix.envs] == ["torch-2.12.1", "torch-2.13.0"]
    assert torch_matrix.run.suite == "smoke"
    assert torch_matrix.indexes.find_links == ("/opt/wheels",)
    backends = load_matrix(os.path.join(BENCH, "real_backends.toml"))
    xla = backends.envs[1]
    assert xla.device == "xla" and xla.vars == {"PJRT_DEVICE": "CPU"}
    assert "torch_xla==2.9.0" in xla.requirements
    assert backends.run.command("xla")[:7] == [
        "run", "--suite", "smoke", "--modes", "eager,compile", "--device", "xla",
    ]  # fmt: skip


def test_real_backends_file_says_every_run_and_check():
    """benchmarks/real_backends.toml holds what real_backends.sh did: per environment its
    runs (smoke, forward-only workloads, XGLM on the CPU) and checks (doctor, the scripts,
    the fallback query); a short check keeps one run per environment."""
    m = load_matrix(os.path.join(BENCH, "real_backends.toml"))
    assert [e.name for e in m.envs] == ["cpu-torch-2.13.0", "xla", "jax", "tpu", "npu-broken"]
    xla_runs = m.runs_of(m.envs[1])
    assert [r.name for r in xla_runs] == [
        "smoke", "forward-llama", "forward-gpt2", "forward-qwen3_moe",
    ]  # fmt: skip
    assert {r.device for r in xla_runs} == {"xla"} and xla_runs[0].probes == m.run.probes
    assert xla_runs[1].command("xla")[:3] == ["run", "--workload", "hf_forward:llama"]
    assert os.path.isfile(os.path.join(xla_runs[1].cwd, "hf_forward.py"))
    xglm = m.runs_of(m.envs[0])[-1]
    assert (xglm.name, xglm.suite, xglm.cases, xglm.device) == ("xglm", "hf", ("xglm",), "cpu")
    assert "--probes" not in xglm.command("cpu")  # the CPU's default probes
    assert m.runs_of(m.envs[3]) == () and m.runs_of(m.envs[4]) == ()
    npu = m.envs[4]  # torch_npu pins torch==2.9.0+cpu, which PyPI lacks: no deps
    assert npu.no_deps == ("torch_npu==2.9.0",) and npu.requirements == ("torch==2.9.0",)
    plain = EnvSpec(name=npu.name, requirements=npu.requirements)
    assert npu.digest(m.indexes, ()) != plain.digest(m.indexes, ())
    assert {env: [c.name for c in checks] for env, checks in m.checks.items()} == {
        "xla": ["fallback_nonzero", "first_step", "doctor"],
        "jax": ["timing_check", "doctor"],
        "tpu": ["doctor"],
        "npu-broken": ["doctor"],
    }
    assert "{run[smoke]}" in m.checks["xla"][0].command
    for checks in m.checks.values():
        for check in checks:
            for part in check.command:
                if part.startswith("{here}/"):
                    assert os.path.isfile(part.format(here=m.here)), part
    short = select_runs(with_overrides(m, cases=("smoke/mlp",), modes=("eager",)), ("smoke",))
    assert [[r.name for r in short.runs_of(e)] for e in short.envs] == [["smoke"]] * 3 + [[]] * 2
    assert short.runs_of(short.envs[2])[0].command("jax")[:9] == [
        "run", "--suite", "smoke", "--modes", "eager", "--device", "jax", "--cases", "smoke/mlp",
    ]  # fmt: skip
    with pytest.raises(MatrixError, match="no run named 'smok'"):
        select_runs(m, ("smok",))
    doctors = select_checks(m, ("doctor",)).checks
    assert {env: [c.name for c in checks] for env, checks in doctors.items()} == {
        env: ["doctor"] for env in ("xla", "jax", "tpu", "npu-broken")
    }
    with pytest.raises(MatrixError, match="no check named 'docter'"):
        select_checks(m, ("docter",))


@pytest.mark.parametrize(
    "text, problem",
    [
        ("[matrix]\nnme = 'x'\n", "unknown key 'nme'"),
        ("[[env]]\nname = 'a'\nrequirements = ['torch']\n", "at least two environments"),
        (
            "[[env]]\nname='a'\nrequirements=['torch']\n[[env]]\nname='a'\nrequirements=['x']\n",
            "names must differ",
        ),
        ("[[env]]\nname = 'a b'\nrequirements = ['torch']\n", "must be letters"),
        ("[[env]]\nname = 'a'\n", "at least one requirement"),
        ("[run]\nmodes = 3\n", "must be a list of strings"),
        ("[matrix\n", "not readable TOML"),
        (
            "[[env]]\nname='a'\nrequirements=['t']\n[[env.runs]]\nname='x'\n[[env.runs]]\n"
            "name='x'\n[[env]]\nname='b'\nrequirements=['t']\n",
            "environment a: run names must differ: x, x",
        ),
        ("[[env]]\nname='a'\nrequirements=['t']\n[[env.runs]]\nsuit='x'\n", "unknown key 'suit'"),
        ("[[env]]\nname='a'\nrequirements=['t']\nruns='smoke'\n", "are \\[\\[env.runs\\]\\]"),
        ("[[env]]\nname='a'\nrequirements=['t']\n[[env.checks]]\nname='d'\n", "command must"),
        (
            "[[env]]\nname='a'\nrequirements=['t']\n[[env.checks]]\nname='d d'\ncommand=['x']\n",
            "name 'd d' must be letters",
        ),
    ],
)
def test_bad_matrix_files_say_what_to_fix(tmp_path, text, problem):
    path = tmp_path / "m.toml"
    path.write_text(text)
    with pytest.raises(MatrixError, match=problem):
        load_matrix(str(path))


def test_env_option_and_digests():
    spec = parse_env("t213=torch==2.13.0,numpy<3")
    assert spec.name == "t213" and spec.requirements == ("torch==2.13.0", "numpy<3")
    with pytest.raises(MatrixError, match="NAME=REQUIREMENT"):
        parse_env("torch==2.13.0")
    other = EnvSpec(name="t213", requirements=("torch==2.12.1",))
    assert spec.digest(Indexes(), ()) != other.digest(Indexes(), ())
    assert spec.digest(Indexes(), ()) != spec.digest(Indexes(find_links=("/w",)), ())
    assert spec.digest(Indexes(), ()) == parse_env("t213=torch==2.13.0,numpy<3").digest(
        Indexes(), ()
    )
    assert not any(r.startswith("torch") and not r.startswith("torchport") for r in
                   torchport_requirements())  # fmt: skip


def test_lock_digest_ignores_torchport_itself():
    lock = "numpy==2.4.6\ntorch==2.13.0+cpu\n"
    assert lock_digest(lock) == lock_digest(lock + "-e file:///work/wt/34\n")
    assert lock_digest(lock) == lock_digest("torchport @ file:///x\n" + lock)
    assert lock_digest(lock) != lock_digest(lock.replace("2.13.0", "2.12.1"))


STUB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "matrix_stub.py")
STUB_PYTHON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "matrix_stub_python.py")


def _stand_up(envs_dir, spec: EnvSpec, indexes: Indexes, common, lock: str, *, stub: bool):
    """A finished environment (no uv build) whose torchport is this install's, or the stub
    (tests/matrix/matrix_stub.py: records a sample run, no torch)."""
    path = os.path.join(envs_dir, f"{spec.name}-{spec.digest(indexes, common)}")
    os.makedirs(os.path.join(path, "bin"))
    script = os.path.join(path, "bin", "torchport")
    with open(script, "w") as f:
        here = os.path.join(os.path.dirname(sys.executable), "torchport")
        target = f"{sys.executable} {STUB}" if stub else here
        f.write(f'#!/bin/sh\nexec {target} "$@"\n')
    os.chmod(script, 0o755)
    python = os.path.join(path, "bin", "python")  # answers the check that torch imports
    with open(python, "w") as f:
        f.write(f'#!/bin/sh\nexec {sys.executable} {STUB_PYTHON} {path} "$@"\n')
    os.chmod(python, 0o755)
    with open(os.path.join(path, "lock.txt"), "w") as f:
        f.write(lock)
    with open(os.path.join(path, MARKER), "w") as f:
        json.dump({"lock_digest": lock_digest(lock)}, f)
    return path


def _matrix(tmp_path, run: str, new_vars: str = "", *, stub: bool) -> list:
    matrix = tmp_path / "m.toml"
    matrix.write_text(
        f"[matrix]\nname = 'demo'\n[run]\n{run}\n"
        "[[env]]\nname = 'old'\nrequirements = ['torch==2.12.1']\n"
        f"[[env]]\nname = 'new'\nrequirements = ['torch==2.13.0']\n{new_vars}\n"
    )
    envs_dir = str(tmp_path / "envs")
    loaded = load_matrix(str(matrix))
    for spec, version in zip(loaded.envs, ("2.12.1", "2.13.0"), strict=True):
        lock = f"numpy==2.4.6\ntorch=={version}\n"
        _stand_up(envs_dir, spec, loaded.indexes, (), lock, stub=stub)
    db, out = tmp_path / "kb.db", tmp_path / "out"
    return ["matrix", matrix, "--envs-dir", envs_dir, "--db", db, "--out", out]


def test_run_matrix_resumes_then_reuses(tmp_path, monkeypatch):
    """The library without the CLI: stub environments, an interrupted pair of runs resumed,
    then reused; the release note compares them (the CLI's own test is slow)."""
    from torchport.kb import open_store
    from torchport.matrix.run import run_matrix
    from torchport.views.release_note import release_note

    args = _matrix(tmp_path, "suite = 'smoke'", "vars = { STUB_FAIL = 'smoke/mlp' }", stub=True)
    matrix = load_matrix(str(args[1]))
    matrix = type(matrix)(**{**matrix.__dict__, "envs_dir": args[3]})
    db, logged = str(args[5]), []
    (tmp_path / "refs").mkdir()
    refs = str(tmp_path / "refs")
    with open_store(db, write=True) as store:
        monkeypatch.setenv("STUB_INTERRUPT", "1")
        sides = run_matrix(matrix, store, db, log=logged.append, reference_cache=refs)
        # an interrupted run (exit 130, as after Ctrl-C) stops the matrix there
        [side] = sides
        assert side.interrupted and side.problem == (
            f"'torchport run' in environment old ended with exit code 130 (run "
            f"{side.run_id} keeps what it recorded)"
        )
        monkeypatch.delenv("STUB_INTERRUPT")
        again = run_matrix(matrix, store, db, log=logged.append, reference_cache=refs)
        assert again[0].run_id == side.run_id
        assert [s.problem for s in again] == [None, None]
        assert sum("resuming run" in line for line in logged) == 1
        # one reference for the torch both share: computed once, found by the second
        assert [s.references_added for s in again] == [0, 0]
        assert side.references_added == 1 and os.listdir(refs) == ["stub-2.13.pt"]
        third = run_matrix(matrix, store, db, log=logged.append, reference_cache=refs)
        assert [s.run_reused for s in third] == [True, True]
        labels = store.get_run(third[1].run_id)["labels"]
        assert labels["matrix_env"] == "new" and labels["matrix_baseline"] == "old"
        note = release_note(store, "demo", [(s.name, s.run_id, None) for s in third])
        [pair] = note.pairs
        assert pair.counts["newly_failing"] == 1 and pair.comparison.common == 8


@pytest.mark.slow
def test_matrix_labels_compares_resumes_and_gates(tmp_path):
    """Stub environments: an interrupted pair of runs is resumed by the next invocation, then
    reused by the one after; the comparison, note, locks and baseline are written; the gate
    fails on the case the new environment broke (its vars plant it)."""
    planted = "vars = { STUB_FAIL = 'smoke/mlp', STUB_COMPILE_S = '10.56' }"
    args = _matrix(tmp_path, "suite = 'smoke'", planted, stub=True)
    out = tmp_path / "out"
    first = torchport(*args, "--json", env={"STUB_INTERRUPT": "1"})
    assert first.returncode == 1
    assert "'torchport run' in environment old ended with exit code 130" in first.stderr

    second = torchport(*args, "--json", "--gate")
    assert second.returncode == 1, second.stderr[-3000:]  # the gate: one regression
    assert second.stderr.count("resuming run") == 1
    data = json.loads(second.stdout)
    envs = {e["name"]: e for e in data["environments"]}
    assert envs["old"]["env_reused"] and not envs["old"]["run_reused"]
    assert envs["new"]["labels"]["env_lock"] == lock_digest("numpy==2.4.6\ntorch==2.13.0\n")
    assert envs["new"]["labels"]["matrix"] == "demo"
    [pair] = data["pairs"]
    assert pair["baseline"] == "old" and pair["comparison"]["common"] == 8
    assert pair["headline"].startswith(
        "old -> new on cpu, suite smoke: 1 newly failing, 0 fixed"
    ), pair["headline"]
    assert (
        "compile wait -12 % over 1 pairs (cold first compiled step; within noise against the "
        "1.15x line, one-shot noise not measured)"
    ) in pair["headline"]
    assert pair["packages"] == [{"name": "torch", "a": "2.12.1", "b": "2.13.0"}]
    [report] = data["gate"]
    assert not report["ok"] and report["regressions"][0]["case"] == "smoke/mlp"
    for name in ("release-note.md", "release-note.html", "release-note.json", "baseline.json"):
        assert (out / name).is_file()
    assert (out / "locks" / "new.txt").read_text() == "numpy==2.4.6\ntorch==2.13.0\n"
    note = (out / "release-note.md").read_text()
    assert "[newly failing: 1](/compare?a=" in note and "  - smoke/mlp [eager]" in note

    third = torchport(*args)
    assert third.returncode == 0, third.stderr[-3000:]
    assert third.stderr.count("is complete: reused") == 2 and "$ " not in third.stderr
    assert f"run {envs['new']['run_id']} reused" in third.stdout
    assert "old -> new on cpu, suite smoke: 1 newly failing" in third.stdout
    gate = torchport("gate", "matrix_env=old", "--baseline", out / "baseline.json", "--db", args[5])
    assert gate.returncode == 0, gate.stdout + gate.stderr
    gate = torchport("gate", "matrix_env=new", "--baseline", out / "baseline.json", "--db", args[5])
    assert gate.returncode == 1 and "smoke/mlp [eager]: " in gate.stdout


@pytest.mark.slow
def test_matrix_runs_real_children(tmp_path):
    """The same with this install's torchport in both environments: two real runs of
    smoke/mlp, compared; a second invocation reuses both."""
    args = _matrix(
        tmp_path, "cases = ['smoke/mlp']\nmodes = ['eager']\nprobes = 'none'", stub=False
    )
    first = torchport(*args, "--json")
    assert first.returncode == 0, first.stderr[-3000:]
    [pair] = json.loads(first.stdout)["pairs"]
    assert pair["comparison"]["common"] == 1
    assert pair["headline"].startswith("old -> new on cpu, suite smoke: 0 newly failing")
    second = torchport(*args)
    assert second.returncode == 0 and second.stderr.count("is complete: reused") == 2


def test_matrix_bad_input_is_one_line(tmp_path):
    done = torchport("matrix", "--env", "a=torch==2.13.0")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "torchport: error: matrix 'a' needs at least two environments (--env NAME=REQ or "
        "[[env]] tables); it has 1"
    ]
    done = torchport("matrix", tmp_path / "missing.toml")
    assert done.returncode == 2 and "no matrix file" in done.stderr
    assert not (tmp_path / "torchport.db").exists()


@pytest.mark.slow
def test_matrix_builds_environments_with_uv(tmp_path):
    """Two real environments built by uv (torch 2.13.0 from /opt/wheels; the second adds a
    package), a lock each; the second build call reuses the folder."""
    indexes = Indexes(
        find_links=("/opt/wheels",),
        extra_index_urls=("file:///opt/pypi/simple", "file:///opt/pypi-more/simple"),
        index_strategy="unsafe-best-match",
    )
    spec = EnvSpec(name="plain", requirements=("torch==2.13.0",))
    built = build_env(spec, str(tmp_path), indexes=indexes, log=lambda _line: None)
    assert not built.reused
    lock = open(built.lock_path).read()
    assert "torch==2.13.0+cpu" in lock and "transformers==" in lock
    version = os.popen(f"{built.torchport} --version").read()
    assert "torchport" in version
    again = build_env(spec, str(tmp_path), indexes=indexes, log=lambda _line: None)
    assert again.reused and again.lock_digest == built.lock_digest


def test_release_note_markdown_shows_stored_text_as_text():
    from torchport.interfaces.release_note_md import release_note_markdown

    hostile = "<img src=x onerror=alert(1)>|[a](b)"
    data = {
        "matrix": "m",
        "problems": [],
        "environments": [{"name": "a", "run_id": "r1", "lock_digest": "d"}],
        "pairs": [
            {
                "baseline": "a",
                "other": "b",
                "run_a": "r1",
                "run_b": "r2",
                "headline": "a -> b: 1 newly failing",
                "comparison": {"newly_failing": [{"case": hostile, "mode": "eager"}]},
                "packages": [{"name": hostile, "a": "1", "b": None}],
            }
        ],
        "checks": [
            {
                "env": "a",
                "name": "doctor",
                "exit_code": 2,
                "wall_s": 3.0,
                "problem": None,
                "first_line": hostile,
                "path": "out/checks/a/doctor.txt",
            },
        ],  # fmt: skip
    }
    text = release_note_markdown(data, "kb.db")
    escaped = "\\<img src=x onerror=alert(1)\\>\\|\\[a\\](b)"
    assert text.count(escaped) == 3 and re.findall(r"(.)<img", text) == ["\\"] * 3
    assert "| a | doctor | 2 | 3 s | " in text
    assert "- [newly failing: 1](/compare?a=r1&b=r2&list=newly_failing)" in text


def test_a_run_past_its_deadline_is_stopped(tmp_path, monkeypatch):
    from torchport.kb import open_store
    from torchport.matrix.run import run_matrix

    args = _matrix(tmp_path, "suite = 'smoke'", stub=True)
    matrix = load_matrix(str(args[1]))
    matrix = type(matrix)(**{**matrix.__dict__, "envs_dir": args[3]})
    monkeypatch.setenv("STUB_SLEEP_S", "120")
    with open_store(str(args[5]), write=True) as store:
        sides = run_matrix(
            matrix, store, str(args[5]), log=lambda _: None, run_timeout_s=3,
            reference_cache=str(tmp_path),
        )  # fmt: skip
    assert [s.problem for s in sides] == [
        f"'torchport run' in environment {n} ran past 3 s: stopped (run "
        f"{s.run_id} keeps what it recorded)"
        for n, s in zip(("old", "new"), sides, strict=True)
    ]


def test_build_only_runs_nothing(tmp_path):
    from torchport.kb import open_store
    from torchport.matrix.run import run_matrix

    args = _matrix(tmp_path, "suite = 'smoke'", stub=True)
    matrix = load_matrix(str(args[1]))
    matrix = type(matrix)(**{**matrix.__dict__, "envs_dir": args[3]})
    with open_store(str(args[5]), write=True) as store:
        sides = run_matrix(matrix, store, str(args[5]), log=lambda _: None, build_only=True)
        assert [(s.env.reused, s.run_id, s.problem) for s in sides] == [(True, None, None)] * 2
        assert store.runs() == []


def test_an_environment_runs_several_runs_then_its_checks(tmp_path):
    """[[env.runs]] and [[env.checks]] with stub environments: each run labelled with its
    name (the workload's given to the child), the checks kept with their command, a check
    naming a run the environment lacks not run; a second invocation reuses runs and checks;
    the note compares only the runs the baseline has."""
    from torchport.kb import open_store
    from torchport.matrix.run import run_matrix

    code = "import sys; print('ran', *sys.argv[1:])"
    text = (
        "[matrix]\nname = 'demo'\n[run]\nsuite = 'smoke'\n"
        "[[env]]\nname = 'old'\nrequirements = ['torch==2.12.1']\n"
        "[[env.runs]]\nname = 'smoke'\n"
        "[[env.runs]]\nname = 'fwd'\nworkload = 'w:f'\n"
        "[[env.checks]]\nname = 'probe'\n"
        f"command = ['{sys.executable}', '-c', \"{code}\", '{{run[fwd]}}', '{{db}}']\n"
        "[[env.checks]]\nname = 'missing'\n"
        f"command = ['{sys.executable}', '-c', 'pass', '{{run[nope]}}']\n"
        "[[env.checks]]\nname = 'plain'\n"
        f"command = ['{sys.executable}', '-c', 'print(1)']\n"
        "[[env]]\nname = 'new'\nrequirements = ['torch==2.13.0']\n"
        "[[env.runs]]\nname = 'smoke'\n"
        "[[env]]\nname = 'bare'\nrequirements = ['x']\nruns = []\n"
    )
    (tmp_path / "m.toml").write_text(text)
    matrix = load_matrix(str(tmp_path / "m.toml"))
    envs_dir = str(tmp_path / "envs")
    matrix = type(matrix)(**{**matrix.__dict__, "envs_dir": envs_dir})
    for spec in matrix.envs:
        _stand_up(envs_dir, spec, matrix.indexes, (), f"torch==2.13.0\n{spec.name}==1\n", stub=True)
    db, checks = str(tmp_path / "kb.db"), str(tmp_path / "out" / "checks")
    (tmp_path / "refs").mkdir()
    with open_store(db, write=True) as store:
        sides = run_matrix(
            matrix, store, db, log=lambda _: None, reference_cache=str(tmp_path / "refs"),
            checks_dir=checks,
        )  # fmt: skip
        assert [(s.name, s.run_name, s.problem) for s in sides] == [
            ("old", "smoke", None), ("old", "fwd", None), ("new", "smoke", None),
            ("bare", None, None),
        ]  # fmt: skip
        fwd = store.get_run(sides[1].run_id)
        assert fwd["labels"]["matrix_run"] == "fwd" and "--workload w:f" in fwd["command"]
        assert fwd["labels"]["compile_cache"] == "empty"
        probe, missing, plain = sides[1].checks
        assert probe.exit_code == 0 and not probe.reused
        kept = open(probe.path).read().splitlines()
        assert kept[0] == f"+ {sys.executable} -c {code} {sides[1].run_id} {db}"
        assert kept[1] == f"ran {sides[1].run_id} {db}" and kept[2] == "(exit code 0)"
        assert missing.exit_code is None and "'nope'" in missing.problem
        groups = run_groups(matrix, sides)
        assert [(n, [(s.name, s.run_name) for s in g]) for n, g in groups] == [
            ("smoke", [("old", "smoke"), ("new", "smoke")]),
            ("fwd", [("old", "fwd")]),
        ]
        again = run_matrix(
            matrix, store, db, log=lambda _: None, reference_cache=str(tmp_path / "refs"),
            checks_dir=checks,
        )  # fmt: skip
        assert [s.run_reused for s in again[:3]] == [True] * 3
        assert again[1].checks[0].reused and again[1].checks[0].first_line == kept[1]
        assert kept[-1] == f"(environment lock {sides[1].env.lock_digest})"
        # a rebuilt environment (another lock) runs its checks again
        old_env = os.path.join(sides[1].env.path, "env.json")
        with open(os.path.join(sides[1].env.path, "lock.txt"), "w") as f:
            f.write("torch==2.13.0\nold==2\n")
        with open(old_env, "w") as f:
            json.dump({"lock_digest": lock_digest("torch==2.13.0\nold==2\n")}, f)
        third = run_matrix(
            matrix, store, db, log=lambda _: None, reference_cache=str(tmp_path / "refs"),
            checks_dir=checks,
        )  # fmt: skip
        assert again[1].checks[2].reused  # the same command in the same environment
        assert not third[-3].checks[2].reused and third[-3].checks[2].exit_code == 0


def test_an_environment_is_built_with_its_bytecode_compiled(tmp_path, monkeypatch):
    """uv compiles the packages' bytecode at build time (as pip does): a process in the
    environment does not compile torch and transformers from source at every import where
    .pyc files cannot be written (PYTHONDONTWRITEBYTECODE)."""
    from torchport.matrix import envs

    calls = []

    def fake_uv(uv, args, log, timeout_s):
        calls.append(args)
        if args[0] == "venv":
            os.makedirs(args[-1])
        return 0.5

    class Frozen:
        returncode, stdout, stderr = 0, "torch==2.13.0\n", ""

    monkeypatch.setattr(envs, "_uv", fake_uv)
    monkeypatch.setattr(envs, "find_uv", lambda: "uv")
    monkeypatch.setattr(envs, "_install_torchport", lambda *a: 0.5)
    monkeypatch.setattr(envs.subprocess, "run", lambda *a, **k: Frozen())
    monkeypatch.setattr(envs, "verify_env", lambda *a, **k: None)  # no interpreter here
    spec = EnvSpec(name="t", requirements=("torch==2.13.0",), no_deps=("extra==1",))
    built = build_env(spec, str(tmp_path), indexes=Indexes(), log=lambda _: None)
    installs = [c for c in calls if c[:2] == ["pip", "install"]]
    assert len(installs) == 2 and all("--compile-bytecode" in c for c in installs)
    with open(os.path.join(built.path, MARKER)) as f:
        marker = json.load(f)
    assert marker["bytecode"] is True
    logged: list[str] = []
    assert build_env(spec, str(tmp_path), indexes=Indexes(), log=logged.append).reused
    assert logged == []  # reused as it is
    with open(os.path.join(built.path, MARKER), "w") as f:
        json.dump({k: v for k, v in marker.items() if k != "bytecode"}, f)  # an older build
    assert build_env(spec, str(tmp_path), indexes=Indexes(), log=logged.append).reused
    assert logged == [
        "[t] built without compiled bytecode: its processes compile torch from source where "
        ".pyc files cannot be written; --rebuild compiles it"
    ]


def test_torchport_is_installed_with_the_environments_setuptools_else_isolated(monkeypatch):
    """No build environment to resolve where the environment has setuptools; where it has
    none (torch 2.9's), uv's isolated build, resolved from the matrix's indexes."""
    from torchport.matrix import envs

    calls = []

    def fake_uv(uv, args, log, timeout_s):
        calls.append(args)
        if "--no-build-isolation" in args and len(calls) == 1 and fail_first:
            raise envs.EnvError("uv pip install failed (exit 2):\nNo module named 'setuptools'")
        return 1.5

    monkeypatch.setattr(envs, "_uv", fake_uv)
    indexes = Indexes(find_links=("/w",))
    fail_first = False
    assert envs._install_torchport("uv", "py", "/src", indexes, print, None) == 1.5
    assert calls == [
        ["pip", "install", "--python", "py", "--no-deps", "--no-build-isolation", "-e", "/src"]
    ]
    calls.clear()
    fail_first, logged = True, []
    assert envs._install_torchport("uv", "py", "/src", indexes, logged.append, None) == 1.5
    assert calls[1] == [
        "pip", "install", "--python", "py", "--no-deps", "--find-links", "/w", "-e", "/src",
    ]  # fmt: skip
    assert "No module named 'setuptools'" in logged[0]
