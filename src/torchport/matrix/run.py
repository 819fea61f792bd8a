"""``torchport matrix``: the same evaluation in several software environments, into one
knowledge base.

A matrix is a list of environments (matrix/envs.py: a name and its requirements) and one
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

    [[env.runs]]                              # several runs in one environment (default: [run])
    name = "forward-llama"                    # pairs with the baseline's run of this name
    workload = "hf_forward:llama"             # any [run] key, plus workload, cwd, vars
    cwd = "workloads"                         # relative to the file

    [[env.checks]]                            # commands run in it after its runs
    name = "doctor"
    command = ["torchport", "doctor"]         # {db}, {here}, {out}, {run[NAME]} are filled in

An environment with ``runs = []`` only builds and runs its checks. Every environment gets
its own compile cache (``TORCHINDUCTOR_CACHE_DIR`` inside it): both sides of a comparison
compile from a cache in the same state, never from whatever another torch left in /tmp.
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

from torchport.kb.sql_common import redact_url
from torchport.matrix.checks import Check, CheckOutcome, run_checks
from torchport.matrix.envs import BuiltEnv, EnvError, EnvSpec, Indexes, build_env, name_problem

RUN_KEYS = ("suite", "cases", "modes", "device", "probes", "args", "workload", "cwd")
ENV_RUN_KEYS = ("name", *RUN_KEYS, "vars")
CHECK_KEYS = ("name", "command", "cwd", "vars", "timeout")
DEFAULT_RUN = "run"  # the name of the one run [run] describes
MATRIX_KEYS = (
    "name",
    "requirements",
    "find_links",
    "index_url",
    "extra_index_urls",
    "index_strategy",
    "envs_dir",
)
ENV_KEYS = ("name", "requirements", "python", "device", "vars", "runs", "checks", "no_deps")
MAX_FILE_BYTES = 1 << 20  # a matrix file is a page of TOML
MAX_TIMEOUT_S = 7 * 24 * 3600


class MatrixError(ValueError):
    """A matrix file or option that cannot be used, with what to fix."""


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """One run's ``torchport run`` options: [run] (every environment's), or one of an
    environment's [[env.runs]] (``name`` pairs it with the baseline's run of that name)."""

    name: str = DEFAULT_RUN
    suite: str = "smoke"
    cases: tuple[str, ...] = ()
    modes: tuple[str, ...] = ("eager", "compile")
    device: str | None = "cpu"  # None in an environment's run: the environment's device
    probes: str | None = None
    args: tuple[str, ...] = ()
    workload: str | None = None  # MODULE:FUNCTION (torchport run --workload) instead of a suite
    cwd: str | None = None  # where the child runs (a workload's module is found there)
    vars: dict[str, str] = field(default_factory=dict)  # over the environment's vars

    def command(self, device: str) -> list[str]:
        what = ["--workload", self.workload] if self.workload else ["--suite", self.suite]
        cmd = ["run", *what, "--modes", ",".join(self.modes), "--device", device]
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
    # an environment's own runs ([[env.runs]]; device None: the environment's), by its name;
    # an environment not named runs [run] alone
    env_runs: dict[str, tuple[RunOptions, ...]] = field(default_factory=dict)
    checks: dict[str, tuple[Check, ...]] = field(default_factory=dict)  # [[env.checks]]
    here: str = "."  # the matrix file's folder ({here} in a check)

    def __post_init__(self) -> None:
        problem = name_problem(self.name)
        if problem:  # it names the folder the locks and the release note go to
            raise MatrixError(f"matrix {problem}; set [matrix] name or --name")
        if len(self.envs) < 2:
            raise MatrixError(
                f"matrix '{self.name}' needs at least two environments (--env NAME=REQ or "
                "[[env]] tables); it has " + str(len(self.envs))
            )
        names = [e.name for e in self.envs]
        if len(set(names)) != len(names):
            raise MatrixError(f"environment names must differ: {', '.join(names)}")
        for env, runs in self.env_runs.items():
            run_names = [r.name for r in runs]
            if len(set(run_names)) != len(run_names):
                raise MatrixError(
                    f"environment {env}: run names must differ: {', '.join(run_names)}"
                )

    def runs_of(self, spec: EnvSpec) -> tuple[RunOptions, ...]:
        """The runs of ``spec``'s environment, each with its device resolved (the run's own,
        else the environment's, else [run]'s)."""
        if spec.name not in self.env_runs:
            return (replace(self.run, device=spec.device or self.run.device),)
        return tuple(
            replace(r, device=r.device or spec.device or self.run.device)
            for r in self.env_runs[spec.name]
        )


@dataclass
class Side:
    """One environment's part: its build, its run, or what stopped it."""

    name: str
    env: BuiltEnv | None = None
    run_name: str | None = None  # which of the environment's runs (None: it ran none)
    run_id: str | None = None
    run_reused: bool = False
    problem: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    # float64 references its run added to the shared cache (None: not run here); 0 when every
    # one was there already (the same torch, transformers and case in an earlier environment)
    references_added: int | None = None
    interrupted: bool = False  # its run was stopped by SIGINT / SIGTERM: the matrix stops too
    # the environment's checks, on its last side (they run after its runs)
    checks: list[CheckOutcome] = field(default_factory=list)


