"""Content fingerprints for models and datasets (what a store was made from).

The model's own identity (:func:`model_fingerprint`, :func:`model_id`) is defined next to the
models, in :mod:`probekit.models.identity` (so that :mod:`probekit.models` never imports this
module), and re-exported here: import both kinds of fingerprint from ``probekit.fingerprint``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from .models.identity import model_fingerprint as model_fingerprint
from .models.identity import model_id as model_id

__all__ = ["dataset_fingerprint", "model_fingerprint", "model_id"]


def dataset_fingerprint(
    tokens: Sequence[Sequence[int]], extra: Mapping[str, Any] | None = None
) -> str:
    """sha256 of the token ids (and ``extra``, e.g. position rule and metadata), 16 hex digits."""
    digest = hashlib.sha256()
    for seq in tokens:
        digest.update(json.dumps([int(t) for t in seq]).encode())
        digest.update(b";")
    if extra:
        digest.update(json.dumps(extra, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:16]
