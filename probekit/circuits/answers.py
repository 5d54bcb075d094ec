"""Moved to :mod:`probekit.capture.answers` (answers as token ids are an input-level helper).

Kept for imports written before the move; delete once nothing imports it.
"""

from ..capture.answers import AnswerTokens as AnswerTokens
from ..capture.answers import answer_ids as answer_ids
from ..capture.answers import answer_token as answer_token
from ..capture.answers import answer_token_ids as answer_token_ids
from ..capture.answers import reduction_warning as reduction_warning