def _references(folder: str) -> set[str]:
    try:
        return {name for name in os.listdir(folder) if name.endswith(".pt")}
    except OSError:
        return set()


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _strings(where: str, value: Any, *, options: bool = False) -> tuple[str, ...]:
    """A list of strings (or one string of them, separated by commas or spaces); none may
    start with '-' unless ``options`` (a requirement, a link or an index is never uv's option)."""
    if isinstance(value, str):
        value = [v for v in value.replace(",", " ").split() if v]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise MatrixError(f"{where} must be a list of strings, not {_shown(value)}")
    if not options:
        for v in value:
            if not v.strip() or v.lstrip().startswith("-"):
                raise MatrixError(f"{where}: {_shown(v)} is not a requirement or a location")
    return tuple(value)


def _string(where: str, value: Any, *, optional: bool = True) -> str | None:
    """A non-empty string (None when not given and ``optional``)."""
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip() or value.lstrip().startswith("-"):
        raise MatrixError(f"{where} must be a string in quotes, not {_shown(value)}")
    return value


def _args(where: str, value: Any) -> tuple[str, ...]:
    """Command-line words: strings or numbers."""
    if not isinstance(value, list) or not all(
        isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value
    ):
        raise MatrixError(f"{where} must be a list of strings (or numbers), not {_shown(value)}")
    return tuple(str(v) for v in value)


def _no_nul(where: str, value: Any) -> None:
    """No NUL byte in any key or string (no command line or environment can hold one)."""
    if isinstance(value, str):
        if "\x00" in value:
            raise MatrixError(f"{where}: a NUL character in {_shown(value)}")
    elif isinstance(value, dict):
        for key, item in value.items():
            _no_nul(where, key)
            _no_nul(where, item)
    elif isinstance(value, list):
        for item in value:
            _no_nul(where, item)


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


def _vars(where: str, value: Any) -> dict[str, str]:
    if (
        not isinstance(value, dict)
        or not all(isinstance(v, str) for v in value.values())
        or not all(k and "=" not in k for k in value)
    ):
        raise MatrixError(f"{where}: vars must map names (no '=') to strings")
    return dict(value)


def _tables(where: str, value: Any, what: str) -> list:
    if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
        raise MatrixError(f"{where}: {what} are [[{what}]] tables (or [] for none)")
    return value


