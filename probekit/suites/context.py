"""What an analysis gets: suite, model (loaded lazily), examples, cached activations.

Activations live in an :class:`~probekit.store.ActivationStore` under
``<cache>/activations/<key>``, keyed by (model fingerprint, dataset fingerprint, sites,
positions, padding side, dtype). A second analysis asking for the same sites, or a rerun of the
suite, reads the store and runs no forward pass; new sites are captured into their own store.
Greedy answers (``[data] answer_column``) are cached the same way under ``<cache>/answers``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..capture import Site, all_layers, capture_sharded, capture_to_store
from ..capture.positions import parse_position_rule
from ..errors import CorruptFileError
from ..executor import Executor, InProcessExecutor, get_executor
from ..fingerprint import dataset_fingerprint, model_fingerprint, model_id
from ..models.protocol import HookedModel
from ..store import ActivationStore
from ..store.manifest import Manifest
from ..util.cache import cache_dir as default_cache_dir
from ..util.device import resolve_device
from ..util.integrity import read_sealed, seal
from ..util.io import atomic_write_json, sha256_bytes
from .data import Examples, build_examples
from .model import load_suite_model, suite_model_reference
from .spec import Suite, SuiteError

__all__ = ["AnalysisContext"]

#: Seconds a suite waits for another process writing the same activation cache entry.
CACHE_LOCK_TIMEOUT_S = 3600.0


def _counts(values: list[Any]) -> dict[str, int]:
    """Occurrences of each value (as text), most frequent first."""
    counts: dict[str, int] = {}
    for v in values:
        counts[str(v)] = counts.get(str(v), 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _key(payload: dict[str, Any]) -> str:
    return sha256_bytes(json.dumps(payload, sort_keys=True, default=str).encode())[:20]


class AnalysisContext:
    """Shared inputs of a suite's analyses.

    Args:
        suite: the validated suite.
        model: an already loaded model (else loaded from ``suite.model`` on first use).
        progress: progress bars for capture and executor tasks.
        executor: runs independent tasks (name or :class:`~probekit.executor.Executor`);
            default: the suite's ``[execution]`` table (in-process when absent).
        cache_dir: root of the activation / answer caches (default ``<PROBEKIT_CACHE>``);
            ``False`` keeps captures in a store under ``<cache>/activations`` anyway but never
            reuses one (every run captures).
        examples: the examples, when already built (e.g. another model's context on the same
            inputs); default: built from ``suite`` on first use.

    Attributes:
        stats: the suite's ``[stats]`` settings; ``device``: resolved torch device name.
    """

    def __init__(
        self, suite: Suite, *, model: HookedModel | None = None, progress: bool = True,
        executor: str | Executor | None = None, cache_dir: str | Path | None = None,
        examples: Examples | None = None,
    ) -> None:
        """Hold the inputs; nothing is loaded or captured until first asked for."""
        self.suite = suite
        self.stats = suite.stats
        self.progress = progress
        self.executor = (
            get_executor(executor) if executor is not None
            else suite.execution.make_executor(progress=progress)
        )
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self._model = model
        self._fingerprint: str | None = None
        self._examples: Examples | None = examples
        self._acts: dict[Site, torch.Tensor] = {}
        self.forward_passes = 0  # captures / generations actually run (0 on a cached rerun)

    def __getstate__(self) -> dict[str, Any]:
        """Pickle without the model and in-memory activations (a worker reloads them lazily)."""
        state = dict(self.__dict__)
        state["_model"] = None
        state["_acts"] = {}
        return state

    @property
    def device(self) -> str:
        """Device for analyses' own computations (``[suite] device`` resolved)."""
        return str(resolve_device(self.suite.device))

    @property
    def model(self) -> Any:
        """The suite's model, loaded on first access."""
        if self._model is None:
            self._model = load_suite_model(self.suite, progress=self.progress)
        return self._model

    @property
    def model_fingerprint(self) -> str:
        """Content fingerprint of the model (cached)."""
        if self._fingerprint is None:
            self._fingerprint = model_fingerprint(self.model)
        return self._fingerprint

    def model_info(self) -> dict[str, Any]:
        """Model provenance for the report."""
        m = self.model
        return {
            "id": str(getattr(m, "probekit_source", "") or model_id(m)),  # a name, not a cache path
            "fingerprint": self.model_fingerprint,
            "n_layers": int(m.cfg.n_layers),
            "d_model": int(m.cfg.d_model),
            "compatibility_mode": bool(getattr(m, "probekit_compatibility_mode", False)),
            "source": str(getattr(m, "probekit_provenance", "") or model_id(m)),
        }

    def data_info(self) -> dict[str, Any]:
        """Data provenance and summaries for the report: source, sha256, class counts, answers."""
        from ..util.io import sha256_file

        data = self.suite.data
        ex = self.examples
        if data.file is not None:
            path = self.suite.resolve(data.file)
            source = {"file": str(data.file), "sha256": sha256_file(path)}
        else:
            source = {"task": data.task or "(the model's training task)",
                      "task_options": dict(data.task_options)}
        out: dict[str, Any] = {"source": source}
        labels = ex.columns.get(data.label)
        if labels is not None:
            out["class_counts"] = {
                split: _counts([labels[i] for i in idx]) for split, idx in ex.splits.items()
            }
        if data.answer_column is not None and "correct" in ex.columns:
            correct = ex.columns["correct"]
            out["answer_accuracy"] = {
                split: float(np.mean([correct[i] for i in idx])) if len(idx) else None
                for split, idx in ex.splits.items()
            }
            split_of = {int(i): split for split, idx in ex.splits.items() for i in idx}
            out["greedy_answers"] = [
                {"split": split_of.get(i), "gold": ex.columns[data.answer_column][i],
                 "answer": ex.columns["greedy_answer"][i], "correct": int(correct[i])}
                for i in range(len(ex))
            ]
        return out

    # -- data -------------------------------------------------------------------------------
    @property
    def examples(self) -> Examples:
        """The suite's examples (rows, columns, splits, pairs), built once."""
        if self._examples is None:
            required = [
                getattr(spec, "label", None) for spec in self.suite.analyses
            ]
            self._examples = build_examples(
                self.suite, self.model, answers=self._cached_answers,
                required_columns=[c for c in required if isinstance(c, str)],
                progress=self.progress,
            )
        return self._examples

    def _cached_answers(
        self, tokens: list[list[int]], golds: list[str]
    ) -> tuple[list[str], list[bool]]:
        from ..capture.generate import answer_correctness

        n_new = self.suite.data.max_new_tokens
        key = _key({"model": self.model_fingerprint, "data": dataset_fingerprint(tokens),
                    "golds": golds, "max_new_tokens": n_new})
        path = self.cache_dir / "answers" / f"{key}.json"
        saved = None
        if path.is_file():
            try:  # a damaged cache record is never trusted: it is recomputed
                saved = read_sealed(path, what="answer cache entry", fix="it is computed again")
            except CorruptFileError as err:
                logging.getLogger("probekit").warning("%s", err)
        if isinstance(saved, dict):
            return saved["texts"], [bool(c) for c in saved["correct"]]
        self.forward_passes += 1
        texts, correct = answer_correctness(
            self.model, tokens, golds, max_new_tokens=n_new, progress=self.progress
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, seal({"texts": texts, "correct": [bool(c) for c in correct]}))
        return texts, correct

    # -- activations ------------------------------------------------------------------------
    def default_sites(self) -> list[Site]:
        """The sites of ``[capture]``: ``"all"`` blocks of ``kind`` (plus the embedding)."""
        cap = self.suite.capture
        sites: list[Site] = [Site(None, "embed")] if cap.include_embed else []
        if list(cap.sites) == ["all"]:
            sites += list(all_layers(self.model, cap.kind))
        else:
            sites += [Site.parse(s) for s in cap.sites]
        return sites

    def activations(self, sites: Sequence[Site] | None = None) -> dict[Site, torch.Tensor]:
        """``site -> (example, d)`` float32 activations at ``[capture] positions``.

        One row per example, read from the cached store; only sites not cached yet are captured.
        """
        sites = list(sites) if sites is not None else self.default_sites()
        missing = [s for s in sites if s not in self._acts]
        if missing:
            self._acts.update(self._load_or_capture(missing))
        return {s: self._acts[s] for s in sites}

    def store_dir(self, sites: Sequence[Site]) -> Path:
        """Cache directory of a capture of ``sites`` for this model, data and capture spec."""
        cap = self.suite.capture
        ex = self.examples
        key = _key({
            "model": self.model_fingerprint,
            "data": dataset_fingerprint(ex.tokens),
            "sites": [s.key for s in sites],
            "positions": cap.positions,
            "position_values": self._position_column(),
            "padding_side": cap.padding_side,
            "dtype": cap.dtype,
        })
        return self.cache_dir / "activations" / key

    def _position_column(self) -> list[Any] | None:
        pos = self.suite.capture.positions
        if pos.startswith("column:"):
            return list(self.examples.column(pos.split(":", 1)[1]))
        return None

    def _load_or_capture(self, sites: list[Site]) -> dict[Site, torch.Tensor]:
        cap = self.suite.capture
        if cap.positions == "all":
            raise SuiteError(
                f"{self.suite.source}: [capture] positions='all' is not supported by suites "
                "(one row per example)"
            )
        for site in sites:
            site.validate(self.model)
        ex = self.examples
        directory = self.store_dir(sites)
        manifest = directory / "manifest.json"
        done = manifest.is_file() and Manifest.load(directory).complete
        if not done:
            try:
                rule = parse_position_rule(cap.positions, ex.columns)
            except (KeyError, ValueError) as err:
                raise SuiteError(f"{self.suite.source}: [capture] {err.args[0]}") from None
            self.forward_passes += 1
            options = {"positions": rule, "batch_size": cap.batch_size,
                       "padding_side": cap.padding_side, "dtype": cap.dtype}
            ref = (None if isinstance(self.executor, InProcessExecutor)
                   else suite_model_reference(self.suite, progress=self.progress))
            if ref is not None:  # one executor task per shard of examples (capture_sharded)
                capture_sharded(
                    ref, ex.tokens, directory, sites, executor=self.executor, device=self.device,
                    examples_per_shard=self.suite.execution.capture_examples_per_shard,
                    progress=False, **options,
                )
            else:
                capture_to_store(  # another run filling this cache entry: wait for it
                    self.model, ex.tokens, directory, sites, progress=self.progress,
                    examples_per_shard=max(len(ex.tokens), 1), lock_timeout=CACHE_LOCK_TIMEOUT_S,
                    **options,
                )
        store = ActivationStore(directory)
        rows = store.examples().numpy()
        if not np.array_equal(rows, np.arange(len(ex.tokens))):
            raise SuiteError(
                f"store {directory} does not hold one row per example in order; delete it"
            )
        return {s: store.load(s).float().reshape(len(rows), -1) for s in sites}
