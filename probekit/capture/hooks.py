"""The one place probekit attaches forward hooks: a scope that always removes them."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from torch import Tensor

from .sites import Site, as_sites, validate_sites

Transform = Callable[[Site, Tensor], Tensor]


class Recorder(Mapping[Site, Tensor]):
    """Activations recorded during the latest forward pass, keyed by :class:`Site`.

    ``transform(site, act)`` (settable between forwards) runs inside the hook, so a capture
    can reduce ``[batch, pos, d]`` to the selected rows before anything is kept in memory.
    """

    def __init__(self, sites: Sequence[Site]) -> None:
        self.sites = tuple(sites)
        self.transform: Transform | None = None
        self._acts: dict[Site, Tensor] = {}

    def hook_fn(self, site: Site) -> Callable[..., None]:
        def save(activation: Tensor, hook: Any) -> None:
            act = activation.detach()
            self._acts[site] = self.transform(site, act) if self.transform else act

        return save

    def clear(self) -> None:
        self._acts.clear()

    def __getitem__(self, site: Site) -> Tensor:
        if site not in self._acts:
            if site in self.sites:
                raise KeyError(f"site {site.name} was not reached: run a forward pass first")
            raise KeyError(f"site {site} is not captured here; captured: {[s.name for s in self.sites]}")
        return self._acts[site]

    def __iter__(self) -> Iterator[Site]:
        return iter(self._acts)

    def __len__(self) -> int:
        return len(self._acts)


@contextmanager
def capture(model: Any, sites: Sequence[Site | str]) -> Iterator[Recorder]:
    """Record ``sites`` during forward passes run inside the ``with`` block.

    Sites are validated against ``model`` before any hook is attached; hooks are removed on
    exit, also when the block raises (transformer-lens ``model.hooks`` scope).

    Example:
        >>> with capture(model, [Site(1, "resid_post")]) as acts:
        ...     model(tokens)
        >>> acts[Site(1, "resid_post")].shape  # (batch, pos, d_model)
    """
    resolved = as_sites(sites)
    validate_sites(model, resolved)
    recorder = Recorder(resolved)
    fwd_hooks = [(site.name, recorder.hook_fn(site)) for site in resolved]
    with model.hooks(fwd_hooks=fwd_hooks):
        yield recorder


def count_hooks(model: Any) -> int:
    """Number of forward/backward hooks attached to any hook point of ``model``."""
    seen: set[int] = set()
    total = 0
    for point in model.hook_dict.values():
        if id(point) in seen:
            continue
        seen.add(id(point))
        total += len(point._forward_hooks) + len(point._backward_hooks)
    return total
