"""A TorchCTS JSON report read, checked and written as a torchport export file, which
``exchange.import_file`` then checks and imports like any other: one run, all or nothing
(docs/suites/ops.md, "Side by side with TorchCTS").

TorchCTS 0.4 writes ``results/<hardware_key>_latest.json``: a small reference naming the run's
file under ``<hardware_key>_history/``, which holds the report, either as plain JSON
(``metadata``, ``results`` and ``skips`` by pytest node id, ``harness_probe_failures``) or in
its lossless compact form (``torchcts_compact_results``: the same object with its repeated keys
and strings put in two tables). All three are read here, from the format as TorchCTS's source
defines it; a reference is followed within its own folder only.

Bad input (not JSON, cut off, the wrong shape, past MAX_BYTES, a field of the wrong type, a
number past 64 bits) is one TorchctsError naming the problem and the fix, raised before
anything is written. Text is kept as recorded except what a knowledge base cannot hold: a NUL
or a lone surrogate is escaped (``\\x00``); a NaN or infinite figure of a test is dropped, one
in the metadata kept as its text. The mapping of TorchCTS's verdicts onto the status ladder is
records/torchcts.py. No torch.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import posixpath
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from torchport.kb.base import StoreError
from torchport.kb.exchange_lines import FORMAT, BadLine, parse
from torchport.records import torchcts
from torchport.records.torchcts import FILTERED, STATUSES, CtsTest

MAX_BYTES = 128 * 2**20  # a whole TorchCTS run (19 395 tests): about 26 MiB plain, 10 compact
MAX_ID_CHARS = 4096  # a pytest node id; a test id past it is no test's
REFERENCE_HOPS = 8
COMPACT, REFERENCE = "torchcts_compact_results", "torchcts_result_reference"
COMPACT_VERSION = REFERENCE_VERSION = 1
TOKEN_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
FIX = "pass the JSON report TorchCTS wrote (results/<hardware_key>_latest.json)"
# How a report begins (its keys sorted, as TorchCTS writes them, or indented): sniffed by
# looks_like so `torchport import` needs no --format for one.
_HEAD = re.compile(
    rb'\s*\{\s*"(format|artifact|harness_probe_failures|metadata|results|skips)"\s*:'
)
HEAD_BYTES = 4096
# TorchCTS's metadata nests 3 deep; it is kept in the run's config, which an export line holds
# under its own few levels, all within exchange_lines.MAX_DEPTH.
METADATA_DEPTH = 16
INT_RANGE = (-(2**63), 2**63 - 1)


class TorchctsError(StoreError):
    """A file that is not a TorchCTS report torchport can import, with what to do (the
    import command shows it as it shows exchange.ExchangeError: one line, exit 2)."""


@dataclass(frozen=True)
class Report:
    """A checked report: the file read (after its references), its tests and its run."""

    path: str
    sha256: str
    size_bytes: int
    metadata: dict
    tests: list[CtsTest]
    probe_failures: int = 0
    counts: dict[str, int] = field(default_factory=dict)  # by TorchCTS status, FILTERED too


def looks_like(path: str) -> bool:
    """Whether ``path`` begins as a TorchCTS report does (a torchport export begins with its
    header line, a knowledge base with SQLite's magic)."""
    try:
        with open(path, "rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError:
        return False
    return bool(_HEAD.match(head.removeprefix(b"\xef\xbb\xbf")))


# -- reading --------------------------------------------------------------------------------
def _fail(path: str, problem: str, fix: str = FIX) -> TorchctsError:
    return TorchctsError(f"'{path}' {problem}; {fix}")


def _load(path: str) -> tuple[Any, bytes]:
    try:
        size = os.path.getsize(path)
        if size > MAX_BYTES:
            raise _fail(
                path,
                f"is {size / 2**20:.0f} MiB, past the {MAX_BYTES // 2**20} MiB a TorchCTS "
                "report may be",
                "import the report of a narrower run (torchcts run --suite, -k)",
            )
        with open(path, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise _fail(path, f"cannot be read ({exc.strerror})") from None
    if len(raw) > MAX_BYTES:  # it grew after its size was read
        raise _fail(path, "grew past the size a TorchCTS report may be while it was read")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise _fail(path, "is not UTF-8 text") from None
    try:
        return parse(text), raw
    except BadLine as exc:
        raise _fail(path, f"{exc} (cut off, or not a TorchCTS report)") from None


def _follow(path: str, reference: dict, hops: int) -> str:
    """The report a ``*_latest.json`` reference names: a relative path inside its folder."""
    if reference.get("format_version") != REFERENCE_VERSION:
        raise _fail(path, "is a TorchCTS reference of an unknown version")
    target = reference.get("artifact")
    if not isinstance(target, str) or not target or "\x00" in target:
        raise _fail(path, "is a TorchCTS reference without its artifact's path")
    if posixpath.isabs(target) or ".." in target.split("/") or "\\" in target:
        raise _fail(
            path, "names a report outside its own folder", f"pass the report itself ({FIX})"
        )
    if hops >= REFERENCE_HOPS:
        raise _fail(path, f"is one of more than {REFERENCE_HOPS} references in a row")
    return os.path.join(os.path.dirname(path), *target.split("/"))


def _token(index: int) -> str:
    digits = ""
    while True:
        index, rest = divmod(index, len(TOKEN_DIGITS))
        digits = TOKEN_DIGITS[rest] + digits
        if index == 0:
            return digits


def _expand(path: str, encoded: dict) -> Any:
    """A compact report as the object it stands for: a key is a token of ``key_table`` (or,
    with a leading ``~``, itself), ``{"$": n}`` is ``string_table[n]``."""
    if encoded.get("format_version") != COMPACT_VERSION:
        raise _fail(path, "is a compact TorchCTS report of an unknown version")
    keys, strings = encoded.get("key_table"), encoded.get("string_table")
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise _fail(path, "is a compact TorchCTS report whose key_table is not a list of text")
    if not isinstance(strings, list) or not all(isinstance(s, str) for s in strings):
        raise _fail(path, "is a compact TorchCTS report whose string_table is not a list of text")
    tokens: dict[str, str] = {_token(i): key for i, key in enumerate(keys)}

    def expand(value: Any) -> Any:  # depth is bounded by parse (exchange_lines.MAX_DEPTH)
        if isinstance(value, list):
            return [expand(v) for v in value]
        if not isinstance(value, dict):
            return value
        if set(value) == {"$"}:
            index = value["$"]
            if isinstance(index, bool) or not isinstance(index, int):
                raise _fail(path, "holds a string reference that is not a number")
            if not 0 <= index < len(strings):
                raise _fail(path, f"holds a string reference past its table ({index})")
            return strings[index]
        out: dict[str, Any] = {}
        for key, item in value.items():
            key = str(key)  # a JSON object's keys are text
            name = key[1:] if key.startswith("~") else tokens[key] if key in tokens else key
            if name in out:
                raise _fail(path, f"holds the key {name[:40]!r} twice in one object")
            out[name] = expand(item)
        return out

    return expand(encoded.get("payload"))


def _document(path: str) -> tuple[str, dict, bytes]:
    """The report's plain object, following references and expanding the compact form."""
    for hops in range(REFERENCE_HOPS + 1):
        value, raw = _load(path)
        if not isinstance(value, dict):
            raise _fail(path, f"holds a JSON {type(value).__name__}, not a TorchCTS report")
        kind = value.get("format")
        if kind == REFERENCE:
            path = _follow(path, value, hops)
            continue
        if kind == COMPACT:
            value = _expand(path, value)
            if not isinstance(value, dict):
                raise _fail(path, "is a compact TorchCTS report whose payload is not an object")
        elif kind is not None:
            raise _fail(path, f"has the format {str(kind)[:40]!r}, not a TorchCTS report's")
        return path, value, raw
    raise _fail(path, f"is one of more than {REFERENCE_HOPS} references in a row")


def clean(value: Any) -> Any:
    """``value`` as a knowledge base can hold it: NUL and lone surrogates escaped, a number
    past 64 bits (parse refuses one; not so a caller's) or not finite kept as its text."""
    if isinstance(value, str):
        if "\x00" in value:
            value = value.replace("\x00", "\\x00")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            value = value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value if INT_RANGE[0] <= value <= INT_RANGE[1] else str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, list):
        return [clean(v) for v in value]
    if isinstance(value, dict):
        return {clean(k): clean(v) for k, v in value.items()}
    return str(value)


TEXT_FIELDS = (
    "suite",
    "op",
    "dtype",
    "phase",
    "input_condition",
    "error_type",
    "error_message",
    "classification",
    "last_tested",
)
NUMBER_FIELDS = ("duration_ms", "maxerr", "cosim")


class _Bad(Exception):
    """A field's problem, in words; the caller says where."""


def _text(record: dict, key: str) -> str | None:
    value = record.get(key)
    if value is not None and not isinstance(value, str):
        raise _Bad(f"its '{key}' is not text")
    return clean(value)


def _number(record: dict, key: str) -> float | None:
    value = record.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Bad(f"its '{key}' is not a number")
    value = float(value)
    return value if math.isfinite(value) else None


def _test(node_id: str, record: Any, *, ran: bool, skip: Any) -> CtsTest:
    if not isinstance(record, dict):
        raise _Bad("is not an object")
    if ran:
        status = record.get("status")
        if status not in STATUSES:
            raise _Bad(
                f"has the status {str(status)[:20]!r} (TorchCTS writes {', '.join(STATUSES)})"
            )
    else:
        status = FILTERED
    texts = {key: _text(record, key) for key in TEXT_FIELDS}
    numbers = {key: _number(record, key) for key in NUMBER_FIELDS}
    process = record.get("subprocess")
    if process is not None and not isinstance(process, dict):
        raise _Bad("its 'subprocess' is not an object")
    process = process or {}
    timed_out = process.get("timed_out")
    if timed_out is not None and not isinstance(timed_out, bool):
        raise _Bad("its subprocess 'timed_out' is not true or false")
    returncode = process.get("returncode")
    if returncode is not None and (isinstance(returncode, bool) or not isinstance(returncode, int)):
        raise _Bad("its subprocess 'returncode' is not a whole number")
    golden = record.get("golden_pass")
    if golden is not None and not isinstance(golden, bool):
        raise _Bad("its 'golden_pass' is not true or false")
    warning = record.get("quality_warning")  # text, or false when there is none
    if warning is not None and not isinstance(warning, (str, bool)):
        raise _Bad("its 'quality_warning' is not text")
    diagnosis = record.get("diagnosis")
    if diagnosis is not None and not isinstance(diagnosis, dict):
        raise _Bad("its 'diagnosis' is not an object")
    # A test skipped while it ran is in both tables: its reason is the skip table's.
    reasons = skip if isinstance(skip, dict) else record
    return CtsTest(
        id=clean(node_id),
        status=status,
        suite=texts["suite"],
        op=texts["op"],
        dtype=texts["dtype"],
        phase=texts["phase"],
        input_condition=texts["input_condition"],
        error_type=texts["error_type"],
        error_message=texts["error_message"],
        classification=texts["classification"],
        skip_reason=_text(reasons, "skip_reason") or _text(record, "skip_reason"),
        detail=_text(reasons, "detail") or _text(record, "skip_detail"),
        duration_ms=numbers["duration_ms"],
        maxerr=numbers["maxerr"],
        cosim=numbers["cosim"],
        finished_at=_iso(texts["last_tested"]),
        timed_out=bool(timed_out),
        signal=_text(process, "signal"),
        returncode=returncode,  # parse refused a number past 64 bits
        diagnosis=_text(diagnosis or {}, "likely_cause"),
        golden_pass=golden,
        quality_warning=clean(warning) if isinstance(warning, str) and warning else None,
    )


def _iso(stamp: str | None) -> str | None:
    """A TorchCTS time (``2026-12-07T15:50:28.816279Z``) as torchport writes one, in UTC to
    the second; None for text that is no time."""
    if not stamp:
        return None
    try:
        when = datetime.fromisoformat(stamp)
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        return when.astimezone(timezone.utc).isoformat(timespec="seconds")
    except (ValueError, OverflowError):  # not a time, or one past year 1 or 9999 in UTC
        return None


def _depth(value: Any) -> int:
    """How deep ``value`` nests (parse bounded it: exchange_lines.MAX_DEPTH)."""
    children = (
        value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    )
    return 1 + max((_depth(v) for v in children), default=0)


def _table(path: str, doc: dict, key: str) -> dict:
    table = doc.get(key, {})
    if not isinstance(table, dict):
        raise _fail(path, f"has a '{key}' that is not an object of tests by id")
    return table


def read(path: str) -> Report:
    """``path`` (a report, or a reference to one) read and checked whole."""
    path, doc, raw = _document(path)
    if "metadata" not in doc or "results" not in doc:
        raise _fail(path, "has no 'metadata' and 'results' (the shape of a TorchCTS report)")
    metadata = doc["metadata"]
    if not isinstance(metadata, dict):
        raise _fail(path, "has a 'metadata' that is not an object")
    for key in ("device_name", "pytorch_version", "timestamp"):
        if not isinstance(metadata.get(key), str) or not metadata[key].strip():
            raise _fail(path, f"has no '{key}' in its metadata (a cut or edited report?)")
    if _iso(metadata["timestamp"]) is None:
        raise _fail(
            path, f"has a metadata 'timestamp' that is no time: {metadata['timestamp'][:40]!r}"
        )
    if _depth(metadata) > METADATA_DEPTH:
        raise _fail(path, f"has metadata nested deeper than {METADATA_DEPTH} levels")
    if metadata.get("collect_only") is True:
        raise _fail(path, "is a collection-only run: no test ran", "import the report of a run")
    results, skips = _table(path, doc, "results"), _table(path, doc, "skips")
    probes = doc.get("harness_probe_failures", [])
    if not isinstance(probes, list):
        raise _fail(path, "has 'harness_probe_failures' that are not a list")
    tests = []
    for table, ran in ((results, True), (skips, False)):
        for node_id, record in table.items():
            if not ran and node_id in results:
                continue  # skipped while it ran: its result has it
            if not node_id or len(node_id) > MAX_ID_CHARS:
                raise _fail(path, f"has a test id of {len(node_id)} characters")
            try:
                tests.append(_test(node_id, record, ran=ran, skip=skips.get(node_id)))
            except _Bad as exc:
                where = "result" if ran else "filtered test"
                raise _fail(path, f"has a {where} {clean(node_id)[:120]!r} that {exc}") from None
    if not tests:
        raise _fail(path, "holds no tests; nothing to import", "import the report of a run")
    return Report(
        path=path,
        sha256=hashlib.sha256(raw).hexdigest(),
        size_bytes=len(raw),
        metadata=clean(metadata),
        tests=tests,
        probe_failures=len(probes),
        counts=dict(Counter(t.status for t in tests)),
    )


# -- as a torchport export file ---------------------------------------------------------------
def _environment_id(data: dict) -> str:
    """As the store names an environment (kb/sql_store.py ``_put_environment``): the import
    holds the id to its content, so a difference here is refused there, never stored."""
    blob = json.dumps(data, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def run_id(report: Report) -> str:
    """The same report is the same run (a second import is skipped): its time and its bytes."""
    when = datetime.fromisoformat(str(_iso(report.metadata["timestamp"])))
    return when.strftime("%Y%m%d-%H%M%S-cts") + report.sha256[:6]


def lines(report: Report, results: list[dict]) -> Iterator[dict]:
    """The export file's records for ``report``, its ``results`` (records/torchcts.py) made
    from its tests."""
    meta = report.metadata
    environment = {
        "torch": meta["pytorch_version"],
        "device": meta["device_name"],
        "hardware_key": meta.get("hardware_key"),
        "recorded_by": "TorchCTS",
    }
    env_id = _environment_id(environment)
    rid = run_id(report)
    finished = str(_iso(meta["timestamp"]))
    elapsed = meta.get("elapsed_sec")
    started = finished
    if isinstance(elapsed, (int, float)) and not isinstance(elapsed, bool) and 0 <= elapsed < 1e8:
        end = datetime.fromisoformat(meta["timestamp"])  # to the microsecond, as recorded
        end = end if end.tzinfo else end.replace(tzinfo=timezone.utc)
        with contextlib.suppress(OverflowError):  # a start before year 1: its finish stands
            start = end.astimezone(timezone.utc) - timedelta(seconds=elapsed)
            started = start.isoformat(timespec="seconds")
    yield {
        "kind": "header",
        "format": FORMAT,
        "runs": [rid],
        "exported_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    yield {"kind": "environment", "id": env_id, "data": environment}
    yield {
        "kind": "run",
        "id": rid,
        "started_at": started,
        "finished_at": finished,
        "state": "complete" if meta.get("session_completed") is True else "interrupted",
        "host": None,
        "command": "torchcts run (imported from its JSON report)",
        "suite": torchcts.SOURCE,
        "device": meta["device_name"],
        "config": {
            "torchcts": {
                "metadata": meta,
                "report_sha256": report.sha256,
                "tests": report.counts,
                "harness_probe_failures": report.probe_failures,
            }
        },
        "plan": [[r["case"], r["mode"]] for r in results],
        "labels": {"source": torchcts.SOURCE},
        "environment_ids": [env_id],
    }
    for result in results:  # a case of tests never run: finished when the run did
        done = result["finished_at"] or finished
        yield {"kind": "result", "run_id": rid, **result, "finished_at": done, "ops": []}
    yield {
        "kind": "end",
        "runs": 1,
        "results": len(results),
        "notes": 0,
        "artifacts": 0,
        "environments": 1,
    }


def write_export(path: str, out_path: str) -> dict:
    """Read the report at ``path`` and write it to ``out_path`` as a torchport export file;
    returns what it holds (``origin``: shown by `torchport import`)."""
    report = read(path)
    results = torchcts.results(report.tests)
    with open(out_path, "w", encoding="utf-8") as out:
        for obj in lines(report, results):
            out.write(json.dumps(obj, sort_keys=True, separators=(",", ":")) + "\n")
    return {
        "format": torchcts.SOURCE,
        "report": report.path,
        "device": report.metadata["device_name"],
        "torch": report.metadata["pytorch_version"],
        "tests": {s: report.counts.get(s, 0) for s in (*STATUSES, FILTERED)},
        "results": dict(Counter(r["status"] for r in results)),
        # PASS within TorchCTS's usable tolerance only (outside its golden one)
        "usable_only": sum(
            1 for t in report.tests if t.status == "PASS" and t.golden_pass is False
        ),
        "run": run_id(report),
    }
