"""torchport suites: the suites this installation knows."""

import click

from torchport.interfaces.cli.common import echo_json, json_option


@click.command("suites")
@json_option
def command(as_json):
    """List the registered suites."""
    from torchport.cases.registry import suite_doc, suite_names

    rows = [{"suite": name, "about": suite_doc(name)} for name in suite_names()]
    if as_json:
        echo_json(rows)
        return
    for row in rows:
        click.echo(f"{row['suite']:<10} {row['about']}")
