-- 0008: each run's counts, kept as its results are recorded (a trigger on insert), so a run's
-- summary and headline and the run list read a few hundred rows a run, not 100 000 result rows
-- (views/run_summary.py, views/headline.py): results by status, stage, error signature, grade
-- and, for results graded fallback or host (queries.HEADLINE_GRADES), host-op table. A NULL is
-- kept as '' (a unique key holds NULLs apart); readers turn '' back into NULL. Results are never
-- updated or deleted, so a count never goes stale.
CREATE TABLE run_tallies (
    run_id     TEXT NOT NULL REFERENCES runs(id),
    status     TEXT NOT NULL,
    stage      TEXT NOT NULL,
    grade      TEXT NOT NULL,
    signature  TEXT NOT NULL,
    host_ops   TEXT NOT NULL,
    n          INTEGER NOT NULL
);
CREATE UNIQUE INDEX run_tallies_key
    ON run_tallies(run_id, status, stage, grade, signature, host_ops);

CREATE TRIGGER results_tally AFTER INSERT ON results BEGIN
    INSERT INTO run_tallies(run_id, status, stage, grade, signature, host_ops, n)
    VALUES (
        NEW.run_id, NEW.status, COALESCE(NEW.stage, ''), COALESCE(NEW.grade, ''),
        COALESCE(NEW.signature, ''),
        CASE WHEN NEW.grade IN ('fallback', 'host') THEN COALESCE(NEW.host_ops, '') ELSE '' END,
        1
    )
    ON CONFLICT (run_id, status, stage, grade, signature, host_ops) DO UPDATE SET n = n + 1;
END;

INSERT INTO run_tallies(run_id, status, stage, grade, signature, host_ops, n)
SELECT run_id, status, COALESCE(stage, ''), COALESCE(grade, ''), COALESCE(signature, ''),
    CASE WHEN grade IN ('fallback', 'host') THEN COALESCE(host_ops, '') ELSE '' END, COUNT(*)
FROM results GROUP BY 1, 2, 3, 4, 5, 6;

-- A key equal when two results' host-op tables are equal, which a comparison decides on: here
-- the table itself (computed, not stored; the outcomes index holds host_ops); PostgreSQL
-- stores its md5 in the outcomes index, which cannot hold the table (migrations_pg/0008).
ALTER TABLE results ADD COLUMN host_ops_key TEXT GENERATED ALWAYS AS (host_ops) VIRTUAL;
