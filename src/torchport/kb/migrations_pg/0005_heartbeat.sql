-- 0005 (PostgreSQL): as migrations/0005_heartbeat.sql.
ALTER TABLE runs ADD COLUMN heartbeat_at TEXT COLLATE "C";
