-- 0007 (PostgreSQL): as migrations/0007_headline_index.sql; host_ops stays out of the key
-- (a B-tree entry is limited to about 2.7 kB): it is read from the rows graded fallback or
-- host only.
CREATE INDEX results_grades ON results(run_id, grade) WHERE grade IS NOT NULL;
