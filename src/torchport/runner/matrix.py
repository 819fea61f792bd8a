"""``torchport matrix``: the same evaluation in several software environments, into one
knowledge base.

A matrix is a list of environments (runner/envs.py: a name and its requirements) and one
run's options. Each environment's run is a child process, its own ``torchport run`` (the
torchport installed in it), labelled with the matrix, the environment's name, its lock's
digest and the digest of the run's options. Resume: a complete run with those labels is
reused; an interrupted one is resumed; an environment already built is reused (envs.py).

Every child shares one float64 reference cache (``TORCHPORT_REFERENCE_CACHE``, keyed by the
torch version, among others): environments on the same torch compute each reference once.

A matrix file (TOML)::

    [matrix]
    name = "torch-releases"
    requirements = ["transformers==5.24.0"]   # in every environment
    find_links = ["/opt/wheels"]              # uv does not read pip's configuration
    index_strategy = "unsafe-best-match"

    [run]
    suite = "smoke"
    cases = ["mlp"]
    modes = ["eager", "compile"]
    probes = "placement,perf,compile"
    args = ["--timeout", "1800"]              # any other 'torchport run' option

    [[env]]                                   # the first is the baseline
    name = "torch-2.12.1"
    requirements = ["torch==2.12.1"]

    [[env]]
    name = "torch-2.13.0"
    requirements = ["torch==2.13.0"]
    # device = "xla"; vars = { PJRT_DEVICE = "CPU" }; python = "3.11"
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field, replace
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10: the backport (pip install 'torchport[matrix]')
    import tomli as tomllib

from torchport.runner.envs import BuiltEnv, EnvError, EnvSpec, Indexes, build_env

RUN_KEYS = ("suite", "cases", "modes", "device", "probes", "args")
MATRIX_KEYS = (
    "name",
    "requirements",
    "find_links",
    "index_url",
    "extra_index_urls",
    "index_strategy",
    "envs_dir",
)
ENV_KEYS = ("name", "requirements", "python", "device", "vars")


class MatrixError(ValueError):
    """A matrix file or option that cannot be used, with what to fix."""


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """What every environment runs (``torchport run`` options)."""

    suite: str = "smoke"
    cases: tuple[str, ...] = ()
    modes: tuple[str, ...] = ("eager", "compile")
    device: str = "cpu"
    probes: str | None = None
    args: tuple[str, ...] = ()

    def command(self, device: str) -> list[str]:
        cmd = ["run", "--suite", self.suite, "--modes", ",".join(self.modes), "--device", device]
        if self.cases:
            cmd += ["--cases", ",".join(self.cases)]
        if self.probes:
            cmd += ["--probes", self.probes]
        return cmd + list(self.args)

    def digest(self, device: str) -> str:
        return hashlib.sha256(json.dumps(self.command(device)).encode()).hexdigest()[:12]


@dataclass(frozen=True, kw_only=True)
class Matrix:
    name: str
    envs: tuple[EnvSpec, ...]
    run: RunOptions = field(default_factory=RunOptions)
    indexes: Indexes = field(default_factory=Indexes)
    requirements: tuple[str, ...] = ()  # installed in every environment
    envs_dir: str | None = None

    def __post_init__(self) -> None:
        if len(self.envs) < 2:
            raise MatrixError(
                f"matrix '{self.name}' needs at least two environments (--env NAME=REQ or "
                "[[env]] tables); it has " + str(len(self.envs))
            )
        names = [e.name for e in self.envs]
        if len(set(names)) != len(names):
            raise MatrixError(f"environment names must differ: {', '.join(names)}")


@dataclass
class Side:
    """One environment's part: its build, its run, or what stopped it."""

    name: str
    env: BuiltEnv | None = None
    run_id: str | None = None
    run_reused: bool = False
    problem: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    # float64 references its run added to the shared cache (None: not run here); 0 when every
    # one was there already (the same torch, transformers and case in an earlier environment)
    references_added: int | None = None
    interrupted: bool = False  # its run was stopped by SIGINT / SIGTERM: the matrix stops too


def _references(folder: str) -> set[str]:
    try:
        return {name for name in os.listdir(folder) if name.endswith(".pt")}
    except OSError:
        return set()


