-- 0006 (PostgreSQL): as migrations/0006_outcomes_index.sql, the decided-on columns carried in
-- the index's leaf (INCLUDE). host_ops stays out: a B-tree entry is limited to about 2.7 kB,
-- and a result may run many ops on the host.
CREATE INDEX results_outcomes ON results(run_id, case_id, mode) INCLUDE (
    status, stage, grade, perf_median_ms, perf_p10_ms, perf_p90_ms, perf_samples,
    parity_rmse_ratio, parity_max_rel_err, compile_cold_first_step_s, compile_warm_first_step_s,
    perf_peak_bytes
);
DROP INDEX results_pairs;

-- As migrations/0006: the plan's length, here a column the server keeps.
ALTER TABLE runs ADD COLUMN planned INTEGER
    GENERATED ALWAYS AS (json_array_length(plan::json)) STORED;
