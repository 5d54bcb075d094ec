"""One way to name a site in reports: ``Site`` (or its hook name) -> short label."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..sites import Site

__all__ = ["site_label"]


def site_label(site: Site | str | None) -> str:
    """Short label of a site as suites spell it: ``"resid_post@3"``, ``"embed"``.

    Hook names (``"blocks.3.hook_resid_post"``) are parsed first; a string that is not a site
    (e.g. ``"acts"`` of an unnamed stack) is returned unchanged, ``None`` as ``"-"``.
    """
    if site is None:
        return "-"
    if isinstance(site, str):
        from ..sites import Site

        try:
            site = Site.parse(site)
        except ValueError:
            return site
    return site.kind if site.layer is None else f"{site.kind}@{site.layer}"
