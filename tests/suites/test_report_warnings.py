"""Report warnings and names a reader needs (issue 27)."""

from probekit.fingerprint import model_id
from probekit.models import build_model
from probekit.suites import load_suite, run_suite
from tests.conftest import TINY_CONFIGS


def test_floor_warning_when_every_p_value_is_at_its_floor(suite_dir, tmp_path):
    from tests.suites.conftest import SUITE

    text = SUITE.split("[[probe]]")[0] + '[[probe]]\nkind = "logistic"\nCs = 3\ncv = 3\n\n[stats]\nn_permutations = 19\n'
    text = text.replace('"ckpt"', f'"{suite_dir / "ckpt"}"').replace('"data.jsonl"', f'"{suite_dir / "data.jsonl"}"')
    (tmp_path / "s.toml").write_text(text)
    result = run_suite(load_suite(tmp_path / "s.toml"), progress=False)
    pvals = result.probes[0]["permutation"]["p_values"]
    assert pvals == [0.05] * len(pvals)  # planted parity: every refit on real labels beats all 19
    (warning,) = [w for w in result.analyses[0].warnings if "at its floor" in w]
    assert "1/(1+19) = 0.05" in warning and "cannot rank the sites" in warning


def test_model_id_prefers_the_loaded_name_to_a_cache_path():
    model = build_model(TINY_CONFIGS["no_ln"])  # model_id takes a HookedModel (checked in tests)
    model.cfg.model_name = "/root/.cache/probekit/models/smol135m-b179"
    assert model_id(model) == "/root/.cache/probekit/models/smol135m-b179"
    model.probekit_source = "smollm2-135m"
    assert model_id(model) == "smollm2-135m"
