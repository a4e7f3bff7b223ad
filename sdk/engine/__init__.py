"""The token-level engine: Lark grammar text → compiled grammar → per-sequence matchers.

Low-level API::

    from sdk.engine import CompiledGrammar, Matcher, TokenizerIndex

    grammar = CompiledGrammar.from_lark(text)            # or .from_schema(schema, ...)
    index = TokenizerIndex.from_hf(hf_tokenizer)
    m = Matcher(grammar, index)
    mask = m.mask()                                      # numpy bool[vocab_size]
    m.advance(token_id)                                  # TokenRejectedError if not allowed
    m.is_accepting()                                     # EOS allowed here
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .grammar import CompiledGrammar
    from .matcher import Matcher
    from .tokenizer import TokenizerIndex


def __getattr__(name: str) -> Any:
    # Lazy: importing the tokenizer index must not pull in Lark, and vice versa.
    if name == "CompiledGrammar":
        from .grammar import CompiledGrammar

        return CompiledGrammar
    if name == "Matcher":
        from .matcher import Matcher

        return Matcher
    if name == "TokenizerIndex":
        from .tokenizer import TokenizerIndex

        return TokenizerIndex
    raise AttributeError(name)


__all__ = ["CompiledGrammar", "Matcher", "TokenizerIndex"]
