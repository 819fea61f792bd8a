"""Issue 35: property-based fuzzing (Hypothesis) of every way hostile input reaches torchport:
import files (every record kind, wrong types, missing fields, deep nesting, huge numbers),
command-line option values, and the dashboard's query parameters. Each must give one line
and exit 2 (CLI) or a 4xx (web), never a traceback or a 500, and never change an existing
knowledge base.

Fixed example budgets (derandomized, so every run tries the same inputs) keep this in the
default suite: IMPORT_EXAMPLES + CLI_EXAMPLES + WEB_EXAMPLES in all, the CLI in-process.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from tests import kb
from tests.interfaces.inproc import invoke
from torchport.kb import open_store
from torchport.kb.exchange import export_runs

IMPORT_EXAMPLES = 80
CLI_EXAMPLES = 120
WEB_EXAMPLES = 200


def budget(n: int):
    return settings(
        max_examples=n,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A knowledge base with every record kind (environment, run, results with op tables,
    an artifact, notes), and its export lines."""
    folder = tmp_path_factory.mktemp("fuzz")
    results = kb.results()
    results[0] = dict(results[0], artifacts=[str(folder / "trace.json")])
    path = kb.build(folder / "kb.db", results_=results, labels={"release": "a"})
    kb.build(path, run_id="r2", labels={"release": "b"})
    with open_store(path, write=True) as store:
        store.add_note("r1", "accepted", case="smoke/mlp", mode="eager", author="ana")
        store._put_artifacts("r1", [{"path": "/gone/t.json", "sha256": "ab" * 32, "bytes": 10}])
    out = io.StringIO()
    with open_store(path, write=False) as store:
        export_runs(store, ["r1"], out)
    return {"path": path, "lines": out.getvalue().splitlines(), "folder": folder}


