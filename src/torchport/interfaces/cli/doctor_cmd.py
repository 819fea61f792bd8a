"""torchport doctor: which devices and backends are usable here, and why not."""

import click

from torchport.interfaces.cli.common import echo_json, json_option


@click.command("doctor")
@json_option
def command(as_json):
    """Report the devices torchport can see, with versions and reasons."""
    import torch
    import torchport
    from torchport.devices import device_names, get_adapter
    rows = []
    for name in device_names():
        try:
            adapter = get_adapter(name)
            ok, reason = adapter.availability()
            versions = adapter.versions()
        except Exception as exc:  # an adapter that breaks is reported, not fatal
            ok, reason, versions = False, f"adapter error: {type(exc).__name__}: {exc}", {}
        rows.append({"device": name, "usable": ok, "detail": reason, "versions": versions})
    from importlib import metadata
    info = {"torchport": torchport.__version__, "torch": torch.__version__,
            "transformers": metadata.version("transformers"), "devices": rows}
    if as_json:
        echo_json(info)
        return
    click.echo(f"torchport {info['torchport']}  torch {info['torch']}  "
               f"transformers {info['transformers']}")
    for row in rows:
        mark = "ok " if row["usable"] else "no "
        extra = "  " + ", ".join(f"{k} {v}" for k, v in row["versions"].items()) \
            if row["versions"] else ""
        click.echo(f"  {mark} {row['device']:<8} {row['detail']}{extra}")
