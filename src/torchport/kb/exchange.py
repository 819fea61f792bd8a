"""Export and import: runs moved between knowledge bases as JSON lines, so two teams can merge
their evidence.

A file holds a header, then per run its environments, the run, its results (each with its op
table), the hashes of the artifacts its results name, and its notes, then an end line with the
counts (a cut-off file is refused). Artifacts travel by reference: path, sha256 and size, read
from the store or hashed from the file where it still exists.

A whole knowledge base imports the same way (``import_from``: an SQLite file or a database
URL, e.g. a laptop's file into the team's PostgreSQL server): every run in it is exported to a
temporary file, which is imported as above; so is a TorchCTS JSON report, written there as
one run by kb/torchcts.py.

Import is idempotent by run id: a run already present with the same content is skipped; one
present with different content is a conflicting duplicate and the whole import is refused
before anything is written. Notes are merged (a note already there is not added twice).
Everything a file adds commits together. Works through the Store protocol only; no torch.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import itertools
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import IO, Any

from torchport.kb import forked
from torchport.kb.base import StoreError
from torchport.kb.exchange_lines import FORMAT, BadLine, check, parse
from torchport.records.result import Recorded

RUN_KEYS = (
    "id",
    "started_at",
    "finished_at",
    "state",
    "host",
    "command",
    "suite",
    "device",
    "config",
    "plan",
    "labels",
    "environment_ids",
)
RESULT_KEYS = (
    "case",
    "case_version",
    "mode",
    "status",
    "stage",
    "grade",
    "metrics",
    "findings",
    "durations",
    "artifacts",
    "error",
    "probe_versions",
    "started_at",
    "finished_at",
    "ops",
)
NOTE_KEYS = ("run_id", "case", "mode", "author", "text", "created_at")
KINDS = ("header", "environment", "run", "result", "artifact", "note", "end")
DIGEST_MOD = 2**256
WRITE_LINES = 1000  # export lines joined into one write


class ExchangeError(StoreError):
    """A file that cannot be imported (or exported), with what to do."""


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def _hash(obj: Any) -> int:
    return int(hashlib.sha256(_canonical(obj).encode()).hexdigest(), 16)


def result_line(run_id: str, result: dict) -> dict:
    return {"kind": "result", "run_id": run_id, **{k: result.get(k) for k in RESULT_KEYS}}


def run_line(run: dict) -> dict:
    return {"kind": "run", **{k: run.get(k) for k in RUN_KEYS}}


@dataclass
class RunDigest:
    """What a run holds, independent of the order its results come in."""

    run: int = 0
    results: int = 0  # sum of the results' hashes, mod 2**256
    count: int = 0

    def add(self, line: dict) -> None:
        self.results = (self.results + _hash(line)) % DIGEST_MOD
        self.count += 1


def stored_digest(store, run_id: str) -> RunDigest:
    digest = RunDigest(run=_hash(run_line(store.get_run(run_id))))
    for result in store._results_stream(run_id=run_id, order="case", with_ops=True):
        digest.add(result_line(run_id, result))
    return digest


def _sha256_file(path: str) -> tuple[str, int] | None:
    try:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest(), os.path.getsize(path)
    except OSError:
        return None


# -- export -----------------------------------------------------------------------------------
def export_runs(store, run_ids: list[str], out: IO[str]) -> dict:
    """Write ``run_ids`` to ``out`` (streamed); returns the counts written."""
    runs = [store.get_run(run_id) for run_id in dict.fromkeys(run_ids)]
    for run in runs:
        if run["state"] == "running":  # a snapshot would conflict with the finished run later
            raise ExchangeError(
                f"run {run['id']} is still running; export it when it has "
                "finished (or was interrupted)"
            )
    counts = {"runs": len(runs), "results": 0, "notes": 0, "artifacts": 0, "environments": 0}

    def write(obj: dict) -> None:
        out.write(_canonical(obj) + "\n")

    write(
        {
            "kind": "header",
            "format": FORMAT,
            "runs": [r["id"] for r in runs],
            "exported_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
    )
    written_envs: set[str] = set()
    for run in runs:
        for env_id in run["environment_ids"]:
            if env_id not in written_envs:
                write({"kind": "environment", "id": env_id, "data": store._environment(env_id)})
                written_envs.add(env_id)
        write(run_line(run))
        paths, n = _result_lines(store, run["id"], out)
        counts["results"] += n
        known = {a["path"]: a for a in store._artifacts(run["id"])}
        for path in dict.fromkeys([*known, *paths]):
            found = known.get(path)
            if found is None:
                hashed = _sha256_file(path)
                found = {
                    "path": path,
                    "sha256": hashed[0] if hashed else None,
                    "bytes": hashed[1] if hashed else None,
                }
            write({"kind": "artifact", "run_id": run["id"], **found})
            counts["artifacts"] += 1
        for note in store.notes(run_id=run["id"]):
            write({"kind": "note", **{k: note.get(k) for k in NOTE_KEYS}})
            counts["notes"] += 1
    counts["environments"] = len(written_envs)
    write({"kind": "end", **counts})
    return counts


def _result_lines(store, run_id: str, out: IO[str]) -> tuple[dict[str, None], int]:
    """Write a run's result lines; returns the artifact paths they name (in order) and how
    many were written. A large run is cut in parts (``store.line_parts``), one a core: this
    process writes the first while forked children (kb/forked.py) put the others' lines
    in files of their own, appended in order after it (the same bytes as one process writes,
    in about half the time on two cores). A stream with no bytes beneath (an in-memory one)
    is written by this process alone."""
    parts = store._line_parts(run_id, forked.workers() if hasattr(out, "buffer") else 1)
    encoding = getattr(out, "encoding", None) or "utf-8"
    with contextlib.ExitStack() as stack:
        spills = [stack.enter_context(tempfile.TemporaryFile()) for _ in parts[1:]]
        (paths, n), theirs = forked.spread(
            list(zip(parts, [None, *spills], strict=True)),
            lambda part: _write_result_lines(store, run_id, part[0], out),
            functools.partial(_spill_part, store, run_id, encoding),
        )
        for spill, (their_paths, their_n) in zip(spills, theirs, strict=True):
            out.flush()
            spill.seek(0)
            shutil.copyfileobj(spill, out.buffer, 1 << 20)  # type: ignore[attr-defined]
            paths.update(dict.fromkeys(their_paths))
            n += their_n
    return paths, n


def _spill_part(
    store, run_id: str, encoding: str, part: tuple[tuple[int, int] | None, IO[bytes]]
) -> tuple[list[str], int]:
    """In a forked child: one part's lines into its spill file, read on connections of its
    own."""
    ids, spill = part
    with (
        store._reopened() as own,
        open(spill.fileno(), "w", encoding=encoding, closefd=False) as text,
    ):
        paths, n = _write_result_lines(own, run_id, ids, text)
    return list(paths), n


def _write_result_lines(
    store, run_id: str, ids: tuple[int, int] | None, out: IO[str]
) -> tuple[dict[str, None], int]:
    """Each line as the store put it together (no parse and encode per result), or made
    here; written a thousand lines at a time (a write a line costs more than the line)."""
    paths: dict[str, None] = {}
    n = 0
    lines: list[str] = []
    for line, result, artifacts in store._export_lines(run_id, ids):
        lines.append(line if line is not None else _canonical(result_line(run_id, result)))
        if artifacts:
            paths.update(dict.fromkeys(str(p) for p in artifacts))
        if len(lines) == WRITE_LINES:
            out.write("\n".join(lines) + "\n")
            n += len(lines)
            lines.clear()
    if lines:
        out.write("\n".join(lines) + "\n")
        n += len(lines)
    return paths, n


# -- import -----------------------------------------------------------------------------------
@dataclass
class ImportReport:
    added: dict[str, int] = field(default_factory=dict)  # run id -> results
    present: list[str] = field(default_factory=list)  # identical, skipped
    notes_added: int = 0
    environments: int = 0
    origin: dict | None = None  # what a TorchCTS report held (kb/torchcts.py write_export)

    def to_dict(self) -> dict:
        out = {
            "added": self.added,
            "already_present": self.present,
            "notes_added": self.notes_added,
            "environments": self.environments,
        }
        if self.origin is not None:
            out["origin"] = self.origin
        return out


def _lines(path: str, sha: Any, *, results_checked: bool = False) -> Iterator[tuple[int, dict]]:
    """The file's records, each checked (exchange_lines.check) as it enters; ``sha`` takes
    every byte read. ``results_checked``: the file's results were checked on an earlier read
    of the same bytes (``Checked.sha256``), so a result line is only parsed."""
    try:
        f = open(path, encoding="utf-8")
    except OSError as exc:
        raise ExchangeError(
            f"cannot read '{path}' ({exc.strerror}); pass an export file made by 'torchport export'"
        ) from None
    with f:
        for number, text in enumerate(f, 1):
            sha.update(text.encode("utf-8", "surrogateescape"))
            if not text.strip():
                continue
            try:
                obj = parse(text)
            except BadLine as exc:
                raise ExchangeError(
                    f"'{path}' line {number} {exc}; the file is damaged or not a torchport export"
                ) from None
            if not isinstance(obj, dict) or obj.get("kind") not in KINDS:
                raise ExchangeError(
                    f"'{path}' line {number} is not a torchport export record "
                    f"(kind must be one of {', '.join(KINDS)})"
                )
            if results_checked and obj["kind"] == "result":
                yield number, obj
                continue
            try:
                obj = check(obj)
            except BadLine as exc:
                raise ExchangeError(f"'{path}' line {number}: {exc}; export it again") from None
            yield number, obj


@dataclass(frozen=True)
class Checked:
    """What reading a file whole found: a digest per run, the runs, and the file's SHA-256
    (the import reads it again and holds it to these bytes)."""

    digests: dict[str, RunDigest]
    runs: dict[str, dict]
    sha256: str
    origin: dict | None = None  # the TorchCTS report the file was made from


def _check(path: str) -> Checked:
    """Read the whole file once: its shape, every record checked (every result validated,
    once: exchange_lines.check), a digest per run."""
    digests: dict[str, RunDigest] = {}
    runs: dict[str, dict] = {}
    header = end = None
    results = 0
    sha = hashlib.sha256()
    for number, obj in _lines(path, sha):
        kind = obj["kind"]
        where = f"'{path}' line {number}"
        if header is None:
            if kind != "header" or obj.get("format") != FORMAT:
                raise ExchangeError(
                    f"'{path}' does not start with a {FORMAT} header; make it "
                    "with 'torchport export'"
                )
            header = obj
            continue
        if end is not None:
            raise ExchangeError(
                f"{where} comes after the end line; the file was joined or edited: export again"
            )
        if kind == "run":
            missing = [
                k
                for k in ("id", "started_at", "state", "command", "suite", "device")
                if not isinstance(obj.get(k), str)
            ]
            if missing:
                raise ExchangeError(f"{where}: run without {', '.join(missing)}")
            if obj["id"] in runs:
                raise ExchangeError(f"{where}: run {obj['id']} appears twice in the file")
            runs[obj["id"]] = obj
            digests[obj["id"]] = RunDigest(run=_hash(obj))
        elif kind in ("result", "artifact", "note"):
            if obj.get("run_id") not in runs:
                raise ExchangeError(
                    f"{where}: a {kind} of run {obj.get('run_id')!r} before that run's line"
                )
            if kind == "result":  # validated as it was read (exchange_lines.check)
                digests[obj["run_id"]].add(obj)
                results += 1
        elif kind == "end":
            end = obj
        elif kind == "header":
            raise ExchangeError(f"{where}: a second header; the file was joined: export again")
    if header is None:
        raise ExchangeError(f"'{path}' is empty; make it with 'torchport export'")
    if end is None or end.get("results") != results or end.get("runs") != len(runs):
        raise ExchangeError(
            f"'{path}' is cut off or edited (its end line is missing or its "
            "counts differ); export it again"
        )
    return Checked(digests, runs, sha.hexdigest())


def check_file(path: str) -> Checked:
    """Read and check the export file ``path`` whole (ExchangeError naming the first bad
    line); what ``import_file`` needs of it."""
    return _check(path)


def import_file(store, path: str, checked: Checked | None = None) -> ImportReport:
    """Import ``path``: refused whole on a conflicting duplicate, else all at once.
    ``checked``: what check_file(path) gave, when the caller already read it. Each result
    is validated once, by that check; the import reads the same bytes again (a file changed
    in between is refused, nothing written) and stores the results as checked."""
    checked = checked or _check(path)
    digests = checked.digests
    present, conflicts = [], []
    for run_id, digest in digests.items():
        try:
            store.get_run(run_id, plan=False)
        except StoreError:
            continue
        mine = stored_digest(store, run_id)
        if (mine.run, mine.results, mine.count) == (digest.run, digest.results, digest.count):
            present.append(run_id)
        else:
            conflicts.append(run_id)
    if conflicts:
        raise ExchangeError(
            f"run(s) {', '.join(conflicts)} already in the knowledge base with "
            "different content; nothing was imported (import into another "
            "--db, or remove the run there first)"
        )
    report = ImportReport(present=present, origin=checked.origin)
    sha = hashlib.sha256()
    with store._all_or_none():
        groups = itertools.groupby(
            _lines(path, sha, results_checked=True),
            key=lambda item: (item[1]["kind"], item[1].get("run_id")),
        )
        for (kind, run_id), items in groups:
            objs = [obj for _, obj in items] if kind != "result" else None
            if kind == "environment":
                for obj in objs or ():
                    if store._put_environment(obj["data"]) != obj["id"]:
                        raise ExchangeError(
                            f"environment {obj['id']} in '{path}' does not "
                            "match its content (edited?); export it again"
                        )
                    report.environments += 1
            elif kind == "run":
                for obj in objs or ():
                    if obj["id"] not in present:
                        store._put_run(obj)
                        report.added[obj["id"]] = 0
            elif kind == "result" and run_id not in present:
                recorded = (Recorded.checked_line(obj) for _, obj in items)
                report.added[run_id] += store.add_results(run_id, recorded)
            elif kind == "artifact" and run_id not in present:
                store._put_artifacts(run_id, objs or [])
            elif kind == "note":
                for obj in objs or ():
                    added = store.add_note(
                        obj["run_id"],
                        obj["text"],
                        case=obj.get("case"),
                        mode=obj.get("mode"),
                        author=obj.get("author"),
                        created_at=obj.get("created_at") or "",
                    )
                    report.notes_added += added is not None
        if sha.hexdigest() != checked.sha256:  # raised inside the transaction: rolled back
            raise ExchangeError(
                f"'{path}' changed while it was imported; nothing was imported: import it again"
            )
    return report


# -- a whole knowledge base ---------------------------------------------------------------------
SQLITE_MAGIC = b"SQLite format 3\x00"
DATABASE_URLS = ("sqlite:///", "postgresql://", "postgres://", "postgresql+psycopg://")


def is_knowledge_base(source: str) -> bool:
    """Whether ``source`` names a knowledge base (a database URL, or an SQLite file) rather
    than an export file."""
    if source.startswith(DATABASE_URLS):
        return True
    try:
        with open(source, "rb") as f:
            return f.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


SOURCE_FORMATS = ("auto", "torchport", "torchcts")


def source_format(source: str, fmt: str = "auto") -> str:
    """What ``source`` is: ``torchport`` (an export file or a knowledge base) or ``torchcts``
    (a TorchCTS JSON report, kb/torchcts.py); ``auto`` tells them apart by how they begin."""
    if fmt != "auto":
        return fmt
    from torchport.kb import torchcts

    if not is_knowledge_base(source) and torchcts.looks_like(source):
        return "torchcts"
    return "torchport"


@contextlib.contextmanager
def prepared(source: str, fmt: str = "auto") -> Iterator[tuple[str, Any]]:
    """``source`` as a checked export file: (its path, what check_file found). A knowledge
    base is exported to a private temporary folder first (oldest run first; a run still
    going there is refused, as its export would be), and a TorchCTS report written there as
    one run (kb/torchcts.py), removed on leaving, also when a signal the caller turns into
    an exception (SIGINT, SIGTERM) stops the import."""
    fmt = source_format(source, fmt)
    if fmt == "torchcts":
        from torchport.kb import torchcts

        with tempfile.TemporaryDirectory(prefix="torchport-import-") as folder:
            path = os.path.join(folder, "runs.jsonl")
            origin = torchcts.write_export(source, path)
            try:
                checked = check_file(path)
            except ExchangeError as exc:  # what kb/torchcts.py made is refused: say whose
                problem = str(exc).replace(f"'{path}' ", "").split("; ")[0]
                raise torchcts.TorchctsError(
                    f"'{source}' (a TorchCTS report) made a record torchport refuses "
                    f"({problem}); nothing was imported: this is torchport's fault, report it "
                    "with the file"
                ) from None
            yield path, dataclasses.replace(checked, origin=origin)
        return
    if not is_knowledge_base(source):
        yield source, check_file(source)
        return
    from torchport.kb.store import open_store

    with tempfile.TemporaryDirectory(prefix="torchport-import-") as folder:
        path = os.path.join(folder, "runs.jsonl")
        with open_store(source, write=False) as other:
            run_ids = [run["id"] for run in reversed(other.runs())]
            if not run_ids:
                raise ExchangeError(f"'{source}' holds no runs; nothing to import")
            with open(path, "w", encoding="utf-8") as out:
                export_runs(other, run_ids, out)
        yield path, check_file(path)


def import_from(store, source: str, fmt: str = "auto") -> ImportReport:
    """Import ``source``: an export file, every run of another knowledge base, or a TorchCTS
    report."""
    with prepared(source, fmt) as (path, checked):
        return import_file(store, path, checked)
