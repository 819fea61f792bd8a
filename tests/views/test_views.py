"""Views return typed rows; the registry loads them from entry points; the renderer formats by
column kind."""

import json

import pytest

from tests import kb
from torchport import plugins
from torchport.interfaces import formats
from torchport.interfaces.formats import brief_error, cell, safe, trim_middle
from torchport.views import BUILTIN_ORDER, ViewError, build_views, view_names
from torchport.views.base import (
    Annotated,
    Breaks,
    Column,
    Copies,
    Exceeded,
    Fraction,
    Graphs,
    Outcome,
    Share,
    Span,
    View,
)

RUN = {"id": "r1", "plan": kb.PLAN, "config": kb.CONFIG}


@pytest.fixture(scope="module")
def views():
    return build_views(RUN, kb.results())


def _by_case(view, mode=None):
    return {
        (r["case"], r.get("mode")): r
        for r in view.records()
        if mode is None or r.get("mode") == mode
    }


def test_every_builtin_view_is_registered_and_built_in_order(views):
    assert view_names()[: len(BUILTIN_ORDER)] == list(BUILTIN_ORDER)
    # The flex, ops, serving, kernels, hotspots and dist views speak only about their own runs;
    # this run has none.
    own_runs = (
        "flex",
        "ops",
        "serving",
        "kernels",
        "kernels_fast_p",
        "hotspots",
        "hotspots_modules",
        "dist",
        "dist_bandwidth",
        "dist_training",
    )
    assert list(views) == [n for n in BUILTIN_ORDER if n not in own_runs]


def test_summary_and_matrix_values(views):
    assert views["summary"].rows[0] == ["pass", 3]
    matrix = {row[0]: row[1:] for row in views["matrix"].rows}
    assert matrix["smoke/mlp"] == [
        Outcome("pass", "on_device", None, 2.71, 1.2e-6, None),
        Outcome("pass", "fallback", None, 46.8, None, None),
    ]
    llama = matrix["hf/llama"][0]
    assert (llama.status, llama.stage) == ("eager_fail", "run")
    assert llama.error.startswith("Could not run 'aten::empty_strided'")  # first line, whole
    assert [c.kind for c in views["matrix"].columns] == ["text", "outcome", "outcome"]


def test_coverage_states_denominators(views):
    rows = {row[0]: row for row in views["coverage"].rows}
    assert rows["all"] == ["all", 4, Fraction(3, 4), Fraction(2, 4), Fraction(2, 4), Fraction(1, 4)]
    assert cell(Fraction(2, 3), "count") == "2 / 3 (66.7%)"


def test_placement_compile_perf_train_profile_values(views):
    placement = _by_case(views["placement"])
    assert placement[("smoke/mlp", "compile")]["grade"] == Annotated(
        "fallback", "2 tensors off device"
    )
    assert placement[("smoke/mlp", "eager")]["copies"] == Copies(1, h2d_bytes=1024)
    compile_rows = {r["case"]: r for r in views["compile"].records()}
    mlp = compile_rows["smoke/mlp"]
    assert (mlp["cold"], mlp["eager"]) == (12.3, 0.1)
    assert mlp["graphs (ops)"] == Graphs(5, [3, 5, 7, 1, 2])
    assert mlp["breaks"] == Breaks(3, 2, "planted.py:12")
    assert compile_rows["hf/llama"]["cold"] == Exceeded(3, "compile_timeout")
    perf = _by_case(views["perf"])
    eager = perf[("smoke/mlp", "eager")]
    assert eager["median ms"] == 2.71 and eager["p10-p90 ms"] == Span(2.5, 3.25)
    assert eager["n"] == 31 and eager["MFU"] == "no peak"
    assert perf[("smoke/mlp", "compile")]["MFU"] == Annotated(0.000021, "6NT")
    assert perf[("smoke/mlp", "compile")]["speedup"] == 1.66
    [train] = views["train"].records()
    assert train["max divergence"] == 1.3e-6 and train["verdict"] == "ok"
    [profile] = views["profile"].records()
    assert profile["device compute"] == Share(10.0, 20.0) and profile["self ms"] == 3.21


def test_json_form_keeps_numbers_as_numbers(views):
    data = json.loads(json.dumps({k: v.to_dict() for k, v in views.items()}))
    perf = data["perf"]
    assert perf["columns"][2] == {"name": "median ms", "kind": "ms"}
    assert perf["rows"][0][2] == 2.71 and perf["rows"][0][3] == {"low": 2.5, "high": 3.25}
    assert data["matrix"]["rows"][0][1]["step_ms"] == 2.71
    assert data["compile"]["rows"][1][1] == {"limit": 3, "status": "compile_timeout"}


