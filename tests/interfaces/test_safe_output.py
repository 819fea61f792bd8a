"""Issue 35 (3, 7, 9): what torchport writes goes to a regular file or a new path only,
whole or not at all; paging and integer options out of range are one line and exit 2."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys

import pytest

from tests import kb
from tests.interfaces.inproc import invoke, one_line
from torchport.config import ConfigError, RunConfig


@pytest.fixture(scope="module")
def kb_path(tmp_path_factory):
    return kb.build(tmp_path_factory.mktemp("safe") / "kb.db")


def _make(kind: str, path, tmp_path):
    target = tmp_path / "elsewhere.txt"
    target.write_text("someone else's file\n")
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink":
        os.symlink(target, path)
    elif kind == "directory":
        os.mkdir(path)
    elif kind == "device":  # a null device of our own (as root), never the system's
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    return target


def _listing(folder) -> list[str]:
    return sorted(os.listdir(folder))


@pytest.mark.parametrize("kind", ["fifo", "symlink", "directory", "device"])
@pytest.mark.parametrize(
    "command",
    [
        ["export", "r1", "-o"],
        ["baseline", "save", "r1", "-o"],
        ["report", "r1", "-o"],
    ],
)
def test_what_is_not_a_regular_file_is_never_replaced(kb_path, tmp_path, kind, command):
    if kind == "device" and os.geteuid() != 0:
        kind = "fifo"  # mknod of a device needs root; the FIFO is refused the same way
    path = tmp_path / "out"
    target = _make(kind, path, tmp_path)
    before = _listing(tmp_path)
    out = invoke(*command, path, "--db", kb_path)
    # report's -o is a click.Path(dir_okay=False): click itself refuses a directory
    clicks = command[0] == "report" and kind == "directory"
    one_line(out, "is a directory" if clicks else "torchport writes only a regular file")
    mode = os.lstat(path).st_mode
    assert {
        "fifo": stat.S_ISFIFO,
        "symlink": stat.S_ISLNK,
        "directory": stat.S_ISDIR,
        "device": stat.S_ISCHR,
    }[kind](mode)
    assert target.read_text() == "someone else's file\n"
    assert _listing(tmp_path) == before  # no PATH.part, no temporary file beside it


def test_a_regular_file_is_replaced_whole(kb_path, tmp_path):
    path = tmp_path / "r1.jsonl"
    path.write_text("old\n")
    out = invoke("export", "r1", "-o", path, "--db", kb_path)
    assert out.code == 0, out.stderr
    assert path.read_text().startswith('{"kind":"header"') or '"header"' in path.read_text()
    assert _listing(tmp_path) == ["r1.jsonl"]


WRITE_WITH_A_SMALL_FILE_LIMIT = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit a write fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
from torchport.interfaces.cli import main
main(sys.argv[1:])
"""


@pytest.mark.parametrize("command", [["export", "r1"], ["report", "r1"]])
def test_a_write_error_is_one_line_and_leaves_the_old_file(kb_path, tmp_path, command):
    """A full disk as the process meets it: write() fails part way (here EFBIG, past a file
    size limit). The old file stays, nothing half-written is left beside it."""
    path = tmp_path / "out.html"
    path.write_text("the previous export\n")
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            WRITE_WITH_A_SMALL_FILE_LIMIT,
            *command,
            "-o",
            path,
            "--db",
            kb_path,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "nothing was written" in lines[0], proc.stderr
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert _listing(tmp_path) == ["out.html"]


@pytest.mark.parametrize(
    "args,needle",
    [
        (["search", "mlp", "--offset", "99999999999999999999"], "--offset"),
        (["results", "--offset", "99999999999999999999"], "--offset"),
        (["results", "--offset", "-1"], "--offset"),
        (["results", "--offset", "x"], "--offset"),
        (["search", "mlp", "--limit", "99999999999999999999"], "--limit"),
    ],
)
def test_paging_out_of_range_is_one_line(kb_path, args, needle):
    one_line(invoke(*args, "--db", kb_path), needle)


RUN = ["run", "--suite", "smoke", "--cases", "mlp", "--device", "cpu", "--probes", "none"]


@pytest.mark.parametrize(
    "option,value,needle",
    [
        ("--seed", "99999999999999999999999", "--seed must be from 0 to 18446744073709551615"),
        ("--seed", "-1", "--seed must be from 0"),
        ("--train-steps", "99999999999", "--train-steps must be from 0"),
        ("--batch", "99999999999", "--batch must be from 1 to 2147483647"),
        ("--new-tokens", "10000000000", "--new-tokens must be from 2"),
    ],
)
def test_integer_options_out_of_range_are_refused_before_anything_runs(
    tmp_path, option, value, needle
):
    """Issue 35 (7): a seed past 64 bits was a build_fail recorded by the run."""
    db = tmp_path / "kb.db"
    one_line(invoke(*RUN, option, value, "--db", db), needle)
    assert not db.exists()


def test_duplicate_modes_cases_and_probes_are_one_each():
    """Issue 35 (7): ``--modes eager,eager`` planned two items of which only one could ever
    be recorded: the run stayed 1/2 and --resume could not finish it."""
    config = RunConfig(
        modes=("eager", "eager", "compile"),
        cases=("mlp", "mlp"),
        probes=("perf", "perf"),
    )
    assert config.modes == ("eager", "compile") and config.cases == ("mlp",)
    assert config.probes == ("perf",)
    from torchport.runner.plan import expand

    keys = [t.key for t in expand(RunConfig(suite="smoke", cases=("mlp",), modes=("eager",) * 2))]
    assert keys == [("smoke/mlp", "eager")]
    assert RunConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ConfigError, match="--jobs must be an integer"):
        RunConfig(jobs=True)
