"""Class counts of a classification split: the degenerate cases no probe score can be read from.

A held-out accuracy tests decodability only when the test split holds two or more classes the
probe has seen in training. With a single test class, chance (the majority rate) is 1 and any
probe that predicts that class scores 1.000, while shuffling *all* labels for a permutation null
puts other classes into the test split: the null scores lower and the test "rejects" for a
probe that learned nothing. :func:`check_class_splits` finds such splits before anything is fit:

* the training split holds fewer than two classes: nothing can be fit (an error);
* the test split holds a single class, a class the training split lacks, or the training split
  holds a class with one example: the decodability test is *not testable* (``problems``);
* a training class has fewer examples than the CV folds: stratified folds miss it in some
  validation fold (scikit-learn's "least populated class" warning), which changes the selected
  hyperparameter (``warnings``, shown in the output and the report).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import DataError

__all__ = ["ClassSplitCheck", "check_class_splits"]


@dataclass(frozen=True, kw_only=True)
class ClassSplitCheck:
    """What :func:`check_class_splits` found.

    Attributes:
        problems: reasons the held-out score cannot test decodability (empty = testable).
        warnings: facts that change the meaning of a result without making it untestable.
        train_counts, test_counts: examples per class (class labels as strings).
    """

    problems: tuple[str, ...]
    warnings: tuple[str, ...]
    train_counts: dict[str, int]
    test_counts: dict[str, int]

    @property
    def testable(self) -> bool:
        """True when no problem was found."""
        return not self.problems


def _counts(y: np.ndarray) -> dict[str, int]:
    classes, counts = np.unique(y, return_counts=True)
    return {str(c): int(n) for c, n in zip(classes.tolist(), counts.tolist())}


def _listed(names: Sequence[str], counts: dict[str, int] | None = None) -> str:
    shown = [f"{n!r}" + (f" ({counts[n]})" if counts else "") for n in names[:5]]
    return ", ".join(shown) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def check_class_splits(
    labels: Sequence | np.ndarray,
    train_idx: np.ndarray,
    test_idx: np.ndarray,
    *,
    cv: int | None = None,
    name: str = "labels",
) -> ClassSplitCheck:
    """Check the classes of a train/test split of ``labels`` (compared as strings).

    Args:
        labels: one class label per example.
        train_idx: example indices of the training split.
        test_idx: example indices of the test split.
        cv: CV folds of the training split (``None``: no CV warning).
        name: what the labels are called in messages (the label column).

    Returns:
        ClassSplitCheck: problems make the decodability test not testable.

    Raises:
        DataError: the training split holds fewer than two classes (no classifier can be fit).
    """
    y = np.asarray([str(v) for v in np.asarray(labels, dtype=object)])
    train, test = _counts(y[np.asarray(train_idx)]), _counts(y[np.asarray(test_idx)])
    if len(train) < 2:
        only = f"only class {next(iter(train))!r}" if train else "no example"
        raise DataError(
            f"{name}: the training split holds {only} ({sum(train.values())} examples); a "
            "classifier needs >= 2 classes in training: put examples of other classes in it"
        )
    if cv is not None and max(train.values()) < cv:
        raise DataError(
            f"{name}: cv={cv} folds but the largest training class has {max(train.values())} "
            f"examples (training classes: {_listed(list(train), train)}); lower cv to <= "
            f"{max(2, max(train.values()))} or add training examples"
        )
    problems: list[str] = []
    if len(test) == 1:
        (cls, n), = test.items()
        problems.append(
            f"{name}: the test split holds a single class {cls!r} ({n} examples): chance is "
            "1.000 and a probe that predicts that class scores 1.000, so held-out accuracy cannot "
            "test decodability (not testable); put examples of >= 2 classes in the test split"
        )
    unseen = [c for c in test if c not in train]
    if unseen:
        problems.append(
            f"{name}: test class(es) {_listed(unseen, test)} never occur in the training split: "
            "the probe cannot predict them and a label shuffle would put them in training, so "
            "the permutation test is not valid (not testable); give every test class training "
            "examples or drop those rows"
        )
    single = [c for c, n in train.items() if n == 1]
    if single:
        problems.append(
            f"{name}: class(es) {_listed(single)} have a single training example: the probe "
            "cannot be validated on them (not testable); add examples or merge rare classes"
        )
    warnings: list[str] = []
    if cv is not None:
        few = [c for c, n in train.items() if 1 < n < cv]
        if few:
            warnings.append(
                f"{name}: class(es) {_listed(few, train)} have fewer training examples than "
                f"cv={cv} folds: some validation folds lack them, so the CV-selected "
                "hyperparameter rests on fewer classes; lower cv or add examples"
            )
    return ClassSplitCheck(problems=tuple(problems), warnings=tuple(warnings),
                           train_counts=train, test_counts=test)
