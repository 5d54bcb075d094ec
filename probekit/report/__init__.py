"""Reports: JSON + self-contained HTML (embedded PNG plots) for suite results.

Exports are lazy (:mod:`probekit.lazy`): the ``report`` CLI parser loads without matplotlib.
"""

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

_EXPORTS = {"read_report": ".write", "render_html": ".write", "versions": ".write",
            "write_report": ".write"}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from .write import render_html as render_html
    from .write import versions as versions
    from .write import write_report as write_report
