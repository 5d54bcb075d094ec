"""Every module imports (catches upstream API breaks, e.g. a transformer-lens major release)."""

import importlib
import pkgutil
import subprocess
import sys

import pytest

import probekit

MODULES = sorted(
    m.name for m in pkgutil.walk_packages(probekit.__path__, prefix="probekit.")
)


@pytest.mark.parametrize("name", MODULES)
def test_module_imports(name):
    importlib.import_module(name)


def test_transformer_lens_major_version_is_pinned():
    from importlib.metadata import version

    import transformer_lens  # noqa: F401

    assert version("transformer-lens").split(".")[0] == "4"


def test_default_path_never_imports_ray():
    code = "import probekit, probekit.capture, probekit.probes, probekit.suites, sys; print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
