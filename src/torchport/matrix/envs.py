"""Software environments for ``torchport matrix``: one virtual environment per spec, built
with uv, with a lock of the exact packages it resolved.

An environment lives in ``<envs dir>/<name>-<spec digest>``: the digest covers everything that
decides what gets installed (requirements, Python, indexes), so an unchanged spec finds its
folder built (``env.json`` written last) and is reused; a changed one builds a new folder.
``lock.txt`` is ``uv pip freeze`` of the built environment; its digest (torchport's own line
left out, so a new checkout does not look like a new environment) labels every run made in it.

This torchport is installed into each environment without its dependencies (a backend such
as torch_xla pins an older torch than torchport declares); its other requirements are
installed with the environment's own.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path

MARKER = "env.json"
LOCK = "lock.txt"
FORMAT = 1  # bump when the folder layout changes (old folders are then rebuilt)


class EnvError(RuntimeError):
    """An environment that cannot be built, with what to do about it."""


NAME_MAX = 100


def name_problem(name: object) -> str | None:
    """Why ``name`` cannot name an environment, a run, a check or a matrix (it names files
    and folders: no separator, no '..', no leading '.' or '-'); None when it can."""
    if not isinstance(name, str) or not name:
        return f"name {name!r} must be a non-empty string"
    if (
        len(name) > NAME_MAX
        or name[0] in ".-"
        or not all(c.isascii() and (c.isalnum() or c in "._-") for c in name)
    ):
        return (
            f"name {name[:NAME_MAX]!r} must be letters, digits, '.', '_' or '-' (ASCII, at most "
            f"{NAME_MAX}, not starting with '.' or '-')"
        )
    return None


@dataclass(frozen=True, kw_only=True)
class Indexes:
    """Where uv looks for packages (uv does not read pip's configuration)."""

    find_links: tuple[str, ...] = ()
    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    index_strategy: str | None = None  # e.g. unsafe-best-match: a local +cpu wheel wins

    def args(self) -> list[str]:
        out: list[str] = []
        for link in self.find_links:
            out += ["--find-links", link]
        if self.index_url:
            out += ["--index-url", self.index_url]
        for url in self.extra_index_urls:
            out += ["--extra-index-url", url]
        if self.index_strategy:
            out += ["--index-strategy", self.index_strategy]
        return out


@dataclass(frozen=True, kw_only=True)
class EnvSpec:
    """One side of a matrix: a name and what to install."""

    name: str
    requirements: tuple[str, ...]
    python: str | None = None  # a version ("3.11") or an interpreter path; default: this one
    device: str | None = None  # the run's device here, when it differs from the matrix's
    vars: dict[str, str] = field(default_factory=dict)  # environment variables for its runs
    # installed after the rest without their dependencies (a wheel that pins a build its
    # index does not have, e.g. torch_npu 2.9.0's torch==2.9.0+cpu)
    no_deps: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        problem = name_problem(self.name)
        if problem:
            raise EnvError(f"environment {problem}")
        for key in ("python", "device"):
            value = getattr(self, key)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                example = "'3.11'" if key == "python" else "'cpu'"
                raise EnvError(
                    f"environment '{self.name}': {key} must be a string (e.g. {example}, "
                    f"quoted), not {value!r}"
                )
        if not self.requirements:
            raise EnvError(f"environment '{self.name}' needs at least one requirement")

    def digest(self, indexes: Indexes, common: tuple[str, ...]) -> str:
        decides = {
            "format": FORMAT,
            "requirements": sorted(self.requirements + common),
            "python": self.python or _python_version(),
            "indexes": asdict(indexes),
            "torchport_deps": sorted(torchport_requirements()),
        }
        if self.no_deps:  # only then: the digests of environments without it stay the same
            decides["no_deps"] = sorted(self.no_deps)
        canonical = json.dumps(decides, sort_keys=True)
        return hashlib.sha256(canonical.encode()).hexdigest()[:12]


@dataclass(frozen=True, kw_only=True)
class BuiltEnv:
    name: str
    path: str
    python: str
    torchport: str  # the torchport script inside it
    lock_digest: str
    reused: bool
    build_s: float

    @property
    def lock_path(self) -> str:
        return os.path.join(self.path, LOCK)


def _python_version() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def find_uv() -> str:
    """The uv binary: the ``uv`` package's (pip install 'torchport[matrix]'), else on PATH."""
    try:
        import uv  # type: ignore[import-not-found,unused-ignore]

        return str(uv.find_uv_bin())
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found:
            return found
    raise EnvError("uv is not installed; install it with: pip install 'torchport[matrix]'")


def torchport_requirements() -> list[str]:
    """torchport's own requirements, torch left out (each environment names its torch)."""
    out = []
    for req in metadata.requires("torchport") or []:
        if "extra ==" in req:
            continue
        name = req.split(";")[0].strip()
        bare = name.split("[")[0]
        for sep in "<>=!~ ":
            bare = bare.split(sep)[0]
        if bare.lower() != "torch":
            out.append(name)
    return out


def torchport_source() -> str:
    """The checkout this torchport runs from (installed editable into each environment)."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "pyproject.toml").is_file() and (parent / "src" / "torchport").is_dir():
            return str(parent)
    raise EnvError(
        f"torchport at {here.parent.parent} is not a source checkout; matrix installs the "
        "checkout it runs from into each environment: run it from a clone (pip install -e .)"
    )


def lock_digest(lock_text: str) -> str:
    """The digest of a lock, torchport's own line left out."""
    lines = sorted(
        line.strip()
        for line in lock_text.splitlines()
        if line.strip()
        and not line.startswith("-e ")  # the editable checkout: torchport itself
        and re.split(r"[=@ <>]", line.strip(), maxsplit=1)[0].lower() != "torchport"
    )
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:12]


