"""Per-model necessity of a marker's substrate: ablate it and score the model's answers.

A marker measures something that lives somewhere in the model (its *substrate*): a probe's
direction at a site, a set of units. Necessity asks whether the model's answers need it: the
substrate is ablated at every position of the prompt (through :mod:`probekit.interventions`) and
the first-token correctness of each evaluated example is compared before and after,

    drop_i = correct_i - correct_i(substrate ablated)      in {-1, 0, 1},

whose mean is the accuracy drop. The control ablates ``n_random`` random substrates of the same
size (random subspaces of the same dimension, Haar-distributed; random unit sets of the same
count) and averages their drops per example, so ``drop - control`` is the accuracy the substrate
carries beyond a random one of its size. Substrates:

- ``probe_direction``: the span of a logistic probe's weights for a label at a site, fit on the
  selection split's activations (amnesic probing, Elazar et al. 2021); ``n_directions > 1`` fits
  probes one after another on the activations with the earlier directions projected out
  (iterative nullspace projection, INLP, Ravfogel et al. 2020), because one probe direction can
  leave the label decodable from what remains.
- ``units``: given unit indices of a site's last axis (e.g. MLP neurons).
- ``key_frequencies``: the ``k`` key Fourier frequencies of the embedding of the residue tokens
  ``0..p-1`` of a modular-addition model (Nanda et al. 2023): their cos/sin components over the
  residue axis are removed from ``W_E`` (``W_E[:p] <- (I - B^T B) W_E[:p]``, ``B`` the frequencies'
  rows of the orthonormal Fourier basis) and each residue token's embedding is replaced by its
  row of the edited matrix; these components average to 0 over the residues, so zero and mean
  ablation coincide. The control removes ``k`` frequencies drawn from the non-key ones.
- ``modifier_subspace``: the ``k``-dimensional subspace a SCAN modifier (``twice``, ``thrice``)
  moves a primitive's state along at an HE site (An & Du 2026's operator view of a modifier;
  :func:`modifier_subspace_substrate`): the top-``k`` right singular vectors of the matrix of
  displacements ``h(x m) - h(x)`` over the selection split's primitive-modifier pairs.

The ablated coordinates are set to their mean over the selection split's activations (``mean``,
default), to 0 (``zero``) or to those of a random selection example (``resample``).

Steering instead of ablating (``method = "steer"``; :mod:`probekit.interventions.steering`):
activation addition (Turner et al. 2023) of ``alpha`` standard deviations along the substrate at
every prompt position, ITI-style (Li et al. 2023), and the same ``drop`` is scored:

- ``probe_direction``: one vector in the substrate's span, the class-mean difference projected
  onto it, ``s = U^T U (mu_c - mu_rest)``, ``u = s / ||s||`` (``c`` the class steered toward,
  ``mu`` means over the selection split); ``v' = v + alpha * sigma * u`` with ``sigma`` the std of
  the selection split's projections ``X u``. For one binary probe direction ``u`` is the probe's
  weight vector, signed toward ``c``. ``alpha > 0`` pushes every prompt toward class ``c``: if the
  model reads its answer from ``u``, the prompts of the other classes change answer and accuracy
  drops by their share. Control: ``v' = v + alpha * sigma * r``, ``r`` a Haar-random unit vector:
  a step of the same norm ``|alpha| sigma`` in a random direction.
- ``units``: ``v'_i = v_i + alpha * sigma_i`` for each unit ``i`` (``sigma_i`` its std over the
  selection split; a unit that never varies is not moved); control: random unit sets of the same
  count, each unit stepped by its own std.
- ``key_frequencies``: refused (removing Fourier components has no direction to push along).

``alpha = 0`` is the identity (drop 0 for every example).

Scores (``score``): ``"first_token"`` (default) is the correctness of the gold next token after
the prompt, as above. ``"output_tokens"`` scores a position-aligned output sequence with teacher
forcing, as the trainer's evaluation of SCAN does (:func:`probekit.train.trainer.evaluate`,
``token_acc``; the objective of :mod:`probekit.testbeds.scan`): the logit at position ``t`` of
the input predicts output token ``y_t`` for ``t < m_i = min(|x_i|, |y_i|)``. Token accuracy
pools the tokens of all examples, ``acc = sum_i c_i / T`` (``c_i`` example ``i``'s correct
tokens, ``T = sum_i m_i``), so each example's value is ``c_i * n / T``: the mean over the ``n``
examples is then exactly the trainer's pooled token accuracy, and ``drop_i`` the example's share
of the pooled drop (``(c_i - c_i^ablated) * n / T``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from jaxtyping import Float

from ..errors import ConfigError, DataError
from ..interventions import (
    Ablate,
    ReplaceByToken,
    orthonormal_rows,
    random_subspace,
    subspace_ablation,
)
from ..sites import Site

__all__ = ["Necessity", "Substrate", "key_frequency_substrate", "modifier_displacements",
           "modifier_subspace_substrate", "necessity", "output_token_correct_sets",
           "probe_direction_substrate", "steer_probe_directions", "steer_units", "unit_substrate"]

#: how :func:`necessity` scores an example (module docstring)
SCORES = ("first_token", "output_tokens")


@dataclass(frozen=True)
class Substrate:
    """What is ablated, and how to ablate a random substrate of the same size.

    Attributes:
        description: one line for the report (``"2 probe directions for 'label' at resid_post@0"``).
        size: directions or units in it.
        ops: the intervention ops that ablate it.
        random_ops: ``seed -> ops`` ablating a random substrate of the same size.
        details: JSON-ready numbers (e.g. the probes' training accuracies).
        basis: ``(k, d)`` orthonormal rows of an ablated subspace, or ``(1, d)`` the unit vector
            a steering substrate steps along (None for units).
    """

    description: str
    size: int
    ops: list[Any]
    random_ops: Callable[[int], list[Any]]
    details: dict[str, Any]
    basis: np.ndarray | None = None


@dataclass(frozen=True)
class Necessity:
    """Per evaluated example: correctness intact and ablated, the drop, the random control.

    Attributes:
        base: ``(n,)`` correctness of the intact model: first token 0/1, or an example's correct
            output tokens times ``n / T`` (``score="output_tokens"``, module docstring).
        ablated: ``(n,)`` correctness with the substrate ablated.
        drop: ``base - ablated``.
        control: ``(n,)`` mean drop over the random substrates, or None.
        random_accuracy: mean accuracy with a random substrate ablated, or None.
    """

    base: np.ndarray
    ablated: np.ndarray
    drop: np.ndarray
    control: np.ndarray | None
    random_accuracy: float | None


def _coords_stats(X: np.ndarray, basis: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    coords = X @ basis.T
    return coords.mean(0), coords


def _subspace_ops(site: Site, basis: np.ndarray, X: np.ndarray, method: str, seed: int) -> list[Any]:
    mean, pool = _coords_stats(X, basis)
    return [subspace_ablation(site, basis, method=method, mean=mean, pool=pool, seed=seed)]


def probe_direction_substrate(
    site: Site,
    X: Float[np.ndarray, "n d"],
    y: np.ndarray,
    *,
    n_directions: int = 1,
    C: float = 1.0,
    method: str = "mean",
    max_iter: int = 200,
) -> Substrate:
    """The span of ``n_directions`` rounds of logistic probes for ``y`` at ``site`` (INLP).

    Round ``j`` fits :class:`~probekit.probes.LogisticProbe` (fixed ``C``) on ``X`` with the
    span found so far projected out and adds its weight rows (``K - 1`` directions for ``K``
    classes, up to rank) to the span. ``X`` are the selection split's activations (``(n, d)``).
    """
    from ..probes import LogisticProbe

    if n_directions < 1:
        raise ConfigError(f"n_directions must be >= 1, got {n_directions}")
    if len(np.unique(y)) < 2:
        raise DataError(f"the probe for the substrate needs >= 2 classes; the selection split has "
                        f"{np.unique(y).tolist()}")
    X = np.asarray(X, dtype=np.float64)
    found = np.zeros((0, X.shape[1]))
    train_acc = []
    for _ in range(n_directions):
        Xr = X - (X @ found.T) @ found if len(found) else X
        probe = LogisticProbe(C=C, max_iter=max_iter).fit(Xr, y)
        train_acc.append(float(probe.score(Xr, y)))
        found = orthonormal_rows(np.vstack([found, probe.coef_]))
    k, d = found.shape
    basis = found

    def random_ops(seed: int) -> list[Any]:
        return _subspace_ops(site, random_subspace(d, k, seed), X, method, seed)

    return Substrate(
        description=f"{k} probe direction{'s' if k > 1 else ''} ({n_directions} INLP round"
        f"{'s' if n_directions > 1 else ''}, C={C:g}) at {site.key}",
        size=k, ops=_subspace_ops(site, basis, X, method, 0), random_ops=random_ops,
        details={"probe_train_accuracy": train_acc, "dimension": k}, basis=basis,
    )


def unit_substrate(
    site: Site, units: Sequence[int], X: Float[np.ndarray, "n d"], *, method: str = "mean"
) -> Substrate:
    """Units ``units`` of ``site``'s last axis, set to their mean over ``X`` (or to 0)."""
    X = np.asarray(X, dtype=np.float64)
    width = X.shape[1]
    units = tuple(int(u) for u in units)
    if not units or len(set(units)) != len(units) or min(units) < 0 or max(units) >= width:
        raise ConfigError(f"units must be distinct indices in 0..{width - 1} of {site.key}, got {list(units)}")
    if method == "resample":
        raise ConfigError("resample ablation of units is not supported; use method 'mean' or 'zero'")
    mean = torch.as_tensor(X.mean(0)) if method == "mean" else None

    def ops(chosen: tuple[int, ...]) -> list[Any]:
        return [Ablate(site=site, features=chosen, method=method, mean=mean)]

    def random_ops(seed: int) -> list[Any]:
        pick = np.random.default_rng(seed).choice(width, size=len(units), replace=False)
        return ops(tuple(sorted(int(u) for u in pick)))

    return Substrate(description=f"{len(units)} units of {site.key}", size=len(units),
                     ops=ops(units), random_ops=random_ops, details={"units": list(units)})


def key_frequency_substrate(model: Any, p: int, *, k: int = 5) -> Substrate:
    """The ``k`` key frequencies of ``model.W_E``'s residue rows ``0..p-1``, removed at ``embed``.

    Keys: the frequencies of largest power summed over embedding dimensions
    (:func:`probekit.grokking.fourier.key_frequencies`); see the module docstring.
    """
    from ..grokking.fourier import fourier_basis, frequency_power, key_frequencies

    w = model.W_E.detach().double().cpu().numpy()
    if not 3 <= p <= w.shape[0]:
        raise ConfigError(f"p={p}: the residue tokens 0..p-1 must be rows of W_E ({w.shape[0]} rows)")
    keys = key_frequencies(frequency_power(w[:p], p).sum(axis=1), k)
    basis = fourier_basis(p)
    n_freq = (p - 1) // 2
    site = Site.parse("embed")

    def without(freqs: Sequence[int]) -> list[Any]:
        b = basis[[r for f in freqs for r in (2 * f - 1, 2 * f)]]  # (2k, p): cos, sin rows
        edited = w.copy()
        edited[:p] = w[:p] - b.T @ (b @ w[:p])
        return [ReplaceByToken(site=site, table=torch.as_tensor(edited, dtype=model.W_E.dtype))]

    others = np.setdiff1d(np.arange(1, n_freq + 1), keys)
    if len(others) < k:
        raise ConfigError(f"k={k} key frequencies leave {len(others)} others for the random control; "
                          f"choose k <= {n_freq // 2}")

    def random_ops(seed: int) -> list[Any]:
        return without(sorted(np.random.default_rng(seed).choice(others, size=k, replace=False).tolist()))

    return Substrate(description=f"the {k} key frequencies {sorted(keys.tolist())} of the embedding (p={p})",
                     size=k, ops=without(keys.tolist()), random_ops=random_ops,
                     details={"key_frequencies": sorted(keys.tolist())})


def modifier_displacements(
    model: Any, dataset: Any, site: Site, *, batch_size: int = 128, pad_id: int = 0,
) -> tuple[Float[np.ndarray, "pair d"], Float[np.ndarray, "token d"], tuple[str, ...]]:
    """Displacements ``h(x m) - h(x)`` of the primitive-modifier pairs of ``dataset`` at ``site``.

    ``dataset``: a :class:`~probekit.testbeds.base.TaskDataset` with SCAN's parse columns
    (:func:`probekit.homomorphism.modifier_pairs`: a primitive ``x`` at position ``p``, its
    modifier ``m`` at ``p + 1``). States are read as in [C]'s same-pass modifier HE
    (:func:`probekit.homomorphism.capture_states`, one pass per input): ``h(x) = h_p``, and the
    clause ``x m`` is the mean of its tokens' states, ``h(x m) = (h_p + h_{p+1}) / 2``, so the
    displacement is ``(h_{p+1} - h_p) / 2``. Returns the ``(pairs, d)`` displacements, the
    ``(tokens, d)`` states of every token of every input (the reference of a mean ablation at
    every position) and each pair's modifier.
    """
    from ..homomorphism import capture_states, modifier_pairs, pair_vectors

    if site.layer is None:
        raise ConfigError(f"the modifier subspace needs a block site (e.g. resid_post@1), got {site.key}")
    states = capture_states(model, dataset.tokens, site=site.kind, layers=[int(site.layer)],
                            batch_size=batch_size, pad_id=pad_id)
    pairs = modifier_pairs(dataset)
    a, b = pair_vectors(states, pairs)
    composite = (a[0] + b[0]) / 2
    return ((composite - a[0]).numpy(), states.acts[0].numpy(), pairs.label)


def modifier_subspace_substrate(
    site: Site,
    displacements: Float[np.ndarray, "pair d"],
    X: Float[np.ndarray, "n d"],
    *,
    k: int = 5,
    method: str = "mean",
) -> Substrate:
    """The modifier operator's subspace at ``site``: top-``k`` directions of the displacements.

    An & Du (2026) read a modifier ``m`` (``twice``, ``thrice``) as an operator on the state of
    the primitive it modifies, ``h(x m) ~ f_m(h(x))``. For an affine operator ``f_m(h) = A_m h +
    b_m`` the displacement ``h(x m) - h(x) = (A_m - I) h(x) + b_m`` lies in the column space of
    ``[A_m - I | b_m]``: the directions the modifier writes along. This substrate is that
    space as the data uses it, without fitting ``A_m`` (``d x d`` from a few hundred pairs): the
    top-``k`` right singular vectors ``V_k`` of the uncentred ``(pairs, d)`` displacement matrix
    ``D`` (rows ``d_i = h(x_i m_i) - h(x_i)``, pooled over the modifiers;
    :func:`modifier_displacements`). When ``D = ((A_m - I) H + b_m 1^T)^T`` exactly, ``V_k``
    are the top-``k`` left singular vectors of ``(A_m - I) [H; 1]`` restricted to the data: the
    principal directions of ``A_m - I`` applied to the primitives' states. The subspace is
    ablated at every position by ``method`` (its coordinates set to their mean over ``X``, the
    selection split's states of every token, by default); the control ablates ``k`` Haar-random
    directions the same way.

    ``details``: ``dimension``, ``n_pairs`` and ``explained`` (the fraction of ``||D||_F^2`` in
    the ``k`` directions).
    """
    D = np.asarray(displacements, dtype=np.float64)
    X = np.asarray(X, dtype=np.float64)
    if D.ndim != 2 or X.ndim != 2 or D.shape[1] != X.shape[1]:
        raise DataError(f"displacements {D.shape} and states {X.shape} must be (pairs, d) and (n, d) "
                        "with the same d")
    if not 1 <= k <= min(D.shape):
        raise ConfigError(f"k={k} modifier directions: need 1 <= k <= min(pairs, d) = {min(D.shape)}")
    _, s, vt = np.linalg.svd(D, full_matrices=False)
    basis = orthonormal_rows(vt[:k])
    d = D.shape[1]
    total = float((s ** 2).sum())

    def random_ops(seed: int) -> list[Any]:
        return _subspace_ops(site, random_subspace(d, k, seed), X, method, seed)

    return Substrate(
        description=f"{k} modifier displacement direction{'s' if k > 1 else ''} at {site.key}",
        size=k, ops=_subspace_ops(site, basis, X, method, 0), random_ops=random_ops,
        details={"dimension": k, "n_pairs": int(D.shape[0]),
                 "explained": float((s[:k] ** 2).sum() / total) if total > 0 else 0.0},
        basis=basis,
    )


@torch.inference_mode()
def output_token_correct_sets(
    model: Any,
    tokens: Sequence[Sequence[int]],
    targets: Sequence[Sequence[int]],
    op_sets: Sequence[Sequence[Any]],
    *,
    batch_size: int = 64,
) -> np.ndarray:
    """Correct teacher-forced output tokens of each example under each op set: ``(sets, n)``.

    Position-aligned (SCAN [C], module docstring): the argmax of the logit at position ``t`` of
    ``tokens[i]`` against ``targets[i][t]`` for ``t < min(len(tokens[i]), len(targets[i]))``; one
    right-padded forward per batch of one set (causal attention: padding after a row never
    changes its logits). Logits that are equal in exact arithmetic (e.g. two tokens of equal
    frequency after a mean ablation) differ by float rounding, whose sign follows the CPU's
    matmul kernel, so such a tie is decided per position and per machine, not by token order.
    """
    from ..interventions import run_with_interventions

    if batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
    n = len(tokens)
    out = np.zeros((len(op_sets), n), dtype=np.int64)
    for g, ops in enumerate(op_sets):
        for start in range(0, n, batch_size):
            rows = range(start, min(start + batch_size, n))
            logits = run_with_interventions(model, [list(tokens[i]) for i in rows], list(ops),
                                            logits="all").output
            pred = logits.argmax(-1).cpu()
            for r, i in enumerate(rows):
                m = min(len(tokens[i]), len(targets[i]))
                gold = torch.as_tensor(list(targets[i][:m]), dtype=torch.long)
                out[g, i] = int((pred[r, :m] == gold).sum())
    return out


def _class_of(y: np.ndarray, toward: Any) -> Any:
    """The class value ``toward`` names (``None``: the last of the sorted classes)."""
    classes = np.unique(y)
    if len(classes) < 2:
        raise DataError(f"steering toward a class needs >= 2 classes; the selection split has {classes.tolist()}")
    if toward is None:
        return classes[-1]
    for c in classes:
        if c == toward or str(c) == str(toward):
            return c
    raise ConfigError(f"steer_toward={toward!r} is not a class of the label; use one of {classes.tolist()}")


def steer_probe_directions(
    site: Site,
    substrate: Substrate,
    X: Float[np.ndarray, "n d"],
    y: np.ndarray,
    *,
    strength: float,
    toward: Any = None,
) -> Substrate:
    """Steering ``alpha = strength`` std along a probe-direction substrate toward class ``toward``.

    ``substrate``: a :func:`probe_direction_substrate` (its ``basis`` ``U``); ``X``, ``y``: the
    selection split's activations and labels; ``toward``: a class of ``y`` (default the last of
    the sorted classes, e.g. 1 of 0/1). The steered vector is the class-mean difference projected
    onto ``span(U)`` (module doc); the returned substrate's ``basis`` is that unit vector.
    """
    from ..interventions import direction_steering

    if substrate.basis is None:
        raise ConfigError(f"steer_probe_directions needs a probe-direction substrate (with a basis), got "
                          f"{substrate.description!r}")
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    c = _class_of(y, toward)
    U = np.asarray(substrate.basis, dtype=np.float64)
    diff = X[y == c].mean(0) - X[y != c].mean(0)
    s = U.T @ (U @ diff)
    if not np.linalg.norm(s) > 1e-12 * max(np.linalg.norm(diff), 1e-300):
        raise DataError(f"the class means of {c!r} and the rest do not differ within {substrate.description}: "
                        "no direction to steer along; use an ablation method ('mean')")
    u = s / np.linalg.norm(s)
    sigma = float((X @ u).std())
    d = X.shape[1]
    direction = direction_steering(site, u, strength=strength, sigma=sigma)  # validates strength

    def random_ops(seed: int) -> list[Any]:
        return [direction_steering(site, random_subspace(d, 1, seed)[0], strength=strength, sigma=sigma)]

    return Substrate(
        description=f"steering {strength:g} sd toward {c!r} along {substrate.description}",
        size=substrate.size, ops=[direction], random_ops=random_ops,
        details={**substrate.details, "strength": float(strength), "steer_toward": c.item() if hasattr(c, "item")
                 else c, "sigma": sigma, "steering_norm": abs(float(strength)) * sigma},
        basis=u[None, :],
    )


def steer_units(
    site: Site, units: Sequence[int], X: Float[np.ndarray, "n d"], *, strength: float
) -> Substrate:
    """Steering units ``units`` of ``site``'s last axis by ``strength`` times their std over ``X``."""
    from ..interventions import unit_steering

    base = unit_substrate(site, units, X, method="zero")  # validates the units
    X = np.asarray(X, dtype=np.float64)
    sigma = X.std(0)
    width = X.shape[1]
    chosen = tuple(base.details["units"])

    def random_ops(seed: int) -> list[Any]:
        pick = np.random.default_rng(seed).choice(width, size=len(chosen), replace=False)
        return [unit_steering(site, sorted(int(u) for u in pick), sigma, strength=strength)]

    return Substrate(description=f"steering {strength:g} sd along {base.description}", size=base.size,
                     ops=[unit_steering(site, chosen, sigma, strength=strength)], random_ops=random_ops,
                     details={**base.details, "strength": float(strength),
                              "steering_norm": abs(float(strength)) * float(np.linalg.norm(sigma[list(chosen)]))})


def necessity(
    model: Any,
    tokens: Sequence[Sequence[int]],
    answer_ids: Sequence[int],
    substrate: Substrate,
    *,
    n_random: int = 10,
    seed: int = 0,
    control: bool = True,
    batch_size: int = 64,
    score: str = "first_token",
    targets: Sequence[Sequence[int]] | None = None,
) -> Necessity:
    """Correctness of ``tokens`` before and after ablating ``substrate`` (module doc).

    ``score="first_token"`` (default): ``answer_ids`` holds each prompt's gold next token, and
    every op set is scored in shared forward passes. ``score="output_tokens"``: ``targets``
    holds each input's position-aligned output sequence (``answer_ids`` is not read) and each
    example's value is its correct teacher-forced tokens times ``n / T``
    (:func:`output_token_correct_sets`). The random substrates use seeds ``seed, seed + 1, ...``.
    """
    from ..neurons.deactivation import FactSet, first_token_correct_sets

    if score not in SCORES:
        raise ConfigError(f"score={score!r} unknown; use one of {list(SCORES)}")
    if score == "output_tokens":
        if targets is None or len(targets) != len(tokens) or len(tokens) < 1:
            raise DataError(f"{len(tokens)} inputs and {None if targets is None else len(targets)} target "
                            "sequences; score='output_tokens' needs one output sequence per input (>= 1)")
    elif len(tokens) != len(answer_ids) or len(tokens) < 1:
        raise DataError(f"{len(tokens)} prompts and {len(answer_ids)} answers; need one answer per prompt (>= 1)")
    sets = [[], substrate.ops]
    if control:
        from ..stats.permutation import check_n_permutations

        check_n_permutations(n_random, name="n_random")  # 1 ... MAX_PERMUTATIONS control sets
        sets += [substrate.random_ops(seed + j) for j in range(n_random)]
    if score == "output_tokens":
        targets = list(targets or ())
        scored = sum(min(len(t), len(y)) for t, y in zip(tokens, targets))
        if scored == 0:
            raise DataError("no output token is scored (every input or output sequence is empty); "
                            "give non-empty output sequences")
        counts = output_token_correct_sets(model, tokens, targets, sets, batch_size=batch_size)
        correct = counts.astype(float) * len(tokens) / scored
    else:
        facts = FactSet(tuple(tuple(int(t) for t in s) for s in tokens), ("",) * len(tokens),
                        tuple(str(a) for a in answer_ids), tuple(int(a) for a in answer_ids))
        correct = first_token_correct_sets(model, facts, sets, batch_size=batch_size).astype(float)
    base, ablated = correct[0], correct[1]
    rand = correct[2:] if control else None
    return Necessity(
        base=base, ablated=ablated, drop=base - ablated,
        control=None if rand is None else (base[None, :] - rand).mean(0),
        random_accuracy=None if rand is None else float(rand.mean()),
    )