def _strings(where: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [v for v in value.replace(",", " ").split() if v]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise MatrixError(f"{where} must be a list of strings, not {value!r}")
    return tuple(value)


def _check_keys(where: str, table: Any, allowed: tuple[str, ...]) -> dict:
    if not isinstance(table, dict):
        raise MatrixError(f"{where} must be a table")
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        raise MatrixError(f"{where}: unknown key {unknown[0]!r}; known: {', '.join(allowed)}")
    return table


def parse_env(text: str) -> EnvSpec:
    """'NAME=REQ[,REQ...]' (the --env option) -> an EnvSpec."""
    name, sep, reqs = text.partition("=")
    if (
        not sep
        or not name.strip()
        or not reqs.strip()
        or reqs.startswith("=")  # 'torch==2.13.0' alone: a requirement with no name
        or not all(c.isalnum() or c in "._-" for c in name.strip())
    ):
        raise MatrixError(
            f"--env '{text}' must look like NAME=REQUIREMENT[,REQUIREMENT...], "
            "e.g. torch-2.13=torch==2.13.0"
        )
    try:
        return EnvSpec(name=name.strip(), requirements=_strings("--env", reqs))
    except EnvError as exc:
        raise MatrixError(str(exc)) from None


def load_matrix(path: str) -> Matrix:
    """Read a matrix file (TOML; the module's docstring shows one)."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise MatrixError(f"no matrix file '{path}'") from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise MatrixError(f"matrix file '{path}' is not readable TOML: {exc}") from None
    _check_keys(path, data, ("matrix", "run", "env"))
    top = _check_keys(f"{path} [matrix]", data.get("matrix", {}), MATRIX_KEYS)
    run = _check_keys(f"{path} [run]", data.get("run", {}), RUN_KEYS)
    envs = data.get("env", [])
    if not isinstance(envs, list):
        raise MatrixError(f"{path}: environments are [[env]] tables")
    specs = []
    for i, env in enumerate(envs):
        env = _check_keys(f"{path} [[env]] #{i + 1}", env, ENV_KEYS)
        env_vars = env.get("vars", {})
        if not isinstance(env_vars, dict) or not all(isinstance(v, str) for v in env_vars.values()):
            raise MatrixError(f"{path} [[env]] #{i + 1}: vars must map names to strings")
        try:
            specs.append(
                EnvSpec(
                    name=str(env.get("name", "")),
                    requirements=_strings(f"{path} env requirements", env.get("requirements", [])),
                    python=env.get("python"),
                    device=env.get("device"),
                    vars=dict(env_vars),
                )
            )
        except EnvError as exc:
            raise MatrixError(f"{path}: {exc}") from None
    base = os.path.dirname(os.path.abspath(path))
    envs_dir = top.get("envs_dir")
    return Matrix(
        name=str(top.get("name") or os.path.splitext(os.path.basename(path))[0]),
        envs=tuple(specs),
        run=_run_options(path, run),
        indexes=Indexes(
            find_links=_strings("find_links", top.get("find_links", [])),
            index_url=top.get("index_url"),
            extra_index_urls=_strings("extra_index_urls", top.get("extra_index_urls", [])),
            index_strategy=top.get("index_strategy"),
        ),
        requirements=_strings("requirements", top.get("requirements", [])),
        envs_dir=os.path.join(base, envs_dir) if envs_dir else None,
    )


def _run_options(where: str, run: dict) -> RunOptions:
    kwargs: dict[str, Any] = {}
    for key in ("suite", "device", "probes"):
        if key in run:
            if not isinstance(run[key], str):
                raise MatrixError(f"{where} [run] {key} must be a string")
            kwargs[key] = run[key]
    for key in ("cases", "modes", "args"):
        if key in run:
            kwargs[key] = (
                _strings(f"[run] {key}", run[key])
                if key != "args"
                else tuple(str(a) for a in run[key])
            )
    return RunOptions(**kwargs)


def with_overrides(matrix: Matrix, **changes: Any) -> Matrix:
    """The matrix with the run options given on the command line (None: keep the file's)."""
    given = {k: v for k, v in changes.items() if v not in (None, ())}
    return replace(matrix, run=replace(matrix.run, **given)) if given else matrix


def default_envs_dir() -> str:
    from torchport.cache import cache_root

    return cache_root("envs")


def side_labels(matrix: Matrix, spec: EnvSpec, env: BuiltEnv) -> dict[str, str]:
    device = spec.device or matrix.run.device
    return {
        "matrix": matrix.name,
        "matrix_env": spec.name,
        "env_lock": env.lock_digest,
        "matrix_plan": matrix.run.digest(device),
        "matrix_baseline": matrix.envs[0].name,  # the dashboard's page compares with it
    }


def _child_environ(spec: EnvSpec, env: BuiltEnv, reference_cache: str) -> dict[str, str]:
    environ = dict(os.environ)
    environ.pop("PYTHONPATH", None)  # this process's paths would shadow the environment's
    environ["VIRTUAL_ENV"] = env.path
    environ["PATH"] = os.path.join(env.path, "bin") + os.pathsep + environ.get("PATH", "")
    environ["TORCHPORT_REFERENCE_CACHE"] = reference_cache
    environ.update(spec.vars)
    return environ


STOP_GRACE_S = 60.0  # a run stopped by SIGTERM marks itself interrupted and ends its workers


def _supervise(child: subprocess.Popen, timeout_s: float | None) -> int | str:
    """Wait for ``child`` (a ``torchport run``); a SIGTERM sent to this process is passed on
    to it (its run ends interrupted, its workers with it); past ``timeout_s`` it is sent
    SIGTERM, then SIGKILL after STOP_GRACE_S."""
    forward = threading.current_thread() is threading.main_thread()
    previous = (
        signal.signal(signal.SIGTERM, lambda *_: child.send_signal(signal.SIGTERM))
        if forward
        else None
    )
    try:
        try:
            return child.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            child.terminate()
            try:
                child.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            return f"ran past {timeout_s:.0f} s"
    finally:
        if forward:
            signal.signal(signal.SIGTERM, previous)


def run_side(
    matrix: Matrix,
    spec: EnvSpec,
    env: BuiltEnv,
    store,
    db: str,
    *,
    reference_cache: str,
    log=print,
    timeout_s: float | None = None,
) -> Side:
    """Run (or reuse, or resume) the evaluation of ``spec`` in its environment."""
    labels = side_labels(matrix, spec, env)
    side = Side(name=spec.name, env=env, labels=labels)
    done = store.find_runs(labels=labels, complete=True)
    if done:
        side.run_id, side.run_reused = done[0], True
        log(f"[{spec.name}] run {done[0]} is complete: reused")
        return side
    unfinished = store.find_runs(labels=labels, complete=False)
    cmd = [env.torchport]
    if unfinished:
        cmd += ["run", "--resume", unfinished[0], "--db", db]
        log(f"[{spec.name}] resuming run {unfinished[0]}")
    else:
        cmd += matrix.run.command(spec.device or matrix.run.device) + ["--db", db]
        cmd += [a for k, v in labels.items() for a in ("--label", f"{k}={v}")]
    log(f"[{spec.name}] $ {' '.join(cmd)}")
    before = _references(reference_cache)
    # The child's tables and progress go to our stderr: stdout is the matrix's own.
    code: int | str = _supervise(
        subprocess.Popen(
            cmd,
            env=_child_environ(spec, env, reference_cache),
            stdout=sys.stderr,
            stderr=sys.stderr,
        ),
        timeout_s,
    )
    side.references_added = len(_references(reference_cache) - before)
    log(
        f"[{spec.name}] float64 references: {side.references_added} computed and added to "
        f"{reference_cache}, {len(before)} there before"
    )
    runs = store.find_runs(labels=labels, complete=False)
    side.run_id = runs[0] if runs else None
    # The shell's convention: 128 + the signal (130 for SIGINT, 143 for SIGTERM).
    side.interrupted = code in (128 + signal.SIGINT, 128 + signal.SIGTERM)
    if code != 0:
        ended = f"ended with exit code {code}" if isinstance(code, int) else f"{code}: stopped"
        side.problem = f"'torchport run' in environment {spec.name} {ended}" + (
            f" (run {side.run_id} keeps what it recorded)" if side.run_id else ""
        )
    elif side.run_id is None:
        side.problem = f"'torchport run' in environment {spec.name} recorded no run"
    return side


def run_matrix(
    matrix: Matrix,
    store,
    db: str,
    *,
    rebuild: bool = False,
    reference_cache: str | None = None,
    log=print,
    run_timeout_s: float | None = None,
    build_only: bool = False,
) -> list[Side]:
    """Build every environment, then run the evaluation in each, in the matrix's order
    (``build_only``: only build them)."""
    from torchport.execution.reference import cache_dir

    envs_dir = matrix.envs_dir or default_envs_dir()
    reference_cache = reference_cache or cache_dir()
    sides = []
    for spec in matrix.envs:
        try:
            env = build_env(
                spec,
                envs_dir,
                indexes=matrix.indexes,
                common=matrix.requirements,
                rebuild=rebuild,
                log=log,
            )
        except EnvError as exc:
            sides.append(Side(name=spec.name, problem=f"environment {spec.name}: {exc}"))
            continue
        log(
            f"[{spec.name}] environment "
            + ("reused" if env.reused else f"built in {env.build_s:.0f} s")
            + f": {env.path} (lock {env.lock_digest})"
        )
        if build_only:
            sides.append(Side(name=spec.name, env=env))
            continue
        side = run_side(
            matrix,
            spec,
            env,
            store,
            db,
            reference_cache=reference_cache,
            log=log,
            timeout_s=run_timeout_s,
        )
        sides.append(side)
        if side.interrupted:  # Ctrl-C: stop here; the next invocation resumes this run
            log(f"[{spec.name}] interrupted: the other environments are left for the next run")
            break
    return sides
