"""Site parsing: every spelling gives the same Site; ``KIND@LAYER[:HEAD]`` keeps a negative layer."""

from __future__ import annotations

import pytest

from probekit.errors import ConfigError
from probekit.sites import Site, parse_block_text


@pytest.mark.parametrize(("text", "parsed"), [
    ("resid_post@3", ("resid_post", 3, None)), ("attn_z@3:2", ("attn_z", 3, 2)),
    (" resid_post@-1 ", ("resid_post", -1, None)), ("attn_z@-2:0", ("attn_z", -2, 0)),
    ("blocks.3.hook_resid_post", None), ("3.resid_post", None), ("embed", None),
    ("resid_post@x", None), ("resid_post@3:h", None)])
def test_parse_block_text(text, parsed):
    assert parse_block_text(text) == parsed


@pytest.mark.parametrize("text", ["resid_post@3", "blocks.3.hook_resid_post", "3.resid_post"])
def test_spellings_agree(text):
    assert Site.parse(text) == Site(3, "resid_post")


def test_head_and_model_level():
    assert Site.parse("attn_z@3:2") == Site(3, "attn_z", 2)
    assert Site.parse("embed") == Site(None, "embed")


@pytest.mark.parametrize(("text", "message"), [
    ("resid_post@-1", "-1"), ("resid_post@x", "'x' is not an integer"),
    ("attn_z@3:h", "'h' is not an integer"), ("nonsense", "cannot parse site")])
def test_refusals_name_the_value(text, message):
    with pytest.raises(ConfigError, match=message):
        Site.parse(text)
