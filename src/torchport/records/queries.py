"""Every SQL statement the SQLite store runs, in one place (schema DDL is in migrations/)."""

# -- identity and schema -------------------------------------------------------------------
USER_VERSION = "PRAGMA user_version"
TABLES = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
QUICK_CHECK = "PRAGMA quick_check(1)"
SET_WAL = "PRAGMA journal_mode = WAL"
FOREIGN_KEYS_ON = "PRAGMA foreign_keys = ON"
QUERY_ONLY_ON = "PRAGMA query_only = ON"
BEGIN_IMMEDIATE = "BEGIN IMMEDIATE"
COMMIT = "COMMIT"
ROLLBACK = "ROLLBACK"


def set_user_version(number: int) -> str:
    return f"PRAGMA user_version = {int(number)}"  # PRAGMA takes no bound parameters


# -- writes ----------------------------------------------------------------------------------
INSERT_ENVIRONMENT = "INSERT OR IGNORE INTO environments(id, data, created_at) VALUES (?, ?, ?)"
INSERT_RUN = (
    "INSERT INTO runs(id, started_at, state, pid, host, command, suite, device, config, plan,"
    " labels) VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?)")
RUN_LIVENESS = "SELECT state, pid, host FROM runs WHERE id = ?"
REOPEN_RUN = "UPDATE runs SET state = 'running', pid = ?, host = ?, finished_at = NULL WHERE id = ?"
# The first environment a run saw stays its own; every distinct one is listed.
SET_FIRST_ENVIRONMENT = "UPDATE runs SET environment_id = COALESCE(environment_id, ?) WHERE id = ?"
ADD_RUN_ENVIRONMENT = (
    "INSERT OR IGNORE INTO run_environments(run_id, environment_id, recorded_at)"
    " VALUES (?, ?, ?)")
