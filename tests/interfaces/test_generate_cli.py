"""``torchport run --scenario generate`` as users run it: tiny llama and gpt2 on the CPU and on
simdev in both modes, the serving view, a planted wrong kernel caught, and bad input refused."""

import pytest

from tests.conftest import torchport

SMALL = ("--prompt-lengths", "4,6", "--new-tokens", "3", "--gen-batches", "1,2")


def by_key(out: dict) -> dict:
    return {(r["case"], r["mode"]): r for r in out["results"]}


def check_generated(result: dict, cache: str = "static") -> None:
    assert result["status"] == "pass", result["error"]
    findings, metrics = result["findings"], result["metrics"]
    assert findings["generate"]["cache"]["kind"] == cache
    assert metrics["generate_matching_tokens"] == metrics["generate_steps"] == 3
    assert metrics["serve_ttft_ms"] > 0 and metrics["serve_tpot_median_ms"] > 0
    assert metrics["serve_tokens_per_s_b1"] > 0 and metrics["serve_tokens_per_s_b2"] > 0
    rows = findings["serve"]["rows"]
    assert {(r["batch"], r["prompt_length"]) for r in rows} == {(1, 4), (1, 6), (2, 4), (2, 6)}


# The simdev run below and the CPU run take a minute or more each on a busy 2-core host: slow.
# Fast coverage of the same features: tests/execution/test_generation.py (generation, caches,
# recompiles), tests/runner/test_generate_ladder.py (the ladder and serve probe in-process),
# tests/probes/test_token_parity.py and the planted kernel on simdev below.
@pytest.fixture(scope="module")
def simdev_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gen-simdev")
    proc = torchport(
        "run", "--suite", "smoke", "--cases", "llama,gpt2,mlp", "--scenario", "generate",
        "--device", "simdev", "--probes", "serve,placement", *SMALL,
        "--db", tmp / "kb.db", "--json", cwd=tmp,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json

    return json.loads(proc.stdout)


@pytest.mark.slow
def test_llama_and_gpt2_generate_on_simdev_in_both_modes(simdev_run):
    results = by_key(simdev_run)
    for case in ("hf/llama", "hf/gpt2"):
        for mode in ("eager", "compile"):
            check_generated(results[(case, mode)])
        compiled = results[(case, "compile")]["findings"]
        assert compiled["compile_backend"]["name"] == "simdev"
        assert compiled["generate"]["compile"]["fullgraph"] is True
        assert compiled["generate"]["compile"]["phases"]["decode"]["compiles"] >= 1
        # static cache: the decode step did not recompile across prompt lengths
        assert compiled["serve"]["recompiles"]["decode"]["across_prompt_lengths"] == 0


@pytest.mark.slow
def test_placement_runs_on_one_decode_step(simdev_run):
    result = by_key(simdev_run)[("hf/llama", "eager")]
    assert result["findings"]["placement_step"].startswith("one decode step (eager, batch 1")
    assert result["grade"] in ("on_device", "fallback")
    assert result["metrics"]["placement_op_calls"] > 0


@pytest.mark.slow
def test_a_model_that_is_not_a_causal_lm_is_a_skip_with_why(simdev_run):
    result = by_key(simdev_run)[("smoke/mlp", "eager")]
    assert result["status"] == "skip"
    assert "not a transformers model" in result["error"]["message"]


@pytest.mark.slow
def test_the_serving_view_shows_each_batch(simdev_run):
    view = simdev_run["views"]["serving"]
    rows = [dict(zip([c["name"] for c in view["columns"]], r, strict=True)) for r in view["rows"]]
    assert {(r["case"], r["mode"], r["batch"]) for r in rows} >= {
        ("hf/llama", "compile", 1),
        ("hf/llama", "compile", 2),
        ("hf/gpt2", "eager", 2),
    }
    assert all(r["tokens match"] == {"n": 3, "of": 3} for r in rows)


@pytest.mark.slow
def test_cpu_both_modes_with_a_fast_compile_backend(tmp_path):
    proc = torchport(
        "run", "--suite", "smoke", "--cases", "llama,gpt2", "--scenario", "generate",
        "--device", "cpu", "--compile-backend", "aot_eager", "--compile-mode",
        "reduce-overhead", *SMALL, "--db", tmp_path / "kb.db", "--json", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json

    results = by_key(json.loads(proc.stdout))
    for case in ("hf/llama", "hf/gpt2"):
        for mode in ("eager", "compile"):
            check_generated(results[(case, mode)])
        backend = results[(case, "compile")]["findings"]["compile_backend"]
        assert backend["mode"] == "reduce-overhead" and "mode_note" in backend


@pytest.mark.parametrize(
    ("device", "status"),
    [("simdev", "accuracy_fail"), pytest.param("cpu", "pass", marks=pytest.mark.slow)],
)
def test_a_wrong_last_layer_kernel_fails_generation_parity(tmp_path, device, status):
    proc = torchport(
        "run", "--suite", "planted", "--cases", "last_layer_wrong", "--modes", "eager",
        "--scenario", "generate", "--device", device, "--probes", "none",
        "--new-tokens", "4", "--db", tmp_path / "kb.db", "--json", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json

    (result,) = json.loads(proc.stdout)["results"]
    assert result["status"] == status, result["error"]
    if status == "accuracy_fail":
        assert result["stage"] == "parity"
        assert "logits outside tolerance" in result["error"]["message"]
        assert result["metrics"]["generate_logits_failing_tensors"] == 1


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (("--scenario", "serve"), "unknown scenario 'serve'"),
        (("--scenario", "generate", "--probes", "perf"), "probe 'perf' measures train"),
        (("--compile-mode", "fast"), "unknown compile mode 'fast'"),
        (("--scenario", "generate", "--prompt-lengths", "8,x"), "--prompt-lengths '8,x'"),
        (("--scenario", "generate", "--new-tokens", "1"), "--new-tokens must be >= 2"),
        (("--scenario", "generate", "--gen-batches", "0"), "--gen-batches must be positive"),
    ],
)
def test_bad_generate_input_is_one_line_and_exit_2(tmp_path, args, problem):
    proc = torchport("run", "--device", "cpu", *args, "--db", tmp_path / "kb.db", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert problem in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "kb.db").exists()


@pytest.mark.slow
def test_cpu_inductor_compile_of_prefill_and_decode(tmp_path):
    proc = torchport(
        "run", "--suite", "smoke", "--cases", "gpt2", "--modes", "compile", "--scenario",
        "generate", "--device", "cpu", *SMALL, "--db", tmp_path / "kb.db", "--json",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json

    (result,) = json.loads(proc.stdout)["results"]
    check_generated(result)
    assert result["findings"]["generate"]["compile"]["backend"]["name"] == "inductor"
