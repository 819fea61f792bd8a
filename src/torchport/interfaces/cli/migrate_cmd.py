"""torchport migrate: bring a knowledge base of an older schema to this torchport's."""

import click

from torchport.interfaces.cli.common import db_option, echo_json, json_option, store_problems


@click.command("migrate")
@db_option
@json_option
def command(db, as_json):
    """Bring the knowledge base (a file or a PostgreSQL database) to this torchport's schema,
    in one transaction. Read commands refuse an older schema and name this command; a run,
    a note or an import migrates the base it writes to as it opens it. A base already
    current is left as it is."""
    from torchport.interfaces.cli import one_line
    from torchport.kb.store import migrate

    with store_problems():
        done = migrate(db)
    if as_json:
        echo_json({"db": done.where, "from": done.before, "to": done.after})
        return
    where = one_line(done.where)  # a path may hold a newline or an escape sequence
    if done.before == done.after:
        click.echo(f"{where}: already at schema v{done.after}; nothing to do")
    else:
        click.echo(f"{where}: migrated from schema v{done.before} to v{done.after}")
