"""Which run a command means: an id, ``latest``, or a selector (``device=cuda,release=2.14``:
the latest complete run matching every condition).

Selector keys ``device`` and ``suite`` match the run's own fields; any other key (or
``label.KEY``) matches a label given with ``torchport run --label KEY=VALUE``. Filters given
once for both sides (``compare --device cuda a b``) are added to each selector.
"""

from __future__ import annotations

from torchport.kb import StoreError

RUN_FIELDS = ("device", "suite")


def parse_selector(text: str) -> dict[str, str]:
    """``"device=cuda,release=2.14"`` -> ``{"device": "cuda", "release": "2.14"}``."""
    out = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or not key:
            raise StoreError(
                f"selector '{text}' must look like device=cuda,release=2.14 (or pass a run id)"
            )
        out[key.removeprefix("label.")] = value.strip()
    return out


def describe(conditions: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in conditions.items()) or "any"


def is_run_id(spec: str | None) -> bool:
    """Whether ``spec`` names a run by its id (not ``latest``, not a selector)."""
    return bool(spec) and "=" not in (spec or "") and spec != "latest"


def resolve_run(store, spec: str | None, filters: dict[str, str] | None = None) -> str:
    """The run id ``spec`` names. ``spec`` None or ``latest``: the newest run (or, with
    ``filters``, the newest complete run matching them)."""
    filters = dict(filters or {})
    if is_run_id(spec):
        return store.get_run(spec, plan=False)["id"]  # StoreError names the latest run
    conditions = {**filters, **(parse_selector(spec) if spec and spec != "latest" else {})}
    if not conditions:
        return store.runs(latest=True)[0]["id"]
    labels = {k: v for k, v in conditions.items() if k not in RUN_FIELDS}
    found = [
        r["id"]
        for r in store.runs(
            device=conditions.get("device"),
            suite=conditions.get("suite"),
            labels=labels or None,
            complete=True,
        )
    ]
    if not found:
        raise StoreError(
            f"no complete run matches {describe(conditions)}; 'torchport runs' "
            "lists the runs and their labels"
        )
    return found[0]
