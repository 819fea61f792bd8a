-- 0007: a run's headline (views/headline.py: results graded fallback or host, the distinct
-- ops they ran on the host) from an index of the graded results alone, in index order: the
-- run list of a million-result file no longer groups every result row.
CREATE INDEX results_grades ON results(run_id, grade, host_ops) WHERE grade IS NOT NULL;
