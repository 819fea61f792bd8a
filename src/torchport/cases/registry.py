"""Suites, found through the ``torchport.suites`` entry-point group (built-ins included)."""

from __future__ import annotations

import fnmatch
import hashlib
import os
from typing import cast

from torchport import plugins
from torchport.cache import cache_root, read_json, write_json
from torchport.cases.base import Case

WORKLOAD_SUITE = "workload"


class UnknownSuite(LookupError):
    pass


class NoMatchingCases(LookupError):
    pass


def _suite_targets() -> dict[str, str]:
    return plugins.targets("torchport.suites")


def suite_names() -> list[str]:
    return sorted(_suite_targets())


def suite_doc(name: str) -> str:
    """First line of the suite function's docstring, without building its cases."""
    fn = plugins.load(_suite_targets()[name])
    return (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else ""


def load_suite(name: str, *, workload: str | None = None) -> list[Case]:
    if name == WORKLOAD_SUITE:
        from torchport.cases.workload import WorkloadCase

        # None only when the suite is listed (``torchport cases workload``).
        return [WorkloadCase(cast(str, workload))]
    target = _suite_targets().get(name)
    if target is None:
        raise UnknownSuite(
            f"unknown suite '{name}'; known: {', '.join(suite_names())} "
            "('torchport suites' lists them)"
        )
    return list(plugins.load(target)())


BUILTIN_CASES = "torchport.cases."


def builtin_catalog_key() -> str:
    """What a built-in suite's listing depends on when it names nothing itself (smoke builds
    hf cases, so its listing imported transformers: 10-18 s on every call): the installed
    torch and transformers, and every source file of the cases package."""
    from importlib.metadata import PackageNotFoundError, version
    from pathlib import Path

    import torchport.cases as package

    def installed(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "none"

    digest = hashlib.sha256()
    for source in sorted(Path(package.__file__).parent.glob("*.py")):
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    return (
        f"torch-{installed('torch')}-transformers-{installed('transformers')}"
        f"-{digest.hexdigest()[:12]}"
    )


def describe_suite(name: str) -> list[dict]:
    """``case.describe()`` of every case of suite ``name``, for listings. A suite whose
    function has ``catalog_key()`` (what its case list and facts depend on: package versions,
    its own source) is described once per key and read from the cache after that: building
    the hf suite's tags imports transformers and reads 196 configs (about 30 s)."""
    if name == WORKLOAD_SUITE:
        return [case.describe() for case in load_suite(name)]
    target = _suite_targets().get(name)
    key_fn = getattr(plugins.load(target), "catalog_key", None) if target else None
    if key_fn is None and target and target.startswith(BUILTIN_CASES):
        key_fn = builtin_catalog_key
    if key_fn is None:  # another package's suite: described afresh each time
        return [case.describe() for case in load_suite(name)]
    path = os.path.join(cache_root("catalogs"), f"{name}-{key_fn()}.json")
    cached = read_json(path)
    if isinstance(cached, list):
        return cached
    rows = [case.describe() for case in load_suite(name)]
    write_json(path, rows)
    return rows


def select(
    cases: list[Case], include: tuple[str, ...] = (), exclude: tuple[str, ...] = ()
) -> list[Case]:
    """Cases whose id (or id without the suite prefix) matches an include glob and no exclude."""

    def matches(case: Case, globs) -> bool:
        short = case.id.split("/", 1)[-1]
        return any(fnmatch.fnmatch(case.id, g) or fnmatch.fnmatch(short, g) for g in globs)

    chosen = [c for c in cases if (not include or matches(c, include)) and not matches(c, exclude)]
    if not chosen:
        raise NoMatchingCases(
            f"no case matches --cases {','.join(include) or '*'}"
            + (f" --exclude {','.join(exclude)}" if exclude else "")
            + "; 'torchport cases SUITE' lists the ids"
        )
    return chosen


def find_case(suite: str, case_id: str, *, workload: str | None = None) -> Case:
    for case in load_suite(suite, workload=workload):
        if case.id == case_id:
            return case
    raise NoMatchingCases(f"suite '{suite}' has no case '{case_id}'")
