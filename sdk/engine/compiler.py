"""`GrammarCompiler`: the engine's one owner, as one object to configure and ask.

Everything the engine keeps between calls answers to it: the limits of a compile and a parse
(`Limits`), the memo tables under one byte budget (compiled automata, schema pieces, turn
grammars, per-vocabulary walks, masks), the vocabulary arrays of each tokenizer index and the
runtimes of each grammar. There is one per process, `default_compiler()` (XGrammar's
`GrammarCompiler` owns its caches the same way; here the tables are shared by every thread and
grammar, which is what makes a second grammar over known schemas cheap)::

    from sdk.engine.compiler import Limits, default_compiler

    compiler = default_compiler()
    compiler.set_budget(1 << 30)                     # a server with memory to spare
    compiler.set_limits(Limits(stack_depth=4000))    # deeper documents
    grammar = compiler.compile_schema(schema)
    matcher = compiler.matcher(grammar, index)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from . import _cache
from ._owner import OWNER, Limits, Owner

if TYPE_CHECKING:
    from .grammar import CompiledGrammar
    from .matcher import Matcher

__all__ = ["GrammarCompiler", "Limits", "default_compiler"]


class GrammarCompiler:
    """Compiles grammars and makes matchers under the process's limits and caches."""

    def __init__(self, owner: Owner = OWNER) -> None:
        self._owner = owner

    # -- limits

    @property
    def limits(self) -> Limits:
        return self._owner.limits

    def set_limits(self, limits: Limits) -> None:
        """The limits of every compile and parse begun from now on (`Limits()`: the
        defaults). A grammar compiled before keeps its tables."""
        if not isinstance(limits, Limits):
            from sdk.errors import ConfigError

            raise ConfigError(f"limits must be an sdk.engine.compiler.Limits, not {limits!r}")
        self._owner.limits = limits

    # -- caches

    @property
    def budget(self) -> int:
        """The byte budget of all memo tables together (`SDK_CACHE_BYTES` at import)."""
        return self._owner.caches.budget

    def set_budget(self, nbytes: int) -> None:
        _cache.set_budget(nbytes)

    def cache_usage(self) -> dict[str, tuple[int, int]]:
        """`{table: (entries, bytes)}`."""
        return _cache.usage()

    def cache_lookups(self) -> dict[str, tuple[int, int]]:
        """`{table: (hits, misses)}` of the counted tables (a schema piece's miss is a
        schema compile)."""
        return _cache.lookups()

    def clear_caches(self) -> None:
        """Empty every memo table (nothing is lost but time)."""
        _cache.clear_all()

    # -- work

    def compile_lark(self, text: str, *, start: str = "start") -> CompiledGrammar:
        """Lark text in the engine's dialect (docs/internals/grammar-dialect.md)."""
        from .grammar import CompiledGrammar

        return CompiledGrammar.from_lark(text, start=start)

    def compile_schema(
        self,
        schema: Any,
        *,
        strict: bool = False,
        whitespace: Literal["compact", "flexible"] = "compact",
        close_objects: bool = False,
        member_order: Literal["declared", "any"] = "declared",
    ) -> CompiledGrammar:
        """A JSON Schema (`sdk.grammar.compile_schema`'s options)."""
        from .grammar import CompiledGrammar

        return CompiledGrammar.from_schema(
            schema,
            strict=strict,
            whitespace=whitespace,
            close_objects=close_objects,
            member_order=member_order,
        )

    def matcher(self, grammar: CompiledGrammar, index: Any) -> Matcher:
        """A matcher of `grammar` over a tokenizer index (`TokenizerIndex`)."""
        from .matcher import Matcher

        return Matcher(grammar, index)


_DEFAULT = GrammarCompiler()


def default_compiler() -> GrammarCompiler:
    """The process's compiler (the one every agent and backend uses)."""
    return _DEFAULT
