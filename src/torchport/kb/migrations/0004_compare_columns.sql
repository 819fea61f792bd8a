-- 0004: what comparing two runs of 100 000 results reads without parsing JSON.

-- The ops a result ran on the host (findings' fallback_ops, sorted keys, no spaces), NULL when
-- none: placement is compared without parsing findings.
ALTER TABLE results ADD COLUMN host_ops TEXT;
UPDATE results SET host_ops = NULLIF(json_extract(findings, '$.fallback_ops'), '{}')
    WHERE findings LIKE '%fallback_ops%';

-- Two runs' transition counts are read from this index alone (views/compare.py).
CREATE INDEX results_pairs ON results(run_id, case_id, mode, status, perf_median_ms);