def uv_reason(output: str) -> str:
    """uv's reason for a failure, on one line: from its first error line (``error:``, ``×``)
    on, box drawing left out; else its last line."""
    raw = output.splitlines()
    first = next((i for i, ln in enumerate(raw) if ln.strip().startswith(("error", "×"))), None)
    keep = raw[first:] if first is not None else raw[-1:]
    reason = " ".join(t for ln in keep if (t := ln.strip().lstrip("×╰─▶│|").strip()))
    reason = reason or "no output"
    return reason if len(reason) <= 400 else reason[:397] + "..."


def _uv(uv: str, args: list[str], log, timeout_s: float | None) -> float:
    """Run one uv command; its wall time in seconds. uv dies with this process, however it
    ends (lifeline.preexec), and is killed when this process is interrupted."""
    from torchport.lifeline import preexec

    log(f"$ uv {' '.join(args)}")
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [uv, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            timeout=timeout_s,
            preexec_fn=preexec(),
        )
    except subprocess.TimeoutExpired:
        raise EnvError(f"uv {args[0]} {args[1]} ran past {timeout_s:.0f} s") from None
    except OSError as exc:
        raise EnvError(f"uv could not start ({exc.strerror or exc})") from None
    if done.returncode != 0:
        raise EnvError(
            f"uv {' '.join(args[:2])} failed (exit {done.returncode}): {uv_reason(done.stdout)}"
        )
    return time.perf_counter() - start


# Bytecode compiled at build time, in parallel, as pip does by default (uv does not): without
# it every process of the environment (the run, its worker, its reference child) compiles the
# modules of torch and transformers it imports from source again where .pyc files cannot be
# written (PYTHONDONTWRITEBYTECODE, a read-only folder): 46 s against 17 s for importing torch
# and transformers and building a small llama on a 2-core machine at load 5 (torch 2.13.0).
BYTECODE = ("--compile-bytecode",)


