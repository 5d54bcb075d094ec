"""SCAN-like command language of An & Du (2026), for compositional generalisation by length.

"Representational Homomorphism Predicts and Improves Compositional Generalization In Transformer
Language Model" (arXiv 2601.18858; tags as in ``docs/references.md``: [C] authors' code,
[O] our choice).

Language [C]
------------
A clause is a primitive (``walk jump look turn`` + optional ``extra_primitives``) followed by an
optional modifier (``twice`` = x2, ``thrice`` = x3; none/twice/thrice equally likely). Clauses are
joined by ``then``. The output is each clause's action token (the primitive upper-cased, ``WALK``)
repeated 1/2/3 times, clauses in order. ``n_noise`` noise tokens from ``foo bar baz`` are inserted at
uniform random positions of the input (``rng.integers(0, len + 1)`` each, one after another); the
output is unchanged. Samples are deduplicated, at most ``max_samples`` per clause count with at most
``10 * max_samples`` draws, as in the authors' ``generate_dataset``.

Splits
------
* ``train`` / ``test_id`` [O]: the deduplicated pool of commands with a clause count in
  ``train_clauses`` (coverage knob: ``(1, 2, 3)`` trains on 1..3 clauses; [C] default ``(2,)``),
  split by a seeded permutation, ``test_id_fraction`` held out.
* ``ood_len_<n>`` [C]: ``n`` clauses for each ``n`` in ``ood_lengths`` (default 5..12), no noise,
  ``n_ood_per_length`` commands each (default 200); OOD accuracy [C] is the mean over these splits.
* ``ood_prim_mod`` [O]: commands with the training clause counts and noise that contain at least one
  held-out primitive x modifier combination (``held_out_combos``, default ``jump thrice``).
  No other split contains a held-out combination.

Every split has the metadata column ``n_clauses``; see :func:`parse_metadata` for the parse columns.

Objective [C] (position-aligned seq2seq, no prompt/answer format)
-----------------------------------------------------------------
The logit at input position ``t`` is trained with cross-entropy to give output token ``t``;
padding is ignored. The authors' code pads a batch of inputs to length ``Lx`` and outputs to
``Ly``, truncates both to ``min(Lx, Ly)`` and ignores pad targets, which makes the scored positions
depend on the batch. Two batch-independent versions are offered (``alignment``):

* ``"pad"`` (default): the input is right-padded with ``<pad>`` up to the output length and every
  output token is scored: ``tokens = input + [pad] * max(0, |out| - |in|)``, ``targets = output``,
  ``target_positions = 0..|out|-1``. Equal to [C] whenever the batch's padded input is at least as
  long as its longest output (the usual case: noise and ``then`` make inputs long).
* ``"truncate"``: score only ``t < min(|in|, |out|)`` of the unpadded input (= [C] with batch size 1).

Accuracy [C] is token accuracy on scored targets (``token_acc`` in the trainer's history).
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

import numpy as np

from ..models.config import ModelConfig
from ..util.constraints import SEED, Between, Each, Ge, NonEmpty, OneOf, validate
from .base import TaskDataset, Vocab

Alignment = Literal["pad", "truncate"]

# split-name -> stream id of the per-split random generator (so that e.g. changing the OOD size
# leaves the training data unchanged)
_STREAM = {"train": 1, "ood_prim_mod": 2, "ood_len": 3}


@dataclass(frozen=True, kw_only=True)
class ScanConfig:
    """Knobs of the language and its splits (see module docstring)."""

    check_types: ClassVar[bool] = True

    primitives: tuple[str, ...] = ("walk", "jump", "look", "turn")
    extra_primitives: tuple[str, ...] = ()
    modifiers: tuple[tuple[str, int], ...] = (("twice", 2), ("thrice", 3))
    connective: str = "then"
    noise_tokens: tuple[str, ...] = ("foo", "bar", "baz")
    n_noise: Annotated[int, Ge(0)] = 0
    train_clauses: Annotated[tuple[int, ...], NonEmpty(hint="e.g. (2,) or (1, 2, 3)"), Each(Ge(1))] = (2,)
    max_samples: Annotated[int, Ge(1)] = 1000
    test_id_fraction: Annotated[float, Between(0, 1)] = 0.1
    ood_lengths: Annotated[tuple[int, ...], Each(Ge(1))] = tuple(range(5, 13))
    n_ood_per_length: Annotated[int, Ge(1)] = 200
    ood_noise: Annotated[int, Ge(0)] = 0
    held_out_combos: tuple[tuple[str, str], ...] = (("jump", "thrice"),)
    n_ood_combo: Annotated[int, Ge(1)] = 200
    alignment: Annotated[str, OneOf(typing.get_args(Alignment))] = "pad"  # an Alignment
    seed: Annotated[int, SEED] = 0

    def __post_init__(self) -> None:
        """The declared rules (:mod:`probekit.util.constraints`), then the rules across fields."""
        validate(self)
        own = "ScanConfig"
        prims = self.all_primitives
        if not prims:
            raise ValueError(f"{own}.primitives must not be empty")
        mods = [m for m, _ in self.modifiers]
        for m, k in self.modifiers:
            if isinstance(k, bool) or not isinstance(k, int) or k < 1:
                raise ValueError(f"{own}.modifiers: repeat count of {m!r} must be an int >= 1, got {k!r}")
        words = [*prims, *mods, self.connective, *self.noise_tokens]
        words += [p.upper() for p in prims]
        dup = sorted({w for w in words if words.count(w) > 1})
        if dup:
            raise ValueError(
                f"{own}: tokens {dup} are used twice (primitives, modifiers, connective, noise and "
                "the upper-cased action tokens must all differ)"
            )
        if self.n_noise and not self.noise_tokens:
            raise ValueError(f"{own}.n_noise={self.n_noise} needs non-empty noise_tokens")
        overlap = sorted(set(self.train_clauses) & set(self.ood_lengths))
        if overlap:
            raise ValueError(
                f"{own}: clause counts {overlap} are in both train_clauses and ood_lengths; "
                "OOD-by-length needs lengths never trained"
            )
        for combo in self.held_out_combos:
            if len(combo) != 2 or combo[0] not in prims or combo[1] not in mods:
                raise ValueError(
                    f"{own}.held_out_combos entry {combo!r} must be (primitive, modifier) with "
                    f"primitive in {list(prims)} and modifier in {mods}"
                )

    @property
    def all_primitives(self) -> tuple[str, ...]:
        """Primitives of the grammar, the extra (held-out) ones last."""
        return (*self.primitives, *self.extra_primitives)


@dataclass(frozen=True)
class Command:
    """One generated example: the clauses and the input word sequence (with noise)."""

    primitives: tuple[str, ...]
    modifiers: tuple[str | None, ...]
    words: tuple[str, ...]


def interpret_command(command: str | list[str], config: ScanConfig | None = None) -> list[str]:
    """Reference semantics: output action tokens of a command (noise tokens are skipped)."""
    cfg = config or ScanConfig()
    words = command.split() if isinstance(command, str) else list(command)
    reps = dict(cfg.modifiers)
    out: list[str] = []
    last: str | None = None
    for w in words:
        if w in cfg.all_primitives:
            last = w.upper()
            out.append(last)
        elif w in reps:
            if last is None:
                raise ValueError(f"modifier {w!r} without a primitive in {' '.join(words)!r}")
            out.extend([last] * (reps[w] - 1))
            last = None  # a modifier closes the clause
        elif w == cfg.connective or w in cfg.noise_tokens:
            if w == cfg.connective:
                last = None
        else:
            raise ValueError(f"unknown word {w!r} in command {' '.join(words)!r}")
    return out


class ScanTask:
    """Task object for the SCAN-like language (splits and objective in the module docstring)."""

    name = "scan"
    #: [C] reports token accuracy (history key ``<split>/token_acc``)
    primary_metric = "token_acc"

    def __init__(self, config: ScanConfig | None = None) -> None:
        self.config = config or ScanConfig()
        cfg = self.config
        toks = ["<pad>", *cfg.all_primitives, *(m for m, _ in cfg.modifiers), cfg.connective]
        toks += [*cfg.noise_tokens, *(p.upper() for p in cfg.all_primitives)]
        self._vocab = Vocab(tokens=tuple(toks))
        self._splits: dict[str, TaskDataset] | None = None

    @property
    def vocab(self) -> Vocab:
        """Tokens: pad, primitives, modifiers, connective, noise words, upper-cased actions."""
        return self._vocab

    def splits(self) -> dict[str, TaskDataset]:
        """``train``, ``test_id`` and one ``ood_len_<n>`` split per held-out length, built once."""
        if self._splits is None:
            self._splits = _make_splits(self.config, self._vocab)
        return self._splits

    @property
    def ood_length_splits(self) -> list[str]:
        """Names of the OOD length splits (``ood_len_<n>``)."""
        return [f"ood_len_{n}" for n in self.config.ood_lengths]

    def model_config(self, **overrides: Any) -> ModelConfig:
        """[C] d_model 128, 4 heads, d_ff 256, GELU, 4 layers.

        Deviations (TL-native blocks): pre-LN instead of post-LN, learned instead of sinusoidal
        positions, no dropout. ``positional_embedding_type="sinusoidal"`` plus
        ``TrainConfig(dropout=0.1)`` give [C]'s positions and dropout (preset ``scan_he_paper``);
        TL-native blocks cannot be post-LN.
        """
        n_ctx = max(ds.max_len for ds in self.splits().values())
        base: dict[str, Any] = dict(
            n_layers=4, d_model=128, n_heads=4, d_head=32, d_mlp=256, act_fn="gelu",
            normalization_type="LN", d_vocab=len(self.vocab), n_ctx=n_ctx, seed=self.config.seed,
        )
        base.update(overrides)
        return ModelConfig(**base)


def _sample_command(
    rng: np.random.Generator, cfg: ScanConfig, n_clauses: int, n_noise: int, force_combo: bool
) -> Command:
    prims = cfg.all_primitives
    mod_choices: list[str | None] = [None, *(m for m, _ in cfg.modifiers)]
    p = [prims[i] for i in rng.integers(0, len(prims), size=n_clauses)]
    m = [mod_choices[i] for i in rng.integers(0, len(mod_choices), size=n_clauses)]
    if force_combo:
        k = int(rng.integers(0, n_clauses))
        p[k], m[k] = cfg.held_out_combos[int(rng.integers(0, len(cfg.held_out_combos)))]
    words: list[str] = []
    for i, (pi, mi) in enumerate(zip(p, m)):
        words.append(pi)
        if mi is not None:
            words.append(mi)
        if i < n_clauses - 1:
            words.append(cfg.connective)
    for _ in range(n_noise):
        pos = int(rng.integers(0, len(words) + 1))
        words.insert(pos, cfg.noise_tokens[int(rng.integers(0, len(cfg.noise_tokens)))])
    return Command(tuple(p), tuple(m), tuple(words))


def _has_combo(cmd: Command, combos: set[tuple[str, str]]) -> bool:
    return any((p, m) in combos for p, m in zip(cmd.primitives, cmd.modifiers))


def _generate(
    rng: np.random.Generator,
    cfg: ScanConfig,
    n_clauses: int,
    n_noise: int,
    n_max: int,
    *,
    want_combo: bool,
) -> list[Command]:
    """Deduplicated commands (by word sequence), at most ``n_max``, at most ``10 n_max`` draws.

    ``want_combo=False`` rejects commands holding a held-out combination; ``True`` forces one.
    """
    combos = set(cfg.held_out_combos)
    seen: set[tuple[str, ...]] = set()
    out: list[Command] = []
    for _ in range(10 * n_max):
        if len(out) >= n_max:
            break
        cmd = _sample_command(rng, cfg, n_clauses, n_noise, force_combo=want_combo)
        if not want_combo and _has_combo(cmd, combos):
            continue
        if cmd.words not in seen:
            seen.add(cmd.words)
            out.append(cmd)
    return out


def parse_metadata(cmd: Command, cfg: ScanConfig) -> dict[str, Any]:
    """Parse columns of one command (positions index the input tokens).

    * ``prim_positions[c]``, ``mod_positions[c]`` (None without modifier): clause ``c``'s tokens.
    * ``clause_spans[c] = [start, end)`` from the primitive to its modifier (inclusive), so a noise
      token between them lies inside the span.
    * ``part_spans`` [C] (sequence HE): the input split at each primitive; a part is a primitive plus
      the tokens up to the next primitive; noise before the first primitive is a part of its own.
      Consecutive parts give the pairs (a, b) of ``a then b``.
    * ``then_positions``, ``noise_positions``; ``output_spans[c]`` = clause ``c``'s output tokens.
    * ``first_primitive`` (one label per example: the first clause's primitive, i.e. its output
      action) and ``second_prim_position`` (the second clause's primitive token; None for a
      single clause): a probe at that position for that label asks whether the first clause is
      still represented when the next one starts (``probes/diagnose_scan_noise.toml``).
    """
    reps = dict(cfg.modifiers)
    prim_pos = [i for i, w in enumerate(cmd.words) if w in cfg.all_primitives]
    mod_pos: list[int | None] = []
    spans: list[list[int]] = []
    for c, start in enumerate(prim_pos):
        if cmd.modifiers[c] is None:
            mod_pos.append(None)
            spans.append([start, start + 1])
        else:
            j = next(i for i in range(start + 1, len(cmd.words)) if cmd.words[i] in reps)
            mod_pos.append(j)
            spans.append([start, j + 1])
    bounds = ([0] if prim_pos[0] > 0 else []) + prim_pos + [len(cmd.words)]
    parts = [[s, e] for s, e in zip(bounds[:-1], bounds[1:])]
    out_spans, o = [], 0
    for m in cmd.modifiers:
        k = 1 if m is None else reps[m]
        out_spans.append([o, o + k])
        o += k
    return {
        "n_clauses": len(cmd.primitives),
        "primitives": list(cmd.primitives),
        "modifiers": list(cmd.modifiers),
        "prim_positions": prim_pos,
        "mod_positions": mod_pos,
        "clause_spans": spans,
        "part_spans": parts,
        "then_positions": [i for i, w in enumerate(cmd.words) if w == cfg.connective],
        "noise_positions": [i for i, w in enumerate(cmd.words) if w in cfg.noise_tokens],
        "output_spans": out_spans,
        "first_primitive": cmd.primitives[0],
        "second_prim_position": prim_pos[1] if len(prim_pos) > 1 else None,
    }


def _to_dataset(name: str, cmds: list[Command], cfg: ScanConfig, vocab: Vocab) -> TaskDataset:
    toks, tgts, poss = [], [], []
    meta: dict[str, list[Any]] = {"command": [], "output": [], "input_len": [], "output_len": []}
    combos = set(cfg.held_out_combos)
    meta["has_held_out_combo"] = []
    for cmd in cmds:
        out = interpret_command(list(cmd.words), cfg)
        x, y = vocab.encode(cmd.words), vocab.encode(out)
        if cfg.alignment == "pad":
            x = x + [vocab.pad_id] * max(0, len(y) - len(x))
            n = len(y)
        else:
            n = min(len(x), len(y))
        toks.append(x)
        tgts.append(y[:n])
        poss.append(list(range(n)))
        meta["command"].append(" ".join(cmd.words))
        meta["output"].append(" ".join(out))
        meta["input_len"].append(len(cmd.words))
        meta["output_len"].append(len(out))
        meta["has_held_out_combo"].append(_has_combo(cmd, combos))
        for k, v in parse_metadata(cmd, cfg).items():
            meta.setdefault(k, []).append(v)
    return TaskDataset(name=name, tokens=toks, targets=tgts, target_positions=poss, metadata=meta)


def _make_splits(cfg: ScanConfig, vocab: Vocab) -> dict[str, TaskDataset]:
    rng = np.random.default_rng([cfg.seed, _STREAM["train"]])
    pool: list[Command] = []
    for n in cfg.train_clauses:
        pool += _generate(rng, cfg, n, cfg.n_noise, cfg.max_samples, want_combo=False)
    perm = rng.permutation(len(pool))
    n_test = max(1, round(cfg.test_id_fraction * len(pool)))
    if n_test >= len(pool):
        raise ValueError(
            f"ScanConfig: only {len(pool)} distinct training commands; test_id_fraction="
            f"{cfg.test_id_fraction} leaves none for training. Add noise or clauses, or lower it"
        )
    splits = {
        "train": _to_dataset("train", [pool[i] for i in perm[n_test:]], cfg, vocab),
        "test_id": _to_dataset("test_id", [pool[i] for i in perm[:n_test]], cfg, vocab),
    }
    if cfg.held_out_combos:
        rng_c = np.random.default_rng([cfg.seed, _STREAM["ood_prim_mod"]])
        per = -(-cfg.n_ood_combo // len(cfg.train_clauses))
        combo: list[Command] = []
        for n in cfg.train_clauses:
            combo += _generate(rng_c, cfg, n, cfg.n_noise, per, want_combo=True)
        splits["ood_prim_mod"] = _to_dataset("ood_prim_mod", combo[: cfg.n_ood_combo], cfg, vocab)
    for n in cfg.ood_lengths:
        rng_l = np.random.default_rng([cfg.seed, _STREAM["ood_len"], n])
        cmds = _generate(rng_l, cfg, n, cfg.ood_noise, cfg.n_ood_per_length, want_combo=False)
        splits[f"ood_len_{n}"] = _to_dataset(f"ood_len_{n}", cmds, cfg, vocab)
    return splits
