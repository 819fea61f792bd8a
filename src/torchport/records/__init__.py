"""The knowledge base. Never imports torch: evidence can be browsed on any laptop.

``open_store(url, write=...)`` is the one entry point; callers see the ``Store`` protocol only,
so another engine (PostgreSQL) can be added behind a URL scheme without changing them.
"""

from torchport.records.base import (  # noqa: F401
    DuplicateResult,
    RunInProgress,
    Store,
    StoreError,
    default_db_path,
)
from torchport.records.result import MalformedResult  # noqa: F401
from torchport.records.status import STATUSES as RESULT_STATUSES  # noqa: F401
from torchport.records.store import open_store  # noqa: F401
