"""Views: named tables computed from a run and its results, shared by ``show`` and ``--json``.

To add one: write a module here with ``build(run, results) -> dict | None`` returning
``{"title", "columns", "rows", "notes"}`` (JSON-able), and add its name to ``VIEWS``.
A view returns None when it has nothing to say about the run.
"""

from __future__ import annotations

from importlib import import_module

VIEWS = ("summary", "ops", "matrix", "coverage", "placement", "compile", "perf", "train",
         "profile")


def build_views(run: dict, results: list[dict]) -> dict[str, dict]:
    built = {}
    for name in VIEWS:
        try:
            module = import_module(f"torchport.interfaces.views.{name}")
        except ModuleNotFoundError:
            continue
        view = module.build(run, results)
        if view is not None:
            built[name] = view
    # A view may stand in for others on its kind of run (the ops table for the per-result
    # matrix and placement rows of thousands of op results): {"supersedes": [names]}.
    for view in list(built.values()):
        for name in view.get("supersedes") or ():
            built.pop(name, None)
    return built