def _install_torchport(uv: str, python: str, source: str, indexes: Indexes, log, timeout_s):
    """This checkout, editable, without its dependencies. Built with the environment's own
    setuptools where it has one (no build environment to resolve and fill); else in uv's
    isolated build environment, resolved from the matrix's indexes."""
    editable = ["pip", "install", "--python", python, "--no-deps"]
    try:
        return _uv(uv, [*editable, "--no-build-isolation", "-e", source], log, timeout_s)
    except EnvError as exc:
        log(f"no build backend in the environment ({str(exc).splitlines()[-1][:200]}): isolated")
        return _uv(uv, [*editable, *indexes.args(), "-e", source], log, timeout_s)


VERIFY_TIMEOUT_S = 600.0  # importing torch and a backend on a loaded machine
# Run by the environment's interpreter: the version of each distribution named (argv[1], a
# JSON list), torch's own __version__, and whether torch and each backend module import.
_VERIFY = """
import importlib, importlib.metadata as md, json, sys
names, modules = json.loads(sys.argv[1]), json.loads(sys.argv[2])
out = {"versions": {}, "imports": {}, "torch": None}
for name in names:
    try:
        out["versions"][name] = md.version(name)
    except md.PackageNotFoundError:
        out["versions"][name] = None
for name in modules:
    try:
        module = importlib.import_module(name)
        out["imports"][name] = None
        if name == "torch":
            out["torch"] = str(module.__version__)
    except BaseException as exc:
        out["imports"][name] = (type(exc).__name__ + ": " + str(exc))[:300]
print(json.dumps(out))
"""


def _dist(requirement: str) -> str | None:
    """The normalized distribution name a requirement names (None: a path or URL)."""
    found = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if not found or "/" in requirement.split(";")[0].split("@")[0]:
        return None
    return re.sub(r"[-_.]+", "-", found.group(1)).lower()


def _locked(lock_text: str) -> dict[str, str]:
    """name (normalized) -> version, for every ``name==version`` line of a lock."""
    out = {}
    for line in lock_text.splitlines():
        name, sep, version = line.strip().partition("==")
        if sep:
            out[re.sub(r"[-_.]+", "-", name).lower()] = version.strip()
    return out


def verify_env(env: BuiltEnv, spec: EnvSpec, lock_text: str, *, timeout_s=VERIFY_TIMEOUT_S):
    """None when ``env``'s interpreter imports torch (and each backend package the spec
    names: a distribution with 'torch' in its name) with the versions its lock holds; else
    one line saying what is wrong. An environment is trusted only then (a deleted torch, a
    package changed by hand, a broken interpreter)."""
    from torchport.lifeline import preexec

    locked = _locked(lock_text)
    names = sorted({"torch"} | {n for r in (*spec.requirements, *spec.no_deps) if (n := _dist(r))})
    names = [n for n in names if n in locked and n != "torchport"]
    if "torch" not in names:
        return f"its lock {env.lock_path} names no torch"
    modules = ["torch"] + [n.replace("-", "_") for n in names if "torch" in n and n != "torch"]
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    environ.update({"VIRTUAL_ENV": env.path, **spec.vars})
    try:
        done = subprocess.run(
            [env.python, "-c", _VERIFY, json.dumps(names), json.dumps(modules)],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout_s,
            env=environ,
            stdin=subprocess.DEVNULL,
            preexec_fn=preexec(),
        )
        found = json.loads(done.stdout.strip().splitlines()[-1])
    except subprocess.TimeoutExpired:
        return f"its interpreter did not import torch within {timeout_s:.0f} s"
    except (OSError, ValueError, IndexError):
        return f"its interpreter {env.python} does not run"
    for module, error in found["imports"].items():
        if error:
            return f"{module} does not import in it ({error})"
    for name in names:
        have = found["versions"].get(name)
        if have != locked[name]:
            return f"{name} is {have or 'not installed'} in it, its lock says {locked[name]}"
    if found.get("torch") and found["torch"] != locked["torch"]:
        return f"torch.__version__ is {found['torch']} in it, its lock says {locked['torch']}"
    return None


