"""The one place probekit attaches hooks: :func:`hook_scope`, which always removes them.

Capture (:mod:`probekit.capture.collect`) and interventions (:mod:`probekit.interventions`) both
attach their hook functions through :func:`hook_scope`, keyed by :class:`~probekit.sites.Site`.
Hook functions see activations in TL's layout and may return a replacement tensor (or ``None``).
Kinds whose hook point only fires behind a bridge flag (``attn_result``, ``q/k/v_input``,
``mlp_in``; :data:`~probekit.sites.GATED_KINDS`) get the flag set for the scope and restored
after it, also when the block raises. On TL-native bridges, whose attention has no split-QKV
fork, per-head ``q/k/v_input`` sites are emulated (:mod:`probekit.capture.split_qkv`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from torch import Tensor

from ..errors import ConfigError
from ..models.protocol import HookedModel
from ..sites import GATED_KINDS, Site, as_sites, validate_sites
from .split_qkv import emulate_split_qkv, needs_emulation

HookFn = Callable[[Tensor], "Tensor | None"]


@contextmanager
def hook_scope(model: HookedModel, hooks: Sequence[tuple[Site, HookFn]]) -> Iterator[None]:
    """Attach forward ``hooks`` (``(site, fn)``, run in order per hook point) for the block.

    Sites are validated before anything is attached; hooks are removed and gated flags restored
    on exit, whether the block returns or raises.
    """
    sites = list(dict.fromkeys(site for site, _ in hooks))
    validate_sites(model, sites)
    if needs_emulation(model, sites):  # native attention: per-head Q/K/V inputs recomputed
        hooks = emulate_split_qkv(model, hooks)
        sites = list(dict.fromkeys(site for site, _ in hooks))
    by_name: dict[str, list[HookFn]] = {}
    for site, fn in hooks:
        by_name.setdefault(site.name, []).append(fn)
    flags = sorted({GATED_KINDS[s.kind] for s in sites if s.kind in GATED_KINDS})
    restore: dict[str, bool] = {}
    handles: list[tuple[Any, Any]] = []
    try:
        for flag in flags:
            old = bool(getattr(model.cfg, flag, False))
            if not old:
                setter = getattr(model, f"set_{flag}", None)
                if setter is None:
                    raise ConfigError(f"model has no set_{flag}(); its {flag} hooks cannot fire")
                try:
                    setter(True)
                except NotImplementedError as err:
                    kinds = sorted(k for k, f in GATED_KINDS.items() if f == flag)
                    raise ConfigError(
                        f"site kinds {kinds} need the bridge's {flag}, which this model's "
                        f"attention does not support ({str(err).split('.')[0]}); use attn_z "
                        "(per head) or resid_pre sites instead"
                    ) from None
                restore[flag] = old
        points = model.hook_dict
        for name, fns in by_name.items():
            point = points[name]
            handles.append((point, point.add_hook(_chain(fns), dir="fwd")))
        yield
    finally:
        for point, handle in handles:
            handle.hook.remove()
            point.fwd_hooks = [h for h in point.fwd_hooks if h is not handle]
        for flag, old in restore.items():
            getattr(model, f"set_{flag}")(old)


def _chain(fns: Sequence[HookFn]) -> Callable[..., Tensor | None]:
    """One TL hook ``(activation, hook) -> activation`` running ``fns`` in order."""

    def hook(activation: Tensor, hook: Any) -> Tensor | None:
        changed = False
        for fn in fns:
            out = fn(activation)
            if out is not None:
                activation, changed = out, True
        return activation if changed else None

    return hook


class Recorder(Mapping[Site, Tensor]):
    """Activations recorded during the latest forward pass of a :func:`capture` scope."""

    def __init__(self, sites: Sequence[Site]) -> None:
        """Record ``sites`` (probekit layout, detached, head sites sliced)."""
        self.sites = tuple(sites)
        self._acts: dict[Site, Tensor] = {}

    def _save_fn(self, site: Site) -> HookFn:
        from .layout import to_probekit_layout

        def save(activation: Tensor) -> None:
            act = to_probekit_layout(site.kind, activation.detach())
            self._acts[site] = act if site.head is None else act[:, :, site.head]

        return save

    def clear(self) -> None:
        """Forget the recorded activations."""
        self._acts.clear()

    def __getitem__(self, site: Site) -> Tensor:
        """The activation of ``site`` from the latest forward pass."""
        if site not in self._acts:
            if site in self.sites:
                raise KeyError(f"site {site.key} was not reached: run a forward pass first")
            raise KeyError(f"site {site} is not captured here; captured: {[s.key for s in self.sites]}")
        return self._acts[site]

    def __iter__(self) -> Iterator[Site]:
        """Sites recorded so far."""
        return iter(self._acts)

    def __len__(self) -> int:
        """Number of sites recorded so far."""
        return len(self._acts)


@contextmanager
def capture(model: HookedModel, sites: Sequence[Site | str]) -> Iterator[Recorder]:
    """Record ``sites`` during forward passes run inside the ``with`` block.

    Activations are kept whole (padded, probekit layout: ``attn_pattern`` is
    ``(batch, query, head, key)``); :func:`~probekit.capture.collect_activations` selects positions
    in unpadded coordinates instead. Hooks are removed on exit, also when the block raises.

    Example:
        >>> with capture(model, [Site(1, "resid_post")]) as acts:
        ...     model(tokens)
        >>> acts[Site(1, "resid_post")].shape  # (batch, pos, d_model)
    """
    resolved = as_sites(sites)
    recorder = Recorder(resolved)
    with hook_scope(model, [(site, recorder._save_fn(site)) for site in resolved]):
        yield recorder


def count_hooks(model: HookedModel) -> int:
    """Number of forward/backward hooks attached to any hook point of ``model``."""
    seen: set[int] = set()
    total = 0
    for point in model.hook_dict.values():
        if id(point) in seen:
            continue
        seen.add(id(point))
        total += len(point._forward_hooks) + len(point._backward_hooks)
    return total