def load_matrix(path: str) -> Matrix:
    """Read a matrix file (TOML; the module's docstring shows one)."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise MatrixError(f"no matrix file '{path}'") from None
    except OSError as exc:
        raise MatrixError(f"matrix file '{path}' cannot be read ({exc.strerror})") from None
    if len(raw) > MAX_FILE_BYTES:
        raise MatrixError(f"matrix file '{path}' is over {MAX_FILE_BYTES} bytes: not a matrix")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MatrixError(
            f"matrix file '{path}' is not UTF-8 text (byte {exc.start}); save it as UTF-8"
        ) from None
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        reason = str(exc) if isinstance(exc, tomllib.TOMLDecodeError) else "nested too deep"
        raise MatrixError(f"matrix file '{path}' is not readable TOML: {reason}") from None
    _no_nul(path, data)
    _check_keys(path, data, ("matrix", "run", "env"))
    top = _check_keys(f"{path} [matrix]", data.get("matrix", {}), MATRIX_KEYS)
    run = _check_keys(f"{path} [run]", data.get("run", {}), RUN_KEYS)
    envs = data.get("env", [])
    if not isinstance(envs, list):
        raise MatrixError(f"{path}: environments are [[env]] tables")
    base = os.path.dirname(os.path.abspath(path))
    common_run = _run_options(f"{path} [run]", run, base)
    specs, env_runs, checks = [], {}, {}
    for i, env in enumerate(envs):
        where = f"{path} [[env]] #{i + 1}"
        env = _check_keys(where, env, ENV_KEYS)
        try:
            spec = EnvSpec(
                name=env.get("name", ""),
                requirements=_strings(f"{path} env requirements", env.get("requirements", [])),
                python=_string(f"{where} python", env.get("python")),
                device=_string(f"{where} device", env.get("device")),
                vars=_vars(where, env.get("vars", {})),
                no_deps=_strings(f"{where} no_deps", env.get("no_deps", [])),
            )
        except EnvError as exc:
            raise MatrixError(f"{path}: {exc}") from None
        specs.append(spec)
        where = f"{path} [[env]] {spec.name}"
        if "runs" in env:
            runs = []
            for j, table in enumerate(_tables(where, env["runs"], "env.runs")):
                table = _check_keys(f"{where} [[env.runs]] #{j + 1}", table, ENV_RUN_KEYS)
                # every key not given is [run]'s, but the device: the environment's first
                own = _run_options(f"{where} [[env.runs]] #{j + 1}", table, base)
                given = {k: getattr(own, k) for k in table if k in ENV_RUN_KEYS}
                runs.append(replace(common_run, **{"device": None, "name": DEFAULT_RUN, **given}))
            env_runs[spec.name] = tuple(runs)
        if "checks" in env:
            checks[spec.name] = tuple(
                _check(f"{where} [[env.checks]] #{j + 1}", table, base)
                for j, table in enumerate(_tables(where, env["checks"], "env.checks"))
            )
    envs_dir = _string(f"{path} [matrix] envs_dir", top.get("envs_dir"))
    name = top["name"] if "name" in top else os.path.splitext(os.path.basename(path))[0]
    return Matrix(
        name=name,
        envs=tuple(specs),
        run=common_run,
        indexes=Indexes(
            find_links=_strings(f"{path} find_links", top.get("find_links", [])),
            index_url=_string(f"{path} [matrix] index_url", top.get("index_url")),
            extra_index_urls=_strings(f"{path} extra_index_urls", top.get("extra_index_urls", [])),
            index_strategy=_string(f"{path} [matrix] index_strategy", top.get("index_strategy")),
        ),
        requirements=_strings(f"{path} requirements", top.get("requirements", [])),
        envs_dir=os.path.join(base, envs_dir) if envs_dir else None,
        env_runs=env_runs,
        checks=checks,
        here=base,
    )


def _name(where: str, value: Any) -> str:
    problem = name_problem(value)
    if problem:
        raise MatrixError(f"{where}: {problem}")
    return value


def _run_options(where: str, run: dict, base: str) -> RunOptions:
    kwargs: dict[str, Any] = {}
    for key in ("suite", "device", "probes", "workload", "cwd"):
        if key in run:
            if not isinstance(run[key], str):
                raise MatrixError(f"{where} {key} must be a string")
            kwargs[key] = run[key]
    for key in ("cases", "modes"):
        if key in run:
            kwargs[key] = _strings(f"{where} {key}", run[key])
    if "args" in run:
        kwargs["args"] = _args(f"{where} args", run["args"])
    if "name" in run:
        kwargs["name"] = _name(where, run["name"])
    if "vars" in run:
        kwargs["vars"] = _vars(where, run["vars"])
    if "cwd" in kwargs:
        kwargs["cwd"] = os.path.join(base, kwargs["cwd"])
    return RunOptions(**kwargs)


def _check(where: str, table: dict, base: str) -> Check:
    table = _check_keys(where, table, CHECK_KEYS)
    command = table.get("command")
    if not command or not isinstance(command, list):
        raise MatrixError(f"{where}: command must be a list, e.g. ['torchport', 'doctor']")
    command = _args(f"{where} command", command)
    timeout = table.get("timeout", 1800)
    if (
        not isinstance(timeout, (int, float))
        or isinstance(timeout, bool)
        or not 0 < timeout <= MAX_TIMEOUT_S
    ):
        raise MatrixError(f"{where}: timeout must be a number of seconds, 0 to {MAX_TIMEOUT_S}")
    cwd = table.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise MatrixError(f"{where}: cwd must be a string")
    return Check(
        name=_name(where, table.get("name")),
        command=command,
        cwd=os.path.join(base, cwd) if cwd else None,
        vars=_vars(where, table.get("vars", {})),
        timeout_s=float(timeout),
    )


def with_overrides(matrix: Matrix, **changes: Any) -> Matrix:
    """The matrix with the run options given on the command line (None: keep the file's),
    for [run] and every environment's own runs (but the device, where an environment or its
    run names its own)."""
    given = {k: v for k, v in changes.items() if v not in (None, ())}
    if not given:
        return matrix
    own = {k: v for k, v in given.items() if k != "device"}
    env_runs = {
        env: tuple(replace(r, **own) for r in runs) for env, runs in matrix.env_runs.items()
    }
    return replace(matrix, run=replace(matrix.run, **given), env_runs=env_runs)


def _known_names(matrix: Matrix, kind: str, names: tuple[str, ...], known: set[str]) -> None:
    """A MatrixError naming the first of ``names`` the matrix has no ``kind`` of, and its own."""
    unknown = sorted(set(names) - known)
    if unknown:
        raise MatrixError(
            f"--{kind}s: no {kind} named {unknown[0]!r} in matrix {matrix.name}; "
            f"its {kind}s: {', '.join(sorted(known)) or 'none'}"
        )


def select_runs(matrix: Matrix, names: tuple[str, ...]) -> Matrix:
    """Only the runs named (``--runs``): every environment keeps those of its runs; an
    unknown name is a MatrixError."""
    _known_names(matrix, "run", names, {r.name for e in matrix.envs for r in matrix.runs_of(e)})
    env_runs = {
        spec.name: tuple(r for r in matrix.runs_of(spec) if r.name in names) for spec in matrix.envs
    }
    return replace(matrix, env_runs=env_runs)


def select_checks(matrix: Matrix, names: tuple[str, ...]) -> Matrix:
    """Only the checks named (``--checks``), in every environment; an unknown name is a
    MatrixError."""
    _known_names(matrix, "check", names, {c.name for cs in matrix.checks.values() for c in cs})
    checks = {
        env: tuple(c for c in env_checks if c.name in names)
        for env, env_checks in matrix.checks.items()
    }
    return replace(matrix, checks=checks)


def default_envs_dir() -> str:
    from torchport.cache import cache_root

    return cache_root("envs")


def side_labels(matrix: Matrix, spec: EnvSpec, env: BuiltEnv, run: RunOptions) -> dict[str, str]:
    """What finds a run again (resume, reuse): the matrix, the environment and its lock,
    which of its runs, and the digest of that run's options."""
    return {
        "matrix": matrix.name,
        "matrix_env": spec.name,
        "matrix_run": run.name,
        "env_lock": env.lock_digest,
        "matrix_plan": run.digest(run.device or "cpu"),
        "matrix_baseline": matrix.envs[0].name,  # the dashboard's page compares with it
    }


