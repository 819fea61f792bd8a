"""Where torchport keeps what it can recompute: ``$TORCHPORT_CACHE``, else the user's cache
folder (``$XDG_CACHE_HOME/torchport``, ``~/.cache/torchport``). Never imports torch."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from torchport import settings

CACHE_ENV = "TORCHPORT_CACHE"


def cache_root(*parts: str) -> str:
    """The folder ``parts`` under the cache root, created if missing."""
    base = settings.value(CACHE_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "torchport"
    )
    path = os.path.join(base, *parts)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:  # checked up front by settings; a race or a read-only home
        raise settings.SettingError(
            f"cannot make the cache folder {path} ({exc.strerror}); set {CACHE_ENV} to a "
            "folder torchport may write"
        ) from None
    return path


def sources_digest(*modules: str) -> str:
    """A short hash of the source files of ``modules`` (dotted names, not imported), so a
    cached answer derived by that code goes stale when the code changes."""
    import importlib.util

    digest = hashlib.sha256()
    for name in modules:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise LookupError(f"no source for module {name}")
        digest.update(Path(spec.origin).read_bytes())
    return digest.hexdigest()[:12]


def read_json(path: str) -> object | None:
    """The JSON a cache file holds; None when it is missing or unreadable (recompute)."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def write_json(path: str, value: object) -> None:
    """Replace ``path`` atomically, so a concurrent reader sees the old file or the new one."""
    folder = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(value, f)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
