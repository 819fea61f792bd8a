"""queries.py's statements for PostgreSQL: each statement written once there, with the dialect
helpers of records/dialect.py, is built here with PostgreSQL's (``POSTGRES``); full text,
which the engines do differently in substance, is written out below (tsvector and ts_rank_cd
where SQLite has FTS5 and bm25). Nothing is translated from SQLite's text.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from torchport.kb import queries as q
from torchport.records.dialect import POSTGRES

# -- written out: full text --------------------------------------------------------------------
# See migrations_pg/0001: the parameter is a tsquery in to_tsquery's syntax made by
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
NO_LIMIT = POSTGRES.no_limit

_WRITTEN = {
    name: value for name, value in dict(globals()).items() if name.isupper() and name[0] != "_"
}


class Statements:
    """``queries`` as PostgreSQL reads it: ``Statements().X`` is the full-text statement
    written out above, else queries.X: a statement the same on both engines, or a function
    called with PostgreSQL's dialect (``d``, where it takes one); what it returns is bound
    to the driver's parameter style (``Dialect.bind``)."""

    def __getattr__(self, name: str) -> Any:
        if name in _WRITTEN:
            return _WRITTEN[name]
        value = getattr(q, name)
        if isinstance(value, str):
            return POSTGRES.bind(value)
        if callable(value):
            return _for_postgres(value)
        return value


@functools.cache
def _for_postgres(build: Callable[..., Any]) -> Callable[..., Any]:
    takes_dialect = "d" in inspect.signature(build).parameters

    @functools.wraps(build)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        made = build(*args, **kwargs, d=POSTGRES) if takes_dialect else build(*args, **kwargs)
        return POSTGRES.bind(made) if isinstance(made, str) else made

    return wrapper
