"""torchport matrix: build each software environment, run the same evaluation in each, and
say what changed from the first (the baseline) to every other."""

from __future__ import annotations

import json
import math
import os

import click

from torchport.interfaces.cli import UsageProblem
from torchport.interfaces.cli.common import echo_json, json_option, open_db, split_csv
from torchport.interfaces.output import OutputError, output_file

REGRESSED_EXIT = 1
FAILED_EXIT = 1  # an environment not built, a run that did not finish: a result, not bad input


class MatrixFailed(UsageProblem):
    """What stopped the matrix, in one line, exit 1 (not click's multi-line 'Error:')."""

    exit_code = FAILED_EXIT


def _seconds(value: float | None) -> float | None:
    if value is not None and not (math.isfinite(value) and 0 < value <= 30 * 24 * 3600):
        raise click.BadParameter(f"{value} is not a number of seconds from 0 to 2592000")
    return value


@click.command("matrix")
@click.argument("matrix_file", metavar="[FILE]", required=False)
@click.option(
    "--env",
    "env_texts",
    multiple=True,
    metavar="NAME=REQ[,REQ...]",
    help="An environment (repeat; the first is the baseline), e.g. t213=torch==2.13.0.",
)
@click.option("--name", default=None, help="The matrix's name (labels its runs).")
@click.option("--suite", default=None, help="Suite for every environment (default smoke).")
@click.option("--cases", multiple=True, help="Case id globs, comma-separated.")
@click.option("--modes", default=None, help="Modes, comma-separated (default eager,compile).")
@click.option("--device", default=None, help="Device for every environment (default cpu).")
@click.option("--probes", default=None, help="Probes, as for 'torchport run'.")
@click.option("--find-links", multiple=True, help="A folder or page of wheels for uv.")
@click.option("--index-url", default=None, help="The package index uv reads.")
@click.option("--extra-index-url", multiple=True, help="Another index for uv.")
@click.option(
    "--index-strategy", default=None, help="uv's --index-strategy (e.g. unsafe-best-match)."
)
@click.option(
    "--envs-dir",
    default=None,
    help="Where the environments are built (default ~/.cache/torchport/envs).",
)
@click.option(
    "--out",
    "out_dir",
    default=None,
    help="Folder for the locks, the release note and the baseline (default "
    "./torchport-matrix/NAME).",
)
@click.option(
    "--runs",
    "run_names",
    multiple=True,
    help="Only these of the environments' runs ([[env.runs]] names), comma-separated.",
)
@click.option(
    "--checks",
    "check_names",
    multiple=True,
    help="Only these of the environments' checks ([[env.checks]] names), comma-separated.",
)
@click.option(
    "--no-checks", is_flag=True, help="Run no [[env.checks]] (doctor, scripts) this time."
)
@click.option("--rebuild", is_flag=True, help="Build every environment again.")
@click.option(
    "--build-only", is_flag=True, help="Only build the environments (and write their locks)."
)
@click.option(
    "--gate",
    "use_gate",
    is_flag=True,
    help="Hold every environment's run to the baseline's: exit 1 on a regression.",
)
@click.option(
    "--run-timeout",
    "run_timeout_s",
    default=None,
    type=float,
    callback=lambda _ctx, _param, value: _seconds(value),
    help="Deadline for one environment's whole run, in seconds.",
)
@click.option("--db", default=None, help="Knowledge base (a SQLite path or postgresql://...).")
@json_option
def command(
    matrix_file,
    env_texts,
    name,
    suite,
    cases,
    modes,
    device,
    probes,
    find_links,
    index_url,
    extra_index_url,
    index_strategy,
    envs_dir,
    out_dir,
    run_names,
    check_names,
    no_checks,
    rebuild,
    build_only,
    use_gate,
    run_timeout_s,
    db,
    as_json,
):
    """Run one evaluation in each environment (built with uv) and compare each with the first.

    FILE is a matrix file (TOML: [matrix], [run], [[env]]; see docs/matrix.md); --env adds
    environments on the command line. A second invocation reuses the built environments and
    the complete runs; an interrupted run is resumed.
    """
    from dataclasses import replace

    from torchport.kb.base import default_db_path
    from torchport.matrix import (
        Indexes,
        Matrix,
        MatrixError,
        load_matrix,
        parse_env,
        run_matrix,
        select_checks,
        select_runs,
        with_overrides,
    )

    try:
        if matrix_file:
            matrix = load_matrix(matrix_file)
            if env_texts:
                matrix = replace(matrix, envs=matrix.envs + tuple(parse_env(t) for t in env_texts))
        else:
            if not env_texts:
                raise MatrixError(
                    "give a matrix file or at least two --env NAME=REQUIREMENT options"
                )
            envs = tuple(parse_env(t) for t in env_texts)
            matrix = Matrix(
                name=name or "-vs-".join(e.name for e in envs),
                envs=envs,
                indexes=Indexes(
                    find_links=tuple(find_links),
                    index_url=index_url,
                    extra_index_urls=tuple(extra_index_url),
                    index_strategy=index_strategy,
                ),
            )
        if name:
            matrix = replace(matrix, name=name)
        matrix = with_overrides(
            matrix,
            suite=suite,
            cases=split_csv(cases),
            modes=split_csv([modes]) if modes else None,
            device=device,
            probes=probes,
        )
        if envs_dir:
            matrix = replace(matrix, envs_dir=os.path.abspath(envs_dir))
        if run_names:
            matrix = select_runs(matrix, tuple(split_csv(run_names)))
        if check_names:
            matrix = select_checks(matrix, tuple(split_csv(check_names)))
    except MatrixError as exc:
        raise UsageProblem(str(exc)) from None

    db = db or default_db_path()
    if "://" not in db:  # every child opens the same file, wherever it runs from
        db = os.path.abspath(db)
    out_dir = out_dir or os.path.join("torchport-matrix", matrix.name)
    try:
        _make_folder(os.path.join(out_dir, "locks"))
    except OutputError as exc:
        raise UsageProblem(str(exc)) from None
    store = open_db(db, write=True)

    def log(line: str) -> None:
        click.echo(line, err=True)

    sides = run_matrix(
        matrix,
        store,
        db,
        rebuild=rebuild,
        log=log,
        run_timeout_s=run_timeout_s,
        build_only=build_only,
        checks_dir=None if no_checks else os.path.join(out_dir, "checks"),
    )
    locks: dict[str, str | None] = {}
    for side in sides:
        locks.setdefault(side.name, None)
        if side.env is not None and locks[side.name] is None:
            with open(side.env.lock_path) as f:
                locks[side.name] = f.read()
            _write(os.path.join(out_dir, "locks", f"{side.name}.txt"), locks[side.name] or "")

    checks = [c for side in sides for c in side.checks]
    if build_only:
        for side in sides:
            click.echo(
                f"{side.name}: "
                + (
                    f"failed: {side.problem}"
                    if side.env is None
                    else f"{side.env.path} (lock {side.env.lock_digest})"
                )
            )
        problems = [s.problem for s in sides if s.problem]
        if problems:
            raise MatrixFailed("; ".join(problems))
        return
    from torchport.views.release_note import run_counts, run_wall_s

    note = _note(store, matrix, sides, locks)
    note.problems += [c.problem for c in checks if c.problem]
    gate_reports = _gate(store, matrix, sides, out_dir)
    data = note.to_dict()
    data["environments"] = [
        {
            "name": s.name,
            "run_name": s.run_name,
            "path": s.env.path if s.env else None,
            "lock_digest": s.env.lock_digest if s.env else None,
            "env_reused": s.env.reused if s.env else None,
            "env_build_s": s.env.build_s if s.env else None,
            "run_id": s.run_id,
            "run_reused": s.run_reused,
            "run_wall_s": run_wall_s(store.get_run(s.run_id)) if s.run_id else None,
            "results": run_counts(store, s.run_id)[0] if s.run_id else None,
            "references_added": s.references_added,
            "labels": s.labels,
        }
        for s in sides
    ]
    data["gate"] = gate_reports
    data["checks"] = [c.to_dict() for c in checks]
    _write(os.path.join(out_dir, "release-note.json"), json.dumps(data, indent=1, default=str))
    from torchport.interfaces.release_note_md import release_note_markdown
    from torchport.kb.sql_common import redact_url

    note_md = release_note_markdown(data, redact_url(db))  # the note is shared: no password
    _write(os.path.join(out_dir, "release-note.md"), note_md)
    if note.pairs:  # the dashboard's page of the matrix, in one file that opens from disk
        try:
            from torchport.interfaces.web.matrix_page import matrix_page
            from torchport.interfaces.web.report import NO_LINKS, html_report
        except ImportError as exc:  # jinja2 is in the web extra
            log(f"release-note.html not written: {exc}; pip install 'torchport[web]'")
        else:
            page = html_report([matrix_page(store, matrix.name, NO_LINKS)])
            _write(os.path.join(out_dir, "release-note.html"), page)
    if as_json:
        echo_json(data)
    else:
        _print(store, note, data, out_dir)
    failed = [r for r in gate_reports if not r["ok"]]
    if note.problems:
        raise MatrixFailed("; ".join(note.problems))
    if use_gate and failed:
        raise SystemExit(REGRESSED_EXIT)