def test_rendered_cells_read_as_before():
    assert (
        cell(Outcome("pass", "fallback", None, 46.8), "outcome") == "pass [fallback] (46.8 ms/step)"
    )
    assert (
        cell(Outcome("eager_fail", None, "run", error="boom"), "outcome")
        == "eager_fail @run (boom)"
    )
    assert cell(Outcome("pass", max_rel_err=3.4e-5), "detail") == "rel err 3.4e-05"
    assert (
        cell(12.3, "s") == "12.30 s"
        and cell(Exceeded(3, "compile_timeout"), "s") == "> 3 s (compile_timeout)"
    )
    assert cell(Annotated(1.0, "3 hits"), "s") == "1.00 s (3 hits)"
    assert cell(Graphs(5, [3, 5, 7, 1, 2]), "count") == "5 (3+5+7+1+...)"
    assert cell(Breaks(3, 2, "planted.py:12"), "count") == "3, 2 distinct @ planted.py:12"
    assert cell(0.102, "percent") == "10.2%" and cell(0.000021, "percent") == "0.0021%"
    assert cell(Annotated(0.000021, "6NT"), "percent") == "0.0021% (6NT)"
    assert cell(1.66, "ratio") == "1.66x" and cell(36509.2, "rate") == "36,509"
    assert cell(463.2 * 2**20, "bytes") == "463.2 MiB" and cell(None, "bytes") == "-"
    assert cell(Share(10.0, 20.0), "ms") == "10 (50%)"
    assert cell(Span(379.4, 1071.6), "ms") == "379-1,072"
    assert (
        cell({"cumsum": 2, "flip": 2, "all": 1, "sort": 1}, "op_counts")
        == "cumsum x2, flip x2, all x1 (+1 more)"
    )
    assert cell(Copies(0), "copies") == "none"


def test_error_text_keeps_the_op_and_the_backend():
    message = (
        "Could not run 'aten::empty_strided' with arguments from the 'jax' backend. This "
        "could be because the operator doesn't exist for this backend, or was omitted "
        "during the selective/custom build process (if using custom build).\nmore"
    )
    assert brief_error(message) == (
        "Could not run 'aten::empty_strided' with arguments from the 'jax' backend."
    )
    long_one = "RuntimeError in aten::foo " + "x" * 300 + " on backend PrivateUse1"
    short = brief_error(long_one)
    assert len(short) == formats.ERROR_CHARS and short.startswith("RuntimeError in aten::foo")
    assert short.endswith("on backend PrivateUse1") and "…" in short
    assert trim_middle("abcdefgh", 7) == "abcd…gh" and trim_middle("abc", 3) == "abc"


def test_control_characters_are_shown_escaped():
    assert safe("a\x1b[2Jb\rc\x07\u202e") == "a\\x1b[2Jb\\rc\\x07\\u202e"
    assert safe("keeps\nlines\tand tabs, é ü 漢") == "keeps\nlines\tand tabs, é ü 漢"


def test_a_row_must_fit_its_columns_and_kinds_are_closed():
    with pytest.raises(ValueError, match="a row of 1 values for 2 columns"):
        View("t", (Column("a"), Column("b")), [[1]])
    with pytest.raises(ValueError, match="unknown kind"):
        Column("a", "furlongs")


def test_a_view_that_cannot_be_imported_is_an_error(monkeypatch):
    real = plugins.targets

    def with_a_broken_view(group):
        found = dict(real(group))
        if group == "torchport.views":
            found["broken"] = "torchport_missing_plugin.views:build"
        return found

    monkeypatch.setattr(plugins, "targets", with_a_broken_view)
    assert view_names()[-1] == "broken"
    with pytest.raises(
        ViewError,
        match=r"view 'broken' \(torchport_missing_plugin.views:build\) "
        "cannot be loaded: ModuleNotFoundError",
    ):
        build_views(RUN, kb.results())


def test_a_view_that_fails_on_odd_records_says_so_and_the_others_still_show():
    odd = [{"case": "a", "mode": "eager", "status": "pass", "findings": {"perf": "oops"}}]
    built = build_views({"id": "r9", "plan": [["a", "eager"]], "config": {}}, odd)
    assert built["matrix"].rows and built["perf"].title == "perf (failed)"
    assert built["perf"].notes == [
        "view 'perf' failed on run r9: AttributeError: 'str' object "
        "has no attribute 'get'; please report it"
    ]


def test_a_view_with_nothing_to_say_is_left_out():
    built = build_views(
        {"plan": [["a", "eager"]], "config": {}}, [{"case": "a", "mode": "eager", "status": "pass"}]
    )
    assert list(built) == ["summary", "matrix"]
