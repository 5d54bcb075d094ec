"""The model interface probekit needs: a structural ``Protocol`` instead of ``model: Any``.

Capture and interventions only touch what TransformerLens exposes on both ``TransformerBridge``
(4.x, tested) and ``HookedTransformer`` (3.x): ``hook_dict`` (hook name -> ``HookPoint``),
``hooks(fwd_hooks=..., bwd_hooks=...)`` (a context manager that removes its hooks on exit),
``cfg`` (``n_layers``, ``d_model``, ``device``, ``default_prepend_bos``...), ``to_tokens`` and a
forward ``model(tokens, attention_mask=..., stop_at_layer=...)``. Anything with these members
is a :class:`HookedModel`; nothing needs to subclass it.

The protocol is ``runtime_checkable`` so beartype (pytest runs with jaxtyping + beartype) can
check annotated arguments; like every runtime protocol check it tests only that the members
exist, not their signatures.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # annotation only: `import probekit.sites` (suite validation) stays torch-free
    import torch

__all__ = ["HookedModel"]


@runtime_checkable
class HookedModel(Protocol):
    """A TransformerLens-style model with named hook points (``TransformerBridge``, ``HookedTransformer``)."""

    cfg: Any
    """Architecture config: ``n_layers``, ``d_model``, ``n_heads``, ``device``, ``default_prepend_bos``."""

    @property
    def hook_dict(self) -> Mapping[str, Any]:
        """Hook name (``blocks.3.hook_resid_post``) -> ``HookPoint`` for every hook the model has."""
        ...

    def hooks(self, *args: Any, **kwargs: Any) -> AbstractContextManager[Any]:
        """Attach ``fwd_hooks`` / ``bwd_hooks`` (lists of ``(name, fn)``) for a ``with`` block."""
        ...

    def to_tokens(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        """Tokenise text to a ``(batch, pos)`` id tensor (``prepend_bos=`` per model)."""
        ...

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Forward ``tokens`` with ``attention_mask=``, ``stop_at_layer=``; logits or None."""
        ...
