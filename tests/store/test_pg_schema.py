"""The two engines' migrations kept in step: after every numbered migration, SQLite's and
PostgreSQL's schemas have the same tables, the same columns in each and the same indexes over
the same columns. What differs by design is listed here and nowhere else."""

import sqlite3

from tests import pg
from torchport.kb import pg_schema, sqlite_schema
from torchport.kb.schema import SCHEMA_VERSION

# SQLite's implicit rowid, made a column in PostgreSQL where the store orders by it.
ROWID_STAND_IN = {"runs", "result_ops", "run_environments"}
# Full-text tables: FTS5 virtual tables in SQLite, (id, tsvector) tables in PostgreSQL.
FTS_TABLES = {"results_fts", "notes_fts"}


# A PostgreSQL B-tree entry is limited to about 2.7 kB: host_ops, free-length text, stays out
# (migrations_pg/0006_outcomes_index.sql).
# run_tallies_key holds md5(signature), md5(host_ops) there (migrations_pg/0008), expressions
# that list no column.
PG_LEAVES_OUT = {
    "results_outcomes": ("host_ops",),
    "results_grades": ("host_ops",),
    "run_tallies_key": ("signature", "host_ops"),
}
# ... and holds host_ops' md5 (host_ops_key, from v8) in its place, where SQLite's is host_ops.
# results_run ends with the id from v9 (migrations_pg/0009), as SQLite's entries end with the
# rowid, which index_info does not list. Each: (columns, the version that adds them).
PG_ADDS = {"results_outcomes": (("host_ops_key",), 8), "results_run": (("id",), 9)}


def _sqlite_schema(conn: sqlite3.Connection) -> tuple[dict, dict]:
    tables = [
        row[0]
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    tables = [t for t in tables if not any(t.startswith(f + "_") for f in FTS_TABLES)]
    # table_xinfo: generated columns too (hidden 2 and 3; 1 is a virtual table's hidden one)
    columns = {
        t: [r[1] for r in conn.execute(f"PRAGMA table_xinfo({t})") if r[6] != 1] for t in tables
    }
    indexes = {
        name: [r[2] for r in conn.execute(f"PRAGMA index_info({name})")]
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
        )
    }
    return columns, indexes


_PG_COLUMNS = (
    "SELECT table_name, array_agg(column_name::text ORDER BY ordinal_position)"
    " FROM information_schema.columns WHERE table_schema = current_schema()"
    " AND table_name != 'torchport_schema' GROUP BY table_name"
)
# Indexes made by CREATE INDEX (not those behind PRIMARY KEY or UNIQUE), with their columns.
_PG_INDEXES = (
    "SELECT i.relname, array_agg(a.attname::text ORDER BY k.n) FROM pg_index x"
    " JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid"
    " JOIN pg_namespace s ON s.oid = t.relnamespace AND s.nspname = current_schema()"
    " CROSS JOIN LATERAL unnest(x.indkey) WITH ORDINALITY AS k(attnum, n)"
    " JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum"
    " WHERE NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)"
    " GROUP BY i.relname"
)


def test_both_engines_have_the_same_migrations_and_schema_at_every_version(pg_url):
    sqlite_numbers = [n for n, _ in sqlite_schema.migrations()]
    pg_numbers = [n for n, _ in pg_schema.migrations()]
    assert sqlite_numbers == pg_numbers == list(range(1, SCHEMA_VERSION + 1))
    lite = sqlite3.connect(":memory:")
    sqlite_schema.register_functions(lite)
    with pg.admin(pg_url) as conn:
        for (number, lite_sql), (_, pg_sql) in zip(
            sqlite_schema.migrations(), pg_schema.migrations(), strict=True
        ):
            for statement in sqlite_schema.statements(lite_sql):
                lite.execute(statement)
            conn.execute(pg_sql)
            lite_columns, lite_indexes = _sqlite_schema(lite)
            pg_columns = {t: cols for t, cols in conn.execute(_PG_COLUMNS)}
            pg_indexes = {name: cols for name, cols in conn.execute(_PG_INDEXES)}
            assert set(pg_columns) == set(lite_columns), number
            for table, cols in lite_columns.items():
                if table in FTS_TABLES:
                    assert pg_columns[table] == ["id", "document"], number
                    continue
                extra = ["seq"] if table in ROWID_STAND_IN else []
                assert pg_columns[table] == extra + cols, (number, table)
            fts_indexes = {f"{t}_document" for t in FTS_TABLES if t in pg_columns}
            assert set(pg_indexes) - fts_indexes == set(lite_indexes), number
            for name, cols in lite_indexes.items():
                left_out = PG_LEAVES_OUT.get(name, ())
                adds, since = PG_ADDS.get(name, ((), 0))
                added = list(adds) if number >= since else []
                expected = [c for c in cols if c not in left_out] + added
                assert pg_indexes[name] == expected, (number, name)