COMPILE_CACHE = "compile-cache"  # inside each environment: its own Inductor / Triton caches


def compile_cache_state(env: BuiltEnv) -> str:
    """'empty' when the environment's compile cache holds no file yet, else 'warm'."""
    for _root, _dirs, files in os.walk(os.path.join(env.path, COMPILE_CACHE)):
        if files:
            return "warm"
    return "empty"


def child_environ(spec: EnvSpec, env: BuiltEnv, reference_cache: str) -> dict[str, str]:
    """The environment of a command run in ``env``: its bin first, the shared float64
    references, its own compile caches, then the spec's vars."""
    environ = dict(os.environ)
    environ.pop("PYTHONPATH", None)  # this process's paths would shadow the environment's
    environ["VIRTUAL_ENV"] = env.path
    environ["PATH"] = os.path.join(env.path, "bin") + os.pathsep + environ.get("PATH", "")
    environ["TORCHPORT_REFERENCE_CACHE"] = reference_cache
    # Both sides of a comparison compile from a cache of their own, never from what another
    # torch (or the user's other work) left in /tmp/torchinductor_<user>.
    cache = os.path.join(env.path, COMPILE_CACHE)
    environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache, "inductor")
    environ["TRITON_CACHE_DIR"] = os.path.join(cache, "triton")
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
    run: RunOptions | None = None,
    log=print,
    timeout_s: float | None = None,
) -> Side:
    """Run (or reuse, or resume) ``run`` (default: the environment's first) of ``spec`` in
    its environment."""
    run = run or matrix.runs_of(spec)[0]
    labels = side_labels(matrix, spec, env, run)
    named = run.name != DEFAULT_RUN
    tag = f"[{spec.name}/{run.name}]" if named else f"[{spec.name}]"
    what = f"'torchport run' {run.name}" if named else "'torchport run'"
    side = Side(name=spec.name, env=env, run_name=run.name, labels=labels)
    done = [r["id"] for r in store.runs(labels=labels, complete=True)]
    if done:
        side.run_id, side.run_reused = done[0], True
        log(f"{tag} run {done[0]} is complete: reused")
        return side
    unfinished = [r["id"] for r in store.runs(labels=labels, complete=False)]
    cmd = [env.torchport]
    if unfinished:
        cmd += ["run", "--resume", unfinished[0], "--db", db]
        log(f"{tag} resuming run {unfinished[0]}")
    else:
        cmd += run.command(run.device or "cpu") + ["--db", db]
        given = {**labels, "compile_cache": compile_cache_state(env)}  # not a finding key
        cmd += [a for k, v in given.items() for a in ("--label", f"{k}={v}")]
    log(f"{tag} $ {' '.join(redact_url(a) if '://' in a else a for a in cmd)}")
    before = _references(reference_cache)
    # The child's tables and progress go to our stderr: stdout is the matrix's own.
    code: int | str = _supervise(
        subprocess.Popen(
            cmd,
            env={**child_environ(spec, env, reference_cache), **run.vars},
            cwd=run.cwd,
            stdout=sys.stderr,
            stderr=sys.stderr,
        ),
        timeout_s,
    )
    side.references_added = len(_references(reference_cache) - before)
    log(
        f"{tag} float64 references: {side.references_added} computed and added to "
        f"{reference_cache}, {len(before)} there before"
    )
    runs = [r["id"] for r in store.runs(labels=labels, complete=False)]
    side.run_id = runs[0] if runs else None
    # The shell's convention: 128 + the signal (130 for SIGINT, 143 for SIGTERM).
    side.interrupted = code in (128 + signal.SIGINT, 128 + signal.SIGTERM)
    if code != 0:
        ended = f"ended with exit code {code}" if isinstance(code, int) else f"{code}: stopped"
        side.problem = f"{what} in environment {spec.name} {ended}" + (
            f" (run {side.run_id} keeps what it recorded)" if side.run_id else ""
        )
    elif side.run_id is None:
        side.problem = f"{what} in environment {spec.name} recorded no run"
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
    checks_dir: str | None = None,
) -> list[Side]:
    """Build every environment, then run its runs, then its checks (into ``checks_dir``;
    None: no checks), in the matrix's order (``build_only``: only build them). One side per
    run; an environment that runs nothing (or could not be built) has one side, with no run.
    """
    from torchport.execution.reference import cache_dir

    envs_dir = matrix.envs_dir or default_envs_dir()
    reference_cache = reference_cache or cache_dir()
    sides: list[Side] = []
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
        mine: list[Side] = []
        for run in matrix.runs_of(spec):
            side = run_side(
                matrix,
                spec,
                env,
                store,
                db,
                reference_cache=reference_cache,
                run=run,
                log=log,
                timeout_s=run_timeout_s,
            )
            mine.append(side)
            if side.interrupted:
                break
        if not mine:
            mine.append(Side(name=spec.name, env=env))
        sides += mine
        if mine[-1].interrupted:  # Ctrl-C: stop here; the next invocation resumes this run
            log(f"[{spec.name}] interrupted: the rest is left for the next run")
            break
        if checks_dir is not None and matrix.checks.get(spec.name):
            mine[-1].checks = run_checks(
                spec,
                env,
                matrix.checks[spec.name],
                environ=child_environ(spec, env, reference_cache),
                out_dir=os.path.join(checks_dir, spec.name),
                fill={
                    "db": db,
                    "here": matrix.here,
                    "out": os.path.dirname(os.path.abspath(checks_dir)),
                    "run": {s.run_name: s.run_id for s in mine if s.run_id},
                },
                log=log,
            )
    return sides


def run_groups(matrix: Matrix, sides: list[Side]) -> list[tuple[str, list[Side]]]:
    """(run name, [the baseline's side, each other environment's side of that run]) for
    every run the baseline environment has: what the release note compares."""
    base = matrix.envs[0].name
    names = [s.run_name for s in sides if s.name == base and s.run_name is not None]
    return [
        (
            name,
            [s for s in sides if s.name == base and s.run_name == name]
            + [s for s in sides if s.name != base and s.run_name == name],
        )
        for name in names
    ]
