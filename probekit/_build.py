"""Build hook (setuptools ``build_py``): the shipped examples become package data.

The examples live where users edit them, in the repository's top-level ``probes/`` and
``circuits/`` (and the diagnosis tables under ``docs/diagnosis/``). ``pyproject.toml`` maps each
folder to a package under ``probekit._examples`` (``[tool.setuptools.package-dir]``) and names
the files to ship (``[tool.setuptools.package-data]``); setuptools builds only the packages it
was told about, and ``packages.find`` cannot find a folder outside ``probekit/``, so this hook
adds the mapped ``probekit._examples.*`` packages to the build. The wheel's examples are thus
built from the one copy in the repository; nothing is duplicated in the tree.

Loaded by setuptools from its file (``[tool.setuptools] cmdclass``) at build time only; nothing
in probekit imports it.
"""

from __future__ import annotations

from setuptools.command.build_py import build_py

EXAMPLES_PACKAGE = "probekit._examples"


class BuildPy(build_py):
    """``build_py`` that also builds the ``probekit._examples.*`` packages of ``package_dir``."""

    def finalize_options(self) -> None:
        """Add every ``package_dir`` entry under ``probekit._examples`` to the packages built."""
        dist = self.distribution
        packages = list(dist.packages or [])
        for name in sorted(dist.package_dir or {}):
            if name.startswith(EXAMPLES_PACKAGE + ".") and name not in packages:
                packages.append(name)
        dist.packages = packages
        super().finalize_options()
