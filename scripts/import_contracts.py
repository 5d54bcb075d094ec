"""Import-linter contract types of probekit (``contract_types`` in ``pyproject.toml``).

The import graph of the other contracts leaves out imports under ``if TYPE_CHECKING:``
(``exclude_type_checking_imports``: a result's ``blocks`` module may name the result type).
:class:`AnnotatedForbiddenContract` is the ``forbidden`` contract checked on the graph *with*
those imports, for the modules where an annotation-only import running back up is the defect
itself (``probekit.context``: the protocols every layer above the capture layer imports).
"""

from __future__ import annotations

from typing import Any

from importlinter.configuration import settings
from importlinter.contracts.forbidden import ForbiddenContract
from importlinter.domain.contract import ContractCheck

__all__ = ["AnnotatedForbiddenContract"]


class AnnotatedForbiddenContract(ForbiddenContract):
    """A ``forbidden`` contract whose graph includes the imports under ``if TYPE_CHECKING:``.

    Same options as ``forbidden``; the graph is rebuilt (uncached) from the session's root
    packages with ``exclude_type_checking_imports = false``.
    """

    type_name = "forbidden_annotated"

    def check(self, graph: Any, verbose: bool) -> ContractCheck:
        """The ``forbidden`` check on the graph that includes the ``TYPE_CHECKING`` imports."""
        external = str(self.session_options.get("include_external_packages", "")).lower() == "true"
        full = settings.GRAPH_BUILDER.build(
            root_package_names=list(self.session_options["root_packages"]),
            include_external_packages=external, exclude_type_checking_imports=False,
            cache_dir=None,
        )
        return super().check(full, verbose)
