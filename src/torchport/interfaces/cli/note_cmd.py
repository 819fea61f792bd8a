"""torchport note RUN [CASE] TEXT: a decision note on a run or on one case of it."""

import click

from torchport.interfaces.cli.common import db_option, open_db, resolve, store_problems

NOTE_TABLES = (
    "runs",
    "notes",
    "notes_fts",
    "notes_fts_data",
    "notes_fts_idx",
    "notes_fts_content",
    "notes_fts_docsize",
    "notes_fts_config",
)


def _default_author() -> str | None:
    import getpass

    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name in a bare container
        return None


@click.command("note")
@click.argument("run_id", metavar="RUN")
@click.argument("words", nargs=-1, required=True, metavar="[CASE] TEXT")
@click.option("--mode", default=None, help="Only this mode of the case.")
@click.option("--author", default=None, help="Who decided (default: your login name).")
@db_option
def command(run_id, words, mode, author, db):
    """Attach a note to RUN (or to CASE in it): why a result was accepted or rejected. RUN is
    a run id, 'latest' or a selector (device=cpu,release=a).

    Notes show in 'show' and 'compare' and are found by 'search'."""
    from torchport.interfaces.cli import UsageProblem

    if len(words) > 2:
        raise UsageProblem('give the note as one quoted argument: torchport note RUN [CASE] "text"')
    case, text = (None, words[0]) if len(words) == 1 else words
    # A note writes the notes table and its full-text index, and reads the run: only those
    # are checked before the write, not every page of a million-result file.
    store = open_db(db, write=True, check_tables=NOTE_TABLES)
    run_id = resolve(store, run_id, {})  # an id, 'latest' or a selector (release=2.14)
    with store_problems():
        note_id = store.add_note(
            run_id, text, case=case, mode=mode, author=author or _default_author()
        )
    from torchport.interfaces.formats import safe

    where = f"run {run_id}" + (f", case {case}" if case else "") + (f" [{mode}]" if mode else "")
    click.echo(f"note {note_id} added to {safe(where)}")
