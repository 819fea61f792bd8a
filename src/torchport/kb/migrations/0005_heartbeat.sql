-- 0005: a run's heartbeat, written by its live supervisor every few seconds: a reader on
-- another host (a shared PostgreSQL server) tells a live run from a dead one by its age, since
-- a pid from another host cannot be checked.
ALTER TABLE runs ADD COLUMN heartbeat_at TEXT;