def _make_folder(path: str) -> None:
    """``path`` made (with its parents); neither it nor its parent may be a symbolic link:
    the matrix's files go into a folder of its own and nowhere else."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise OutputError(
            f"cannot make the folder '{path}' ({exc.strerror}); pass another --out"
        ) from None
    for part in (path, os.path.dirname(path)):
        if part and os.path.islink(part):
            raise OutputError(
                f"'{part}' is a symbolic link; torchport writes a matrix's files only into a "
                "folder of its own: pass another --out"
            )


def _write(path: str, text: str) -> None:
    """``text`` into ``path`` through the safe-output path (a regular file or a new one,
    whole or not at all; never through a symbolic link)."""
    try:
        with output_file(path) as f:
            f.write(text)
    except OutputError as exc:
        raise MatrixFailed(str(exc)) from None


def _note(store, matrix, sides, locks):
    """The release note: each run the baseline made, compared with the same run elsewhere."""
    from torchport.matrix import DEFAULT_RUN, run_groups
    from torchport.views.release_note import ReleaseNote, release_note

    note = ReleaseNote(matrix=matrix.name, problems=[s.problem for s in sides if s.problem])
    for name, group in run_groups(matrix, sides):
        part = release_note(
            store,
            matrix.name,
            [(s.name, s.run_id, locks[s.name]) for s in group],
            run_name=None if name == DEFAULT_RUN else name,
        )
        note.pairs += part.pairs
        note.problems += part.problems
    if not note.pairs and not any(s.run_name for s in sides if s.name == matrix.envs[0].name):
        note.problems.append(f"the baseline {matrix.envs[0].name} has no run: nothing to compare")
    return note


def _gate(store, matrix, sides, out_dir: str) -> list[dict]:
    """The baseline's expected file of each of its runs (for 'torchport gate' in CI:
    ``baseline.json``, or ``baseline-<run>.json`` for a named run), and each other run of
    that name held to it."""
    from torchport.matrix import DEFAULT_RUN, run_groups
    from torchport.views.baseline import gate, make_baseline

    reports = []
    for name, (base, *others) in run_groups(matrix, sides):
        if base.run_id is None:
            continue
        baseline = make_baseline(
            store.get_run(base.run_id), store.statuses(base.run_id, outcomes=True)
        )
        file = "baseline.json" if name == DEFAULT_RUN else f"baseline-{name}.json"
        _write(os.path.join(out_dir, file), json.dumps(baseline, indent=1))
        for side in others:
            if side.run_id is None:
                continue
            report = gate(
                baseline, store.get_run(side.run_id), store.statuses(side.run_id, outcomes=True)
            )
            reports.append(
                {"env": side.name, "run_name": name, "run": side.run_id, **report.to_dict()}
            )
    return reports


def _gate_hint(data: dict, out_dir: str) -> str:
    """The 'torchport gate' command for CI: with named runs, one run of the environment
    (``--label matrix_run=RUN``) against that run's baseline file."""
    for report in data["gate"]:
        if report["run_name"] != "run":
            name = report["run_name"]
            path = os.path.join(out_dir, f"baseline-{name}.json")
            return f"matrix_env=NAME --label matrix_run={name} --baseline {path}"
    return f"matrix_env=NAME --baseline {os.path.join(out_dir, 'baseline.json')}"


