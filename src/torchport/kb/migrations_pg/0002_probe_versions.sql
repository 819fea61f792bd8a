-- 0002 (PostgreSQL): as migrations/0002_probe_versions.sql.
ALTER TABLE results ADD COLUMN probe_versions TEXT COLLATE "C" NOT NULL DEFAULT '{}';

CREATE TABLE run_environments (
    seq             BIGINT GENERATED ALWAYS AS IDENTITY,
    run_id          TEXT COLLATE "C" NOT NULL REFERENCES runs(id),
    environment_id  TEXT COLLATE "C" NOT NULL REFERENCES environments(id),
    recorded_at     TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (run_id, environment_id)
);

CREATE INDEX result_ops_result ON result_ops(result_id);
