"""Biographies for small models trained from scratch (Allen-Zhu & Li 2023, Part 3.1), word-level.

Allen-Zhu & Li (2023), "Physics of Language Models: Part 3.1, Knowledge Storage and
Extraction" (arXiv 2309.14316) pretrain GPT-2-style models *from scratch* on synthetic
biographies (bioS) and ask whether question answering (QA) learnt for some people transfers to
people seen only in biographies (out-of-distribution extraction). This is that protocol as a
token :class:`~probekit.testbeds.base.Task` for probekit's own trainer, reusing the names,
attribute values, sentence templates and questions of :mod:`probekit.testbeds.biographies`
(the SmolLM2 fine-tune testbed) with a word-level vocabulary so that a tiny model trains on it.

Data (every choice deterministic in ``seed``):

* ``n_people`` people with unique three-word names and the ID/OOD split (``id_fraction`` of
  them ID) of :class:`~probekit.testbeds.biographies.Biographies` with the same seed;
* six attributes as in the paper: birth month, birth city, university, major, employer and the
  employer's city (tied to the employer, as the paper's company city). The first five are
  uniform over the first ``n_values`` values of their lists (the paper: hundreds of values);
  ``work_city`` is :data:`EMPLOYER_CITY` of the employer;
* a biography is one sentence per attribute from one of four paraphrases; the first sentence
  names the person in full and the others say ``they`` (the paper's bioS without *fullname*;
  ``fullname = True`` repeats the name). Biography 1 has the canonical attribute order;
  biographies 2..``augmentation`` draw fresh paraphrases and, with ``permute``, a random order
  (the paper's *multiK + permute*; ``augmentation = 1`` is *bioS single*).

Tokens: words and the punctuation ``.`` / ``?``; a multi-word value is one token joined by
``_`` (``Stanford_University``), so every answer is one token. ``<bos>`` starts every row.

Splits (the paper's *mixed training*: biographies and ID QA trained together):

* ``train``: every biography (loss on every next token) + the six QA rows of each ID person;
* ``test_id``: the QA rows of the ID people (trained: in-distribution extraction);
* ``test_ood``: the QA rows of the OOD people, seen only in biographies (knowledge extraction);
* ``probe_train`` / ``probe_test``: one row per person, ``<bos>`` and the full name, people split
  50/50 (seeded independently of ID/OOD), then every person whose value of some attribute fewer
  than two ``probe_train`` people hold moved there (in index order): every test class is a
  training class with >= 2 people, as a validated, permutation-tested probe needs (a value
  only one person holds is a singleton training class: keep ``n_people >> n_values``). The model is causal, so the last position's hidden
  state *is* the state at the name's last token in every biography that starts with the name
  (P-probing; the label columns are the attributes). Its scored token is the word after the
  name in biography 1 (only there to give the row a scored position; its accuracy means little).

A QA row is ``<bos> question-words Answer:`` with the answer token scored at the last position
(answer-only loss). Metadata: ``kind`` (bio/qa/probe), ``person``, ``in_distribution``, and the
six attribute columns on every row; QA rows add ``attribute`` and ``answer`` (the value).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

import numpy as np

from ..models.config import ModelConfig
from ..util.constraints import SEED, Between, Ge, validate
from .base import TaskDataset, Vocab
from .biographies import (
    ATTRIBUTES as _BIO_ATTRIBUTES,
)
from .biographies import (
    FIRST_NAMES,
    LAST_NAMES,
    MIDDLE_NAMES,
    QUESTIONS,
    TEMPLATES,
    Biographies,
    BiographiesConfig,
)

__all__ = ["ATTRIBUTES", "EMPLOYER_CITY", "BioScratch", "BioScratchConfig", "words"]

BOS, PAD = "<bos>", "<pad>"
PRONOUN = "they"

#: the employer's city (the paper's sixth attribute, tied to the employer)
EMPLOYER_CITY: dict[str, str] = {
    "Nestle": "Vevey", "Siemens": "Munich", "Boeing": "Chicago", "Pfizer": "New York",
    "Shell": "London", "Intel": "Santa Clara", "Nokia": "Espoo", "Ikea": "Delft",
    "Lego": "Billund", "Heineken": "Amsterdam", "Toyota": "Nagoya", "Adidas": "Bremen",
}
#: attribute -> values (the biographies testbed's five plus the employer's city)
ATTRIBUTES: dict[str, tuple[str, ...]] = {**_BIO_ATTRIBUTES,
                                          "work_city": tuple(EMPLOYER_CITY.values())}
_TEMPLATES: dict[str, tuple[str, ...]] = {
    **TEMPLATES,
    "work_city": ("{name} works in {value}.", "{name} has an office in {value}.",
                  "{name} commutes to work in {value}.", "{name} is based in {value}."),
}
_QUESTIONS: dict[str, str] = {**QUESTIONS, "work_city": "In which city does {name} work?\nAnswer:"}


def words(text: str) -> list[str]:
    """Word-level tokens: whitespace-separated words, ``.`` and ``?`` split off their word."""
    return text.replace(".", " .").replace("?", " ?").split()


def _value_token(value: str) -> str:
    return value.replace(" ", "_")


@dataclass(frozen=True, kw_only=True)
class BioScratchConfig:
    """Knobs of the from-scratch biographies testbed (the paper: N = 100,000, hundreds of values).

    Attributes:
        n_people: people (at most the 18,000 name combinations).
        n_values: values per independent attribute (the first ``n_values`` of each list).
        augmentation: biographies per person (1: bioS single; K > 1: multiK).
        permute: shuffle the sentence order of biographies 2..K (the paper's *permute*).
        fullname: every sentence names the person (the paper's *fullname*); else ``they``.
        id_fraction: share of people whose QA is trained (the paper: one half).
        seed: people, attributes, paraphrases, orders and both person splits.
    """

    check_types: ClassVar[bool] = True

    n_people: Annotated[int, Between(4, len(FIRST_NAMES) * len(MIDDLE_NAMES) * len(LAST_NAMES),
                                     closed="both")] = 400
    n_values: Annotated[int, Between(2, 12, closed="both", hint="the lists hold 12 values")] = 8
    augmentation: Annotated[int, Ge(1)] = 1
    permute: bool = True
    fullname: bool = False
    id_fraction: Annotated[float, Between(0, 1)] = 0.5
    seed: Annotated[int, SEED] = 0

    def __post_init__(self) -> None:
        """The declared rules (:mod:`probekit.util.constraints`)."""
        validate(self)


class BioScratch:
    """The testbed: ``people`` (name, attributes, ID flag), ``biographies``, ``splits``."""

    name = "bio_scratch"

    def __init__(self, config: BioScratchConfig | None = None) -> None:
        self.config = config or BioScratchConfig()
        toks = [PAD, BOS, PRONOUN, ".", "?", *FIRST_NAMES, *MIDDLE_NAMES, *LAST_NAMES]
        for attr in ATTRIBUTES:
            toks += [_value_token(v) for v in ATTRIBUTES[attr]]
            for text in (*_TEMPLATES[attr], _QUESTIONS[attr]):
                toks += [w for w in words(text.format(name="", value="")) if w]
        self._vocab = Vocab(tokens=tuple(dict.fromkeys(toks)), pad=PAD)
        self._people: list[dict[str, Any]] | None = None
        self._splits: dict[str, TaskDataset] | None = None

    @property
    def vocab(self) -> Vocab:
        """Pad, bos, pronoun, punctuation, name parts, then per attribute its values and words."""
        return self._vocab

    @property
    def people(self) -> list[dict[str, Any]]:
        """Per person: ``index``, ``name``, ``in_distribution`` and one value per attribute."""
        if self._people is None:
            c = self.config
            base = Biographies(BiographiesConfig(n_people=c.n_people, id_fraction=c.id_fraction,
                                                 seed=c.seed)).people
            rng = np.random.default_rng([c.seed, 10])
            out = []
            for p in base:
                attrs = {a: _BIO_ATTRIBUTES[a][int(rng.integers(c.n_values))]
                         for a in _BIO_ATTRIBUTES}
                attrs["work_city"] = EMPLOYER_CITY[attrs["employer"]]
                out.append({"index": p.index, "name": p.name,
                            "in_distribution": p.in_distribution, **attrs})
            self._people = out
        return self._people

    def biographies(self, person: dict[str, Any]) -> list[list[str]]:
        """The ``augmentation`` biographies of ``person`` as word lists (the first canonical)."""
        c = self.config
        rng = np.random.default_rng([c.seed, 11, person["index"]])
        order = list(ATTRIBUTES)
        out = []
        for k in range(c.augmentation):
            attrs = order if k == 0 or not c.permute else [order[j] for j in rng.permutation(6)]
            text: list[str] = []
            for s, a in enumerate(attrs):
                template = _TEMPLATES[a][int(rng.integers(len(_TEMPLATES[a])))]
                name = person["name"] if s == 0 or c.fullname else PRONOUN
                text += words(template.format(name=name, value=_value_token(person[a])))
            out.append(text)
        return out

    def splits(self) -> dict[str, TaskDataset]:
        """``train``, ``test_id``, ``test_ood``, ``probe_train``, ``probe_test`` (built once)."""
        if self._splits is None:
            self._splits = self._make_splits()
        return self._splits

    def model_config(self, **overrides: Any) -> ModelConfig:
        """2 layers, d_model 128, 4 heads, GELU, LN; ``n_ctx`` fits the longest row."""
        n_ctx = max(ds.max_len for ds in self.splits().values())
        base: dict[str, Any] = dict(
            n_layers=2, d_model=128, n_heads=4, d_head=32, d_mlp=512, act_fn="gelu",
            normalization_type="LN", d_vocab=len(self.vocab), n_ctx=n_ctx, seed=self.config.seed,
        )
        base.update(overrides)
        return ModelConfig(**base)

    def _make_splits(self) -> dict[str, TaskDataset]:
        c, v = self.config, self._vocab
        rows: dict[str, list[tuple[list[int], list[int], list[int], dict[str, Any]]]] = {
            s: [] for s in ("train", "test_id", "test_ood", "probe_train", "probe_test")}
        meta_of = {p["index"]: {"person": p["index"], "in_distribution": p["in_distribution"],
                                **{a: p[a] for a in ATTRIBUTES}} for p in self.people}
        first_bios = {}
        for p in self.people:
            for k, bio in enumerate(self.biographies(p)):
                ids = v.encode([BOS, *bio])
                if k == 0:
                    first_bios[p["index"]] = ids
                rows["train"].append((ids, ids[1:], list(range(len(ids) - 1)),
                                      {"kind": "bio", "attribute": None, "answer": None,
                                       **meta_of[p["index"]]}))
        for p in self.people:
            for a in ATTRIBUTES:
                ids = v.encode([BOS, *words(_QUESTIONS[a].format(name=p["name"]))])
                row = (ids, [v.id(_value_token(p[a]))], [len(ids) - 1],
                       {"kind": "qa", "attribute": a, "answer": p[a], **meta_of[p["index"]]})
                if p["in_distribution"]:
                    rows["train"].append(row)
                rows["test_id" if p["in_distribution"] else "test_ood"].append(row)
        probe_rng = np.random.default_rng([c.seed, 12])
        in_train = np.zeros(c.n_people, dtype=bool)
        in_train[probe_rng.permutation(c.n_people)[: c.n_people // 2]] = True
        for p in self.people:  # every value in probe_train is held by >= 2 training people
            for a in ATTRIBUTES:
                if sum(in_train[q["index"]] and q[a] == p[a] for q in self.people) < 2:
                    in_train[p["index"]] = True
        for p in self.people:
            n_name = 1 + len(p["name"].split())
            ids = first_bios[p["index"]][:n_name]
            rows["probe_train" if in_train[p["index"]] else "probe_test"].append(
                (ids, [first_bios[p["index"]][n_name]], [n_name - 1],
                 {"kind": "probe", "attribute": None, "answer": None, **meta_of[p["index"]]}))
        out = {}
        for name, rs in rows.items():
            keys = ["kind", "attribute", "answer", "person", "in_distribution", *ATTRIBUTES]
            out[name] = TaskDataset(
                name=name, tokens=[r[0] for r in rs], targets=[r[1] for r in rs],
                target_positions=[r[2] for r in rs],
                metadata={k: [r[3][k] for r in rs] for k in keys})
        return out
