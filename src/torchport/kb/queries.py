"""Every SQL statement the store runs, in one place (schema DDL is in migrations/), each
written once for both engines. A statement whose text differs by engine is a function of the
dialect ``d`` (records/dialect.py: SQLite's by default; pg_queries.py calls each with
PostgreSQL's), built from its helpers: nothing is patched from one engine's text into the
other's. Full text, which the engines do in substance differently (FTS5 and bm25, tsvector and
ts_rank_cd), is written once per engine (here and in pg_queries.py). The PRAGMAs and the
schema checks at the top are SQLite's own (pg_schema.py has PostgreSQL's)."""

from torchport.records import line_text
from torchport.records.dialect import SQLITE, Dialect
from torchport.records.figures import (
    COMPILE_FIGURES,
    FASTER,
    FIGURE_RULES,
    KEY_FIGURES,
    NOT_JUDGED,
    OUTCOME_FIGURES,
    PARITY_FIGURES,
    PLACEMENT_RULE,
    SLOWER,
    STATUS_RULES,
    STEP_TIME,
    WITHIN,
)
from torchport.records.status import NOT_FAILURES, sql_list

# -- identity and schema -------------------------------------------------------------------
USER_VERSION = "PRAGMA user_version"
TABLES = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
QUICK_CHECK = "PRAGMA quick_check(1)"
ALL_TABLES = "SELECT name FROM sqlite_master WHERE type = 'table'"


def quick_check_table(table: str) -> str:
    """The quick check of one table and its indexes (SQLite 3.33+); ``table`` is a name
    from ALL_TABLES (PRAGMA takes no bound parameters)."""
    return 'PRAGMA quick_check("' + table.replace('"', '""') + '")'


SET_WAL = "PRAGMA journal_mode = WAL"
FOREIGN_KEYS_ON = "PRAGMA foreign_keys = ON"
QUERY_ONLY_ON = "PRAGMA query_only = ON"
BEGIN = "BEGIN"  # deferred: a read snapshot from its first read on
BEGIN_IMMEDIATE = "BEGIN IMMEDIATE"
COMMIT = "COMMIT"
ROLLBACK = "ROLLBACK"
NO_LIMIT = SQLITE.no_limit  # LIMIT ? for "every row" (pg_queries.py: PostgreSQL's)


def set_user_version(number: int) -> str:
    return f"PRAGMA user_version = {int(number)}"  # PRAGMA takes no bound parameters


# -- writes ----------------------------------------------------------------------------------
def insert_environment(d: Dialect = SQLITE) -> str:
    return d.insert_ignore("environments(id, data, created_at)", "?, ?, ?")


