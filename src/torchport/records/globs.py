"""Case-id globs in SQL: fnmatch's syntax (what ``run --cases`` and users know) as SQLite GLOB,
or as PostgreSQL LIKE.

GLOB with a fixed prefix is answered from an index; fnmatch in Python would read every row.
The two differ in small ways: fnmatch writes a negated set ``[!a]`` where GLOB writes ``[^a]``,
fnmatch reads ``[^a]`` as the set {^, a}, and an unclosed ``[`` is a literal in fnmatch. The
translation is exact for every pattern except a set that starts with ``^``; that one becomes
``?`` (any character: a superset) and the caller filters the rows with fnmatch itself.
"""

from __future__ import annotations


def fnmatch_to_glob(pattern: str) -> tuple[str, bool]:
    """The GLOB for an fnmatch ``pattern`` and whether it matches exactly the same strings
    (False: it matches a superset; filter with ``fnmatch.fnmatchcase``)."""
    out: list[str] = []
    exact = True
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        i += 1
        if c in "*?":
            out.append(c)
        elif c == "[":
            # Find the closing bracket as fnmatch does: a leading '!' and then a leading ']'
            # belong to the set.
            j = i
            if j < n and pattern[j] == "!":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                out.append("[[]")  # unclosed: a literal '[' in fnmatch
                continue
            body, i = pattern[i:j], j + 1
            negated = body.startswith("!")
            if negated:
                body = body[1:]
            if body.startswith("^") and not negated or _has_reversed_range(body):
                out.append("?")
                exact = False
            else:
                out.append(("[^" if negated else "[") + body + "]")
        else:
            out.append(c)  # ']' alone and every other character are literals in both
    return "".join(out), exact


def _has_reversed_range(body: str) -> bool:
    """``[z-a]``: fnmatch drops such a range; SQLite's handling is not documented."""
    k = 0
    while k + 2 < len(body):
        if body[k + 1] == "-" and body[k] > body[k + 2]:
            return True
        k += 1
    return False


LIKE_ESCAPE = "\\"


def fnmatch_to_like(pattern: str) -> tuple[str, bool]:
    """The LIKE pattern (escape character ``\\``) for an fnmatch ``pattern`` and whether it
    matches exactly the same strings. LIKE has ``*`` and ``?`` (as ``%`` and ``_``) but no
    sets: from the first ``[`` on the pattern is ``%`` (a superset; filter with
    ``fnmatch.fnmatchcase``), which keeps the fixed prefix an index answers."""
    out: list[str] = []
    for c in pattern:
        if c == "[":
            return "".join(out) + "%", False
        if c == "*":
            out.append("%")
        elif c == "?":
            out.append("_")
        elif c in "%_\\":
            out.append(LIKE_ESCAPE + c)
        else:
            out.append(c)
    return "".join(out), True
