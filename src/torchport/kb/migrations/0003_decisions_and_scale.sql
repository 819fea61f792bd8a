-- 0003: decision notes, artifact hashes, error signatures, and the indexes a knowledge base of
-- a million results needs (every read is an indexed lookup, never a scan of every result).

-- The error grouped by cause (records/signature.py); torchport_signature is that function,
-- registered on every connection.
ALTER TABLE results ADD COLUMN signature TEXT;
UPDATE results SET signature = torchport_signature(error_type, error_message)
    WHERE error_type IS NOT NULL OR error_message IS NOT NULL;

-- Key figures out of metrics (records/figures.py): a comparison reads numbers, not JSON.
ALTER TABLE results ADD COLUMN perf_median_ms REAL;
ALTER TABLE results ADD COLUMN perf_p10_ms REAL;
ALTER TABLE results ADD COLUMN perf_p90_ms REAL;
ALTER TABLE results ADD COLUMN perf_samples INTEGER;
ALTER TABLE results ADD COLUMN parity_rmse_ratio REAL;
ALTER TABLE results ADD COLUMN parity_max_rel_err REAL;
ALTER TABLE results ADD COLUMN compile_cold_first_step_s REAL;
ALTER TABLE results ADD COLUMN compile_warm_first_step_s REAL;
ALTER TABLE results ADD COLUMN perf_peak_bytes INTEGER;
UPDATE results SET
    perf_median_ms = json_extract(metrics, '$.perf_median_ms'),
    perf_p10_ms = json_extract(metrics, '$.perf_p10_ms'),
    perf_p90_ms = json_extract(metrics, '$.perf_p90_ms'),
    perf_samples = json_extract(metrics, '$.perf_samples'),
    parity_rmse_ratio = json_extract(metrics, '$.parity_rmse_ratio'),
    parity_max_rel_err = json_extract(metrics, '$.parity_max_rel_err'),
    compile_cold_first_step_s = json_extract(metrics, '$.compile_cold_first_step_s'),
    compile_warm_first_step_s = json_extract(metrics, '$.compile_warm_first_step_s'),
    perf_peak_bytes = json_extract(metrics, '$.perf_peak_bytes')
    WHERE metrics != '{}';

-- A run's results in recorded order (paging), its counts and failure groups (covering), a
-- case's newest result per mode (last status), case globs with a fixed prefix.
CREATE INDEX results_run ON results(run_id);
CREATE INDEX results_run_status ON results(run_id, status, stage, signature);
CREATE INDEX results_case_mode ON results(case_id, mode);
DROP INDEX results_case;

-- Why a team accepted a trade-off or rejected a result: notes on a run or on one case of it.
CREATE TABLE notes (
    id          INTEGER PRIMARY KEY,
    run_id      TEXT NOT NULL REFERENCES runs(id),
    case_id     TEXT,                      -- NULL: the note is about the whole run
    mode        TEXT,                      -- NULL: every mode of the case
    author      TEXT,
    text        TEXT NOT NULL,
    created_at  TEXT NOT NULL
);
CREATE INDEX notes_run ON notes(run_id, case_id);
CREATE VIRTUAL TABLE notes_fts USING fts5(
    text, author, case_id, content='notes', content_rowid='id'
);
CREATE TRIGGER notes_ai AFTER INSERT ON notes BEGIN
    INSERT INTO notes_fts(rowid, text, author, case_id)
    VALUES (new.id, new.text, new.author, new.case_id);
END;
CREATE TRIGGER notes_ad AFTER DELETE ON notes BEGIN
    INSERT INTO notes_fts(notes_fts, rowid, text, author, case_id)
    VALUES ('delete', old.id, old.text, old.author, old.case_id);
END;

-- Files a run's results point at (traces), by content hash: an imported run names the bytes it
-- needs even where the file itself never travelled. sha256 NULL: missing where it was exported.
CREATE TABLE artifacts (
    run_id      TEXT NOT NULL REFERENCES runs(id),
    path        TEXT NOT NULL,
    sha256      TEXT,
    bytes       INTEGER,
    PRIMARY KEY (run_id, path)
);
