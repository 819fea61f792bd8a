"""The checks of a matrix environment: commands run in it after its runs (``torchport
doctor``, a benchmark script, a query of the knowledge base), each kept in a file of its own
whose first line is the command and whose last lines are its exit code, its wall time and the
lock digest of the environment it ran in.

A failing check is a result to keep, never a reason to stop the other environments. A check
whose file already holds the same command, finished, is reused (a second invocation runs
nothing) when the environment's lock is the same; a check that names a run the environment
has not recorded is not run, and says so.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
import time
from dataclasses import dataclass, field

from torchport.kb.sql_common import redact, redact_url

DONE_PREFIX = "(exit code "


@dataclass(frozen=True, kw_only=True)
class Check:
    """A command run in an environment after its runs; ``command[0]`` is the environment's
    own when its bin/ has it (torchport, python). ``{db}``, ``{here}`` (the matrix file's
    folder), ``{out}`` and ``{run[NAME]}`` (the id of the environment's run NAME) are filled in."""

    name: str
    command: tuple[str, ...]
    cwd: str | None = None
    vars: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 1800.0


@dataclass
class CheckOutcome:
    env: str
    name: str
    command: str  # as run, one line
    path: str  # the file its output is kept in
    exit_code: int | None = None  # None: not run, or stopped at its deadline
    wall_s: float | None = None
    reused: bool = False
    problem: str | None = None  # why it did not run (or did not finish)
    first_line: str = ""  # the first line of its output (the summary shows it)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _argv(check: Check, env_path: str, fill: dict) -> list[str]:
    argv = [part.format_map(fill) for part in check.command]
    own = os.path.join(env_path, "bin", argv[0])
    if os.sep not in argv[0] and os.path.exists(own):
        argv[0] = own
    return argv


def _lock_line(lock_digest: str) -> str:
    return f"(environment lock {lock_digest})"


def _finished(path: str, line: str, lock_digest: str) -> tuple[int, float, str] | None:
    """(exit code, wall s, first output line) of a kept file of the same command, finished,
    in an environment with the same lock."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    if (
        len(lines) < 4
        or lines[0] != line
        or lines[-1] != _lock_line(lock_digest)
        or not lines[-3].startswith(DONE_PREFIX)
    ):
        return None
    try:
        code = int(lines[-3].removeprefix(DONE_PREFIX).rstrip(")"))
        wall = float(lines[-2].removeprefix("(wall time ").removesuffix(" s)"))
    except ValueError:
        return None
    return code, wall, next((ln for ln in lines[1:-3] if ln.strip()), "")


def _new_file(path: str):
    """``path`` opened for writing, never through a symbolic link (O_NOFOLLOW) and never a
    FIFO or device (O_NONBLOCK and the type checked before it is truncated)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o666)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        os.set_blocking(fd, True)
        os.ftruncate(fd, 0)
        return os.fdopen(fd, "w", encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


def _keep(path: str, line: str, output: str, outcome: CheckOutcome, lock_digest: str) -> None:
    """The check's file: its command line, its output, then how it ended."""
    with _new_file(path) as f:
        f.write(line + "\n" + output.rstrip("\n") + ("\n" if output.strip() else ""))
        if outcome.problem:
            f.write(f"({outcome.problem})\n")
        else:
            f.write(f"{DONE_PREFIX}{outcome.exit_code})\n")
            f.write(f"(wall time {outcome.wall_s:.0f} s)\n")
            f.write(_lock_line(lock_digest) + "\n")


def _run(argv: list[str], environ: dict, check: Check) -> tuple[str, int | None, str | None]:
    """(output, exit code, problem): the command in a session of its own, its whole group
    killed at its deadline."""
    try:
        child = subprocess.Popen(
            argv,
            env=environ,
            cwd=check.cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,
        )
    except OSError as exc:
        return "", None, f"check {check.name} could not start: {exc}"
    try:
        output, _ = child.communicate(timeout=check.timeout_s)
        return output, child.returncode, None
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        output, _ = child.communicate()
        return output, None, f"check {check.name} ran past {check.timeout_s:.0f} s: stopped"


def run_checks(
    spec,
    env,
    checks,
    *,
    environ: dict[str, str],
    out_dir: str,
    fill: dict,
    log=print,
) -> list[CheckOutcome]:
    """Run ``checks`` in ``env`` (``spec``'s), in order, each into ``out_dir/<name>.txt``."""
    os.makedirs(out_dir, exist_ok=True)
    linked = os.path.islink(out_dir)  # then nothing is written there: each check says so
    outcomes = []
    for check in checks:
        path = os.path.join(out_dir, f"{check.name}.txt")
        outcome = CheckOutcome(env=spec.name, name=check.name, command="", path=path)
        outcomes.append(outcome)
        try:
            argv = _argv(check, env.path, fill)
        except (KeyError, IndexError, ValueError, AttributeError) as exc:
            outcome.problem = (
                f"check {check.name} in environment {spec.name} not run: its command names "
                f"{exc} which this environment has not recorded"
            )
            log(f"[{spec.name}] {outcome.problem}")
            continue
        # The command as a line, the environment's folder written as $ENV (files stay portable).
        # (kept and shown: a password in {db} never is)
        shown = " ".join(argv).replace(env.path, "$ENV")
        if fill.get("db") and "://" in fill["db"]:
            shown = shown.replace(fill["db"], redact_url(fill["db"]))
        outcome.command = redact(shown)
        line = f"+ {outcome.command}"
        kept = _finished(path, line, env.lock_digest)
        if kept is not None:
            outcome.exit_code, outcome.wall_s, outcome.first_line = kept
            outcome.reused = True
            log(f"[{spec.name}] check {check.name}: kept in {path} (exit {kept[0]}): reused")
            continue
        if linked:
            outcome.problem = f"check {check.name} not run: {out_dir} is a symbolic link"
            log(f"[{spec.name}] {outcome.problem}")
            continue
        log(f"[{spec.name}] check {check.name}: $ {outcome.command}")
        start = time.perf_counter()
        output, outcome.exit_code, outcome.problem = _run(argv, {**environ, **check.vars}, check)
        outcome.wall_s = time.perf_counter() - start
        outcome.first_line = next((ln for ln in output.splitlines() if ln.strip()), "")
        try:
            _keep(path, line, output, outcome, env.lock_digest)
        except OSError as exc:
            outcome.problem = f"check {check.name}'s output cannot be kept in {path} ({exc})"
        log(
            f"[{spec.name}] check {check.name}: "
            + (outcome.problem or f"exit {outcome.exit_code} in {outcome.wall_s:.0f} s")
            + f", kept in {path}"
        )
    return outcomes