INSERT_RUN = (
    "INSERT INTO runs(id, started_at, state, pid, host, heartbeat_at, command, suite, device,"
    " config, plan, labels) VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def run_liveness(d: Dialect = SQLITE) -> str:
    """The resume's check and claim: the run's row stays locked until the claim commits."""
    return "SELECT state, pid, host, heartbeat_at FROM runs WHERE id = ?" + d.for_update


REOPEN_RUN = (
    "UPDATE runs SET state = 'running', pid = ?, host = ?, heartbeat_at = ?, finished_at = NULL"
    " WHERE id = ?"
)
# Only the run's own supervisor beats (a resume elsewhere has taken the run over).
HEARTBEAT = (
    "UPDATE runs SET heartbeat_at = ? WHERE id = ? AND state = 'running' AND pid = ? AND host = ?"
)
# The first environment a run saw stays its own; every distinct one is listed.
SET_FIRST_ENVIRONMENT = "UPDATE runs SET environment_id = COALESCE(environment_id, ?) WHERE id = ?"


def add_run_environment(d: Dialect = SQLITE) -> str:
    return d.insert_ignore("run_environments(run_id, environment_id, recorded_at)", "?, ?, ?")


FINISH_RUN = "UPDATE runs SET state = ?, finished_at = ? WHERE id = ?"


def insert_result(d: Dialect = SQLITE) -> str:
    return (
        "INSERT INTO results(run_id, case_id, case_version, mode, status, stage, grade, metrics,"
        " findings, durations, artifacts, probe_versions, error_type, error_message, traceback,"
        f" started_at, finished_at, signature, host_ops, {', '.join(KEY_FIGURES)})"
        f" VALUES ({', '.join('?' * (19 + len(KEY_FIGURES)))}){d.returning_id}"
    )


INSERT_RESULT_OP = (
    "INSERT INTO result_ops(result_id, op, device, count, fallback) VALUES (?, ?, ?, ?, ?)"
)

# -- reads -------------------------------------------------------------------------------------
RUN_BY_ID = "SELECT * FROM runs WHERE id = ?"


def latest_run(d: Dialect = SQLITE) -> str:
    return f"SELECT id FROM runs ORDER BY started_at DESC, {d.rowid} DESC LIMIT 1"


def run_environments(d: Dialect = SQLITE) -> str:
    return (
        "SELECT environment_id FROM run_environments WHERE run_id = ?"
        f" ORDER BY recorded_at, {d.rowid}"
    )


ENVIRONMENT = "SELECT data FROM environments WHERE id = ?"
DONE_ITEMS = "SELECT case_id, mode FROM results WHERE run_id = ?"


def where_results(
    *, run_id: bool, status: bool, case_glob: bool, fallback_op: bool, d: Dialect = SQLITE
) -> str:
    """The WHERE clause for results filtered by the named conditions (parameters in this
    order: run_id, status, case glob, fallback op exact name, its length + 1 and its prefix).
    A case glob is the engine's (``Dialect.glob``; records/globs.py translates fnmatch's
    syntax): a fixed prefix is answered from an index."""
    sql = " WHERE 1 = 1"
    if run_id:
        sql += " AND run_id = ?"
    if status:
        sql += " AND status = ?"
    if case_glob:
        sql += f" AND {d.glob('case_id')}"
    if fallback_op:
        # ``aten.cumsum`` names every overload (aten.cumsum.default, ...). A prefix compare,
        # not LIKE: '_' in an op name (aten._index_put_impl_) is not a wildcard.
        sql += (
            " AND id IN (SELECT result_id FROM result_ops WHERE fallback = 1 AND"
            f" (op = ? OR {d.op_prefix('op')}))"
        )
    return sql


# Recorded order, or (case, mode) order: the (run_id, case_id, mode) index, so two runs can be
# walked side by side without sorting either.
ORDERS = {"id": " ORDER BY id", "case": " ORDER BY case_id, mode"}


# What a comparison, a baseline or a gate reads of each result, in (case, mode) order from the
# (run_id, case_id, mode) index: no findings or traceback to parse, only the host-op table (where
# placement was graded and found some) and the error's first line.
def outcomes(d: Dialect = SQLITE) -> str:
    """Parameter: run_id."""
    figures = ", ".join(_figure("results", name, d) for name in OUTCOME_FIGURES)
    return (
        f"SELECT case_id, mode, status, stage, grade, {figures},"
        " CASE WHEN grade IS NOT NULL THEN results.host_ops END,"
        f" CASE WHEN error_message IS NOT NULL THEN {d.first_line('error_message')}"
        " END AS error_line FROM results WHERE run_id = ? ORDER BY case_id, mode"
    )


# What a baseline and a gate read of each result (views/baseline.py): its status, failing stage
# and step time with its spread and sample count, in (case, mode) order from the outcomes index
# alone, as plain rows (no dict a result: 100 000 a run).
STATUS_FIGURES = ("perf_median_ms", "perf_p10_ms", "perf_p90_ms", "perf_samples")


def statuses(*, bounds: tuple[bool, bool] = (False, False), d: Dialect = SQLITE) -> str:
    """Parameters: run_id, then the first case (``bounds[0]``) and the case past the last
    (``bounds[1]``) of a part. Rows: case_id, mode, status, stage, then STATUS_FIGURES."""
    figures = ", ".join(_figure("results", name, d) for name in STATUS_FIGURES)
    low, high = (" AND case_id >= ?", " AND case_id < ?")
    return (
        f"SELECT case_id, mode, status, stage, {figures} FROM results{_covering(d)}"
        f" WHERE run_id = ?{low if bounds[0] else ''}{high if bounds[1] else ''}"
        " ORDER BY case_id, mode"
    )


# -- export: each result's line put together from its stored texts ----------------------------
# A run's rows for its export lines (records/line_text.py): ``plain`` says whether the
# database reads every JSON column as JSON (NaN, which Python writes and reads, it does not:
# that row, like any other it does not, is exported from its row as before), then
# line_text.COLUMNS. Read in spans of ids, each with its op table rows (OPS_OF_SPAN).
LINE_JSON_COLUMNS = ("artifacts", "durations", "findings", "metrics", "probe_versions")

# A run's first and last result id: an export reads the ids between in spans.
FIRST_ID_OF_RUN = "SELECT id FROM results WHERE run_id = ? ORDER BY id LIMIT 1"
LAST_ID_OF_RUN = "SELECT id FROM results WHERE run_id = ? ORDER BY id DESC LIMIT 1"
# The id of a run's result at an offset in recorded order: where a part of its export starts.
ID_AT_OFFSET = "SELECT id FROM results WHERE run_id = ? ORDER BY id LIMIT 1 OFFSET ?"


def result_lines(*, guarded: bool = True, d: Dialect = SQLITE) -> str:
    """Parameters: run_id, a span's first id and the next span's. Rows: ``plain``
    (``Dialect.all_json``, ``guarded`` or not), then line_text.COLUMNS, in recorded order
    (the run's rows one after another in the file: read in (case, mode) order they are
    scattered, and the read costs twice as much)."""
    return (
        f"SELECT {d.all_json(LINE_JSON_COLUMNS, guarded=guarded)} AS plain,"
        f" {', '.join(line_text.COLUMNS)}"
        " FROM results WHERE run_id = ? AND id >= ? AND id < ? ORDER BY id"
    )


def ops_of_span(d: Dialect = SQLITE) -> str:
    """The op table rows of a span of result ids (the same parameters after run_id), by
    result in recorded order: merged with the span's results by id (a result's own read per
    result cost an index lookup each, on 100 000 results that have no ops in most)."""
    return (
        "SELECT result_id, op, device, count, fallback FROM result_ops"
        f" WHERE result_id >= ? AND result_id < ? ORDER BY result_id, {d.rowid}"
    )


def select_results(
    *,
    run_id: bool,
    status: bool,
    fallback_op: bool,
    case_glob: bool = False,
    order: str = "id",
    with_ops: bool = False,
    paged: bool = False,
    d: Dialect = SQLITE,
) -> str:
    """Results filtered (``where_results``) in ``order``, with each one's op table as JSON
    (``with_ops``); ``paged`` adds LIMIT ? OFFSET ? (``Dialect.pages_by_id``: the page's ids
    first, then its rows)."""
    columns = f"*, {d.ops_json()}" if with_ops else "*"
    where = where_results(
        run_id=run_id, status=status, case_glob=case_glob, fallback_op=fallback_op, d=d
    )
    if paged and order == "id" and d.pages_by_id:
        ids = f"SELECT id FROM results{where} ORDER BY id LIMIT ? OFFSET ?"
        return f"SELECT {columns} FROM results WHERE id IN ({ids}) ORDER BY id"
    sql = f"SELECT {columns} FROM results{where}{ORDERS[order]}"
    return sql + " LIMIT ? OFFSET ?" if paged else sql


def count_results(
    *, run_id: bool, status: bool, case_glob: bool, fallback_op: bool, d: Dialect = SQLITE
) -> str:
    return "SELECT COUNT(*) FROM results" + where_results(
        run_id=run_id, status=status, case_glob=case_glob, fallback_op=fallback_op, d=d
    )


def count_results_by_run(
    *, run_id: bool, status: bool, case_glob: bool, fallback_op: bool, d: Dialect = SQLITE
) -> str:
    """Counts per run in one pass (the op page: which runs ran an op on the host)."""
    where = where_results(
        run_id=run_id, status=status, case_glob=case_glob, fallback_op=fallback_op, d=d
    )
    return f"SELECT run_id, COUNT(*) AS n FROM results{where} GROUP BY run_id"


# The results that ran an op on the host, counted by run without reading a result row: each
# run's span of result ids (its first and last, two lookups on results_run, whose entries end
# with the id: SQLite's rowid, PostgreSQL's from schema v9), and the op table's result ids
# counted in each span. Exact where no two spans overlap (runs recorded one after another):
# then every id in a span is that run's. ``overlaps`` says when they do (runs recorded at the
# same time), and the caller counts by the result rows instead (count_results_by_run). One
# statement: the spans and the counts are read from one snapshot.
_RUN_SPANS = (
    "SELECT id AS run_id, (SELECT MIN(id) FROM results WHERE run_id = runs.id) AS lo,"
    " (SELECT MAX(id) FROM results WHERE run_id = runs.id) AS hi FROM runs"
)


def count_op_results_by_run_span(d: Dialect = SQLITE) -> str:
    return (
        f"WITH spans AS ({_RUN_SPANS}) SELECT spans.run_id, COUNT(*) AS n,"
        " (SELECT COUNT(*) FROM spans a JOIN spans b ON a.run_id < b.run_id AND a.lo <= b.hi"
        " AND b.lo <= a.hi) AS overlaps FROM (SELECT DISTINCT result_id FROM result_ops"
        f" WHERE fallback = 1 AND (op = ? OR {d.op_prefix('op')})) AS hits"
        " JOIN spans ON hits.result_id BETWEEN spans.lo AND spans.hi GROUP BY spans.run_id"
    )


# -- scale: listings, summaries and last statuses from indexes ------------------------------
# A listing carries the plan's length, not the plan (100 000 entries in a large sweep).
_RUN_HEADER = (
    "SELECT id, started_at, finished_at, state, pid, host, command, suite, device, config,"
    " labels, environment_id, heartbeat_at, planned FROM runs"
)
RUN_HEADER = _RUN_HEADER + " WHERE id = ?"  # one run as a listing shows it (``planned``)

# A run's counts are kept as its results are recorded (migrations/0008: the run_tallies table,
# '' for NULL): the answers of a count over its result rows, from a few hundred rows a run.
_TALLY_N = "CAST(SUM(n) AS BIGINT) AS n"
STATUS_COUNTS = f"SELECT run_id, status, {_TALLY_N} FROM run_tallies GROUP BY run_id, status"
RUN_STATUS_COUNTS = f"SELECT status, {_TALLY_N} FROM run_tallies WHERE run_id = ? GROUP BY status"
RUN_STATUS_COUNTS_BY_RUN = (
    f"SELECT run_id, status, {_TALLY_N} FROM run_tallies WHERE run_id = ? GROUP BY run_id, status"
)
RUN_COUNT = "SELECT COALESCE(SUM(n), 0) FROM run_tallies WHERE run_id = ?"


def list_runs(d: Dialect = SQLITE) -> str:
    return f"{_RUN_HEADER} ORDER BY started_at DESC, {d.rowid} DESC"


def run_selectors(d: Dialect = SQLITE) -> str:
    return (
        "SELECT id, state, pid, host, device, suite, labels FROM runs"
        f" ORDER BY started_at DESC, {d.rowid} DESC"
    )


FAILURES = f" run_id = ? AND status NOT IN {sql_list(NOT_FAILURES)}"


def failure_groups(*, severity: tuple[str, ...]) -> str:
    """Failure groups of one run, (status, stage, signature) with a count (run_tallies), worst
    first when ``severity`` is given (a status order), else most common first. Parameters:
    run_id, limit."""
    order = "n DESC, status, stage"
    if severity:
        rank = " ".join(f"WHEN '{s}' THEN {i}" for i, s in enumerate(severity))
        order = f"CASE status {rank} ELSE {len(severity)} END, " + order
    return (
        "SELECT status, NULLIF(stage, '') AS stage, NULLIF(signature, '') AS signature,"
        f" {_TALLY_N} FROM run_tallies WHERE{FAILURES} GROUP BY status, stage, signature"
        f" ORDER BY {order} LIMIT ?"
    )


FAILURE_GROUP_COUNT = (
    f"SELECT COUNT(*) FROM (SELECT 1 FROM run_tallies WHERE{FAILURES}"
    " GROUP BY status, stage, signature) AS groups"
)


def failure_examples(*, no_stage: bool = False, no_signature: bool = False) -> str:
    """A group's first results. Parameters: run_id, status, stage, signature, limit, less the
    stage and the signature the group has none of (``no_stage``, ``no_signature``: ``IS NULL``
    instead). Equalities, not ``IS ?``: PostgreSQL's ``IS NOT DISTINCT FROM`` is no index
    condition, so its planner walked the whole table in id order (3.6 s at a million results);
    ``=`` finds the group on (run_id, status, stage, signature)."""
    stage = "stage IS NULL" if no_stage else "stage = ?"
    sig = "signature IS NULL" if no_signature else "signature = ?"
    return (
        "SELECT case_id, mode, error_message FROM results WHERE run_id = ? AND status = ?"
        f" AND {stage} AND {sig} ORDER BY id LIMIT ?"
    )


# One indexed lookup per case (the (case_id, mode) index): the newest eager status, else the
# newest of any mode.
_LAST = (
    "SELECT r.status FROM results r JOIN runs ON runs.id = r.run_id WHERE r.case_id = ?"
    " AND (CAST(? AS TEXT) IS NULL OR runs.device = ?)"
)
LAST_EAGER_STATUS = _LAST + " AND r.mode = 'eager' ORDER BY r.id DESC LIMIT 1"
LAST_ANY_STATUS = _LAST + " ORDER BY r.id DESC LIMIT 1"
# Every case at once: the newest result per (case, mode), grouped on the same index.
LAST_STATUS_EVERY_CASE = (
    "SELECT id, case_id, mode, status FROM results WHERE id IN (SELECT MAX(r.id) FROM results r"
    " JOIN runs ON runs.id = r.run_id WHERE runs.device = ? GROUP BY r.case_id, r.mode)"
)
LAST_STATUS_EVERY_CASE_ANY_DEVICE = (
    "SELECT id, case_id, mode, status FROM results WHERE id IN (SELECT MAX(id) FROM results"
    " GROUP BY case_id, mode)"
)

# Ranked full text. bm25 over every match costs a lookup per match (its length): 100 000 matches
# of a common word take seconds. So the newest RANK_WINDOW matches are ranked by bm25 (a case-id
# hit above an error-message hit above a traceback hit), and older matches follow, newest first;
# both walk the FTS index in rowid order and stop at the page.
SEARCH_WINDOW = (
    "SELECT rowid, bm25(results_fts, 10.0, 4.0, 1.0) AS score FROM results_fts"
    " WHERE results_fts MATCH ? ORDER BY rowid DESC LIMIT ?"
)
SEARCH_BY_RECENCY = (
    "SELECT rowid FROM results_fts WHERE results_fts MATCH ? ORDER BY rowid DESC LIMIT ? OFFSET ?"
)


def results_by_id(n: int) -> str:
    return f"SELECT * FROM results WHERE id IN ({', '.join('?' * n)})"


SEARCH_COUNT = "SELECT COUNT(*) FROM results_fts WHERE results_fts MATCH ?"


# -- decisions: notes and artifacts -----------------------------------------------------------
def insert_note(d: Dialect = SQLITE) -> str:
    return (
        "INSERT INTO notes(run_id, case_id, mode, author, text, created_at)"
        f" VALUES (?, ?, ?, ?, ?, ?){d.returning_id}"
    )


def note_exists(d: Dialect = SQLITE) -> str:
    same = " AND ".join(d.same(column, "?") for column in ("case_id", "mode", "author"))
    return f"SELECT 1 FROM notes WHERE run_id = ? AND {same} AND text = ? AND created_at = ?"


NOTES_OF_RUN = "SELECT * FROM notes WHERE run_id = ? ORDER BY id"
NOTES_OF_CASE = "SELECT * FROM notes WHERE run_id = ? AND case_id = ? ORDER BY id"
ALL_NOTES = "SELECT * FROM notes ORDER BY id"
SEARCH_NOTES = (
    "SELECT notes.* FROM (SELECT rowid, rank FROM notes_fts WHERE notes_fts MATCH ?"
    " ORDER BY rank LIMIT ? OFFSET ?) AS hit JOIN notes ON notes.id = hit.rowid"
    " ORDER BY hit.rank"
)
CASE_IN_RUN = "SELECT mode FROM results WHERE run_id = ? AND case_id = ?"


def insert_artifact(d: Dialect = SQLITE) -> str:
    return d.insert_ignore("artifacts(run_id, path, sha256, bytes)", "?, ?, ?, ?")


ARTIFACTS_OF_RUN = "SELECT path, sha256, bytes FROM artifacts WHERE run_id = ? ORDER BY path"

# -- import: a run as it was recorded elsewhere -----------------------------------------------
# No pid: the supervisor lived on another machine; the state is what the exporter saw.
INSERT_RUN_AS_RECORDED = (
    "INSERT INTO runs(id, started_at, finished_at, state, pid, host, command, suite, device,"
    " config, plan, labels, environment_id) VALUES (?, ?, ?, ?, NULL, ?, ?, ?, ?, ?, ?, ?, ?)"
)


# -- comparing two runs inside the database -----------------------------------------------------
# Two runs of 100 000 results are joined on (case_id, mode) by the unique index. The database
# decides each pair as views/compare.py and views/noise.py do (compare_decisions,
# step_time_verdict) and returns the transition counts and only the pairs that show a change;
# the views decide those again and hold the page to the whole comparison. Named parameters:
# run_a, run_b, parity, compile, memory (factors), min_samples, min_change. Two runs of 100 000
# results are joined on (case_id, mode) by the outcomes index (``_indexed_join``).


PERF_VERDICTS_COUNTED = (SLOWER, FASTER, NOT_JUDGED)  # the rest of the timed: WITHIN
# The status lists: the only ones that show an error line.
STATUS_DECISIONS = tuple(rule.name for rule in STATUS_RULES)


def _figure(alias: str, name: str, d: Dialect) -> str:
    """A figure of a result row: its column (a key figure, records/figures.py KEY_FIGURES),
    or, for any other compared figure, read out of the metrics document (``Dialect.metric``)."""
    if name not in KEY_FIGURES:
        return d.metric(alias, name)
    return f"{alias}.{name}"


def _outcome_columns(alias: str, d: Dialect, error_when: str = "") -> str:
    """An outcome row's columns; ``error_when``: the condition (and a trailing AND) under
    which its error line is read: SQLite reads the row itself, not only an index, for it."""
    return ", ".join(_outcome_column_list(alias, d, error_when))


def _outcome_column_list(alias: str, d: Dialect, error_when: str = "") -> list[str]:
    """``_outcome_columns`` one by one: case, mode, status, stage, grade, the figures, then
    the host ops and the error line (the two an index may not hold)."""
    return [
        f"{alias}.case_id",
        f"{alias}.mode",
        f"{alias}.status",
        f"{alias}.stage",
        f"{alias}.grade",
        *(_figure(alias, n, d) for n in OUTCOME_FIGURES),
        f"CASE WHEN {alias}.grade IS NOT NULL THEN {alias}.host_ops END",
        f"CASE WHEN {error_when}{alias}.error_message IS NOT NULL THEN"
        f" {d.first_line(f'{alias}.error_message')} END",
    ]


# A step time is compared only where both runs ran the whole ladder (and timed it).
BOTH_PASSED = "a.status = 'pass' AND b.status = 'pass'"


def _both_timed(d: Dialect) -> str:
    """Both passed with a step time (``STEP_TIME.timed``): the pairs a comparison judges."""
    timed = STEP_TIME.timed_sql(lambda alias, name: _figure(alias, name, d))
    return f"{BOTH_PASSED} AND {timed}"


def pairs_that_may_differ(
    *, rows_apart: bool = False, bounds: tuple[bool, bool] = (False, False), d: Dialect = SQLITE
) -> str:
    """Every pair that shows a change (``compare_decisions``, or a step time judged other
    than within noise), both outcomes and the pair's decisions (``decisions``), in case
    order: a superset of what the lists show only by the placement candidates. Named
    parameters: as compare_lists but limit.

    ``rows_apart`` (always, for an outcomes index that holds a host-op table's key but not
    its text: PostgreSQL's): the pairs are decided from the index alone, and a pair's rows
    are looked up by key only where it shows what only they hold: the host ops of a
    placement candidate, the error line of a pair in which a side failed (the others' host
    ops read NULL). Reading every pair's host ops and error line had PostgreSQL's planner
    read the whole table (a million rows, every run's) and sort both runs: 0.48 s of 0.5 s.
    ``bounds``: as ``pair_counts``, one part of the pairs (``:low``, ``:high``)."""
    shows = [f"({c})" for c in compare_decisions(d).values()]
    verdict = step_time_verdict(says={v: f"'{v}'" for v in (*PERF_VERDICTS_COUNTED, WITHIN)}, d=d)
    shows.append(f"({verdict}) IN ({', '.join(repr(v) for v in PERF_VERDICTS_COUNTED)})")
    # Only the status lists show an error line, and a pair is in one only when a side failed:
    # the other pairs are read from the index alone (SQLite seeks a row only for its text).
    failed = "(a.status != 'pass' OR b.status != 'pass')"
    join = _indexed_join(bounds, d)
    where = f" AND ({' OR '.join(shows)}) ORDER BY a.case_id, a.mode"
    if not (rows_apart or d.host_ops_compared != "host_ops"):
        return (
            f"SELECT {_outcome_columns('a', d, f'{failed} AND ')},"
            f" {_outcome_columns('b', d, f'{failed} AND ')},"
            f" {decisions(d)}{join}{where}"
        )
    indexed = {x: _outcome_column_list(x, d)[:-2] for x in "ab"}
    inner = ", ".join(f"{c} AS {x}{i}" for x, cs in indexed.items() for i, c in enumerate(cs))
    placed = PLACEMENT_RULE.sql(d, *(f"{x}.{d.host_ops_compared}" for x in "ab"))

    def side(x: str) -> str:
        row = f"{x}_row"
        return (
            ", ".join(f"pairs.{x}{i}" for i in range(len(indexed[x])))
            + f", CASE WHEN pairs.placed THEN {row}.host_ops END, CASE WHEN pairs.failed AND"
            f" {row}.error_message IS NOT NULL THEN {d.first_line(f'{row}.error_message')} END"
        )

    def lookup(x: str) -> str:
        return d.lookup(
            f"{x}_row",
            None,
            f"(pairs.placed OR pairs.failed) AND {x}_row.run_id = :run_{x}"
            f" AND {x}_row.case_id = pairs.a0 AND {x}_row.mode = pairs.a1",
        )

    return (
        f"SELECT {side('a')}, {side('b')}, pairs.decided FROM (SELECT {inner},"
        f" {decisions(d)} AS decided, ({placed}) AS placed, {failed} AS failed"
        f"{join}{where}{d.fence}) AS pairs{lookup('a')}{lookup('b')}"
        " ORDER BY pairs.a0, pairs.a1"
    )


def decisions(d: Dialect = SQLITE) -> str:
    """Every decision on one pair (a, b), as one integer: bit k set when the k-th of
    ``decided_names`` holds (a step time within noise sets none). Named parameters: the
    lines (compare_decisions, step_time_verdict)."""
    names = decided_names()
    conditions = compare_decisions(d).values()
    bits = [f"CASE WHEN {c} THEN {1 << k} ELSE 0 END" for k, c in enumerate(conditions)]
    says = {v: str(1 << names.index(v)) for v in PERF_VERDICTS_COUNTED}
    bits.append(f"COALESCE({step_time_verdict(says={**says, WITHIN: '0'}, d=d)}, 0)")
    return f"({' + '.join(bits)})"


OUTCOMES_INDEX = "results_outcomes"  # holds every column a comparison decides on


def _indexed_join(bounds: tuple[bool, bool], d: Dialect) -> str:
    """Two runs' pairs joined by key on the outcomes index (named to SQLite, since an empty
    file's planner would pick another); ``bounds``: only a part of A's case ids, from
    ``:low`` / below ``:high`` (``Dialect.part``)."""
    index = d.indexed_by(OUTCOMES_INDEX)
    key, part = d.part(bounds)
    return (
        f" FROM results a{index} JOIN results b{index} ON b.run_id = :run_b AND {key}"
        f" AND b.mode = a.mode WHERE a.run_id = :run_a{part}"
    )


def _ratio(x: str, y: str) -> str:
    """y / x as Python divides them (true division in doubles), NULL where x is 0 or NULL."""
    return f"(CASE WHEN {x} != 0 THEN CAST({y} AS DOUBLE PRECISION) / {x} END)"


def _flag(condition: str) -> str:
    return f"CASE WHEN {condition} THEN 1 ELSE 0 END"


def step_time_verdict(*, says: dict[str, str], d: Dialect = SQLITE) -> str:
    """The step-time rule (records/figures.py ``STEP_TIME``, whose Python views/noise.py
    applies) as one SQL expression over the pair (a, b): what ``says`` gives for each
    verdict (SQL values), NULL when the pair did not pass and was not timed on both sides.
    Named parameters: min_samples, min_change."""
    return STEP_TIME.sql(lambda alias, name: _figure(alias, name, d), says, BOTH_PASSED)


def compare_decisions(d: Dialect = SQLITE) -> dict[str, str]:
    """What views/compare.py decides per pair, exactly, as SQL conditions: the status lists,
    the placement candidates, each parity, compile and memory figure past its line. Named
    parameters: parity, compile, memory. Host-op tables are compared as the outcomes index
    holds them (``Dialect.host_ops_compared``: the text, or its key)."""
    decisions = {rule.name: rule.sql(d) for rule in STATUS_RULES}
    host_ops = (f"{x}.{d.host_ops_compared}" for x in "ab")
    decisions[PLACEMENT_RULE.name] = PLACEMENT_RULE.sql(d, *host_ops)
    for rule in FIGURE_RULES:
        decisions[rule.figure] = figure_past(rule, d)
    return decisions


def figure_past(rule, d: Dialect = SQLITE) -> str:
    """A FigureRule (records/figures.py) as an SQL condition over the pair (a, b): exactly
    its ``past``, the line a named parameter (``:line``)."""
    a, b = _figure("a", rule.figure, d), _figure("b", rule.figure, d)
    up = f"{_ratio(a, b)} > :{rule.line}"
    if rule.both_ways:
        return f"({up} OR {_ratio(b, a)} > :{rule.line})"
    return f"{a} > 0 AND {up}"


def pair_counts(*, bounds: tuple[bool, bool] = (False, False), d: Dialect = SQLITE) -> str:
    """Pairs per (A status, B status), and of them how many have a step time on both sides,
    from the outcomes index alone. ``bounds``: whether A's case ids are held from ``:low``
    and below ``:high`` (a part of the pairs; compare_lists splits two runs in parts)."""
    return (
        f"SELECT a.status, b.status, COUNT(*), SUM({_flag(_both_timed(d))})"
        f"{_indexed_join(bounds, d)} GROUP BY a.status, b.status"
    )


_NO_COUNT = "CAST(NULL AS BIGINT)"  # typed: PostgreSQL matches the UNION's columns by type


def decided_names() -> list[str]:
    """What ``compare_lists`` counts, in its columns' order (and its bits' order): each
    decision of ``compare_decisions``, then the step-time verdicts but ``WITHIN``."""
    return [*compare_decisions(), *PERF_VERDICTS_COUNTED]


def compare_lists(
    *,
    bounds: tuple[bool, bool] = (False, False),
    only: tuple[str, ...] | None = None,
    after: bool = False,
    d: Dialect = SQLITE,
) -> str:
    """One pass over two runs' pairs, from the outcomes index alone, for a comparison's page.

    Each pair is decided once, into bits (``decisions``). Returned rows: list, key, key,
    count, timed count, the pair's decisions, outcome A, outcome B:
      - ``transition``, status A, status B, pairs, pairs timed on both sides;
      - ``decided``, pairs, and decisions: how many pairs hold each set of decisions that
        holds of some pair (a set read as a number is counted faster than each decision);
      - a list's name, case, mode, and both outcomes: the first ``:limit`` pairs of each
        list in its order (case, mode; step-time changes largest first) and every
        placement candidate (host-op sets are compared in Python). Only the status lists'
        pairs read their rows (for the error line).
    ``bounds``: as ``pair_counts``, one part of the pairs (``:low``, ``:high``). ``only``:
    the lists read out (decision names, ``perf`` for the step-time changes); None: all.
    ``after``: each list from the pair after ``:after_case``, ``:after_mode`` (and the
    figure's place in its list's order ``:after_metric``; ``:after_gap`` for step times):
    a later page of one list, at the cost of the first."""
    listed = compare_decisions(d)
    names = decided_names()
    medians = (_figure("a", "perf_median_ms", d), _figure("b", "perf_median_ms", d))
    pairs = (
        f"SELECT a.case_id, a.mode, a.status AS status_a, b.status AS status_b,"
        f" {_flag(_both_timed(d))} AS timed, {decisions(d)} AS decided,"
        f" abs({_ratio(*medians)} - 1) AS gap"
        f"{_indexed_join(bounds, d)}"
    )

    def holds(name: str) -> str:
        return f"(decided & {1 << names.index(name)}) != 0"

    def first(name: str, where: str, by_gap: bool = False, limit: bool = True) -> str:
        order = "gap DESC, case_id, mode" if by_gap else "case_id, mode"
        if limit and after:  # keyset: the pairs after the last one shown, in the list's order
            rank = next((f.index(name) for f in (PARITY_FIGURES, COMPILE_FIGURES) if name in f), 0)
            later = (
                "(case_id > :after_case OR (case_id = :after_case AND (mode > :after_mode"
                f" OR (mode = :after_mode AND {rank} > :after_metric))))"
            )
            if by_gap:
                later = f"(gap < :after_gap OR (gap = :after_gap AND {later}))"
            where = f"{where} AND {later}"
        cap = " LIMIT :limit" if limit else ""
        return (
            f"SELECT * FROM (SELECT '{name}' AS list, case_id, mode, {_NO_COUNT} AS n,"
            f" {_NO_COUNT} AS timed, decided"
            f" FROM shown WHERE {where} ORDER BY {order}{cap}) AS {name}"
        )

    # The pairs that passed on both sides (most) are counted apart: sorting them into the
    # status pairs' groups took a sixth of SQLite's statement.
    both_passed = "status_a = 'pass' AND status_b = 'pass'"
    chosen = [
        "SELECT 'transition' AS list, status_a AS case_id, status_b AS mode, COUNT(*) AS n,"
        f" SUM(timed) AS timed, {_NO_COUNT} AS decided FROM pairs WHERE NOT ({both_passed})"
        " GROUP BY status_a, status_b",
        "SELECT * FROM (SELECT 'transition' AS list, 'pass' AS case_id, 'pass' AS mode,"
        f" COUNT(*) AS n, SUM(timed) AS timed, {_NO_COUNT} AS decided FROM pairs"
        f" WHERE {both_passed}) AS passed WHERE n > 0",
        f"SELECT 'decided', NULL, NULL, COUNT(*), {_NO_COUNT}, decided FROM shown GROUP BY decided",
    ]
    chosen += [
        first(name, holds(name), limit=name != PLACEMENT_RULE.name)
        for name in listed
        if only is None or name in only
    ]
    if only is None or "perf" in only:
        chosen.append(first("perf", f"({holds(SLOWER)} OR {holds(FASTER)})", by_gap=True))
    # Only the status lists show an error line; the other pairs are read from the index alone.
    errors = f"chosen.list IN ({', '.join(repr(n) for n in STATUS_DECISIONS)}) AND "

    def lookup(x: str) -> str:
        # the few chosen rows stay the outer loop, each pair found by key (the counts' rows,
        # n not NULL, look up nothing)
        return d.lookup(
            x,
            OUTCOMES_INDEX,
            f"chosen.n IS NULL AND {x}.run_id = :run_{x} AND {x}.case_id = chosen.case_id"
            f" AND {x}.mode = chosen.mode",
        )

    return (
        f"WITH pairs AS MATERIALIZED ({pairs}),"
        " shown AS MATERIALIZED (SELECT case_id, mode, decided, gap FROM pairs"
        " WHERE decided != 0),"
        f" chosen AS ({' UNION ALL '.join(chosen)})"
        " SELECT chosen.*,"
        f" {_outcome_columns('a', d, errors)}, {_outcome_columns('b', d, errors)}"
        f" FROM chosen{lookup('a')}{lookup('b')}"
    )


# The case id at an offset of a run's results in case order: where a part of a comparison starts.
CASE_AT = "SELECT case_id FROM results WHERE run_id = ? ORDER BY case_id LIMIT 1 OFFSET ?"

# Pairs recorded in one run only (parameters: the run, the other run); the index alone answers.
ONLY_IN = (
    "SELECT a.case_id, a.mode FROM results a WHERE a.run_id = ? AND NOT EXISTS (SELECT 1 FROM"
    " results b WHERE b.run_id = ? AND b.case_id = a.case_id AND b.mode = a.mode)"
    " ORDER BY a.case_id, a.mode"
)

# What a comparison shows of its two runs besides the pairs, read by kb/reads/compare.py with
# the pairs (parameters: run A, run B; A may be B): the runs as a listing shows them, each
# one's environments in the order recorded (the first one's data read apart, by id), its
# tallied status counts (whose sum is its size, RUN_COUNT) and graded host-op groups (the
# headline), the notes on either, and a run's plan where a pair is missing on one side.
COMPARED_RUNS = _RUN_HEADER + " WHERE id IN (?, ?)"


def compared_environments(d: Dialect = SQLITE) -> str:
    return (
        "SELECT run_id, environment_id FROM run_environments WHERE run_id IN (?, ?)"
        f" ORDER BY recorded_at, {d.rowid}"
    )


ENVIRONMENTS_BY_ID = "SELECT id, data FROM environments WHERE id IN (?, ?)"
COMPARED_STATUS_COUNTS = (
    f"SELECT run_id, status, {_TALLY_N} FROM run_tallies WHERE run_id IN (?, ?)"
    " GROUP BY run_id, status"
)
NOTES_OF_RUNS = "SELECT * FROM notes WHERE run_id IN (?, ?) ORDER BY id"
RUN_PLAN = "SELECT plan FROM runs WHERE id = ?"


# -- a run's headline (views/headline.py) ------------------------------------------------------
# Results by (status, grade) and, for those graded fallback or host, by their host-op table, in
# one pass over the outcomes index: a run's fallbacks and distinct host ops without findings.


def headline_groups(*, one_run: bool, two_runs: bool = False) -> str:
    """Graded results by (run, grade, host-op table), from run_tallies. Parameters
    (``one_run``): run_id; (``two_runs``, a comparison's): both run ids. Rows: run_id, grade,
    ops, n; the host-op table counts for grades in HEADLINE_GRADES only."""
    runs = " AND run_id = ?" if one_run else " AND run_id IN (?, ?)" if two_runs else ""
    return (
        f"SELECT run_id, grade, NULLIF(host_ops, '') AS ops, {_TALLY_N} FROM run_tallies"
        f" WHERE grade != ''{runs}"
        " GROUP BY run_id, grade, host_ops"
    )


def headline_compile_wait(d: Dialect = SQLITE) -> str:
    """Parameter: run_id. Median cold first compiled step of a run's compiled results."""
    cold = _figure("results", "compile_cold_first_step_s", d)
    return d.median(
        f"SELECT {cold} AS v FROM results{_covering(d)} WHERE run_id = ?"
        f" AND mode = 'compile' AND {cold} IS NOT NULL"
    )


def _covering(d: Dialect) -> str:
    """The outcomes index, named to SQLite: it holds every column the headline's medians
    read, so they never read a result row (SQLite's planner may pick the narrower unique
    index and read 100 000 rows of JSON and tracebacks around them)."""
    return d.indexed_by(OUTCOMES_INDEX)


def headline_speedup(d: Dialect = SQLITE) -> str:
    """Parameter: run_id. Median over cases of eager / compiled median step time, for the
    cases that passed in both modes with a step time."""
    e, c = (_figure(x, "perf_median_ms", d) for x in "ec")
    return d.median(
        f"SELECT {e} * 1.0 / {c} AS v FROM results e{_covering(d)}"
        f" JOIN results c{_covering(d)} ON c.run_id = e.run_id"
        " AND c.case_id = e.case_id AND c.mode = 'compile' WHERE e.run_id = ?"
        " AND e.mode = 'eager' AND e.status = 'pass' AND c.status = 'pass'"
        f" AND {e} > 0 AND {c} > 0"
    )
