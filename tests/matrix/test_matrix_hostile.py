"""torchport matrix against bad input and a damaged environment (issue 44): every malformed
matrix file or option is one line and exit 2 with nothing built or written (examples, and
Hypothesis over the TOML values of every key); names cannot send files out of the matrix's
folder; an environment whose torch no longer imports is rebuilt or refused, never trusted by
its env.json; a failed build says "failed" with uv's reason on one line."""

from __future__ import annotations

import json
import math
import os
import sys
import sysconfig
from datetime import date

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import torchport
from tests.interfaces.inproc import invoke, one_line
from tests.matrix.test_matrix import STUB
from torchport.matrix.envs import (
    MARKER,
    EnvError,
    EnvSpec,
    Indexes,
    build_env,
    lock_digest,
    name_problem,
    uv_reason,
)
from torchport.matrix.run import Matrix, MatrixError, load_matrix

GOOD = {
    "matrix": {"name": "m", "requirements": ["numpy"], "envs_dir": "envs"},
    "run": {"suite": "smoke", "cases": ["mlp"], "modes": ["eager"], "args": ["--timeout", 60]},
    "env": [
        {"name": "a", "requirements": ["torch==2.12.1"], "python": "3.11", "vars": {"X": "1"}},
        {
            "name": "b",
            "requirements": ["torch==2.13.0"],
            "runs": [{"name": "r", "suite": "smoke"}],
            "checks": [{"name": "c", "command": ["torchport", "doctor"], "timeout": 60}],
        },
    ],
}


def _toml_key(key: str) -> str:
    return _toml(key)