def build_env(
    spec: EnvSpec,
    envs_dir: str,
    *,
    indexes: Indexes,
    common: tuple[str, ...] = (),
    rebuild: bool = False,
    log=print,
    timeout_s: float | None = 3600.0,
) -> BuiltEnv:
    """The environment of ``spec``, built unless a finished one with the same digest exists."""
    start = time.perf_counter()
    path = os.path.join(os.path.abspath(envs_dir), f"{spec.name}-{spec.digest(indexes, common)}")
    python = os.path.join(path, "bin", "python")
    marker = os.path.join(path, MARKER)
    if not rebuild and os.path.isfile(marker):
        try:
            with open(marker) as f:
                done = json.load(f)
            with open(os.path.join(path, LOCK)) as f:
                lock = f.read()
            if lock_digest(lock) != done["lock_digest"]:
                raise ValueError("its lock changed")
            if not done.get("bytecode"):
                log(
                    f"[{spec.name}] built without compiled bytecode: its processes compile "
                    "torch from source where .pyc files cannot be written; --rebuild compiles it"
                )
            found = BuiltEnv(
                name=spec.name,
                path=path,
                python=python,
                torchport=os.path.join(path, "bin", "torchport"),
                lock_digest=done["lock_digest"],
                reused=True,
                build_s=time.perf_counter() - start,
            )
            problem = verify_env(found, spec, lock)
            if problem is None:
                return found
            log(f"[{spec.name}] {path} cannot be trusted: {problem}; building it again")
        except (OSError, ValueError, KeyError, TypeError):
            log(f"[{spec.name}] {marker} or its lock is unreadable: building again")
    uv = find_uv()
    source = torchport_source()
    if os.path.exists(path):
        shutil.rmtree(path)  # half-built (no marker): start clean
    os.makedirs(os.path.dirname(path), exist_ok=True)
    log(f"[{spec.name}] building {path}")
    steps_s = {}  # where a build's time goes
    steps_s["venv"] = _uv(
        uv, ["venv", "--quiet", "--python", spec.python or sys.executable, path], log, timeout_s
    )
    reqs = [*spec.requirements, *common, *torchport_requirements()]
    install = ["pip", "install", *BYTECODE, "--python", python, *indexes.args()]
    steps_s["packages"] = _uv(uv, [*install, *reqs], log, timeout_s)
    if spec.no_deps:
        steps_s["no_deps"] = _uv(uv, [*install, "--no-deps", *spec.no_deps], log, timeout_s)
    steps_s["torchport"] = _install_torchport(uv, python, source, indexes, log, timeout_s)
    lock_start = time.perf_counter()
    from torchport.lifeline import preexec

    freeze = subprocess.run(
        [uv, "pip", "freeze", "--python", python],
        capture_output=True,
        text=True,
        check=False,
        preexec_fn=preexec(),
    )
    if freeze.returncode != 0:
        raise EnvError(f"uv pip freeze failed in {path}: {freeze.stderr.strip()}")
    with open(os.path.join(path, LOCK), "w") as f:
        f.write(freeze.stdout)
    digest = lock_digest(freeze.stdout)
    steps_s["lock"] = time.perf_counter() - lock_start
    log(f"[{spec.name}] build steps: " + ", ".join(f"{k} {v:.0f} s" for k, v in steps_s.items()))
    with open(marker + ".tmp", "w") as f:
        json.dump(
            {
                "name": spec.name,
                "requirements": list(spec.requirements + common),
                "lock_digest": digest,
                "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "steps_s": steps_s,
                "bytecode": True,  # compiled at build time (BYTECODE)
            },
            f,
        )
    built = BuiltEnv(
        name=spec.name,
        path=path,
        python=python,
        torchport=os.path.join(path, "bin", "torchport"),
        lock_digest=digest,
        reused=False,
        build_s=time.perf_counter() - start,
    )
    problem = verify_env(built, spec, freeze.stdout)
    if problem is not None:  # no marker: the next call builds it again
        raise EnvError(f"built in {path}, but {problem}")
    os.replace(marker + ".tmp", marker)  # written last: a folder without it is half-built
    return built
