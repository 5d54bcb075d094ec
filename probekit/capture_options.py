"""The options of an activation capture, declared once (no torch: a suite validates without it).

:class:`CaptureOptions` holds what every capture surface shares (:class:`ShardOptions` the
shard size of a capture into a store): the Python API's
:class:`~probekit.capture.CaptureConfig` (``collect_activations``, ``capture_to_store``), a
suite's ``[capture]`` table (:class:`probekit.suites.spec.CaptureSpec`) and the flags of
``probekit capture`` all subclass it or are generated from it
(:mod:`probekit.util.cli_options`), so the three agree on every default and bound.

Defaults: ``batch_size`` 64, the suite's (``[capture]``, the path every shipped report runs
through, so no report changes); ``examples_per_shard`` 256, the documented ``probekit capture
--examples-per-shard`` default and the suites' ``[execution] capture_examples_per_shard``. The
shard size never changes a captured row: a shard holds whole batches
(:attr:`~probekit.capture.CaptureConfig.shard_examples`), so the batches are the same whatever
it is. The batch size changes a row only through floating-point rounding (every example runs
under its own causal mask, pads are masked): on CPU, batches of 32 and 64 gave bit-identical
rows (tiny model, left and right padding), but a GPU or BLAS kernel may pick another
summation order for another batch shape. Both set memory: one forward pass, one shard file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from .util.constraints import Ge, Validated

__all__ = ["EXAMPLES_PER_SHARD", "CaptureOptions", "ShardOptions", "ShardSize"]

#: examples per store shard file: a killed capture loses at most one shard of work
EXAMPLES_PER_SHARD = 256
#: the rule of a shard size (``examples_per_shard``, ``[execution] capture_examples_per_shard``)
ShardSize = Annotated[int, Ge(1, hint="examples per shard file, rounded up to whole batches")]


@dataclass(frozen=True, kw_only=True)
class CaptureOptions(Validated):
    """How a capture batches its forward passes and stores its rows.

    Attributes:
        batch_size: examples per forward pass.
        padding_side: where a batch's shorter prompts are padded.
        dtype: storage dtype of the captured rows.
    """

    batch_size: Annotated[int, Ge(1)] = 64
    padding_side: Literal["left", "right"] = "right"
    dtype: Literal["float32", "float16", "bfloat16"] = "float32"


@dataclass(frozen=True, kw_only=True)
class ShardOptions(Validated):
    """How a capture into a store is cut into shard files (not a key of a suite's ``[capture]``).

    A suite captures into one shard, or ``[execution] capture_examples_per_shard`` examples per
    executor task (the same rule and default, :data:`ShardSize`).

    Attributes:
        examples_per_shard: examples per store shard file (rounded up to whole batches): a
            killed capture loses at most one shard of work.
    """

    examples_per_shard: ShardSize = EXAMPLES_PER_SHARD