def _toml(value) -> str:
    """``value`` as a TOML value (inline tables and arrays; no writer library needed)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        out = []
        for ch in value:
            if ch == '"' or ch == "\\":
                out.append("\\" + ch)
            elif 0x20 <= ord(ch) < 0x7F:
                out.append(ch)
            else:
                out.append(f"\\U{ord(ch):08X}")
        return '"' + "".join(out) + '"'
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml(v)}" for k, v in value.items()) + "}"
    raise TypeError(value)


def _document(data: dict) -> str:
    lines = []
    for table in ("matrix", "run"):
        if table in data:
            lines.append(f"[{table}]")
            lines += [f"{_toml_key(k)} = {_toml(v)}" for k, v in data[table].items()]
    for env in data.get("env", []):
        lines.append("[[env]]")
        lines += [f"{_toml_key(k)} = {_toml(v)}" for k, v in env.items()]
    return "\n".join(lines) + "\n"


scalars = (
    st.text(max_size=12)
    | st.sampled_from(["..", ".", "/abs", "../up", "-x", "a/b", "\x00", "a\nb", "3.11", "é"])
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats()
    | st.booleans()
    | st.dates()
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),  # fmt: skip
    max_leaves=6,
)
# (table, key) of every value a matrix file holds: [matrix], [run], [[env]] #1, #2's runs/checks
PLACES = [("matrix", k) for k in ("name", "requirements", "find_links", "index_url",
                                  "extra_index_urls", "index_strategy", "envs_dir")]  # fmt: skip
PLACES += [("run", k) for k in ("suite", "cases", "modes", "device", "probes", "args",
                                "workload", "cwd")]  # fmt: skip
PLACES += [("env", k) for k in ("name", "requirements", "python", "device", "vars", "runs",
                                "checks", "no_deps")]  # fmt: skip
PLACES += [("env.runs", k) for k in ("name", "suite", "modes", "vars", "args")]
PLACES += [("env.checks", k) for k in ("name", "command", "cwd", "vars", "timeout")]


def _changed(place: tuple[str, str], value) -> dict:
    data = json.loads(json.dumps(GOOD))
    table, key = place
    if table in ("matrix", "run"):
        data[table][key] = value
    elif table == "env":
        data["env"][0][key] = value
    else:
        data["env"][1][table.split(".")[1]][0][key] = value
    return data


def _assert_contained(matrix: Matrix) -> None:
    """Every name that names a file or folder keeps it inside its folder."""
    names = [matrix.name, *(e.name for e in matrix.envs)]
    names += [r.name for e in matrix.envs for r in matrix.runs_of(e)]
    names += [c.name for checks in matrix.checks.values() for c in checks]
    for name in names:
        assert name_problem(name) is None, name
        joined = os.path.normpath(os.path.join("out", name, "x"))
        assert joined.startswith("out" + os.sep + name + os.sep), name


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(place=st.sampled_from(PLACES), value=values)
def test_any_toml_value_anywhere_loads_or_is_one_matrix_error(tmp_path, place, value):
    path = tmp_path / "m.toml"
    try:
        text = _document(_changed(place, value))
    except TypeError:
        return
    path.write_text(text)
    try:
        matrix = load_matrix(str(path))
    except MatrixError as exc:
        assert "\n" not in str(exc) or "\n" in repr(value), str(exc)
        return
    _assert_contained(matrix)
    for env in matrix.envs:  # what reaches uv and the environment's processes
        assert all(isinstance(r, str) and not r.startswith("-") for r in env.requirements)
        assert env.python is None or isinstance(env.python, str)
    assert matrix.envs_dir is None or isinstance(matrix.envs_dir, str)
    assert matrix.indexes.index_url is None or isinstance(matrix.indexes.index_url, str)


MALFORMED = [
    (b"[matrix]\nname = '\xff\xfe'\n", "is not UTF-8 text"),
    (b"[[env]]\nname = 'a'\nrequirements = ['t']\npython = 3.11\n", "python must be a string"),
    (b"[matrix]\nindex_url = ['a']\n", "index_url must be a string"),
    (b"[matrix]\nenvs_dir = 5\n", "envs_dir must be a string"),
    (b"[matrix]\nname = '../up'\n", "matrix name '../up' must be letters"),
    (b"[matrix]\nname = '/abs'\n", "matrix name '/abs' must be letters"),
    (b"[matrix]\nname = '..'\n", "matrix name '..' must be letters"),
    (b"[[env]]\nname = '..'\nrequirements = ['t']\n", "environment name '..' must be letters"),
    (b"[matrix]\nrequirements = ['--index-url=http://x']\n", "is not a requirement"),
    (b"[[env]]\nname='a'\nrequirements=['t']\nvars={'A=B'='1'}\n", "vars must map names"),
    (b'[run]\nsuite = "a\\u0000b"\n', "a NUL character"),
    (b"[run]\nargs = [{}]\n", "args must be a list of strings"),
    (
        b"[[env]]\nname='a'\nrequirements=['t']\n[[env.checks]]\nname='c'\ncommand=['x']\n"
        b"timeout=nan\n",
        "timeout must be a number",
    ),
    (
        b"[[env]]\nname='a'\nrequirements=['t']\n[[env.checks]]\nname='..'\ncommand=['x']\n",
        "name '..' must be letters",
    ),
    (b"[matrix\n", "not readable TOML"),
    (b"a = " + b"[" * 3000 + b"]" * 3000 + b"\n", "not readable TOML"),
]


@pytest.mark.parametrize("text, needle", MALFORMED)
def test_a_malformed_matrix_file_is_one_line_and_nothing_is_written(
    tmp_path, monkeypatch, text, needle
):
    """Issue 44 (1): these gave tracebacks (non-UTF-8, a number for python, a list for
    index_url, a number for envs_dir) or sent files out of the matrix's folder."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.toml").write_bytes(text)
    one_line(invoke("matrix", "m.toml", "--db", "kb.db", "--build-only"), needle)
    assert sorted(os.listdir(tmp_path)) == ["m.toml"]  # no database, no folder, no env


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--name", "../up"], "matrix name '../up' must be letters"),
        (["--name", "/tmp/x"], "matrix name '/tmp/x' must be letters"),
        (["--run-timeout", "nan"], "nan is not a number of seconds"),
        (["--run-timeout", "-1"], "-1.0 is not a number of seconds"),
    ],
)
def test_a_malformed_matrix_option_is_one_line_and_nothing_is_written(
    tmp_path, monkeypatch, args, needle
):
    monkeypatch.chdir(tmp_path)
    envs = ["--env", "a=torch==2.12.1", "--env", "b=torch==2.13.0"]
    one_line(invoke("matrix", *envs, *args, "--db", "kb.db", "--build-only"), needle)
    assert os.listdir(tmp_path) == []


