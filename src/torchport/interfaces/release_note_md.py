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
        lines.append(f"- `{_md(env['name'])}`: run `{env['run_id']}`, lock `{env['lock_digest']}`")
    lines.append("")
    for pair in data["pairs"]:
        a, b = pair["run_a"], pair["run_b"]
        cmp = pair["comparison"]
        lines += [f"## {_md(pair['baseline'])} -> {_md(pair['other'])}", "", _md(pair["headline"])]
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
    for report in data.get("gate") or []:
        lines.append(
            f"- gate `{_md(report['env'])}` against the baseline: "
            f"{len(report['regressions'])} regressions, {len(report['improvements'])} improvements"
        )
    return "\n".join(lines) + "\n"
