-- 0008 (PostgreSQL): as migrations/0008_run_tallies.sql. The key holds the signature and the
-- host-op table by their md5 (a B-tree entry is limited to about 2.7 kB); the trigger is a
-- function.
CREATE TABLE run_tallies (
    run_id     TEXT COLLATE "C" NOT NULL REFERENCES runs(id),
    status     TEXT COLLATE "C" NOT NULL,
    stage      TEXT COLLATE "C" NOT NULL,
    grade      TEXT COLLATE "C" NOT NULL,
    signature  TEXT COLLATE "C" NOT NULL,
    host_ops   TEXT COLLATE "C" NOT NULL,
    n          BIGINT NOT NULL
);
CREATE UNIQUE INDEX run_tallies_key
    ON run_tallies(run_id, status, stage, grade, md5(signature), md5(host_ops));

CREATE FUNCTION torchport_tally() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO run_tallies AS t(run_id, status, stage, grade, signature, host_ops, n)
    VALUES (
        NEW.run_id, NEW.status, COALESCE(NEW.stage, ''), COALESCE(NEW.grade, ''),
        COALESCE(NEW.signature, ''),
        CASE WHEN NEW.grade IN ('fallback', 'host') THEN COALESCE(NEW.host_ops, '') ELSE '' END,
        1
    )
    ON CONFLICT (run_id, status, stage, grade, md5(signature), md5(host_ops))
    DO UPDATE SET n = t.n + 1;
    RETURN NULL;
END $$;
CREATE TRIGGER results_tally AFTER INSERT ON results
    FOR EACH ROW EXECUTE FUNCTION torchport_tally();

INSERT INTO run_tallies(run_id, status, stage, grade, signature, host_ops, n)
SELECT run_id, status, COALESCE(stage, ''), COALESCE(grade, ''), COALESCE(signature, ''),
    CASE WHEN grade IN ('fallback', 'host') THEN COALESCE(host_ops, '') ELSE '' END, COUNT(*)
FROM results GROUP BY 1, 2, 3, 4, 5, 6;

-- The md5 of a result's host-op table, in the outcomes index: a comparison decides whether two
-- results ran the same ops on the host from the index alone (without it every pair's row was
-- read from the table: the compare page's 450-650 ms at 100 000 results a run).
ALTER TABLE results ADD COLUMN host_ops_key TEXT COLLATE "C"
    GENERATED ALWAYS AS (md5(host_ops)) STORED;
DROP INDEX results_outcomes;
CREATE INDEX results_outcomes ON results(run_id, case_id, mode) INCLUDE (
    status, stage, grade, perf_median_ms, perf_p10_ms, perf_p90_ms, perf_samples,
    parity_rmse_ratio, parity_max_rel_err, compile_cold_first_step_s, compile_warm_first_step_s,
    perf_peak_bytes, host_ops_key
);
