import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
# no fsync of the thousands of throwaway files the tests write (probekit.util.io; the writes
# stay atomic, and subprocesses such as notebook kernels inherit it); tests/util/test_util.py
# switches it back on to check the fsyncs themselves
os.environ.setdefault("PROBEKIT_FSYNC", "0")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # `make test` runs pytest-xdist with one worker per core: one BLAS/OpenMP thread per worker
    # (set before torch is imported; subprocesses such as notebook kernels inherit it), so the
    # workers do not oversubscribe the cores (two spinning OpenMP threads per worker on a 2-core
    # machine make small GEMMs many times slower).
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

import pytest  # noqa: E402
import torch  # noqa: E402

from probekit.models import ModelConfig, build_model  # noqa: E402

if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)

TINY_CONFIGS = {
    "ln_mha": ModelConfig(n_layers=2, d_model=16, n_heads=2, d_head=8, d_vocab=11, n_ctx=12, act_fn="gelu"),
    "gqa_rotary_rms": ModelConfig(
        n_layers=3, d_model=24, n_heads=6, d_head=4, d_vocab=13, n_ctx=12, n_key_value_heads=2,
        normalization_type="RMS", positional_embedding_type="rotary", act_fn="silu",
    ),
    "no_ln": ModelConfig(n_layers=1, d_model=16, n_heads=4, d_head=4, d_vocab=11, n_ctx=12, normalization_type=None),
}


@pytest.fixture(scope="session", params=sorted(TINY_CONFIGS))
def tiny_model(request):
    return build_model(TINY_CONFIGS[request.param])


@pytest.fixture(scope="session")
def small_model():
    return build_model(TINY_CONFIGS["ln_mha"])


TINY_HF_WORDS = [f"w{i}" for i in range(20)]


