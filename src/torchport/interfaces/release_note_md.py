"""The release note as Markdown (``torchport matrix`` writes it beside the locks): each pair's
line, the packages that changed, and a link to every list (the dashboard's compare page, as
``torchport serve`` serves it) with the command that prints it."""

from __future__ import annotations

from urllib.parse import urlencode

from torchport.interfaces.formats import safe

LISTS = (
    ("newly_failing", "newly failing"),
    ("newly_passing", "fixed"),
    ("failure_changed", "failing differently"),
    ("host_ops", "host-op changes"),
    ("parity", "parity drift"),
    ("perf", "step-time changes"),
    ("compile", "compile-wait changes"),
)


# As the report's Markdown (web/report.py): a backslash before each character that could open
# HTML, a link or a code span, or end a table cell.
_MARKUP = str.maketrans({ch: "\\" + ch for ch in "\\|<>&[]`*_"})


def _md(text: object) -> str:
    """Stored text (case, environment and package names) shown as text, never as Markdown."""
    return " ".join(safe(text).translate(_MARKUP).splitlines())


def release_note_markdown(data: dict, db: str, dashboard: str = "") -> str:
    lines = [f"# Release note: {_md(data['matrix'])}", ""]
    for problem in data["problems"]:
        lines.append(f"- problem: {_md(problem)}")
    for env in data["environments"]:
        named = env.get("run_name") not in (None, "run")
        which = f" {_md(env['run_name'])}" if named else ""
        run = f"run{which} `{env['run_id']}`" if env.get("run_id") else "no run"
        lines.append(f"- `{_md(env['name'])}`: {run}, lock `{env['lock_digest']}`")
    lines.append("")
    for pair in data["pairs"]:
        a, b = pair["run_a"], pair["run_b"]
        cmp = pair["comparison"]
        which = f" ({_md(pair['run_name'])})" if pair.get("run_name") else ""
        lines += [
            f"## {_md(pair['baseline'])} -> {_md(pair['other'])}{which}",
            "",
            _md(pair["headline"]),
        ]
        lines += ["", f"`torchport compare {a} {b} --all --db {db}`", ""]
        for key, title in LISTS:
            rows = cmp.get(key) or []
            n = len(rows)
            href = dashboard + "/compare?" + urlencode({"a": a, "b": b, "list": key})
            lines.append(f"- [{title}: {n}]({href})")
            for row in list(rows)[:10] if isinstance(rows, list) else []:
                lines.append(f"  - {_md(row.get('case'))} [{_md(row.get('mode'))}]")
        if pair["packages"]:
            head = f"| package | {_md(pair['baseline'])} | {_md(pair['other'])} |"
            lines += ["", head]
            lines.append("| --- | --- | --- |")
            for p in pair["packages"]:
                lines.append(f"| {_md(p['name'])} | {_md(p['a'] or '-')} | {_md(p['b'] or '-')} |")
        lines.append("")
    if any(env.get("results") is not None for env in data["environments"]):
        lines += ["## Runs", "", "| environment | run | run id | results | wall |"]
        lines.append("| --- | --- | --- | --- | --- |")
        for env in data["environments"]:
            results = env.get("results")
            counts = ", ".join(f"{k} {v}" for k, v in results.items()) if results else "-"
            wall = f"{env['run_wall_s']:.0f} s" if env.get("run_wall_s") is not None else "-"
            lines.append(
                f"| {_md(env['name'])} | {_md(env.get('run_name') or '-')} "
                f"| {env.get('run_id') or '-'} | {_md(counts)} | {wall} |"
            )
        lines.append("")
    if data.get("checks"):
        lines += ["## Checks", "", "| environment | check | exit | wall | first line | kept in |"]
        lines.append("| --- | --- | --- | --- | --- | --- |")
        for c in data["checks"]:
            wall = f"{c['wall_s']:.0f} s" if c.get("wall_s") is not None else "-"
            exit_code = "-" if c.get("exit_code") is None else c["exit_code"]
            lines.append(
                f"| {_md(c['env'])} | {_md(c['name'])} | {exit_code} | {wall} "
                f"| {_md(c.get('problem') or c.get('first_line') or '')} | {_md(c['path'])} |"
            )
        lines.append("")
    for report in data.get("gate") or []:
        lines.append(
            f"- gate `{_md(report['env'])}` against the baseline: "
            f"{len(report['regressions'])} regressions, {len(report['improvements'])} improvements"
        )
    return "\n".join(lines) + "\n"
