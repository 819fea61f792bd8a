-- 0001: runs, environments, results, per-result op table, full-text search.
CREATE TABLE environments (
    id          TEXT PRIMARY KEY,          -- sha256 of the canonical JSON
    data        TEXT NOT NULL,             -- JSON fingerprint
    created_at  TEXT NOT NULL
);

CREATE TABLE runs (
    id              TEXT PRIMARY KEY,
    started_at      TEXT NOT NULL,
    finished_at     TEXT,
    state           TEXT NOT NULL CHECK (state IN ('running', 'complete', 'interrupted')),
    pid             INTEGER,               -- supervisor pid, to tell a killed run from a live one
    host            TEXT,
    command         TEXT NOT NULL,
    suite           TEXT NOT NULL,
    device          TEXT NOT NULL,
    config          TEXT NOT NULL,         -- the full resolved config, JSON
    plan            TEXT NOT NULL,         -- JSON list of [case, mode] the run intends to cover
    labels          TEXT NOT NULL DEFAULT '{}',
    environment_id  TEXT REFERENCES environments(id)
);

CREATE TABLE results (
    id              INTEGER PRIMARY KEY,
    run_id          TEXT NOT NULL REFERENCES runs(id),
    case_id         TEXT NOT NULL,
    case_version    INTEGER NOT NULL,
    mode            TEXT NOT NULL,
    status          TEXT NOT NULL,
    stage           TEXT,                  -- the failing stage; NULL on pass
    grade           TEXT,                  -- placement grade when the placement probe ran
    metrics         TEXT NOT NULL DEFAULT '{}',
    findings        TEXT NOT NULL DEFAULT '{}',
    durations       TEXT NOT NULL DEFAULT '{}',
    artifacts       TEXT NOT NULL DEFAULT '[]',
    error_type      TEXT,
    error_message   TEXT,
    traceback       TEXT,
    started_at      TEXT,
    finished_at     TEXT NOT NULL,
    UNIQUE (run_id, case_id, mode)
);
CREATE INDEX results_case ON results(case_id);
CREATE INDEX results_status ON results(status);

-- Every aten op a result executed, with where it ran: answers "which cases run op X on the host".
CREATE TABLE result_ops (
    result_id   INTEGER NOT NULL REFERENCES results(id),
    op          TEXT NOT NULL,
    device      TEXT NOT NULL,
    count       INTEGER NOT NULL,
    fallback    INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX result_ops_op ON result_ops(op, fallback);

CREATE VIRTUAL TABLE results_fts USING fts5(
    case_id, error_message, traceback, content='results', content_rowid='id'
);
CREATE TRIGGER results_ai AFTER INSERT ON results BEGIN
    INSERT INTO results_fts(rowid, case_id, error_message, traceback)
    VALUES (new.id, new.case_id, new.error_message, new.traceback);
END;
CREATE TRIGGER results_ad AFTER DELETE ON results BEGIN
    INSERT INTO results_fts(results_fts, rowid, case_id, error_message, traceback)
    VALUES ('delete', old.id, old.case_id, old.error_message, old.traceback);
END;
