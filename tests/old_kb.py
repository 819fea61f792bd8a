"""Knowledge bases of an older schema, as an older torchport left them: the schema built by the
migrations up to that version (nothing newer runs), then the rows of a current base copied in,
column by column, wherever the older table has the column. A column added later is then
filled by its migration, as it was for the files and servers that torchport wrote."""

from __future__ import annotations

import sqlite3

from torchport.kb import pg_schema, sqlite_schema

# Parents before children: the foreign keys hold at every insert.
TABLES = ("environments", "runs", "run_environments", "results", "result_ops", "notes", "artifacts")


def _rows(source: str, table: str) -> tuple[list[str], list[tuple]]:
    conn = sqlite3.connect(source)
    try:
        columns = [row[1] for row in conn.execute(f"PRAGMA table_xinfo({table})") if not row[6]]
        order = "rowid"
        rows = conn.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY {order}").fetchall()
    finally:
        conn.close()
    return columns, rows


def sqlite_at(path: str, version: int, source: str) -> str:
    """An SQLite file at schema ``version`` holding ``source``'s rows (a current-schema file)."""
    conn = sqlite3.connect(path, isolation_level=None)
    sqlite_schema.register_functions(conn)  # migration 0003 calls torchport_signature
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("BEGIN")
    for number, script in sqlite_schema.migrations():
        if number <= version:
            for statement in sqlite_schema.statements(script):
                conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {int(version)}")
    have = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for table in TABLES:
        if table not in have:
            continue
        # hidden 0: a stored column (not generated)
        old = {row[1] for row in conn.execute(f"PRAGMA table_xinfo({table})") if not row[6]}
        columns, rows = _rows(source, table)
        keep = [i for i, c in enumerate(columns) if c in old]
        names = ", ".join(columns[i] for i in keep)
        marks = ", ".join("?" * len(keep))
        conn.executemany(
            f"INSERT INTO {table}({names}) VALUES ({marks})",
            [tuple(row[i] for i in keep) for row in rows],
        )
    conn.execute("COMMIT")
    conn.close()
    return path


def pg_at(url: str, version: int, source: str) -> str:
    """The (empty) PostgreSQL database at ``url`` made a knowledge base at schema ``version``
    (from pg_schema.FIRST_VERSION, the first this engine wrote) holding ``source``'s rows."""
    import psycopg

    assert version >= pg_schema.FIRST_VERSION, version
    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        conn.execute(f"CREATE TABLE {pg_schema.VERSION_TABLE} (version INTEGER NOT NULL)")
        for number, script in pg_schema.migrations():
            if number <= version:
                conn.execute(script)
        conn.execute(f"INSERT INTO {pg_schema.VERSION_TABLE}(version) VALUES (%s)", (version,))
        for table in TABLES:
            old = {
                row[0]
                for row in conn.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = %s"
                    " AND table_schema = current_schema() AND is_generated = 'NEVER'"
                    " AND (identity_generation IS NULL OR identity_generation != 'ALWAYS')",
                    (table,),
                )
            }
            columns, rows = _rows(source, table)
            keep = [i for i, c in enumerate(columns) if c in old]
            names = ", ".join(columns[i] for i in keep)
            marks = ", ".join(["%s"] * len(keep))
            with conn.cursor() as cur:
                cur.executemany(
                    f"INSERT INTO {table}({names}) VALUES ({marks})",
                    [tuple(row[i] for i in keep) for row in rows],
                )
        for table in ("results", "notes"):  # ids given: the next one a writer takes follows
            conn.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'),"
                f" GREATEST((SELECT MAX(id) FROM {table}), 1))"
            )
    return url
