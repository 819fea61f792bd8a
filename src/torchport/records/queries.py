"""Every SQL statement the SQLite store runs, in one place (schema DDL is in migrations/)."""

# -- identity and schema -------------------------------------------------------------------
USER_VERSION = "PRAGMA user_version"
TABLES = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
QUICK_CHECK = "PRAGMA quick_check(1)"
SET_WAL = "PRAGMA journal_mode = WAL"
FOREIGN_KEYS_ON = "PRAGMA foreign_keys = ON"
QUERY_ONLY_ON = "PRAGMA query_only = ON"
BEGIN = "BEGIN"  # deferred: a read snapshot from its first read on
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
    " started_at, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
INSERT_RESULT_OP = (
    "INSERT INTO result_ops(result_id, op, device, count, fallback) VALUES (?, ?, ?, ?, ?)")

# -- reads -------------------------------------------------------------------------------------
RUN_BY_ID = "SELECT * FROM runs WHERE id = ?"
LATEST_RUN = "SELECT id FROM runs ORDER BY started_at DESC, rowid DESC LIMIT 1"
ALL_RUNS = "SELECT * FROM runs ORDER BY started_at DESC, rowid DESC"
RUN_ENVIRONMENTS = (
    "SELECT environment_id FROM run_environments WHERE run_id = ? ORDER BY recorded_at, rowid")
STATUS_COUNTS = "SELECT run_id, status, COUNT(*) AS n FROM results GROUP BY run_id, status"
ENVIRONMENT = "SELECT data FROM environments WHERE id = ?"
DONE_ITEMS = "SELECT case_id, mode FROM results WHERE run_id = ?"
SEARCH = (
    "SELECT results.* FROM results_fts JOIN results ON results.id = results_fts.rowid"
    " WHERE results_fts MATCH ? ORDER BY rank")
LAST_STATUS = (
    "SELECT r.case_id, r.mode, r.status FROM results r JOIN runs ON runs.id = r.run_id"
    " ORDER BY r.id")
LAST_STATUS_ON_DEVICE = (
    "SELECT r.case_id, r.mode, r.status FROM results r JOIN runs ON runs.id = r.run_id"
    " WHERE runs.device = ? ORDER BY r.id")


def select_results(*, run_id: bool, status: bool, fallback_op: bool) -> str:
    """Results filtered by the named conditions (parameters in this order: run_id, status,
    fallback op exact name, its length + 1 and its prefix). Case globs are matched in Python
    (fnmatch), since LIKE and GLOB read ``_``, ``[`` and case differently."""
    sql = "SELECT * FROM results WHERE 1 = 1"
    if run_id:
        sql += " AND run_id = ?"
    if status:
        sql += " AND status = ?"
    if fallback_op:
        # ``aten.cumsum`` names every overload (aten.cumsum.default, ...). A prefix compare,
        # not LIKE: '_' in an op name (aten._index_put_impl_) is not a wildcard.
        sql += (" AND id IN (SELECT result_id FROM result_ops WHERE fallback = 1 AND"
                " (op = ? OR substr(op, 1, ?) = ?))")
    return sql + " ORDER BY id"
