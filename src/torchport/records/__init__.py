"""The knowledge base. Never imports torch: evidence can be browsed on any laptop.

``open_store(url)`` is the one entry point; callers see the ``Store`` API only, so another
backend (PostgreSQL) can be added behind a URL scheme without changing them.
"""

from torchport.records.store import (  # noqa: F401
    RESULT_STATUSES, Store, StoreError, default_db_path, open_store,
)
