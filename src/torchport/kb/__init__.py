"""The knowledge base: storage and reads. Never imports torch: evidence can be browsed on any
laptop.

``open_store(url, write=...)`` is the one entry point; callers see the ``Store`` protocol only
(``kb/base.py``: its writes and one read per question, ``kb/surface.py``), so another engine can
be added behind a URL scheme without changing them. The engines (``sqlite_store``,
``pg_store``) share ``sql_store`` and ``sql_kb``; the schema and its migrations are
``schema``, ``migrations/`` and ``migrations_pg/``; each question's read is a module of
``kb/reads/`` (``compare``); export and import are ``exchange``; a long read's later parts run
in forked children (``forked``). The values and rules the records hold are ``torchport.records``,
the layer below.
"""

from torchport.kb.base import (  # noqa: F401
    DuplicateResult,
    RunInProgress,
    Store,
    StoreError,
    default_db_path,
)
from torchport.kb.store import open_store  # noqa: F401
