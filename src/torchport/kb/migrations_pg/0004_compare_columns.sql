-- 0004 (PostgreSQL): as migrations/0004_compare_columns.sql.
ALTER TABLE results ADD COLUMN host_ops TEXT COLLATE "C";

CREATE INDEX results_pairs ON results(run_id, case_id, mode, status, perf_median_ms);
