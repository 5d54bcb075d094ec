"""An import-linter contract type that also sees annotation-only imports (``lint-imports``).

``[tool.importlinter] exclude_type_checking_imports = true`` builds the one graph every contract
shares without the imports under ``if TYPE_CHECKING:`` (a result's display module may name the
result type it renders). A contract of type ``forbidden_annotations_included`` is a ``forbidden``
contract checked on a graph built *with* them, so a module that only annotates with a forbidden
module's type still breaks it. Registered in ``pyproject.toml`` (``contract_types``);
``lint-imports`` imports it from the repository root.
"""

from __future__ import annotations

import grimp
from importlinter.contracts.forbidden import ForbiddenContract
from importlinter.domain.contract import ContractCheck

__all__ = ["ForbiddenAnnotationsIncluded"]


class ForbiddenAnnotationsIncluded(ForbiddenContract):
    """A ``forbidden`` contract whose graph includes the ``TYPE_CHECKING`` imports."""

    type_name = "forbidden_annotations_included"

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        """Check the contract on the full graph (same root packages, every import)."""
        options = self.session_options
        external = str(options.get("include_external_packages", "false")).lower() == "true"
        full = grimp.build_graph(*options["root_packages"], include_external_packages=external,
                                 exclude_type_checking_imports=False, cache_dir=None)
        return super().check(full, verbose)
