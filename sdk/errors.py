"""The typed error hierarchy: every failure the SDK raises derives from `SDKError`."""

from __future__ import annotations


class SDKError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigError(SDKError, ValueError, TypeError):
    """A setting or argument of the public API is invalid (a negative `max_tokens`, `tools=`
    given a bare function, a history entry that is not a message, ...).

    Raised where the mistake is made, before anything runs. It is a `ValueError` and a
    `TypeError` too, so code written against Python's conventions catches it either way.
    """


class SchemaError(SDKError, ValueError):
    """The input is not a usable JSON Schema (malformed, dangling `$ref`, bad regex, ...).

    `pointer` is the JSON pointer (RFC 6901) of the offending place in the input schema.
    """

    def __init__(self, message: str, pointer: str = "") -> None:
        self.pointer = pointer
        super().__init__(f"{message} (at {pointer or '/'})")


class UnsupportedSchemaError(SchemaError):
    """A keyword the grammar cannot enforce, rejected because `strict=True` was asked for."""

    def __init__(self, keyword: str, pointer: str = "", detail: str = "") -> None:
        self.keyword = keyword
        msg = f"keyword {keyword!r} cannot be enforced by the grammar"
        if detail:
            msg += f": {detail}"
        super().__init__(msg, pointer)


class GrammarError(SDKError, ValueError):
    """A Lark grammar the engine cannot compile (syntax, unsupported construct, left recursion)."""


class RegexError(GrammarError):
    """A regular expression outside the supported dialect, or invalid."""


class TooComplexError(GrammarError):
    """Compilation or matching exceeded a resource cap (automaton states, stack depth, ...)."""


class MatcherError(SDKError):
    """Base class of run-time matcher errors."""


class TokenRejectedError(MatcherError):
    """`advance` was given a token the grammar does not allow at this point."""


class NoValidTokenError(MatcherError):
    """No token can continue the output; raised instead of producing an all -inf mask."""


class TokenizerError(SDKError):
    """A tokenizer could not be indexed or loaded."""