FINISH_RUN = "UPDATE runs SET state = ?, finished_at = ? WHERE id = ?"
INSERT_RESULT = (
    "INSERT INTO results(run_id, case_id, case_version, mode, status, stage, grade, metrics,"
    " findings, durations, artifacts, probe_versions, error_type, error_message, traceback,"
    " started_at, finished_at, signature)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
INSERT_RESULT_OP = (
    "INSERT INTO result_ops(result_id, op, device, count, fallback) VALUES (?, ?, ?, ?, ?)")

# -- reads -------------------------------------------------------------------------------------
RUN_BY_ID = "SELECT * FROM runs WHERE id = ?"
LATEST_RUN = "SELECT id FROM runs ORDER BY started_at DESC, rowid DESC LIMIT 1"
RUN_ENVIRONMENTS = (
    "SELECT environment_id FROM run_environments WHERE run_id = ? ORDER BY recorded_at, rowid")
STATUS_COUNTS = "SELECT run_id, status, COUNT(*) AS n FROM results GROUP BY run_id, status"
ENVIRONMENT = "SELECT data FROM environments WHERE id = ?"
DONE_ITEMS = "SELECT case_id, mode FROM results WHERE run_id = ?"


def where_results(*, run_id: bool, status: bool, case_glob: bool, fallback_op: bool) -> str:
    """The WHERE clause for results filtered by the named conditions (parameters in this
    order: run_id, status, case GLOB, fallback op exact name, its length + 1 and its prefix).
    A case glob is SQLite GLOB (records/globs.py translates fnmatch's syntax): a fixed prefix
    is answered from an index."""
    sql = " WHERE 1 = 1"
    if run_id:
        sql += " AND run_id = ?"
    if status:
        sql += " AND status = ?"
    if case_glob:
        sql += " AND case_id GLOB ?"
    if fallback_op:
        # ``aten.cumsum`` names every overload (aten.cumsum.default, ...). A prefix compare,
        # not LIKE: '_' in an op name (aten._index_put_impl_) is not a wildcard.
        sql += (" AND id IN (SELECT result_id FROM result_ops WHERE fallback = 1 AND"
                " (op = ? OR substr(op, 1, ?) = ?))")
    return sql


# Recorded order, or (case, mode) order: the (run_id, case_id, mode) index, so two runs can be
# walked side by side without sorting either.
ORDERS = {"id": " ORDER BY id", "case": " ORDER BY case_id, mode"}
# The columns a brief row carries: no traceback, and of the findings only the host-op table.
BRIEF_COLUMNS = (
    "id, run_id, case_id, case_version, mode, status, stage, grade, metrics, durations,"
    " probe_versions, error_type, error_message, started_at, finished_at,"
    " json_object('fallback_ops', json(COALESCE(json_extract(findings, '$.fallback_ops'),"
    " '{}'))) AS findings, '[]' AS artifacts, NULL AS traceback")


def select_results(*, run_id: bool, status: bool, fallback_op: bool, case_glob: bool = False,
                   order: str = "id", brief: bool = False, paged: bool = False) -> str:
    """Results filtered (``where_results``) in ``order``; ``paged`` adds LIMIT ? OFFSET ?."""
    sql = f"SELECT {BRIEF_COLUMNS if brief else '*'} FROM results"
    sql += where_results(run_id=run_id, status=status, case_glob=case_glob,
                         fallback_op=fallback_op) + ORDERS[order]
    return sql + " LIMIT ? OFFSET ?" if paged else sql


def count_results(*, run_id: bool, status: bool, case_glob: bool, fallback_op: bool) -> str:
    return "SELECT COUNT(*) FROM results" + where_results(
        run_id=run_id, status=status, case_glob=case_glob, fallback_op=fallback_op)


# -- scale: listings, summaries and last statuses from indexes ------------------------------
# A listing carries the plan's length, not the plan (100 000 entries in a large sweep).
LIST_RUNS = (
    "SELECT id, started_at, finished_at, state, pid, host, command, suite, device, config,"
    " labels, environment_id, json_array_length(plan) AS planned FROM runs"
    " ORDER BY started_at DESC, rowid DESC")
RUN_STATUS_COUNTS = "SELECT status, COUNT(*) AS n FROM results WHERE run_id = ? GROUP BY status"
RUN_SELECTORS = (
    "SELECT id, state, pid, host, device, suite, labels FROM runs"
    " ORDER BY started_at DESC, rowid DESC")
FAILURES = " run_id = ? AND status NOT IN ('pass', 'skip')"


def failure_groups(*, signature: str, severity: tuple[str, ...]) -> str:
    """Failure groups of one run, (status, stage, signature) with a count, worst first when
    ``severity`` is given (a status order), else most common first. Parameters: run_id, limit.
    ``signature`` is the column, or the expression that computes it on an older schema."""
    order = "n DESC, status, stage"
    if severity:
        rank = " ".join(f"WHEN '{s}' THEN {i}" for i, s in enumerate(severity))
        order = f"CASE status {rank} ELSE {len(severity)} END, " + order
    return (f"SELECT status, stage, {signature} AS signature, COUNT(*) AS n FROM results"
            f" WHERE{FAILURES} GROUP BY status, stage, {signature} ORDER BY {order} LIMIT ?")


def failure_group_count(signature: str) -> str:
    return (f"SELECT COUNT(*) FROM (SELECT 1 FROM results WHERE{FAILURES}"
            f" GROUP BY status, stage, {signature})")


def failure_examples(signature: str) -> str:
    """A group's first results. Parameters: run_id, status, stage, signature, limit."""
    return ("SELECT case_id, mode, error_message FROM results WHERE run_id = ? AND status = ?"
            f" AND stage IS ? AND {signature} IS ? ORDER BY id LIMIT ?")


# One indexed lookup per case (the (case_id, mode) index): the newest eager status, else the
# newest of any mode.
_LAST = ("SELECT r.status FROM results r JOIN runs ON runs.id = r.run_id WHERE r.case_id = ?"
         " AND (? IS NULL OR runs.device = ?)")
LAST_EAGER_STATUS = _LAST + " AND r.mode = 'eager' ORDER BY r.id DESC LIMIT 1"
LAST_ANY_STATUS = _LAST + " ORDER BY r.id DESC LIMIT 1"
# Every case at once: the newest result per (case, mode), grouped on the same index.
LAST_STATUS_EVERY_CASE = (
    "SELECT id, case_id, mode, status FROM results WHERE id IN (SELECT MAX(r.id) FROM results r"
    " JOIN runs ON runs.id = r.run_id WHERE runs.device = ? GROUP BY r.case_id, r.mode)")
LAST_STATUS_EVERY_CASE_ANY_DEVICE = (
    "SELECT id, case_id, mode, status FROM results WHERE id IN (SELECT MAX(id) FROM results"
    " GROUP BY case_id, mode)")

# Ranked full text: rank (bm25) inside the FTS index first, then only one page of rows is read.
SEARCH_PAGE = (
    "SELECT results.* FROM (SELECT rowid, rank FROM results_fts WHERE results_fts MATCH ?"
    " ORDER BY rank LIMIT ? OFFSET ?) AS hit JOIN results ON results.id = hit.rowid"
    " ORDER BY hit.rank")
SEARCH_COUNT = "SELECT COUNT(*) FROM results_fts WHERE results_fts MATCH ?"

# -- decisions: notes and artifacts -----------------------------------------------------------
INSERT_NOTE = (
    "INSERT INTO notes(run_id, case_id, mode, author, text, created_at)"
    " VALUES (?, ?, ?, ?, ?, ?)")
NOTE_EXISTS = (
    "SELECT 1 FROM notes WHERE run_id = ? AND case_id IS ? AND mode IS ? AND author IS ?"
    " AND text = ? AND created_at = ?")
NOTES_OF_RUN = "SELECT * FROM notes WHERE run_id = ? ORDER BY id"
NOTES_OF_CASE = "SELECT * FROM notes WHERE run_id = ? AND case_id = ? ORDER BY id"
ALL_NOTES = "SELECT * FROM notes ORDER BY id"
SEARCH_NOTES = (
    "SELECT notes.* FROM (SELECT rowid, rank FROM notes_fts WHERE notes_fts MATCH ?"
    " ORDER BY rank LIMIT ? OFFSET ?) AS hit JOIN notes ON notes.id = hit.rowid"
    " ORDER BY hit.rank")
CASE_IN_RUN = "SELECT mode FROM results WHERE run_id = ? AND case_id = ?"
INSERT_ARTIFACT = (
    "INSERT OR IGNORE INTO artifacts(run_id, path, sha256, bytes) VALUES (?, ?, ?, ?)")
ARTIFACTS_OF_RUN = "SELECT path, sha256, bytes FROM artifacts WHERE run_id = ? ORDER BY path"

# -- import: a run as it was recorded elsewhere -----------------------------------------------
# No pid: the supervisor lived on another machine; the state is what the exporter saw.
INSERT_RUN_AS_RECORDED = (
    "INSERT INTO runs(id, started_at, finished_at, state, pid, host, command, suite, device,"
    " config, plan, labels, environment_id) VALUES (?, ?, ?, ?, NULL, ?, ?, ?, ?, ?, ?, ?, ?)")
RESULT_OPS = "SELECT op, device, count, fallback FROM result_ops WHERE result_id = ? ORDER BY rowid"
