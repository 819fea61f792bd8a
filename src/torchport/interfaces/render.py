"""Rendering views as terminal tables (rich).

Everything printed from the knowledge base goes in as ``rich.text.Text``, never as markup, and
the console itself has markup and emoji codes off: a label ``[/bold]`` or an error quoting
``[enforce fail at alloc_cpu.cpp:127]`` prints as written.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from torchport.interfaces.formats import cell, safe, text_cell
from torchport.views.base import View

ENVIRONMENT_KEYS = (
    "device_name",
    "device_count",
    "privateuse1_backend",
    "adapter",
    "dispatch_key",
    "torch",
    "transformers",
    "backend_packages",
    "runtime",
    "driver",
    "cpu",
    "python",
    "os",
    "torchport",
    "torchport_git",
)


def make_console(**kwargs) -> Console:
    """A console that prints text as given and does not squeeze tables to 80 columns when
    output is piped to a file."""
    kwargs = {"markup": False, "emoji": False, "highlight": False, **kwargs}
    console = Console(**kwargs)
    if not console.is_terminal:
        console = Console(width=160, **kwargs)
    return console


def view_table(view: View) -> Table:
    table = Table(title=Text(safe(view.title)), title_justify="left", show_lines=False)
    for column in view.columns:
        table.add_column(Text(safe(column.name)), overflow="fold")
    for row in view.rows:
        table.add_row(
            *[
                Text(cell(value, column.kind))
                for value, column in zip(row, view.columns, strict=True)
            ]
        )
    return table


def print_view(console: Console, view: View) -> None:
    if view.columns:
        console.print(view_table(view))
    else:  # a view that failed: its title and the note that says why
        console.print(Text(safe(view.title)))
    for note in view.notes:
        console.print(Text(f"  {text_cell(note, 2000)}"))


def print_views(console: Console, views: dict[str, View]) -> None:
    for view in views.values():
        print_view(console, view)
        console.print()


def environment_lines(env: dict) -> list[str]:
    return [
        text_cell(f"{k}: {env[k]}", 500)
        for k in ENVIRONMENT_KEYS
        if env.get(k) not in (None, {}, "")
    ]


def print_run_header(console: Console, run: dict, environments: list[dict]) -> None:
    """``show``'s first lines: the run, its command and the environment it ran in."""
    labels = ", ".join(f"{k}={v}" for k, v in run["labels"].items()) or "-"
    head = Text()
    head.append(text_cell(f"run {run['id']}", 120), style="bold")
    head.append(
        text_cell(
            f"  {run['state']}  suite {run['suite']}  device {run['device']}  "
            f"dtype {run['config'].get('dtype')}  labels {labels}",
            1000,
        )
    )
    console.print(head)
    console.print(Text(text_cell(f"command: {run['command']}", 1000)))
    first, *others = environments or [{}]
    for line in environment_lines(first):
        console.print(Text(f"  {line}"))
    for number, env in enumerate(others, 2):
        console.print(Text(f"  environment {number} (a later worker start differed):"))
        for line in environment_lines(env):
            console.print(Text(f"    {line}"))
