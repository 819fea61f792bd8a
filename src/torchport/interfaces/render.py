"""Rendering views and results as terminal tables (rich)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table


def make_console(**kwargs) -> Console:
    """A console that does not squeeze tables to 80 columns when output is piped to a file."""
    console = Console(**kwargs)
    if not console.is_terminal:
        console = Console(width=160, **kwargs)
    return console


def view_table(view: dict) -> Table:
    table = Table(title=view["title"], title_justify="left", show_lines=False)
    for column in view["columns"]:
        table.add_column(str(column), overflow="fold")
    for row in view["rows"]:
        table.add_row(*["" if v is None else escape(str(v)) for v in row])
    return table


def print_views(console: Console, views: dict[str, dict]) -> None:
    for view in views.values():
        console.print(view_table(view))
        for note in view.get("notes") or ():
            console.print(f"  {note}")
        console.print()


def environment_lines(env: dict) -> list[str]:
    keys = ("device_name", "device_count", "privateuse1_backend", "adapter", "dispatch_key",
            "torch", "transformers", "backend_packages",
            "runtime", "driver", "cpu", "python", "os", "torchport", "torchport_git")
    return [f"{k}: {env[k]}" for k in keys if env.get(k) not in (None, {}, "")]
