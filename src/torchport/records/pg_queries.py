"""queries.py's statements in PostgreSQL's dialect.

Most statements are translated mechanically (``translate``): placeholders (``?`` to ``%s``,
``:name`` to ``%(name)s``), ``INSERT OR IGNORE`` to ``ON CONFLICT DO NOTHING``, ``IS`` /
``IS NOT`` between values to ``IS [NOT] DISTINCT FROM``, ``rowid`` to ``seq``, ``GLOB`` to
``LIKE`` (records/globs.py ``fnmatch_to_like``), a few function names. The statements that
differ in substance are written out below: full text (tsvector and ts_rank_cd, where SQLite
has FTS5 and bm25), the op table as JSON, and the run lock of a resume.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from torchport.records import queries as q
from torchport.records.figures import METRIC_DIGITS

_RENAMES = (
    ("json_array_length(plan)", "json_array_length(plan::json)"),
    ("instr(", "strpos("),
    ("char(10)", "chr(10)"),
    (" GLOB ?", " LIKE ? ESCAPE '\\'"),
    ("= +a.case_id", "= a.case_id"),  # SQLite's planner hint (queries._indexed_join)
    # A part of two runs' pairs (queries._indexed_join) is merged from both runs' index scans:
    # B's starts at the part's first case too, not at the run's.
    (" AND a.case_id >= :low", " AND a.case_id >= :low AND b.case_id >= :low"),
    (" AND a.case_id < :high", " AND a.case_id < :high AND b.case_id < :high"),
    # An op's overloads (queries.where_results) by the prefix operator: the planner reckons
    # its rows from the op column's statistics and reads it from the (op, fallback) index,
    # where it guessed 400 rows of 29 000 for substr() and sorted them all for a page. The
    # length parameter stays (the prefix carries it), so the parameters are the same. A
    # B-tree serves ^@ from PostgreSQL 15 (C collation, as op's); an older server reads the
    # op table whole, with the same answer.
    ("substr(op, 1, ?) = ?)", "(? >= 0 AND op ^@ ?))"),
    # A subquery kept apart from the statement around it (queries.pairs_that_may_differ)
    (" LIMIT -1 OFFSET 0)", " OFFSET 0)"),
)
_INSERT_OR_IGNORE = re.compile(r"^INSERT OR IGNORE (INTO .*)$", re.DOTALL)
_IS_NOT = re.compile(r"\bIS NOT (?!NULL\b|DISTINCT\b)")
_IS = re.compile(r"\bIS (?!NOT\b|NULL\b|DISTINCT\b)")
_NAMED = re.compile(r"(?<![:\w]):([a-z_]+)")
_METRIC = re.compile(r"torchport_metric\((\w+)\.metrics, '([a-z0-9_]+)'\)")
_INDEXED_BY = re.compile(r" INDEXED BY \w+")


@functools.lru_cache(maxsize=512)
def translate(sql: str) -> str:
    """One of queries.py's statements for PostgreSQL (psycopg's placeholders)."""
    sql = sql.replace("%", "%%")
    for old, new in _RENAMES:
        sql = sql.replace(old, new)
    sql = _INSERT_OR_IGNORE.sub(r"INSERT \1 ON CONFLICT DO NOTHING", sql)
    sql = _IS_NOT.sub("IS DISTINCT FROM ", sql)
    sql = _IS.sub("IS NOT DISTINCT FROM ", sql)
    sql = _INDEXED_BY.sub("", sql)
    sql = re.sub(r"\browid\b", "seq", sql)
    sql = _NAMED.sub(r"%(\1)s", sql)
    sql = _METRIC.sub(lambda m: metric_sql(m[1], m[2]), sql)
    return sql.replace("?", "%s")


def metric_sql(alias: str, name: str) -> str:
    """SQLite's ``torchport_metric(alias.metrics, 'name')`` (records/figures.py
    ``metric_value``) in PostgreSQL: the number after the key in the stored text, which
    records/sql_common.py ``to_json`` writes (``{"a": 1.5, "b": NaN}``: Python's JSON, which
    PostgreSQL's json type refuses for its NaN and Infinity, so it is not parsed as JSON). The
    key is a structural one: preceded by ``{`` or by the space of ``, `` (a quote inside a
    string is escaped); NaN, anything not a number, and an integer of more digits than
    ``METRIC_DIGITS`` (past a double's range, or near it) read as NULL."""
    more = METRIC_DIGITS - 1
    number = f'[{{ ]"{name}": (-{{0,1}}(Infinity|[0-9][0-9.eE+-]{{0,{more}}}))[,}}]'
    return f"CAST(substring({alias}.metrics from '{number}') AS DOUBLE PRECISION)"


# -- written out: what PostgreSQL does differently ----------------------------------------------
NO_LIMIT = None  # LIMIT NULL: every row
# The resume's check and claim: the run's row stays locked until the claim commits.
RUN_LIVENESS = translate(q.RUN_LIVENESS) + " FOR UPDATE"
INSERT_RESULT = translate(q.INSERT_RESULT) + " RETURNING id"
INSERT_NOTE = translate(q.INSERT_NOTE) + " RETURNING id"
OPS_JSON = (
    "(SELECT coalesce(json_agg(json_build_object('op', op, 'device', device, 'count', count,"
    " 'fallback', fallback = 1) ORDER BY seq), '[]')::text FROM result_ops"
    " WHERE result_id = results.id) AS ops_json"
)

# Full text (see migrations_pg/0001): the parameter is a tsquery in to_tsquery's syntax made by
# PGStore._fts_query from letters and digits only, so user text is never its syntax. Scores
# are negated ranks: lower is better, as SQLite's bm25.
_MATCH = "FROM results_fts, to_tsquery('simple', %s) AS query WHERE document @@ query"
SEARCH_WINDOW = (
    f"SELECT id, -ts_rank_cd(document, query) AS score {_MATCH} ORDER BY id DESC LIMIT %s"
)
SEARCH_BY_RECENCY = f"SELECT id {_MATCH} ORDER BY id DESC LIMIT %s OFFSET %s"
SEARCH_COUNT = f"SELECT COUNT(*) {_MATCH}"
SEARCH_NOTES = (
    "SELECT notes.* FROM (SELECT id, ts_rank_cd(document, query) AS rank FROM notes_fts,"
    " to_tsquery('simple', %s) AS query WHERE document @@ query ORDER BY rank DESC, id"
    " LIMIT %s OFFSET %s) AS hit JOIN notes ON notes.id = hit.id ORDER BY hit.rank DESC, hit.id"
)


def select_results(*, with_ops: bool = False, **flags: Any) -> str:
    """A page in recorded order picks its ids first (the id index alone, merged with the
    filter's ids) and reads the page's rows only: ordering every matching row for OFFSET
    10 000 sorted 29 000 whole rows on disk."""
    sql = translate(q.select_results(**flags))
    if flags.get("paged") and flags.get("order", "id") == "id":
        ids = sql.replace("SELECT * FROM results", "SELECT id FROM results", 1)
        sql = f"SELECT * FROM results WHERE id IN ({ids}) ORDER BY id"
    if with_ops:
        return sql.replace("SELECT * FROM results", f"SELECT *, {OPS_JSON} FROM results", 1)
    return sql


# Export rows (queries.result_lines): PostgreSQL reads a column as JSON by its json type,
# whose input refuses NaN and Infinity, which Python writes: a row whose JSON columns hold
# either word is exported from its row instead (``plain`` NULL). Any other text that is not
# JSON stops the export with the server's error.
_ALL_JSON = " || ".join(q.LINE_JSON_COLUMNS)
RESULT_LINES = translate(
    q.result_lines(
        f"CASE WHEN strpos({_ALL_JSON}, 'NaN') = 0 AND strpos({_ALL_JSON}, 'Infinity') = 0"
        f" THEN {' AND '.join(f'json_typeof({c}::json) IS NOT NULL' for c in q.LINE_JSON_COLUMNS)}"
        " END"
    )
)


# A median (queries._median) by PostgreSQL's ordered-set aggregate: the two middle values are
# percentile_disc(0.5) ascending and descending (the same value when the count is odd), one
# sort each, where ranking every value by two window functions cost twice as long at 50 000
# values. Their mean is the same double-precision arithmetic as AVG of the two: (a + b) / 2.
_MEDIAN_SHELL = translate(q._median("\0")).split("\0")


def _pg_median(sql: str) -> str:
    head, tail = _MEDIAN_SHELL
    assert sql.startswith(head) and sql.endswith(tail), "queries._median changed: update pg"
    values = sql[len(head) : len(sql) - len(tail)]
    middle = "percentile_disc(0.5) WITHIN GROUP (ORDER BY v"
    return (
        f"SELECT CAST(({middle}) + {middle} DESC)) / 2 AS DOUBLE PRECISION) AS median,"
        f" NULLIF(COUNT(*), 0) AS n FROM ({values}) AS vs"
    )


def headline_compile_wait(**kwargs: Any) -> str:
    return _pg_median(translate(q.headline_compile_wait(**kwargs)))


def headline_speedup(**kwargs: Any) -> str:
    return _pg_median(translate(q.headline_speedup(**kwargs)))


# The comparisons decide whether two results ran the same ops on the host by the md5 key the
# outcomes index holds (migrations_pg/0008): never a table row a pair.
_HOST_OPS_CHANGED = "a.host_ops IS DISTINCT FROM b.host_ops"


class Dialect:
    """``queries`` as PostgreSQL reads it: ``Dialect().X`` is the statement written out above,
    else queries.X translated (a function's result translated)."""

    def __getattr__(self, name: str) -> Any:
        if name in _WRITTEN:
            return _WRITTEN[name]
        value = getattr(q, name)
        if isinstance(value, str):
            return translate(value)
        if callable(value):
            return _translated(value)
        return value


def _by_key(build: Callable[..., str]) -> Callable[..., str]:
    @functools.wraps(build)
    def wrapper(*args: Any, **kwargs: Any) -> str:
        sql = build(*args, **kwargs)
        assert _HOST_OPS_CHANGED in sql, "queries.compare_decisions changed: update pg_queries"
        return sql.replace(_HOST_OPS_CHANGED, "a.host_ops_key IS DISTINCT FROM b.host_ops_key")

    return wrapper


def _translated(build: Callable[..., str]) -> Callable[..., str]:
    @functools.wraps(build)
    def wrapper(*args: Any, **kwargs: Any) -> str:
        return translate(build(*args, **kwargs))

    return wrapper


# A comparison's chosen pairs (queries.compare_lists) are found by key, one lookup each. As a
# join, the planner reckons them a hundred thousand (the placement candidates have no limit)
# and reads both runs' whole rows to match them, by a hash or sorted for a merge; a lateral
# subquery is looked up per chosen row (its LIMIT 1 keeps it from being pulled up into a
# join). The pairs themselves are then free to be merged from the two runs' outcomes index
# scans, which hold them in key order (EXPLAIN ANALYZE: 100 ms where a lookup per pair on
# three processes took 200 ms).
_LOOKUP = re.compile(
    r" LEFT JOIN results (\w) ON (chosen\.n IS NULL AND \1\.run_id = %\(run_\1\)s"
    r" AND \1\.case_id = chosen\.case_id AND \1\.mode = chosen\.mode)"
)


# A comparison's pairs (queries.pairs_that_may_differ) are decided from the outcomes index
# alone, which holds a host-op table's key, not its text: a pair's rows are looked up by key
# only for the host ops of a placement candidate or the error line of a failure (a lateral
# subquery each, whose condition skips the lookup for the other pairs). Reading the host ops
# and error lines of every pair had the planner read the whole table (1 000 000 rows, every
# run's) by a sequential scan and sort both runs: 0.48 s of 0.5 s.
_PAIR_LOOKUP = re.compile(
    r" LEFT JOIN results (\w_row) ON (\(pairs\.placed OR pairs\.failed\) AND .*?)"
    r"(?= LEFT JOIN| ORDER BY)"
)


def pairs_that_may_differ(**kwargs: Any) -> str:
    sql = _by_key(_translated(q.pairs_that_may_differ))(**kwargs, rows_apart=True)
    return _looked_up(sql, _PAIR_LOOKUP, "pairs_that_may_differ")


def compare_lists(**kwargs: Any) -> str:
    return _looked_up(_by_key(_translated(q.compare_lists))(**kwargs), _LOOKUP, "compare_lists")


def _looked_up(sql: str, joins: re.Pattern, statement: str) -> str:
    """Both runs' ``LEFT JOIN results X ON condition`` that ``joins`` finds (groups: X, the
    condition) made lateral lookups: one indexed lookup a row, the condition inside."""
    sql, found = joins.subn(
        r" LEFT JOIN LATERAL (SELECT * FROM results \1 WHERE \2 LIMIT 1) AS \1 ON true", sql
    )
    assert found == 2, f"queries.{statement} changed: update pg_queries"
    return sql


_WRITTEN = {
    name: value
    for name, value in dict(globals()).items()
    if name.isupper()
    or name
    in (
        "select_results",
        "headline_compile_wait",
        "headline_speedup",
        "compare_lists",
        "pairs_that_may_differ",
    )
}
