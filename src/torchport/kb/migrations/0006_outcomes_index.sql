-- 0006: comparing two runs of 100 000 results reads one index, not the wide result rows (the
-- metrics, findings and traceback text around the key figures cost 0.35 s a join on a
-- million-result file; benchmarks/web_pages.py). The index holds everything the exact counts
-- and the lists of the compare page decide on (queries.compare_counts, queries.compare_lists);
-- it replaces results_pairs, its prefix.
CREATE INDEX results_outcomes ON results(
    run_id, case_id, mode, status, stage, grade, perf_median_ms, perf_p10_ms, perf_p90_ms,
    perf_samples, parity_rmse_ratio, parity_max_rel_err, compile_cold_first_step_s,
    compile_warm_first_step_s, perf_peak_bytes, host_ops
);
DROP INDEX results_pairs;

-- A run's planned length as a column: listing runs and reading one parsed every plan (100 000
-- entries in a large sweep: 7 ms a run). The plan is written once, when the run is inserted.
ALTER TABLE runs ADD COLUMN planned INTEGER;
UPDATE runs SET planned = json_array_length(plan);
CREATE TRIGGER runs_planned AFTER INSERT ON runs BEGIN
    UPDATE runs SET planned = json_array_length(NEW.plan) WHERE id = NEW.id;
END;
