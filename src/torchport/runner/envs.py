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
        if not self.name or not all(c.isalnum() or c in "._-" for c in self.name):
            raise EnvError(
                f"environment name '{self.name}' must be letters, digits, '.', '_' or '-'"
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


def _uv(uv: str, args: list[str], log, timeout_s: float | None) -> float:
    """Run one uv command; its wall time in seconds."""
    log(f"$ uv {' '.join(args)}")
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [uv, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        raise EnvError(f"uv {args[0]} {args[1]} ran past {timeout_s:.0f} s") from None
    if done.returncode != 0:
        tail = "\n".join(done.stdout.strip().splitlines()[-15:])
        raise EnvError(f"uv {' '.join(args[:2])} failed (exit {done.returncode}):\n{tail}")
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
            if not done.get("bytecode"):
                log(
                    f"[{spec.name}] built without compiled bytecode: its processes compile "
                    "torch from source where .pyc files cannot be written; --rebuild compiles it"
                )
            return BuiltEnv(
                name=spec.name,
                path=path,
                python=python,
                torchport=os.path.join(path, "bin", "torchport"),
                lock_digest=done["lock_digest"],
                reused=True,
                build_s=time.perf_counter() - start,
            )
        except (OSError, ValueError, KeyError):
            log(f"[{spec.name}] {marker} is unreadable: building again")
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
    freeze = subprocess.run(
        [uv, "pip", "freeze", "--python", python], capture_output=True, text=True, check=False
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
    os.replace(marker + ".tmp", marker)  # written last: a folder without it is half-built
    return BuiltEnv(
        name=spec.name,
        path=path,
        python=python,
        torchport=os.path.join(path, "bin", "torchport"),
        lock_digest=digest,
        reused=False,
        build_s=time.perf_counter() - start,
    )
