"""Grammar literals read without `ast.literal_eval` mean exactly what Lark makes of them."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from lark import Token
from lark.exceptions import GrammarError
from lark.load_grammar import _literal_to_pattern, eval_escaping

from sdk.engine._lark_literals import literal_pattern, unescape_literal

# Every character that means something to either reading, and a few that do not.
_ALPHABET = st.sampled_from(list("\\\\\\\"'Uuxnftrvab01789AfFN{}/ é\n\r\x00."))


def _lark(body: str) -> str | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escapes warn in Python's reading
        try:
            return eval_escaping(body)
        except (GrammarError, SyntaxError, ValueError):
            return None


@settings(max_examples=3000, deadline=None)
@given(st.text(_ALPHABET, max_size=12))
@example('\\\\"')
@example("\\x4")
@example("\\u00e9\\d")
@example("a'b\\'")
@example("\\777")
@example("\\")
def test_unescape_matches_lark(body: str) -> None:
    ours = unescape_literal(body)
    if ours is not None:  # None: the body goes to Lark itself
        assert ours == _lark(body)


@pytest.mark.parametrize(
    ("kind", "text"),
    [
        ("STRING", '"\\"name\\""'),
        ("STRING", '"a\\\\b"'),
        ("STRING", '"caf\\u00e9"i'),
        ("STRING", '"it\'s"'),
        ("REGEXP", '/[^"\\\\\\x00-\\x1f]/'),
        ("REGEXP", "/\\d+(\\.\\d+)?/i"),
        ("REGEXP", '/"(\\\\.|[^"\\\\])*"/'),
    ],
)
def test_literal_pattern_matches_lark(kind: str, text: str) -> None:
    tok = Token(kind, text)
    ours, lark = literal_pattern(tok), _literal_to_pattern(tok)
    assert (type(ours), ours.value, ours.flags, ours.raw) == (
        type(lark),
        lark.value,
        lark.flags,
        lark.raw,
    )


def test_literal_pattern_errors_are_larks() -> None:
    with pytest.raises(GrammarError, match="Empty terminals"):
        literal_pattern(Token("STRING", '""'))
