"""Views: queries over records that return typed rows. No formatting, no torch.

A view is a function ``build(run, results) -> View | None`` (``run`` and ``results`` as the
store returns them); it returns None when it has nothing to say about the run. ``show``
renders each View as a table and ``show --json`` prints its values.

To add one: write ``build`` in a module and register it under the ``torchport.views``
entry-point group (``[project.entry-points."torchport.views"]`` in pyproject.toml), as the
built-ins below are. A registered view that cannot be imported is an error, never skipped.
"""

from __future__ import annotations

from collections.abc import Callable

from torchport import plugins
from torchport.views.base import Column, View  # noqa: F401

GROUP = "torchport.views"
# Built-ins print in this order; views from other packages follow, by name.
BUILTIN_ORDER = (
    "summary",
    "ops",
    "matrix",
    "coverage",
    "flex",
    "placement",
    "compile",
    "perf",
    "serving",
    "train",
    "profile",
    "kernels",
    "kernels_fast_p",
    "hotspots",
    "hotspots_modules",
    "dist",
    "dist_bandwidth",
    "dist_training",
)


class ViewError(LookupError):
    """A registered view that cannot be loaded or built."""


def view_names() -> list[str]:
    known = plugins.targets(GROUP)
    return [n for n in BUILTIN_ORDER if n in known] + sorted(set(known) - set(BUILTIN_ORDER))


def load_view(name: str) -> Callable[[dict, list[dict]], View | None]:
    target = plugins.targets(GROUP).get(name)
    if target is None:
        raise ViewError(f"unknown view '{name}'; known: {', '.join(view_names())}")
    try:
        return plugins.load(target)
    except Exception as exc:  # ImportError, AttributeError, or the module's own failure
        raise ViewError(
            f"view '{name}' ({target}) cannot be loaded: {type(exc).__name__}: "
            f"{exc}; reinstall the package that provides it"
        ) from None


def build_views(run: dict, results: list[dict]) -> dict[str, View]:
    """Every registered view with something to say. A view that raises on this run's records
    becomes a View with no rows and a note naming the error: the others still show."""
    built = {}
    for name in view_names():
        build = load_view(name)
        try:
            view = build(run, results)
        except Exception as exc:  # a bug or records it does not expect: say so, keep going
            message = str(exc).splitlines()[0][:200] if str(exc) else ""
            view = View(
                f"{name} (failed)",
                (),
                [],
                [
                    f"view '{name}' failed on run {run.get('id')}: {type(exc).__name__}: "
                    f"{message}; please report it"
                ],
            )
        if view is not None:
            built[name] = view
    for view in list(built.values()):
        for name in view.supersedes:
            built.pop(name, None)
    return built
