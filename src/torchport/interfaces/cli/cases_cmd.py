"""torchport cases SUITE: the cases of a suite, with tags and the last recorded status."""

import click

from torchport.interfaces.cli.common import db_option, echo_json, json_option, problems


@click.command("cases")
@click.argument("suite")
@click.option("--params", is_flag=True, help="Count parameters (meta device; slower).")
@db_option
@json_option
def command(suite, params, db, as_json):
    """List the cases of SUITE."""
    import os
    from torchport.cases.registry import load_suite
    from torchport.records import default_db_path, open_store
    with problems():
        cases = load_suite(suite)
    path = db or default_db_path()
    last = open_store(path).last_status_by_case() if os.path.exists(path) else {}
    rows = []
    for case in cases:
        row = case.describe()
        if params and hasattr(case, "param_count"):
            try:
                row["params"] = case.param_count()
            except Exception as exc:  # a case that cannot even be sized says so
                row["params"] = f"error: {type(exc).__name__}"
        row["last_status"] = last.get(case.id)
        rows.append(row)
    if as_json:
        echo_json(rows)
        return
    from torchport.interfaces.render import make_console
    from rich.table import Table
    table = Table(title=f"suite {suite}: {len(rows)} cases", title_justify="left")
    columns = ["case", "tags"] + (["params"] if params else []) + ["last status", "note"]
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(row["case"], ",".join(row["tags"]),
                      *([f"{row['params']:,}" if isinstance(row.get("params"), int)
                         else str(row.get("params"))] if params else []),
                      row["last_status"] or "-", row.get("skip_reason") or "")
    make_console().print(table)
