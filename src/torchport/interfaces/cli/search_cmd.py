"""torchport search TEXT: ranked search over host ops, run labels, case ids, errors,
tracebacks and notes."""

import click

from torchport.interfaces.bounds import MAX_LIMIT, MAX_OFFSET
from torchport.interfaces.cli.common import (
    db_option,
    echo_json,
    json_option,
    open_db,
    public_result,
    store_problems,
)

DEFAULT_LIMIT = 50


@click.command("search")
@click.argument("text", nargs=-1, required=True)
@click.option(
    "--limit",
    default=DEFAULT_LIMIT,
    show_default=True,
    type=click.IntRange(1, MAX_LIMIT),
    help="Results per page, best first.",
)
@click.option(
    "--offset", default=0, type=click.IntRange(0, MAX_OFFSET), help="Skip this many results."
)
@db_option
@json_option
def command(text, limit, offset, db, as_json):
    """Find results whose case id, error or traceback mentions every word of TEXT (whole
    words; end one with * for a prefix: qwen*), best first, and the notes that mention it.
    An op name (cumsum, aten.cumsum) also finds the results that ran it on the host, and
    any text the runs whose labels hold it; those come first.

    Ranking: the newest 1000 matches by relevance (a case-id hit before an error message
    before a traceback), then older matches newest first."""
    query = " ".join(text)
    store = open_db(db)
    with store_problems():
        total = store.search(query, count=True)
        results = store.search(query, limit=limit, offset=offset)
        notes = store.search(query, limit=limit, notes=True) if offset == 0 else []
        from torchport.views.search_more import more_hits

        more = more_hits(store, query, limit) if offset == 0 else {}
    if as_json:
        echo_json(
            {
                "query": query,
                "total": total,
                "offset": offset,
                "limit": limit,
                "results": [public_result(r) for r in results],
                "notes": notes,
                **{name: view.to_dict() for name, view in more.items()},
            }
        )
        return
    from torchport.interfaces.render import make_console, print_view
    from torchport.views.compare_tables import notes_view
    from torchport.views.listing import results_view

    console = make_console()
    for view in more.values():
        print_view(console, view)
        console.print()
    if notes:
        print_view(console, notes_view(notes, "Notes matching"))
        console.print()
    if not results:
        console.print(
            f"no results match '{query}'"
            + (" in a case id, error or traceback" if more else "")
            + (f" past offset {offset} ({total} in all)" if total else ""),
            markup=False,
            highlight=False,
        )
        return
    view = results_view(results)
    view.title = f"results {offset + 1}-{offset + len(results)} of {total}, best match first"
    if offset + len(results) < total:
        view.notes.append(
            f"{total - offset - len(results)} more; --offset "
            f"{offset + len(results)} for the next page"
        )
    print_view(console, view)