def test_uvs_reason_is_one_line():
    output = (
        "Using Python 3.11.7 environment at: envs/x\n"
        "  × No solution found when resolving dependencies:\n"
        "  ╰─▶ Because torch==9.9 was not found in the package registry and you require\n"
        "      torch==9.9, we can conclude that your requirements are unsatisfiable.\n"
    )
    assert uv_reason(output) == (
        "No solution found when resolving dependencies: Because torch==9.9 was not found in "
        "the package registry and you require torch==9.9, we can conclude that your "
        "requirements are unsatisfiable."
    )
    assert uv_reason("a\nb\n") == "b" and uv_reason("") == "no output"


def _real_env(envs_dir: str, spec: EnvSpec, indexes: Indexes) -> str:
    """A real virtual environment (no uv build) whose torch is this interpreter's (a .pth
    file names its site-packages), with a finished marker and a lock of that torch."""
    import subprocess

    import torch

    path = os.path.join(envs_dir, f"{spec.name}-{spec.digest(indexes, ())}")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", path], check=True)
    site = subprocess.run(
        [os.path.join(path, "bin", "python"), "-c", "import sysconfig; print(sysconfig."
         "get_paths()['purelib'])"], capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    with open(os.path.join(site, "torch-here.pth"), "w") as f:
        f.write(sysconfig.get_paths()["purelib"] + "\n")
    script = os.path.join(path, "bin", "torchport")
    with open(script, "w") as f:
        f.write(f'#!/bin/sh\nexec {sys.executable} {STUB} "$@"\n')
    os.chmod(script, 0o755)
    lock = f"torch=={torch.__version__}\n"
    with open(os.path.join(path, "lock.txt"), "w") as f:
        f.write(lock)
    with open(os.path.join(path, MARKER), "w") as f:
        json.dump({"lock_digest": lock_digest(lock), "bytecode": True}, f)
    return site


def test_an_environment_whose_torch_was_deleted_is_rebuilt_or_refused(tmp_path):
    """Issue 44 (1): an environment whose torch no longer imports was trusted by its
    env.json (the run recorded ``crash @worker_start "No module named 'torch'"`` and the note
    said "1 fixed"). It is checked at every reuse: rebuilt, and here (no index to build
    from) refused in one line with uv's reason; no run is made in it."""
    import torch

    (tmp_path / "empty").mkdir()
    indexes = Indexes(find_links=(str(tmp_path / "empty"),), index_url="file:///nonexistent")
    spec = EnvSpec(name="real", requirements=(f"torch=={torch.__version__}",))
    envs_dir = str(tmp_path / "envs")
    site = _real_env(envs_dir, spec, indexes)
    logged: list[str] = []
    assert build_env(spec, envs_dir, indexes=indexes, log=logged.append).reused
    os.unlink(os.path.join(site, "torch-here.pth"))  # torch is gone from the environment
    with pytest.raises(EnvError) as caught:
        build_env(spec, envs_dir, indexes=indexes, log=logged.append)
    assert any(
        "cannot be trusted: torch does not import in it (ModuleNotFoundError" in line
        for line in logged
    ), logged
    message = str(caught.value)
    assert "\n" not in message and message.startswith("uv pip install failed (exit")
    assert "torch" in message  # uv's reason: no torch to be found


def test_a_stood_up_environment_with_torch_deleted_records_nothing_in_a_matrix(tmp_path):
    """The same through the command: the broken side is a problem (exit 1, one line, the
    environment "failed"), its cases get no result, and no "fixed" is claimed."""
    from tests.matrix.test_matrix import _stand_up
    from torchport.kb import open_store

    (tmp_path / "empty").mkdir()
    (tmp_path / "m.toml").write_text(
        f"[matrix]\nname = 'demo'\nfind_links = ['{tmp_path / 'empty'}']\n"
        "index_url = 'file:///nonexistent'\n[run]\nsuite = 'smoke'\n"
        "[[env]]\nname = 'old'\nrequirements = ['torch==2.12.1']\n"
        "[[env]]\nname = 'new'\nrequirements = ['torch==2.13.0']\n"
    )
    matrix = load_matrix(str(tmp_path / "m.toml"))
    envs_dir = str(tmp_path / "envs")
    for spec, version in zip(matrix.envs, ("2.12.1", "2.13.0"), strict=True):
        path = _stand_up(envs_dir, spec, matrix.indexes, (), f"torch=={version}\n", stub=True)
    open(os.path.join(path, "BROKEN"), "w").close()  # the second's torch does not import
    db, out = tmp_path / "kb.db", tmp_path / "out"
    (tmp_path / "refs").mkdir()
    done = torchport("matrix", tmp_path / "m.toml", "--envs-dir", envs_dir, "--db", db,
                     "--out", out, timeout=300)  # fmt: skip
    assert done.returncode == 1, (done.stdout, done.stderr)
    errors = [ln for ln in done.stderr.splitlines() if ln.startswith("torchport: error:")]
    assert len(errors) == 1 and "environment new: uv" in errors[0] and "failed" in errors[0]
    assert "new: environment failed" in done.stdout and "fixed" not in done.stdout
    with open_store(str(db), write=False) as store:
        assert [r["labels"]["matrix_env"] for r in store.runs()] == ["old"]


def _uv_children(parent: int) -> list[int]:
    """The uv processes whose parent is ``parent``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent and argv and os.path.basename(argv[0]) == b"uv" and b"install" in argv:
            found.append(int(pid))
    return found


@pytest.mark.parametrize("signum", [15, 9], ids=["TERM", "KILL"])
def test_a_signal_during_a_build_leaves_no_uv_running(tmp_path, signum):
    """Issue 44 (1): SIGTERM during a build left ``uv pip install`` running for ~30 s,
    reparented to init, writing into a folder the next call may delete. uv dies with the
    matrix (PR_SET_PDEATHSIG; SIGTERM also kills it on the way out, exit 143)."""
    import signal
    import socket
    import subprocess
    import threading

    from tests.conftest import TORCHPORT
    from tests.interfaces.test_signals import _alive, _wait_for

    silent = socket.socket()  # an index that accepts and never answers: uv waits on it
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    held: list = []
    threading.Thread(target=lambda: [held.append(silent.accept()) for _ in range(16)],
                     daemon=True).start()  # fmt: skip
    (tmp_path / "m.toml").write_text(
        f"[matrix]\nname = 'demo'\nindex_url = 'http://127.0.0.1:{silent.getsockname()[1]}/'\n"
        "[[env]]\nname = 'a'\nrequirements = ['torch==2.13.0']\n"
        "[[env]]\nname = 'b'\nrequirements = ['torch==2.13.0']\n"
    )
    proc = subprocess.Popen(
        [TORCHPORT, "matrix", "m.toml", "--build-only", "--envs-dir", "envs", "--db", "kb.db"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert _wait_for(lambda: _uv_children(proc.pid) or proc.poll() is not None, 120)
        uv = _uv_children(proc.pid)
        assert uv, proc.communicate(timeout=30)
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        silent.close()
    assert proc.returncode == (128 + signal.SIGTERM if signum == 15 else -signal.SIGKILL), stderr
    assert _wait_for(lambda: not any(_alive(pid) for pid in uv), 10), uv
    assert "Traceback" not in stderr
    written = {os.path.relpath(os.path.join(d, f), tmp_path) for d, _, fs in os.walk(tmp_path)
               for f in fs}  # fmt: skip
    assert all(w.startswith(("envs/", "torchport-matrix/")) or w in ("m.toml", "kb.db")
               for w in written), written  # fmt: skip


def test_a_checks_file_and_log_never_hold_the_databases_password(tmp_path):
    """A check's command may name ``{db}``: it runs with the URL as given, but the line kept
    in its file and logged carries no password (a matrix's files are shared)."""
    from types import SimpleNamespace

    from torchport.matrix.checks import Check, run_checks

    url = "postgresql://ana:hunter swordfish@127.0.0.1:1/kb"
    env = SimpleNamespace(path=str(tmp_path / "env"), lock_digest="abc")
    spec = SimpleNamespace(name="e")
    logged: list[str] = []
    check = Check(name="c", command=(sys.executable, "-c", "import sys; print(len(sys.argv))",
                                     "{db}"))  # fmt: skip
    [outcome] = run_checks(spec, env, [check], environ=dict(os.environ),
                           out_dir=str(tmp_path / "checks"), fill={"db": url},
                           log=logged.append)  # fmt: skip
    assert outcome.exit_code == 0 and outcome.first_line == "2"  # the URL reached it whole
    kept = open(outcome.path).read()
    assert "postgresql://ana@127.0.0.1:1/kb" in kept
    for text in (kept, *logged):
        assert "hunter" not in text and "swordfish" not in text, text