def checks_view(checks: list[dict]):
    """The environments' checks: exit code, wall time, the first line of the output."""
    from torchport.views.base import Column, View

    return View(
        "Checks",
        (
            Column("environment"),
            Column("check"),
            Column("exit", "int"),
            Column("wall", "s"),
            Column("first line of its output"),
            Column("kept in"),
        ),
        [
            [
                c["env"],
                c["name"],
                c["exit_code"],
                c["wall_s"],
                c["problem"] or c["first_line"],
                c["path"],
            ]
            for c in checks
        ],  # fmt: skip
    )


def _print(store, note, data: dict, out_dir: str) -> None:
    from torchport.interfaces.formats import safe
    from torchport.interfaces.render import make_console, print_views
    from torchport.views.compare_tables import comparison_views
    from torchport.views.release_note import packages_view, runs_view

    console = make_console()
    for env in data["environments"]:
        if env["run_name"] is None:
            run = "no run"
        else:
            named = f"{env['run_name']} " if env["run_name"] != "run" else ""
            run = f"run {named}{env['run_id']} " + ("reused" if env["run_reused"] else "made")
        if env["path"] is None:  # not built: the problems below say why
            console.print(f"{safe(env['name'])}: environment failed", markup=False, highlight=False)
            continue
        console.print(
            f"{safe(env['name'])}: environment "
            + ("reused" if env["env_reused"] else "built")
            + f" (lock {env['lock_digest']}), {run}"
            + (
                f", {env['references_added']} float64 references computed"
                if env["references_added"] is not None
                else ""
            ),
            markup=False,
            highlight=False,
        )
    for pair in note.pairs:
        which = f" ({pair.run_name})" if pair.run_name else ""
        console.rule(f"{pair.baseline} -> {pair.other}{which}")
        views = [v for v in [packages_view(pair)] if v is not None]
        views += comparison_views(pair.comparison)
        print_views(console, {str(i): v for i, v in enumerate(views)})
    summary = {"runs": runs_view(store, [(e["name"], e["run_name"], e["run_id"]) for e in
                                          data["environments"]])}  # fmt: skip
    if data["checks"]:
        summary["checks"] = checks_view(data["checks"])
    print_views(console, summary)
    console.print("Release note:", markup=False, highlight=False)
    for pair in note.pairs:
        console.print(f"  {safe(pair.headline)}", markup=False, highlight=False)
    for report in data["gate"]:
        console.print(
            f"  gate {safe(report['env'])}"
            + (f" ({safe(report['run_name'])})" if report["run_name"] != "run" else "")
            + f": {len(report['regressions'])} regressions, "
            f"{len(report['improvements'])} improvements against the baseline",
            markup=False,
            highlight=False,
        )
    for problem in note.problems:
        console.print(f"  problem: {safe(problem)}", markup=False, highlight=False)
    console.print(
        f"locks, release note (.md, .html, .json) and baseline in {out_dir}/; dashboard: "
        f"torchport serve, then /matrix/{data['matrix']}; CI: torchport gate "
        f"{_gate_hint(data, out_dir)}"
        + (f"; checks' output in {os.path.join(out_dir, 'checks')}/" if data["checks"] else ""),
        markup=False,
        highlight=False,
    )
