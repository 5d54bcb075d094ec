"""Interventions: read, replace, ablate, add and differentiate activations at typed sites.

One scope keyed by :class:`~probekit.sites.Site` (optionally one head; grouped-query attention:
K/V sites are indexed by KV head): per batch row, at positions given by the capture position
rules in *unpadded* coordinates, so left and right padding give the same result. Hooks go through
:func:`probekit.capture.hook_scope` and are always removed.

    >>> from probekit.interventions import Read, Replace, run_with_interventions
    >>> site = Site(3, "resid_pre")
    >>> clean = run_with_interventions(model, clean_tokens, [Read(site=site)])
    >>> patched = run_with_interventions(
    ...     model, corrupt_tokens, [Replace(site=site, values=clean[site], positions=LastToken())])
    >>> patched.output  # aligned logits (batch, pos, d_vocab)

Training-time dropout at sites (TL-native blocks have none): :func:`.dropout.dropout`. Ablating a
linear subspace (a probe direction; amnesic probing, INLP): :func:`.subspace.subspace_ablation`.
Steering along a direction or units by ``alpha`` standard deviations (activation addition, ITI):
:func:`.steering.direction_steering`, :func:`.steering.unit_steering`.

Ops (:mod:`.ops`): :class:`Read`, :class:`Replace` (patch from a cache), :class:`ReplaceByToken`
(a row of a per-token table, e.g. an edited embedding), :class:`ReplaceFromRows`
(patch from another row of the batch), :class:`Ablate` (zero / mean / resample), :class:`Add`
(steering), :class:`Grad` (d objective / d activation; ``objective=`` or
:meth:`InterventionResult.backward`), :class:`Recompute` (a write computed from activations
reached earlier in the same forward pass, e.g. edge patching).

How to add an intervention:

1. add a frozen keyword-only dataclass subclassing :class:`.ops.WriteOp` to :mod:`.ops` (it
   brings ``site``, ``positions``, ``rows``, ``features`` and their validation; validate your own
   fields in ``__post_init__`` after ``super().__post_init__()``), and add it to ``Op`` /
   ``WRITE_OPS``;
2. add its branch to :func:`.apply.apply_write`: it receives the site's activation in probekit
   layout (``pos`` on axis 1, head already sliced, still *padded*) and must return a new tensor
   built with ``torch.where(mask, new_values, part)`` (out of place, so gradients flow); convert
   aligned user tensors with ``_padded`` (:func:`probekit.capture.to_padded`) and check shapes
   with ``_check_values`` (raise :mod:`probekit.errors` classes naming the value and the fix);
3. test it against a hand-written TL hook on the tiny models of ``tests/conftest.py`` (MHA and GQA)
   and for left/right padding invariance (``tests/interventions/``).

Never attach hooks elsewhere: method modules (circuits, neurons, ...) build on these ops.
"""

from .dropout import dropout as dropout
from .dropout import dropout_sites as dropout_sites
from .ops import Ablate as Ablate
from .ops import Add as Add
from .ops import Grad as Grad
from .ops import Op as Op
from .ops import Read as Read
from .ops import Recompute as Recompute
from .ops import Replace as Replace
from .ops import ReplaceByToken as ReplaceByToken
from .ops import ReplaceFromRows as ReplaceFromRows
from .ops import WriteOp as WriteOp
from .run import InterventionResult as InterventionResult
from .run import as_batch as as_batch
from .run import intervene as intervene
from .run import run_with_interventions as run_with_interventions
from .steering import direction_steering as direction_steering
from .steering import unit_steering as unit_steering
from .subspace import orthonormal_rows as orthonormal_rows
from .subspace import random_subspace as random_subspace
from .subspace import subspace_ablation as subspace_ablation
