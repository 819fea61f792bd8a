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
        # Its size: parameters for a model case, sample inputs for an op case.
        for key, method in (("params", "param_count"), ("samples", "sample_count")):
            if params and hasattr(case, method):
                try:
                    row[key] = getattr(case, method)()
                except Exception as exc:  # a case that cannot even be sized says so
                    row[key] = f"error: {type(exc).__name__}"
        row["last_status"] = last.get(case.id)
        rows.append(row)
    if as_json:
        echo_json(rows)
        return
    from torchport.interfaces.render import make_console
    from rich.table import Table
    table = Table(title=f"suite {suite}: {len(rows)} cases", title_justify="left")
    sizes = [k for k in ("params", "samples") if any(k in row for row in rows)] if params \
        else []
    columns = ["case", "tags"] + sizes + ["last status", "note"]
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(row["case"], ",".join(row["tags"]),
                      *[f"{row[k]:,}" if isinstance(row.get(k), int) else str(row.get(k, "-"))
                        for k in sizes],
                      row["last_status"] or "-", row.get("skip_reason") or _note(row))
    make_console().print(table)


def _note(row: dict) -> str:
    """Op cases: whether backward is checked too."""
    if "autograd" in row:
        return "forward + backward" if row["autograd"] else "forward"
    return ""
