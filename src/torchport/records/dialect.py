"""The SQL fragments in which SQLite and PostgreSQL differ, one helper each: kb/queries.py
writes every statement once, with these, for the engine it is given (``SQLITE`` or
``POSTGRES``), and never patches one engine's text into the other's (docs/where-rules-live.md).

A statement written for both engines uses ``?`` and ``:name`` for its parameters; the
PostgreSQL driver's spelling (``%s``, ``%(name)s``) is made by ``Dialect.bind``, the driver's
parameter style, once per statement text.

To add a difference: one field or method here, given for both engines, used where the
statement is written.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from torchport.records.figures import METRIC_DIGITS

_NAMED = re.compile(r"(?<![:\w]):([a-z_]+)")


@dataclass(frozen=True)
class Dialect:
    name: str
    # The row order a table's rows were inserted in: SQLite's rowid; PostgreSQL's ``seq``
    # identity column (migrations_pg/0001).
    rowid: str
    # ``LIMIT ?`` for every row.
    no_limit: int | None
    # A subquery kept apart from the statement around it (not flattened into it).
    fence: str
    # PostgreSQL's outcomes index holds a host-op table's md5 key (migrations_pg/0008), not its
    # text: a pair's host ops are compared by key there; SQLite's holds the text.
    host_ops_compared: str
    # Lookups of a comparison's chosen rows: SQLite joins each by key; PostgreSQL looks each up
    # in a lateral subquery, since as a join its planner reckoned the chosen rows a hundred
    # thousand and read both runs' whole rows to match them (EXPLAIN ANALYZE: 100 ms where a
    # lookup per pair took 200 ms on three processes).
    lateral_lookups: bool
    # A page of results in recorded order picks its ids first (the id index alone) and reads
    # the page's rows only: PostgreSQL sorted 29 000 whole rows on disk for OFFSET 10 000.
    pages_by_id: bool

    def bind(self, sql: str) -> str:
        """``sql``'s parameters as this engine's driver spells them."""
        return _bind_pg(sql) if self is POSTGRES else sql

    def insert_ignore(self, into: str, values: str) -> str:
        """INSERT of a row unless one with its key is there. ``into``: ``table(columns)``."""
        if self is POSTGRES:
            return f"INSERT INTO {into} VALUES ({values}) ON CONFLICT DO NOTHING"
        return f"INSERT OR IGNORE INTO {into} VALUES ({values})"

    def same(self, a: str, b: str) -> str:
        """``a`` equals ``b``, NULL equal to NULL."""
        return f"{a} IS NOT DISTINCT FROM {b}" if self is POSTGRES else f"{a} IS {b}"

    def differs(self, a: str, b: str) -> str:
        """``a`` differs from ``b``, NULL equal to NULL."""
        return f"{a} IS DISTINCT FROM {b}" if self is POSTGRES else f"{a} IS NOT {b}"

    def indexed_by(self, index: str) -> str:
        """SQLite told which index to read (an empty file's planner would pick another);
        PostgreSQL's planner has no such hint and finds it by its statistics."""
        return "" if self is POSTGRES else f" INDEXED BY {index}"

    def glob(self, column: str) -> str:
        """``column`` matched by a case glob parameter (records/globs.py makes it: SQLite's
        GLOB, PostgreSQL's LIKE)."""
        return f"{column} LIKE ? ESCAPE '\\'" if self is POSTGRES else f"{column} GLOB ?"

    def op_prefix(self, column: str) -> str:
        """``column`` starts with a prefix parameter, after a parameter of its length + 1.
        SQLite compares the substring; PostgreSQL uses the prefix operator, whose rows its
        planner reckons from the op column's statistics and reads from the (op, fallback)
        index (a B-tree serves ^@ from PostgreSQL 15, C collation as op's; an older server
        reads the op table whole, with the same answer). The length stays a parameter, so
        both take the same ones."""
        if self is POSTGRES:
            return f"(? >= 0 AND {column} ^@ ?)"
        return f"substr({column}, 1, ?) = ?"

    def first_line(self, text: str) -> str:
        """The first line of ``text``."""
        find, newline = ("strpos", "chr(10)") if self is POSTGRES else ("instr", "char(10)")
        return f"substr({text}, 1, {find}({text} || {newline}, {newline}) - 1)"

    def metric(self, alias: str, name: str) -> str:
        """A figure read out of ``alias``'s stored metrics document (records/figures.py
        ``metric_value``): SQLite calls it as a function of the connection
        (sqlite_schema.register_functions); PostgreSQL reads the number after the key in the
        stored text, which kb/sql_common.py ``to_json`` writes (``{"a": 1.5, "b": NaN}``:
        Python's JSON, which PostgreSQL's json type refuses for NaN and Infinity, so it is not
        parsed as JSON). The key is a structural one: after ``{`` or the space of ``, `` (a
        quote inside a string is escaped); NaN, anything not a number, and an integer of more
        digits than METRIC_DIGITS (past a double's range, or near it) read as NULL."""
        if self is not POSTGRES:
            return f"torchport_metric({alias}.metrics, '{name}')"
        more = METRIC_DIGITS - 1
        number = f'[{{ ]"{name}": (-{{0,1}}(Infinity|[0-9][0-9.eE+-]{{0,{more}}}))[,}}]'
        return f"CAST(substring({alias}.metrics from '{number}') AS DOUBLE PRECISION)"

    def part(self, bounds: tuple[bool, bool]) -> tuple[str, str]:
        """A part of two runs' pairs (``:low`` to below ``:high`` of A's case ids): (the
        join's key condition for B, the conditions on the part). SQLite is kept from carrying
        A's range over to B and finding B by it, not by key ('+'); PostgreSQL merges the part
        from both runs' index scans, so B's starts at the part's first case too."""
        hint = "+" if any(bounds) and self is not POSTGRES else ""
        sides = "ab" if self is POSTGRES else "a"
        limits = (">= :low", "< :high")
        conds = "".join(
            f" AND {x}.case_id {limit}"
            for limit, on in zip(limits, bounds, strict=True)
            if on
            for x in sides
        )
        return f"b.case_id = {hint}a.case_id", conds

    def lookup(self, alias: str, index: str | None, condition: str) -> str:
        """``LEFT JOIN`` of the result row ``alias`` found by ``condition`` (a key): a join
        on SQLite (reading ``index``, where one is named), a lateral lookup of one row on
        PostgreSQL (``lateral_lookups``)."""
        if self.lateral_lookups:
            return (
                f" LEFT JOIN LATERAL (SELECT * FROM results {alias} WHERE {condition}"
                f" LIMIT 1) AS {alias} ON true"
            )
        hint = self.indexed_by(index) if index else ""
        return f" LEFT JOIN results {alias}{hint} ON {condition}"

    def median(self, values: str) -> str:
        """The median of a query's ``v`` column and how many values it had (NULLs when none),
        in the database. SQLite ranks every value by two window functions; PostgreSQL takes
        the two middle values by its ordered-set aggregate, ascending and descending (the same
        value when the count is odd), one sort each, where the window functions cost twice
        as long at 50 000 values; their mean is the same arithmetic as AVG of the two."""
        if self is POSTGRES:
            middle = "percentile_disc(0.5) WITHIN GROUP (ORDER BY v"
            return (
                f"SELECT CAST(({middle}) + {middle} DESC)) / 2 AS DOUBLE PRECISION) AS median,"
                f" NULLIF(COUNT(*), 0) AS n FROM ({values}) AS vs"
            )
        return (
            "SELECT AVG(v) AS median, MAX(n) AS n FROM (SELECT v, ROW_NUMBER() OVER (ORDER BY v)"
            f" AS i, COUNT(*) OVER () AS n FROM ({values}) AS vs) AS ranked"
            " WHERE i IN ((n + 1) / 2, (n + 2) / 2)"
        )

    def ops_json(self) -> str:
        """A result's op table as one JSON array, in recorded order (``ops_json``)."""
        if self is POSTGRES:
            return (
                "(SELECT coalesce(json_agg(json_build_object('op', op, 'device', device,"
                " 'count', count, 'fallback', fallback = 1) ORDER BY seq), '[]')::text"
                " FROM result_ops WHERE result_id = results.id) AS ops_json"
            )
        return (
            "(SELECT json_group_array(json_object('op', op, 'device', device, 'count', count,"
            " 'fallback', json(CASE fallback WHEN 1 THEN 'true' ELSE 'false' END)))"
            " FROM (SELECT * FROM result_ops WHERE result_id = results.id ORDER BY rowid))"
            " AS ops_json"
        )

    def all_json(self, columns: tuple[str, ...], *, guarded: bool = True) -> str:
        """Whether every one of ``columns`` reads as JSON. PostgreSQL's json type refuses NaN
        and Infinity, which Python writes: ``guarded``, a row holding either word reads NULL
        (it is then exported from its row); unguarded, such a row stops the statement (the
        caller reads again guarded: the words' search cost 0.11 s of 0.26 s of server time
        on an export's 100 000 rows, docs/at-a-glance.md). Any other text that is not JSON
        stops the statement with the server's error either way. SQLite's ``json_valid``
        refuses nothing."""
        if self is POSTGRES:
            valid = " AND ".join(f"{c}::json IS NOT NULL" for c in columns)  # the cast parses
            if not guarded:
                return valid
            text = " || ".join(columns)
            return (
                f"CASE WHEN strpos({text}, 'NaN') = 0 AND strpos({text}, 'Infinity') = 0"
                f" THEN {valid} END"
            )
        return " AND ".join(f"json_valid({c})" for c in columns)

    @property
    def returning_id(self) -> str:
        """What an INSERT ends with to give the new row's id (SQLite: the cursor's lastrowid)."""
        return " RETURNING id" if self is POSTGRES else ""

    @property
    def for_update(self) -> str:
        """A read that keeps its row locked until the transaction commits (SQLite's write
        transaction, BEGIN IMMEDIATE, locks the whole file)."""
        return " FOR UPDATE" if self is POSTGRES else ""


SQLITE = Dialect(
    name="sqlite",
    rowid="rowid",
    no_limit=-1,
    fence=" LIMIT -1 OFFSET 0",
    host_ops_compared="host_ops",
    lateral_lookups=False,
    pages_by_id=False,
)
POSTGRES = Dialect(
    name="postgresql",
    rowid="seq",
    no_limit=None,
    fence=" OFFSET 0",
    host_ops_compared="host_ops_key",
    lateral_lookups=True,
    pages_by_id=True,
)


@functools.lru_cache(maxsize=1024)
def _bind_pg(sql: str) -> str:
    """psycopg's parameter style: ``?`` to ``%s``, ``:name`` to ``%(name)s``, a literal ``%``
    doubled. No statement holds a ``?`` or a ``:name`` that is not a parameter."""
    return _NAMED.sub(r"%(\1)s", sql.replace("%", "%%")).replace("?", "%s")
