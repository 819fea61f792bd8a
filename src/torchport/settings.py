"""Every ``TORCHPORT_*`` environment variable, parsed in one place with its range.

``value(NAME)`` is the parsed value of one (its default when unset or empty); ``check_all()``
parses every one that is set, so a bad value stops a command before it starts work: one line
naming the variable, what it holds and what it may hold (the CLI's exit 2). Nothing here
imports torch or another torchport module, so every layer may read its settings here.

To add one: a ``Setting`` in ``SETTINGS`` (its kind and range), then ``value(NAME)`` where it
is read; ``docs/reliability.md`` lists them.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MODULE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")


class SettingError(ValueError):
    """A ``TORCHPORT_*`` variable holds a value torchport cannot use; the message names it."""


@dataclass(frozen=True)
class Setting:
    name: str
    kind: str  # int | float | flag | folder | module | choice | text
    default: Any = None
    low: float | None = None
    high: float | None = None
    what: str = ""  # what it is for (the error line says it)
    choices: tuple[str, ...] = ()  # the values a ``choice`` may hold ('' is its default)


_S = Setting
SETTINGS = {
    s.name: s
    for s in (
        _S("TORCHPORT_DB", "text", None, what="the knowledge base (a SQLite path or URL)"),
        _S("TORCHPORT_CACHE", "folder", None, what="the cache folder"),
        _S("TORCHPORT_REFERENCE_CACHE", "folder", None, what="the float64 reference cache"),
        _S("TORCHPORT_SHOW_SUMMARY_ABOVE", "int", 5000, 0, 10**9, "results before show sums up"),
        _S(
            "TORCHPORT_WORKLOAD_CHECK_TIMEOUT_S",
            "float",
            120.0,
            0.1,
            86400.0,
            "seconds a workload's check may take",
        ),
        _S("TORCHPORT_COLD_WORKER", "text", None, what="a worker with empty compile caches"),
        _S("TORCHPORT_TOKEN", "text", None, what="the dashboard's token"),
        _S("TORCHPORT_PRIVATEUSE1_MODULE", "module", None, what="the backend module to import"),
        _S("TORCHPORT_TPU_STRICT", "flag", False, what="TPU strict mode"),
        _S("TORCHPORT_SIMDEV_STRICT", "flag", False, what="simdev strict mode"),
        _S("TORCHPORT_SIMDEV_DONATE", "flag", False, what="simdev donation"),
        _S("TORCHPORT_SIMDEV_NATIVE_OPS", "text", "", what="simdev's native ops"),
        _S("TORCHPORT_SIMDEV_WRONG_OPS", "text", "", what="simdev's planted wrong ops"),
        _S("TORCHPORT_SIMCCL_FAULT", "text", "", what="simccl's planted fault"),
        _S("TORCHPORT_SIMDEV_BUGS", "text", "", what="simdev's planted conformance bugs"),
        _S(
            "TORCHPORT_SIMDEV_FLOAT64",
            "choice",
            "",
            what="simdev without float64 arithmetic",
            choices=("refuse", "float32"),
        ),
        _S("TORCHPORT_ACCDEV_KERNEL_S", "float", 0.002, 0.0, 60.0, "accdev's kernel seconds"),
        _S("TORCHPORT_WORKER_MAX_MAPS", "int", None, 1, 2**31 - 1, "a worker's memory-map limit"),
        _S(
            "TORCHPORT_WORKER_MAX_RSS_BYTES",
            "int",
            None,
            1,
            2**62,
            "a worker's resident-memory limit in bytes",
        ),
        # set by torchport for its own children
        _S("TORCHPORT_DIST_OUT", "text", None, what="a world's output folder"),
        _S("TORCHPORT_SUPERVISOR_PID", "int", None, 1, 2**31 - 1, "the supervisor's pid"),
        _S("TORCHPORT_CHILD_TOKEN", "text", None, what="a supervised child's token"),
        _S("TORCHPORT_WORKLOAD_PATH", "text", None, what="a workload's folder"),
    )
}

FLAGS = {"": False, "0": False, "1": True, "false": False, "true": True, "no": False, "yes": True}


def _bad(s: Setting, raw: str, may: str) -> SettingError:
    shown = raw if len(raw) <= 60 else raw[:57] + "..."
    return SettingError(
        f"{s.name}={shown!r} is not usable ({s.what}): it must be {may}; set it so or unset it"
    )


def _range(s: Setting) -> str:
    def shown(x: float | None) -> str:
        return f"{int(x)}" if x is not None and float(x).is_integer() else f"{x}"

    return f"from {shown(s.low)} to {shown(s.high)}"


def parse(name: str, raw: str | None) -> Any:
    """The value of ``raw`` for the setting ``name`` (its default for None or '')."""
    s = SETTINGS[name]
    if raw is None or raw == "":
        return s.default
    if "\x00" in raw:
        raise _bad(s, raw, "text without a NUL byte")
    if s.kind in ("int", "float"):
        try:
            number = int(raw.strip()) if s.kind == "int" else float(raw.strip())
        except ValueError:
            raise _bad(s, raw, f"{'a whole number' if s.kind == 'int' else 'a number'} "
                       f"{_range(s)}") from None  # fmt: skip
        assert s.low is not None and s.high is not None
        if not (math.isfinite(number) and s.low <= number <= s.high):
            raise _bad(s, raw, f"a number {_range(s)}")
        return number
    if s.kind == "flag":
        flag = FLAGS.get(raw.strip().lower())
        if flag is None:
            raise _bad(s, raw, "0 or 1")
        return flag
    if s.kind == "module":
        if not MODULE_RE.match(raw.strip()):
            raise _bad(s, raw, "a dotted module name (e.g. torch_neuronx)")
        return raw.strip()
    if s.kind == "folder":
        _check_folder(s, raw)
        return raw
    if s.kind == "choice":
        chosen = raw.strip().lower()
        if chosen not in s.choices:
            raise _bad(s, raw, "one of " + ", ".join(s.choices))
        return chosen
    return raw


def _check_folder(s: Setting, raw: str) -> None:
    """A folder that exists, or a new path whose nearest existing parent is a folder."""
    path = os.path.abspath(raw)
    if os.path.exists(path):
        if not os.path.isdir(path):
            raise _bad(s, raw, "a folder (it names something that is not one)")
        return
    parent = os.path.dirname(path)
    while not os.path.lexists(parent) and parent != os.path.dirname(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise _bad(s, raw, f"a folder or a new path ({parent} is not a folder)")


def value(name: str) -> Any:
    """The parsed value of ``name`` now (SettingError when it holds a bad one)."""
    return parse(name, os.environ.get(name))


def check_all(environ: Mapping[str, str] | None = None) -> None:
    """Parse every known ``TORCHPORT_*`` variable that is set: SettingError at the first bad."""
    given: Mapping[str, str] = os.environ if environ is None else environ
    for name in SETTINGS:
        if name in given:
            parse(name, given[name])
