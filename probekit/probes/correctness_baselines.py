"""Black-box baselines for the in-advance correctness probe, scored on the probe's own folds.

"No Answer Needed" (arXiv 2509.10625) compares its question-only probe with black-box
predictors of correctness. Each baseline here returns out-of-fold scores (fit on a fold's
training rows, scored on its test rows), so it can be compared with the probe row by row:

* ``group_base_rate``: the training rows' correct rate of the row's group (e.g. its relation);
  the global training rate for a group the fold never saw. It knows *which kind of question* a
  row is and nothing else, so it is constant within a group (within-group AUROC exactly 0.5).
* ``question_text``: TF-IDF of the prompt (word 1-2-grams, sublinear tf) + L2 logistic
  regression (scikit-learn), the paper's question-embedding assessor with a bag-of-words embedding.
* ``confidence``: the model's own answer confidence (e.g. max next-token probability), taken as
  given: nothing is fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from jaxtyping import Float, Shaped
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

__all__ = ["answer_confidence", "group_base_rate_scores", "question_text_scores"]

Folds = Sequence[tuple[np.ndarray, np.ndarray]]


def group_base_rate_scores(
    correct: Shaped[np.ndarray, " n"], groups: Shaped[np.ndarray, " n"], folds: Folds
) -> Float[np.ndarray, " n"]:
    """Out-of-fold score = training correct rate of the row's group (global rate if unseen)."""
    y = np.asarray(correct, dtype=np.float64)
    groups = np.asarray(groups)
    out = np.full(len(y), np.nan)
    for tr, te in folds:
        overall = y[tr].mean()
        for g in np.unique(groups[te]):
            rows = te[groups[te] == g]
            seen = tr[groups[tr] == g]
            out[rows] = y[seen].mean() if len(seen) else overall
    return out


def question_text_scores(
    texts: Sequence[str], correct: Shaped[np.ndarray, " n"], folds: Folds, *, C: float = 1.0
) -> Float[np.ndarray, " n"]:
    """Out-of-fold P(correct) from TF-IDF (1-2-grams) + logistic regression on the prompt text."""
    y = np.asarray(correct).astype(int)
    texts = list(texts)
    out = np.full(len(y), np.nan)
    for tr, te in folds:
        if len(np.unique(y[tr])) < 2:
            out[te] = y[tr].mean()
            continue
        vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
        Xtr = vec.fit_transform([texts[i] for i in tr])
        clf = LogisticRegression(C=C, max_iter=1000).fit(Xtr, y[tr])
        out[te] = clf.predict_proba(vec.transform([texts[i] for i in te]))[:, 1]
    return out


def answer_confidence(model: Any, tokens: list[list[int]], batch_size: int = 16) -> np.ndarray:
    """Max next-token probability after each prompt: the model's confidence in its first answer.

    A black-box baseline of "No Answer Needed" (arXiv 2509.10625); one batched forward pass
    over left-padded prompts, no hooks.

    Args:
        model: a loaded model (``model(input_ids, attention_mask=...)`` returns logits).
        tokens: one token-id list per prompt.
        batch_size: prompts per forward pass.

    Returns:
        ``(n,)`` probabilities in (0, 1].
    """
    import torch

    from ..capture.batching import iter_batches, model_device, pad_id_of
    from ..capture.generate import plain_last_logits

    forward = plain_last_logits(model)  # right padding: no NaN pad queries (pitfalls: float64)
    out = []
    with torch.inference_mode():
        for batch in iter_batches(tokens, batch_size=batch_size, pad_id=pad_id_of(model), side="right"):
            logits = forward(batch.to(model_device(model)), None, None)
            out.append(torch.softmax(logits.double(), -1).amax(-1).cpu().numpy())
    return np.concatenate(out)