def _digest(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def _one_line_or_ok(outcome) -> None:
    assert outcome.code != "traceback", outcome.stderr
    assert outcome.code in (0, 2), (outcome.code, outcome.stderr[-2000:])
    if outcome.code == 2:
        lines = outcome.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("torchport: error: "), outcome.stderr


# -- import files ------------------------------------------------------------------------------
HUGE = st.one_of(
    st.integers(min_value=2**63, max_value=10**40), st.integers(max_value=-(2**63) - 1)
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**64),
    HUGE,
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
KINDS = ("header", "environment", "run", "result", "artifact", "note", "end")


@st.composite
def damaged_export(draw, lines: list[str]) -> str:
    objs = [json.loads(line) for line in lines]
    what = draw(st.sampled_from(["set", "drop", "replace", "insert", "nest", "raw"]))
    i = draw(st.integers(min_value=0, max_value=len(objs) - 1))
    obj = objs[i]
    if what == "set":
        key = draw(st.one_of(st.sampled_from(sorted(obj)), st.text(max_size=8)))
        obj[key] = draw(VALUES)
    elif what == "drop" and len(obj) > 1:
        obj.pop(draw(st.sampled_from(sorted(k for k in obj if k != "kind"))), None)
    elif what == "replace":
        objs[i] = draw(VALUES)
    elif what == "insert":
        extra = draw(st.dictionaries(st.text(max_size=8), VALUES, max_size=5))
        extra["kind"] = draw(st.sampled_from(KINDS))
        if draw(st.booleans()):
            extra["run_id"] = "r1"
        objs.insert(i + 1, extra)
    text = [json.dumps(o) for o in objs]
    if what == "nest":
        depth = draw(st.integers(min_value=50, max_value=200_000))
        text[i] = text[i][:-1] + ', "deep": ' + "[" * depth + "]" * depth + "}"
    elif what == "raw":
        text[i] = draw(st.text(max_size=60))
    return "\n".join(text) + "\n"


def test_fuzz_import_files(base, tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzzimport")

    @budget(IMPORT_EXAMPLES)
    @given(text=damaged_export(base["lines"]))
    def check(text):
        source = folder / "x.jsonl"
        source.write_text(text)
        target = folder / "target.db"
        shutil.copy(base["path"], target)  # an existing knowledge base (r1 and r2)
        before = _digest(target)
        out = invoke("import", source, "--db", target)
        _one_line_or_ok(out)
        if out.code != 0:
            assert _digest(target) == before, out.stderr
        fresh = folder / "fresh.db"
        fresh.unlink(missing_ok=True)
        out = invoke("import", source, "--db", fresh)
        _one_line_or_ok(out)
        assert out.code == 0 or not fresh.exists(), out.stderr

    check()


# -- command-line option values ---------------------------------------------------------------
OPTION_TEXT = st.one_of(
    st.integers(min_value=-(10**25), max_value=10**25).map(str),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20),
    st.sampled_from(["0", "-1", "1e3", "nan", "inf", "", " ", "0x10", "eager,eager"]),
)
READS = [
    (["search", "mlp"], ["--offset", "--limit"]),
    (["results"], ["--offset", "--limit", "--status", "--case", "--run", "--fallback-op"]),
    (["runs"], []),
    (["show"], []),
    (["compare", "r1"], []),
]
RUN_OPTIONS = [
    "--seed",
    "--jobs",
    "--batch",
    "--seq",
    "--train-steps",
    "--new-tokens",
    "--timeout",
    "--compile-timeout",
    "--perf-budget",
    "--peak-tflops",
    "--modes",
    "--prompt-lengths",
    "--gen-batches",
    "--dtype",
    "--cases",
    "--ray-retries",
]


@st.composite
def command_line(draw) -> list[str]:
    if draw(st.booleans()):
        # run on a device that does not exist: every value is checked, nothing ever runs
        args = ["run", "--suite", "smoke", "--device", "no-such-device", "--probes", "none"]
        for option in draw(st.lists(st.sampled_from(RUN_OPTIONS), min_size=1, max_size=3)):
            args += [option, draw(OPTION_TEXT)]
        return args
    command, options = draw(st.sampled_from(READS))
    args = list(command)
    if command[0] in ("show", "compare"):
        args.append(draw(OPTION_TEXT))
    for option in draw(st.lists(st.sampled_from(options), max_size=3)) if options else []:
        args += [option, draw(OPTION_TEXT)]
    return args


def test_fuzz_cli_option_values(base):
    path = base["path"]
    before = _digest(path)

    @budget(CLI_EXAMPLES)
    @given(args=command_line())
    def check(args):
        out = invoke(*args, "--db", path)
        _one_line_or_ok(out)
        if args[0] == "run":
            assert out.code == 2, out.stdout  # the device never exists

    check()
    assert _digest(path) == before


# -- dashboard query parameters ---------------------------------------------------------------
PARAM = st.one_of(
    st.text(max_size=30),
    st.integers(min_value=-(10**25), max_value=10**25).map(str),
    st.sampled_from(["%00", "\x00", "nan", "inf", "-0", "1e308", "r1", "r2", "latest", "*"]),
)
ROUTES = {
    "/search": ["q", "offset"],
    "/runs": ["device", "suite", "state", "label"],
    "/runs/r1": ["offset"],
    "/runs/r1/trace": ["case", "mode"],
    "/ops/aten.cumsum": ["offset"],
    "/compare": [
        "a",
        "b",
        "list",
        "offset",
        "after_case",
        "after_mode",
        "after_gap",
        "after_metric",
    ],
    "/cases/smoke/mlp": [],
    "/evaluations": [],
    "/evaluations/r1": [],  # no evaluation there: a 404 whatever the name
}


@st.composite
def request(draw) -> tuple[str, dict]:
    route = draw(st.sampled_from(sorted(ROUTES)))
    if draw(st.integers(0, 5)) == 0:  # a path segment of its own
        route = route.replace("r1", quote(draw(PARAM), safe="") or "x")
    names = ROUTES[route] if route in ROUTES else ["offset"]
    params = {name: draw(PARAM) for name in draw(st.lists(st.sampled_from(names or ["x"])))}
    if route == "/compare" and draw(st.booleans()):
        params.update(a="r1", b="r2")
    return route + draw(st.sampled_from(["", ".json"])), params


def test_fuzz_dashboard_query_parameters(base):
    from torchport.interfaces.web.app import create_app

    path = base["path"]
    before = _digest(path)
    with open_store(path, write=False) as store:
        client = TestClient(create_app(store), base_url="http://localhost")

        @budget(WEB_EXAMPLES)
        @given(req=request())
        def check(req):
            route, params = req
            answer = client.get(route, params=params)
            assert answer.status_code in (200, 400, 404), (route, params, answer.text[-2000:])
            assert "Traceback" not in answer.text
            assert "sqlite3" not in answer.text and "OperationalError" not in answer.text

        check()
    assert _digest(path) == before