def build_tiny_hf(directory: Path, arch: str, *, seed: int = 0, load: bool = True, **load_options):
    """A 3-layer Hugging Face model (``llama``: rotary, grouped KV heads; ``gpt2``: learned
    positions) with a word-level tokenizer over :data:`TINY_HF_WORDS`, saved and loaded back
    (``load=False``: only saved; ``seed``: the weights' initialisation)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import (
        GPT2Config,
        GPT2LMHeadModel,
        LlamaConfig,
        LlamaForCausalLM,
        PreTrainedTokenizerFast,
    )

    from probekit.models import load_model

    vocab = {w: i for i, w in enumerate([*TINY_HF_WORDS, "<unk>", "<s>", "</s>", "<pad>"])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                            pad_token="<pad>").save_pretrained(directory)
    torch.manual_seed(seed)
    special = dict(bos_token_id=vocab["<s>"], eos_token_id=vocab["</s>"], pad_token_id=vocab["<pad>"])
    if arch == "llama":  # rotary positions, grouped KV heads
        config = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                             initializer_range=0.3, architectures=["LlamaForCausalLM"], **special)
        LlamaForCausalLM(config).eval().save_pretrained(directory)
    else:  # learned absolute positions: a wrong position id would change the logits
        config = GPT2Config(vocab_size=len(vocab), n_embd=32, n_inner=64, n_layer=3, n_head=4, n_positions=32,
                            initializer_range=0.3, architectures=["GPT2LMHeadModel"], **special)
        GPT2LMHeadModel(config).eval().save_pretrained(directory)
    return load_model(str(directory), **load_options) if load else None


@pytest.fixture(scope="session", params=["llama", "gpt2"])
def tiny_hf(request, tmp_path_factory):
    return build_tiny_hf(tmp_path_factory.mktemp(request.param), request.param)


def random_sequences(n: int, vocab: int, lo: int = 2, hi: int = 12, seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(lo, hi + 1, (n,), generator=g)
    return [torch.randint(0, vocab, (int(length),), generator=g).tolist() for length in lengths]


def write_tiny_suite(root: Path, suite_text: str, *, n: int = 180, hi: int = 10, n_id: int = 150) -> Path:
    """A tiny random model, labelled data and ``suite_text`` in ``root`` (the suite tests' setup).

    Labels: ``planted`` = parity of the last token id (readable from its embedding at every
    layer), ``null`` = coin flips, ``last`` = the last token id (control); rows from ``n_id`` on
    are the ``ood`` split, every third ID row is ``test``.
    """
    import json

    import numpy as np

    from probekit.models import save_checkpoint

    cfg = TINY_CONFIGS["ln_mha"]
    save_checkpoint(build_model(cfg), cfg, root / "ckpt")
    rng = np.random.default_rng(0)
    rows = []
    for i, s in enumerate(random_sequences(n, cfg.d_vocab, lo=3, hi=hi, seed=11)):
        split = "ood" if i >= n_id else ("test" if i % 3 == 0 else "train")
        rows.append({"tokens": s, "planted": int(s[-1] % 2), "null": int(rng.integers(0, 2)),
                     "last": int(s[-1]), "split": split})
    (root / "data.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    (root / "suite.toml").write_text(suite_text)
    return root


@pytest.fixture
def single_thread():
    """Run a test single-threaded in torch (restored afterwards).

    On a shared 2-core machine, torch's two OpenMP threads spin-wait on each other and tiny
    GEMMs become ~50x slower; probe and statistics unit problems are small, so one thread is
    fastest. tests/probes and tests/stats use it for every test via their conftest.
    """
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="module")
def ray_cluster():
    """A 2-CPU local Ray cluster for one test module (skips without Ray); shut down after it.

    Workers get this checkout and tests/ on PYTHONPATH (task functions defined in test modules
    are pickled by reference) and one BLAS/OpenMP thread each.
    """
    ray = pytest.importorskip("ray")
    root = Path(__file__).resolve().parents[1]
    if ray.is_initialized():
        ray.shutdown()
    path = os.pathsep.join([str(root), str(root / "tests"), os.environ.get("PYTHONPATH", "")])
    ray.init(
        num_cpus=2, include_dashboard=False, log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": path, "OMP_NUM_THREADS": "1",
                                  "MKL_NUM_THREADS": "1"}},
    )
    yield ray
    ray.shutdown()


# --- scheduling under pytest-xdist (`make test`: -n auto --dist loadfile --no-loadscope-reorder) --
# `--dist loadfile` keeps each test file on one worker, so its module-scoped fixtures are built
# once. (`--dist loadgroup` would spread single tests, but with pytest 9 + xdist 3.8 its groups are
# ignored: xdist renames `item._nodeid`, which pytest 9 no longer reads, so every module fixture was
# rebuilt on each worker.) The slowest files are scheduled first, so that no worker starts one of
# them while the others are nearly done (the Makefile's --no-loadscope-reorder keeps this order;
# xdist's default hands out the files with the most tests first). The numbers are each file's CPU seconds in the default
# tier (setup + call + teardown of its tests, subprocesses and notebook kernels included), measured
# one directory at a time in one process on one thread (CONTRIBUTING.md "Tests"); 2,507 tests,
# ~540 CPU-s in all, so ~270 s per worker on 2 cores plus ~20 s of collection each. A file
# missing here would start in collection order: tests/test_bad_input.py (then 92 CPU-s, last in
# that order) used to leave one worker ~40 s of work after the other had finished.
SLOWEST_FILES = (
    "tests/test_tutorials.py",                       # 63: five notebooks in Jupyter kernels
    "tests/test_docs.py",                            # 40: every guide's Python blocks
    "tests/test_bad_input.py",                       # 34
    "tests/diagnosis/test_cli.py",                   # 28: trains the modadd smoke population
    "tests/diagnosis/test_scan_smoke.py",            # 21: trains the SCAN smoke population
    "tests/diagnosis/test_finetune_population.py",   # ~22: 4 SmolLM2 fine-tunes
    "tests/diagnosis/test_real_models.py",           # ~20: tiny HF models end to end
    "tests/diagnosis/test_he_study.py",              # 18
    "tests/geometry/test_capacity.py",               # 11
    "tests/neurons/test_generation_cache.py",        # 10
    "tests/circuits/test_patching.py",               # 10
    "tests/probes/test_correctness_controls.py",     # 10
    "tests/test_imports.py",                         # 9
    "tests/executors/test_processes.py",             # 9: three spawned process pools
    "tests/diagnosis/test_kg_composition.py",        # 9: trains the KG smoke population
    "tests/diagnosis/test_runner.py",                # 8
    "tests/models/test_real.py",                     # 8: SmolLM2
    "tests/homomorphism/test_study.py",              # 7
    "tests/probes/test_logistic_tol.py",             # 7
)


def pytest_collection_modifyitems(config, items):
    """Under xdist, run the files of :data:`SLOWEST_FILES` first (in that order; stable sort)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    rank = {path: i for i, path in enumerate(SLOWEST_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))
