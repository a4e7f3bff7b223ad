"""The engine's one owner: its limits, its memo tables under one byte budget, and the
vocabulary tables, as one object (`OWNER`) instead of module constants and loose globals.

`sdk.engine.compiler.GrammarCompiler` is its public face. Tables of things that come and go
(tokenizer indexes, grammars) are keyed weakly, so they go with them; a vocabulary's walk
tables hang on the vocabulary itself (`Vocab.caches`: a lookup there is one dict read).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, fields
from typing import Any

from ._cache import REGISTRY, CacheRegistry

__all__ = ["OWNER", "Limits", "Owner"]


@dataclass(frozen=True)
class Limits:
    """Every bound on one compile and one parse: past one, `TooComplexError` names it, never
    a hang or a silently looser mask (llguidance's `ParserLimits` plays this part there).

    The defaults keep a hostile schema to seconds of compile on a laptop core; they apply to
    work begun after they are set (a grammar compiled before keeps its tables)."""

    #: states of one regular expression's NFA
    nfa_states: int = 400_000
    #: states of one DFA built as a table (bigger automata stay lazy where they can)
    dfa_states: int = 100_000
    #: subset-construction steps of one regular expression (nested counted repeats such as
    #: `(x{0,100}){0,100}` stay under the state caps but would take minutes)
    subset_work: int = 5_000_000
    #: the same steps summed over every regular expression of one grammar: a schema with
    #: dozens of heavy patterns stops at ~5-7 s
    grammar_work: int = 15_000_000
    #: states of one rule's automaton over symbols (NFA, then DFA)
    rule_nfa_states: int = 2_000_000
    rule_dfa_states: int = 200_000
    #: subset-construction steps of one rule's automaton
    rule_subset_work: int = 10_000_000
    #: open rules on one parse's stack (a call that ends its rule does not count)
    stack_depth: int = 1000
    #: simultaneous parses of one sequence (ambiguity the lexer cannot settle yet)
    live_parses: int = 5000

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                from sdk.errors import ConfigError

                raise ConfigError(f"limit {f.name} must be a positive int, not {value!r}")


class Owner:
    """What the engine keeps between calls; one per process (`OWNER`)."""

    def __init__(self, registry: CacheRegistry) -> None:
        self.limits = Limits()
        #: every memo table (`BoundedCache`) and their one byte budget
        self.caches = registry
        #: the arrays of each tokenizer index (`_vocab.vocab_of`), dropped with the index
        self.vocabs: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        #: each grammar's runtimes by vocabulary (`matcher._runtime`), dropped with the grammar
        self.runtimes: weakref.WeakKeyDictionary[Any, dict[int, Any]] = weakref.WeakKeyDictionary()


OWNER = Owner(REGISTRY)
