"""Synthetic biographies for knowledge storage and extraction (Allen-Zhu & Li 2023, Part 3.1).

Allen-Zhu & Li (2023), "Physics of Language Models: Part 3.1, Knowledge Storage and
Extraction" (arXiv 2309.14316): a model pretrained on biographies of fictional people and
fine-tuned on question/answer pairs about *half* of them answers questions about the *other*
half (out-of-distribution extraction) only when the biographies were **augmented** during
pretraining (several paraphrased biographies per person, sentence order permuted, the full name
in every sentence); without augmentation it memorises the QA pairs of the first half and fails
on the second. P-probing explains why: with augmentation the attributes are linearly decodable
from the hidden state at the last token of the person's name, so they are stored *with* the
person; without it they are spread over the tokens preceding each attribute.

Here the biographies are taught to a pretrained LM by fine-tuning (the paper pretrains from
scratch; whether its direction reproduces on a pretrained model is an open question this
testbed lets one measure, see docs/finetune.md).

Generation (all of it deterministic in ``seed``):

* ``n_people`` unique names ``First Middle Last`` drawn without replacement from the product of
  three name lists (:data:`FIRST_NAMES` x :data:`MIDDLE_NAMES` x :data:`LAST_NAMES`);
* every person gets one value per attribute (:data:`ATTRIBUTES`: birth month, birth city,
  university, major, employer), each uniform over its value list;
* a biography is one sentence per attribute, each from one of :data:`TEMPLATES`'s paraphrases,
  every sentence starting with the full name (the paper's *fullname* augmentation, so that every
  biography starts with the name and the name's last token is well defined). Biography 1 of a
  person uses the canonical attribute order; biographies 2..``augmentation`` draw fresh
  paraphrases and, with ``permute``, a random sentence order (the paper's *multiM + permute*);
* one question per (person, attribute) from :data:`QUESTIONS`, ``"...?<newline>Answer:"`` with the
  answer ``" value"`` (a leading space: the answer is scored as the continuation of the prompt).

Splits (the paper's protocol, section 3): the people are split ``id_fraction`` /
``1 - id_fraction`` into ID and OOD people (seeded);

* ``train``: every biography of every person (``prompt = ""``, the biography as ``answer``, so
  the whole text is trained) plus the QA pairs of the ID people;
* ``test_id``: the QA pairs of the ID people (seen in training: memorisation / in-distribution
  extraction);
* ``test_ood``: the QA pairs of the OOD people, who appear only in biographies (knowledge
  extraction).

:func:`probing_rows` gives the P-probing inputs: one row per person whose ``text`` is the
person's full name (the prefix every biography starts with) with one column per attribute. The
model is causal, so the hidden state at the last token of that text *is* the hidden state at the
name's last token inside each of the person's biographies; a probe suite reads it with
``[capture] positions = "last"`` and ``[data] label = "birth_city"`` (no position column
needed). Its ``split`` column splits the people 50/50 (seeded, independent of ID/OOD) into the
probe's ``train`` and ``test`` people; ``split_<attribute>`` is a split stratified by that
attribute (``[data] split_column``), under which a probe is testable with few people.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import numpy as np

from ..util.constraints import Between, Ge, Validated

__all__ = [
    "ATTRIBUTES",
    "BiographiesConfig",
    "Biographies",
    "Person",
    "write_biographies",
]

FIRST_NAMES = (
    "Anya", "Bastian", "Corin", "Delia", "Emrys", "Fenna", "Galen", "Hesper", "Isolde", "Jorah",
    "Kestrel", "Lioba", "Maren", "Nilo", "Orla", "Perrin", "Quilla", "Rhys", "Saoirse", "Tavin",
    "Ulla", "Vesna", "Wren", "Xavia", "Yorick", "Zelie", "Aldric", "Briony", "Cassius", "Dagny",
)
MIDDLE_NAMES = (
    "Briar", "Cove", "Dale", "Ember", "Flint", "Grove", "Hollis", "Ivy", "Jasper", "Lark",
    "Moss", "North", "Onyx", "Pike", "Quill", "Rowan", "Sable", "Thorn", "Vale", "Wilder",
)
LAST_NAMES = (
    "Ashcombe", "Belcourt", "Carrow", "Dunmore", "Ellery", "Fairleigh", "Gorrin", "Halvard",
    "Ingram", "Jessup", "Kilbride", "Lovell", "Marlowe", "Norcott", "Oakhurst", "Pellam",
    "Quarrie", "Redfern", "Stanwick", "Tolliver", "Upshaw", "Vantreight", "Whitlock", "Yarrow",
    "Zanders", "Ambrose", "Blackwood", "Castellan", "Drummond", "Everhart",
)

#: attribute -> the values a person's attribute is drawn from (uniformly)
ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "birth_month": ("January", "February", "March", "April", "May", "June", "July", "August",
                    "September", "October", "November", "December"),
    "birth_city": ("Lisbon", "Denver", "Osaka", "Nairobi", "Montreal", "Krakow", "Perth",
                   "Lima", "Dublin", "Seoul", "Austin", "Oslo"),
    "university": ("Stanford University", "Oxford University", "Yale University",
                   "Kyoto University", "McGill University", "Rice University",
                   "Tufts University", "Duke University", "Cornell University",
                   "Brown University", "Emory University", "Purdue University"),
    "major": ("Biology", "Economics", "Philosophy", "Chemistry", "History", "Geology",
              "Linguistics", "Statistics", "Architecture", "Music", "Nursing", "Physics"),
    "employer": ("Nestle", "Siemens", "Boeing", "Pfizer", "Shell", "Intel", "Nokia",
                 "Ikea", "Lego", "Heineken", "Toyota", "Adidas"),
}

#: attribute -> paraphrased sentence templates (each starts with the full name)
TEMPLATES: dict[str, tuple[str, ...]] = {
    "birth_month": ("{name} was born in {value}.", "{name} celebrates a birthday every {value}.",
                    "{name} came into the world in {value}.",
                    "{name} has a birthday in {value}."),
    "birth_city": ("{name} was born in {value}.", "{name} spent early childhood in {value}.",
                   "{name} comes from {value}.", "{name} grew up in {value}."),
    "university": ("{name} studied at {value}.", "{name} graduated from {value}.",
                   "{name} received a degree from {value}.", "{name} attended {value}."),
    "major": ("{name} majored in {value}.", "{name} focused on {value} at university.",
              "{name} completed a degree in {value}.", "{name} studied {value}."),
    "employer": ("{name} works for {value}.", "{name} is employed by {value}.",
                 "{name} has a job at {value}.", "{name} earns a living at {value}."),
}

#: attribute -> the question asked about it (the QA fine-tuning and evaluation prompt)
QUESTIONS: dict[str, str] = {
    "birth_month": "In which month was {name} born?\nAnswer:",
    "birth_city": "In which city was {name} born?\nAnswer:",
    "university": "Which university did {name} attend?\nAnswer:",
    "major": "What did {name} major in?\nAnswer:",
    "employer": "Which company does {name} work for?\nAnswer:",
}


@dataclass(frozen=True, kw_only=True)
class BiographiesConfig(Validated):
    """The knobs of the biography testbed.

    Attributes:
        n_people: fictional people (unique names; at most the 18,000 name combinations).
        augmentation: biographies per person (1: the paper's *bioS single*; > 1: *multiM*,
            each extra one with fresh paraphrases).
        permute: shuffle the sentence order of biographies 2..``augmentation`` (the paper's
            *permute*; biography 1 keeps the canonical order).
        id_fraction: the share of people whose QA pairs are trained (the paper: one half).
        seed: people, attributes, paraphrases, orders and the ID/OOD split.
    """

    n_people: Annotated[int, Between(2, len(FIRST_NAMES) * len(MIDDLE_NAMES) * len(LAST_NAMES),
                                     closed="both")] = 200
    augmentation: Annotated[int, Ge(1)] = 1
    permute: bool = True
    id_fraction: Annotated[float, Between(0, 1)] = 0.5
    seed: Annotated[int, Ge(0)] = 0


@dataclass(frozen=True, kw_only=True)
class Person:
    """One fictional person: index, unique full name, attribute values and ID/OOD membership."""

    index: int
    name: str
    attributes: dict[str, str]
    in_distribution: bool


class Biographies:
    """The biography testbed: people, their biographies, QA pairs and the JSONL rows.

    Rows (:meth:`rows`) have ``prompt``, ``answer``, ``split`` and the metadata ``kind``
    (``"bio"`` or ``"qa"``), ``person`` (index), ``name`` and, for QA rows, ``attribute``.
    """

    name = "biographies"

    def __init__(self, config: BiographiesConfig | None = None) -> None:
        self.config = config or BiographiesConfig()
        self._people: list[Person] | None = None

    @property
    def people(self) -> list[Person]:
        """Every person, in index order (built once)."""
        if self._people is None:
            self._people = self._make_people()
        return self._people

    def _make_people(self) -> list[Person]:
        c = self.config
        rng = np.random.default_rng([c.seed, 0])
        n_mid, n_last = len(MIDDLE_NAMES), len(LAST_NAMES)
        codes = rng.choice(len(FIRST_NAMES) * n_mid * n_last, size=c.n_people, replace=False)
        n_id = max(1, min(c.n_people - 1, round(c.id_fraction * c.n_people)))
        is_id = np.zeros(c.n_people, dtype=bool)
        is_id[rng.permutation(c.n_people)[:n_id]] = True
        people = []
        for i, code in enumerate(codes.tolist()):
            first, rest = divmod(code, n_mid * n_last)
            middle, last = divmod(rest, n_last)
            attrs = {a: values[int(rng.integers(len(values)))] for a, values in ATTRIBUTES.items()}
            name = f"{FIRST_NAMES[first]} {MIDDLE_NAMES[middle]} {LAST_NAMES[last]}"
            people.append(Person(index=i, name=name, attributes=attrs, in_distribution=bool(is_id[i])))
        return people

    def biographies(self, person: Person) -> list[str]:
        """The ``augmentation`` biographies of ``person`` (the first in canonical order)."""
        c = self.config
        rng = np.random.default_rng([c.seed, 1, person.index])
        order = list(ATTRIBUTES)
        out = []
        for k in range(c.augmentation):
            attrs = order if k == 0 or not c.permute else [order[j] for j in rng.permutation(len(order))]
            sentences = [TEMPLATES[a][int(rng.integers(len(TEMPLATES[a])))].format(
                name=person.name, value=person.attributes[a]) for a in attrs]
            out.append(" ".join(sentences))
        return out

    def qa_rows(self, person: Person, split: str) -> list[dict[str, Any]]:
        """One question per attribute about ``person``, in split ``split``."""
        return [{"prompt": QUESTIONS[a].format(name=person.name), "answer": f" {v}",
                 "split": split, "kind": "qa", "person": person.index, "name": person.name,
                 "attribute": a} for a, v in person.attributes.items()]

    def rows(self) -> list[dict[str, Any]]:
        """Every row: ``train`` (biographies + ID QA), ``test_id`` (ID QA), ``test_ood`` (OOD QA)."""
        out: list[dict[str, Any]] = []
        for p in self.people:
            out += [{"prompt": "", "answer": bio, "split": "train", "kind": "bio",
                     "person": p.index, "name": p.name} for bio in self.biographies(p)]
        for p in self.people:
            if p.in_distribution:
                out += self.qa_rows(p, "train")
        for split, wanted in (("test_id", True), ("test_ood", False)):
            for p in self.people:
                if p.in_distribution == wanted:
                    out += self.qa_rows(p, split)
        return out

    def probing_rows(self) -> list[dict[str, Any]]:
        """P-probing inputs: the full name per person, its attributes, a 50/50 probe split.

        The probe split is seeded independently of the ID/OOD split (``[seed, 2]``). Besides
        ``split``, ``split_<attribute>`` is a split stratified by that attribute (seeded
        ``[seed, 3]``): of the ``k`` people with a value, ``(k - 1) // 2`` are ``test`` and the
        rest ``train``, a value held by one person only is ``unused``; so every test value has
        >= 2 training people and no training value is a singleton (a probe is then testable on
        few people, where the plain split leaves test values the probe never saw).
        """
        n = self.config.n_people
        rng = np.random.default_rng([self.config.seed, 2])
        is_train = np.zeros(n, dtype=bool)
        is_train[rng.permutation(n)[: n // 2]] = True
        strat = np.random.default_rng([self.config.seed, 3])
        split_of: dict[str, dict[int, str]] = {}
        for attr in ATTRIBUTES:
            split_of[attr] = {}
            for value in sorted({p.attributes[attr] for p in self.people}):
                group = [p.index for p in self.people if p.attributes[attr] == value]
                test = set(strat.permutation(group)[: (len(group) - 1) // 2].tolist())
                split_of[attr].update({i: "unused" if len(group) == 1 else
                                       "test" if i in test else "train" for i in group})
        return [{"text": p.name, "split": "train" if is_train[p.index] else "test",
                 "person": p.index, "in_distribution": p.in_distribution, **p.attributes,
                 **{f"split_{a}": split_of[a][p.index] for a in ATTRIBUTES}}
                for p in self.people]


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    from ..util.io import atomic_write_text

    atomic_write_text(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))


def write_biographies(config: BiographiesConfig, directory: str | Path) -> dict[str, Path]:
    """Write the testbed's JSONL files into ``directory``.

    * ``data.jsonl``: every row (:meth:`Biographies.rows`), what a fine-tune reads;
    * ``eval.jsonl``: the QA rows of ``test_id`` and ``test_ood`` only (an evaluation file:
      prompt/answer/split), the same for every ``augmentation`` and ``permute``;
    * ``probing.jsonl``: the P-probing rows (:meth:`Biographies.probing_rows`), likewise.

    Returns ``{"data": path, "eval": path, "probing": path}``. Every file is written atomically,
    byte-for-byte the same for the same ``config``.
    """
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    task = Biographies(config)
    rows = task.rows()
    paths = {"data": out / "data.jsonl", "eval": out / "eval.jsonl", "probing": out / "probing.jsonl"}
    _write_jsonl(paths["data"], rows)
    _write_jsonl(paths["eval"], [r for r in rows if r["split"] != "train"])
    _write_jsonl(paths["probing"], task.probing_rows())
    return paths
