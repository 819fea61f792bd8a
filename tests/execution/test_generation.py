"""Greedy generation with a KV cache: the timing arithmetic on a fake timer, the cache chosen,
and recompiles of the decode step counted (none with a static cache across prompt lengths)."""

import pytest

torch = pytest.importorskip("torch")

from torchport.cases.base import Size  # noqa: E402
from torchport.cases.hf import HFCase  # noqa: E402
from torchport.execution import generation  # noqa: E402
from torchport.execution.compile_backend import Choice  # noqa: E402
from torchport.instruments import compile_metrics  # noqa: E402
from torchport.probes.serve import CompileCounter, recompiles  # noqa: E402
from torchport.timing import serving_figures  # noqa: E402


class FakeTimer:
    """Runs the call and answers the next scripted duration instead of reading a clock."""

    def __init__(self, durations):
        self.durations = list(durations)

    def __call__(self, fn):
        return fn(), self.durations.pop(0)


def test_generate_times_prefill_and_each_decode_step_with_the_timer_given():
    vocab = 5

    def step(ids, positions, cache):  # next token = (last token + 1) % vocab
        return torch.nn.functional.one_hot((ids[:, -1] + 1) % vocab, vocab).float()

    timer = FakeTimer([0.5, 0.1, 0.2, 0.3])
    done = generation.generate(step, step, None, torch.tensor([[1, 2]]), 4, timer=timer)
    assert done.tokens.tolist() == [[3, 4, 0, 1]]
    assert (done.prefill_s, done.decode_s) == (0.5, [0.1, 0.2, 0.3])


def test_serving_figures_arithmetic():
    # two generations at batch 4: prefills 10 ms and 30 ms; decode steps 1..6 ms
    found = serving_figures([0.010, 0.030], [[0.001, 0.002, 0.003], [0.004, 0.005, 0.006]], 4)
    assert found["ttft_ms"] == pytest.approx(20.0)
    assert found["tpot_median_ms"] == pytest.approx(3.5)
    assert found["tpot_p10_ms"] == pytest.approx(1.5)
    assert found["tpot_p90_ms"] == pytest.approx(5.5)
    assert found["tpot_n"] == 6 and found["ttft_n"] == 2
    # 4 rows x 6 decode steps in 21 ms
    assert found["decode_tokens_per_s"] == pytest.approx(24 / 0.021)
    with pytest.raises(ValueError):
        serving_figures([0.01], [[]], 1)


@pytest.fixture(scope="module")
def llama():
    return HFCase("llama").build(seed=0, size=Size()).model.eval()


def test_static_cache_for_architectures_that_declare_static_shapes(llama):
    plan = generation.cache_plan(llama)
    assert (plan.kind, plan.fullgraph) == ("static", True)
    assert generation.cache_keyword(llama) in generation.CACHE_KEYWORDS
    with pytest.raises(generation.NotCausalLM):
        generation.check_causal_lm(torch.nn.Linear(2, 2))


def decode_compiles(model, plan: generation.CachePlan, lengths) -> dict:
    """Compile prefill and decode (dynamo, eager backend: no code generation) and generate at
    each prompt length through the one pair; compiles per phase and length."""
    compile_metrics.reset_dynamo()
    caches = generation.Caches(model, plan, max(lengths) + 3)
    choice = Choice("eager", "test")
    eager = generation.step_functions(model)
    setup = generation.Setup(model=model, plan=plan, caches=caches, seed=0)
    setup.sides["compiled"] = tuple(choice.compile(f, fullgraph=plan.fullgraph) for f in eager)
    rows = []
    for length in lengths:
        counter = CompileCounter()
        setup.run("compiled", 1, length, 3, wrap=counter.wrap_pair)
        rows.append({"batch": 1, "prompt_length": length, "compiles": counter.summary()})
    return recompiles(rows[1:], 1) | {"first": rows[0]["compiles"]}


def test_static_cache_decode_needs_no_recompile_across_prompt_lengths(llama):
    found = decode_compiles(llama, generation.cache_plan(llama), (4, 6, 9))
    assert found["first"]["decode"]["compiles"] == 1  # one graph for every decode step
    assert found["decode"]["across_prompt_lengths"] == 0
    assert found["prefill"]["across_prompt_lengths"] >= 1  # a new prompt shape


@pytest.mark.slow  # in `make test-slow`: keeps the default suite under 15 min
def test_dynamic_cache_decode_recompiles_as_the_cache_grows(llama):
    plan = generation.CachePlan("dynamic", "test", False)
    found = decode_compiles(llama, plan, (4, 6))
    # the cache's length is in the decode step's shapes: a recompile (dynamo then marks it
    # dynamic) within the first generation already
    assert found["first"]["decode"]["compiles"] >= 2
    assert found["first"]["decode"]["reasons"]
