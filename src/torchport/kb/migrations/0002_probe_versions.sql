-- 0002: the version of every probe that contributed to a result; every environment a run's
-- workers reported (a resumed run on a new torch release keeps both fingerprints).
ALTER TABLE results ADD COLUMN probe_versions TEXT NOT NULL DEFAULT '{}';

CREATE TABLE run_environments (
    run_id          TEXT NOT NULL REFERENCES runs(id),
    environment_id  TEXT NOT NULL REFERENCES environments(id),
    recorded_at     TEXT NOT NULL,
    PRIMARY KEY (run_id, environment_id)
);
INSERT INTO run_environments(run_id, environment_id, recorded_at)
    SELECT id, environment_id, started_at FROM runs WHERE environment_id IS NOT NULL;

-- The op table is read per result (fallback queries join on it).
CREATE INDEX result_ops_result ON result_ops(result_id);
