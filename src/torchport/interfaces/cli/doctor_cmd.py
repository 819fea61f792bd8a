"""torchport doctor: which devices and backends are usable here, and why not."""

import click

from torchport.interfaces.cli import UsageProblem
from torchport.interfaces.cli.common import echo_json, json_option


@click.command("doctor")
@json_option
def command(as_json):
    """Report the devices torchport can see, with versions and reasons."""
    from torchport.api import doctor

    info = doctor()
    if "broken" in info:
        broken = info["broken"]
        name = broken.get("backend") or "an installed backend"
        fix = (
            "; TORCH_DEVICE_BACKEND_AUTOLOAD=0 makes torch import without it"
            if broken.get("autoload_off_helps")
            else ""
        )
        first = (broken.get("message") or "").strip().splitlines()
        cause = f"; cause: {broken['cause']}" if broken.get("cause") else ""
        raise UsageProblem(
            f"'import torch' fails: backend {name} does not load "
            f"({first[0] if first else broken.get('type')}{cause}); repair or "
            f"uninstall it{fix}"
        )
    if as_json:
        echo_json(info)
        return
    click.echo(
        f"torchport {info['torchport']}  torch {info['torch']}  transformers {info['transformers']}"
    )
    for row in info["devices"]:
        mark = "ok " if row["usable"] else "no "
        extra = (
            "  " + ", ".join(f"{k} {v}" for k, v in row["versions"].items())
            if row["versions"]
            else ""
        )
        click.echo(f"  {mark} {row['device']:<8} {row['detail']}{extra}")
        if row.get("dist_backends"):
            click.echo(
                f"       {'':<8} collectives: {row['dist_backends'][0]} (default)"
                + "".join(f", {b}" for b in row["dist_backends"][1:])
            )
        for what, how in (row.get("api") or {}).items():
            click.echo(f"       {'':<8} {what}: {how}")
        for warning in row.get("warnings", ()):
            click.echo(f"  warning ({row['device']}): {warning}")
