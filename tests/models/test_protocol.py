"""HookedModel: the bridge satisfies the protocol; objects missing a member do not."""

from probekit.models import HookedModel, ModelConfig, build_model


class _NoHooks:
    cfg = None
    hook_dict: dict = {}

    def to_tokens(self, text):
        return text

    def __call__(self, tokens):
        return tokens


def test_bridge_is_a_hooked_model_and_partial_objects_are_not():
    model = build_model(ModelConfig(n_layers=1, d_model=8, n_heads=2, d_head=4, d_vocab=7, n_ctx=4))
    assert isinstance(model, HookedModel)
    assert "blocks.0.hook_resid_post" in model.hook_dict
    assert not isinstance(_NoHooks(), HookedModel)  # no hooks(): capture could not attach
    assert not isinstance(object(), HookedModel)
