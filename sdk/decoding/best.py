"""The most likely valid output under the model: a best-first search over the grammar's outputs.

Greedy masked decoding returns the output whose tokens were each the best among those the
grammar allowed, which is not the valid output the model finds most likely: a first token can
look best and lead where the model puts little mass on anything valid (the bias the exact
sampler corrects, `sdk.decoding.exact`). The search (`Agent(decoding="best")`):

1. Dives greedily first, the way the masked greedy turn decodes: forced text as the tokenizer
   writes it (healed), the most likely allowed token elsewhere. Its output is the floor: the
   result is never less likely than greedy's.
2. Then opens prefixes best first by log p (uniform cost: log p only falls along a path, so a
   prefix less likely than the best complete output found can be skipped, with everything
   under it). Once no open prefix is more likely than the best complete output, that output
   is the most likely one (`proven`).
3. Stops at a budget of work (forward passes and the tokens they feed; by default the dive's
   own), with the most likely complete output found.

Each prefix offers its `width` most likely valid tokens: the search is exact among those.
Forced text (keys, punctuation, the rest of a name) is written as the tokenizer writes it, as in
the masked turn, and the same spelling rules hold (`_alignment`): forced text given back is
not split, and a token the tokenizer would merge with the forced text after it is not taken
(its merged token is). The search ranks texts, not other spellings of the same text in tokens
(the model rarely means those, and each would cost a forward pass). Forced runs go in one forward
pass with the logits after each token, so forced tokens count in the score: their probability
under the model is rarely 1, and a call whose forced keys the model did not expect is less
likely than its free tokens say.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from sdk.decoding._alignment import seam_token, spell_as_tokenizer
from sdk.decoding._gate import GateRun
from sdk.decoding._search import Cursor, turn_result, valid_tokens
from sdk.decoding.generate import TurnOutput, forced_token_ids, runaway_period
from sdk.engine.logits import log_softmax

if TYPE_CHECKING:
    from collections.abc import Callable

    from sdk.decoding._gate import CallGate
    from sdk.decoding.generate import RollbackSession
    from sdk.engine.matcher import Matcher
    from sdk.engine.tokenizer import TokenizerIndex

__all__ = ["BestResult", "BestSearch", "best_turn", "sequence_logprob"]

#: Valid tokens a prefix offers the search, most likely first.
WIDTH = 16
#: What a forward pass costs besides its tokens, in tokens fed (SmolLM2-135M on llama.cpp, 2
#: cores: 14.5 ms for one token, 44.5 ms for ten).
PASS_COST = 3.0
#: The search's default work after the dive, as a share of the dive's: with the search's own
#: overhead (a mask and a softmax a prefix), the turn takes under twice greedy's time.
BUDGET = 0.8


@dataclass(frozen=True)
class BestResult:
    """What the search found.

    Attributes:
        tokens: the output's tokens (the end token left out); the greedy dive's where no
            complete output was found within `max_tokens`.
        logprob: its log-probability under the model (-inf where it is not complete).
        greedy_logprob: the greedy dive's (-inf where greedy did not finish).
        complete: the output ends where the grammar does.
        proven: no output is more likely (among each prefix's `width` best tokens).
        passes: forward passes in all; `greedy_passes` of them for the dive.
        runaway: the unit the dive's last tokens repeated, where it ran away and no complete
            output was found ("" otherwise).
    """

    tokens: tuple[int, ...]
    logprob: float
    greedy_logprob: float
    complete: bool
    proven: bool
    passes: int
    greedy_passes: int
    runaway: str = ""


@dataclass(eq=False)
class _Node:
    path: tuple[int, ...]
    score: float  # log p(path) under the model
    matcher: Matcher | None  # None at a leaf
    leaf: bool = False  # a complete output
    cands: list[tuple[float, int]] | None = None  # (log p, token) allowed, best first
    next: int = 0  # the next candidate the search has not taken
    kids: dict[int, _Node] = field(default_factory=dict)


class BestSearch:
    """A best-first search over one session (see the module's doc).

    Args:
        session: The turn's session, not yet prefilled; it must roll back (`rollback`).
        matcher: The grammar's matcher at the output's start (not moved: forks are).
        index: The vocabulary's bytes and end tokens.
        tokenizer: Encodes forced text (as the masked turn does).
        max_tokens: Outputs longer than this are not considered.
        heal: Forced runs end where the model's own tokens would (as the masked turn's).
        width: Valid tokens a prefix offers the search.
    """

    def __init__(
        self,
        session: RollbackSession,
        matcher: Matcher,
        index: TokenizerIndex,
        tokenizer: Any,
        *,
        max_tokens: int = 256,
        heal: bool = True,
        width: int = WIDTH,
    ) -> None:
        self.index = index
        self.tokenizer = tokenizer
        self.eos_ids = index.eos_ids
        self.max_tokens = max_tokens
        self.heal = heal
        self.width = width
        self._cursor = Cursor(session)
        self.root = _Node((), 0.0, matcher.fork())
        self._heap: list[tuple[float, int, _Node]] = []
        self._order = itertools.count()
        self.best: _Node | None = None
        self._lp: np.ndarray = np.zeros(0)  # the last filled node's log-probabilities

    # ------------------------------------------------------------------ the trie

    def _fill(self, node: _Node, row: np.ndarray, only: int | None = None) -> np.ndarray:
        """The node's candidates from the logits after it (`only`: forced text's token, the
        one candidate); its log-probabilities returned."""
        assert node.matcher is not None
        lp = np.asarray(log_softmax(row.astype(np.float64)))
        if only is not None:
            node.cands = [(float(lp[only]), only)]
            return lp
        at_limit = len(node.path) >= self.max_tokens
        allowed = valid_tokens(node.matcher, lp.shape[0], self.eos_ids, at_limit)
        w = np.where(allowed, lp, -np.inf)
        if self.heal:  # forced text given back is spelled as the tokenizer spells it
            spell_as_tokenizer(node.matcher, self.index, self.tokenizer, w)
        self._lp = lp
        k = min(self.width, int(allowed.sum()))
        top = np.argpartition(-w, k - 1)[:k] if k else np.zeros(0, dtype=np.int64)
        top = top[np.argsort(-w[top], kind="stable")]
        node.cands = [(float(w[t]), int(t)) for t in top if w[t] > -math.inf]
        self._push(node)
        return lp

    def _child(self, node: _Node, token: int, logp: float) -> _Node:
        kid = node.kids.get(token)
        if kid is not None:
            return kid
        path, score = (*node.path, token), node.score + logp
        if token in self.eos_ids:
            kid = _Node(path, score, None, leaf=True)
        else:
            assert node.matcher is not None
            fork = node.matcher.fork()
            fork.advance(token)
            leaf = fork.is_terminated()  # only the end may follow: complete without it
            kid = _Node(path, score, None if leaf else fork, leaf=leaf)
        node.kids[token] = kid
        if kid.leaf and (self.best is None or kid.score > self.best.score):
            self.best = kid
        return kid

    def _merged(self, node: _Node, token: int) -> int | None:
        """The tokenizer's first token of `token` and the forced text after it where that is
        not `token` (`]` chosen, `,` forced: `],`); None where it is, or nothing is forced."""
        if not self.heal or token in self.eos_ids:
            return None
        assert node.matcher is not None
        fork = node.matcher.fork()
        fork.advance(token)
        first = seam_token(fork, self.index, self.tokenizer, token)
        if first == token or not node.matcher.fork().try_advance(first):
            return None
        return first

    def _open(self, node: _Node) -> _Node:
        """Open `node` and the run of forced tokens after it, in one forward pass; the last
        node of that run."""
        assert node.matcher is not None
        chain = forced_token_ids(
            node.matcher.fork(),
            self.index,
            self.tokenizer,
            self.max_tokens - len(node.path),
            heal=self.heal,
        )
        path = (*node.path, *chain)
        rows = self._cursor.start(chain) if not node.path else self._cursor.rows(path, len(chain))
        for row, token in zip(rows, chain, strict=False):
            lp = self._fill(node, row, only=token)
            node = self._child(node, token, float(lp[token]))
            if node.leaf:
                return node
        self._fill(node, rows[-1])
        return node

    def _push(self, node: _Node) -> None:
        """Queue the node's next candidate not yet taken (one entry a node at a time)."""
        cands = node.cands or []
        while node.next < len(cands) and cands[node.next][1] in node.kids:
            node.next += 1
        if node.next < len(cands):
            bound = node.score + cands[node.next][0]
            if self.best is None or bound > self.best.score:
                heapq.heappush(self._heap, (-bound, next(self._order), node))

    def prefix_logprob(self, tokens: Sequence[int]) -> float:
        """log p(tokens) of a path the search visited (its end token not counted)."""
        node = self.root
        for token in tokens:
            node = node.kids[token]
        return node.score

    # ------------------------------------------------------------------ the search

    def _cost(self) -> float:
        """The work done so far, in tokens: a forward pass costs `PASS_COST` tokens besides
        the tokens it feeds (a search feeds fewer tokens a pass than greedy's forced runs)."""
        return PASS_COST * self._cursor.passes + self._cursor.tokens

    def run(self, budget: float | None = None) -> BestResult:
        """The dive, then best first until proven or `budget` more work (`_cost`; None:
        `BUDGET` times the dive's, under twice greedy's time in all)."""
        cursor = self._cursor
        node = self._open(self.root)
        runaway = ""
        while not node.leaf:  # the greedy dive
            period = runaway_period(node.path)
            if period or not node.cands:  # a value ran away, or max_tokens left no end
                if period:
                    runaway = self.index.decode_bytes(list(node.path[-period:])).decode(
                        "utf-8", errors="replace"
                    )
                break
            logp, token = node.cands[0]
            merged = self._merged(node, token)  # as the masked turn feeds it (`respell`)
            if merged is not None:
                token, logp = merged, float(self._lp[merged])
            kid = self._child(node, token, logp)
            node = kid if kid.leaf else self._open(kid)
        dive = node
        greedy_passes, spent = cursor.passes, self._cost()
        limit = spent + (BUDGET * spent if budget is None else budget)
        heap = self._heap
        proven = True
        while heap:
            neg, _, node = heap[0]
            if self.best is not None and -neg <= self.best.score:
                break
            if self._cost() >= limit:
                proven = False
                break
            heapq.heappop(heap)
            assert node.cands is not None
            logp, token = node.cands[node.next]
            node.next += 1
            fresh = token not in node.kids  # else the dive or a forced run took it
            if fresh and self._merged(node, token) is not None:
                self._push(node)  # a split of text the tokenizer's token spells whole
                continue
            kid = self._child(node, token, logp)
            self._push(node)
            if fresh and not kid.leaf:
                self._open(kid)
        best = self.best
        greedy = dive.score if dive.leaf else -math.inf
        if best is None:
            return BestResult(
                _output(dive.path, self.eos_ids),
                -math.inf,
                greedy,
                False,
                False,
                cursor.passes,
                greedy_passes,
                runaway,
            )
        return BestResult(
            _output(best.path, self.eos_ids),
            best.score,
            greedy,
            True,
            proven,
            cursor.passes,
            greedy_passes,
        )


def _output(path: Sequence[int], eos_ids: frozenset[int]) -> tuple[int, ...]:
    return tuple(t for t in path if t not in eos_ids)


#: `sequence_logprob` feeds at most this many tokens a pass: llama.cpp computes 64 tokens or
#: more on other kernels than a turn's steps (`sdk.backends._llama_batch`), whose rounding
#: would make the same tokens score differently than they did while decoding.
SCORE_CHUNK = 32


def sequence_logprob(session: RollbackSession, tokens: Sequence[int]) -> float:
    """log p(tokens | prompt) under the session's model (the logits after each token, in
    passes of at most `SCORE_CHUNK` tokens): how benches compare two decodings' outputs."""
    if not tokens:
        return 0.0
    cursor = Cursor(session)
    ids = list(tokens)
    rows = cursor.start(ids[: SCORE_CHUNK - 1])
    for at in range(SCORE_CHUNK - 1, len(ids), SCORE_CHUNK):
        rows += cursor.rows(ids[: at + SCORE_CHUNK], len(ids[at : at + SCORE_CHUNK]))[1:]
    total = 0.0
    for row, token in zip(rows, ids, strict=False):
        total += float(np.asarray(log_softmax(row.astype(np.float64)))[token])
    return total


def _cut_repeat(tokens: list[int], gate: CallGate | None, index: TokenizerIndex) -> int:
    """Where the turn's first repeated call starts (`drop_repeated_calls`, as the masked
    turn's gate cuts it), or `len(tokens)`."""
    if gate is None or not gate.drop_repeats:
        return len(tokens)
    steer = GateRun(gate, index)
    for token in tokens:
        steer.after(index.decode_bytes([token]))
        if steer.repeat_from is not None:
            return steer.repeat_from
    return len(tokens)


def best_turn(
    session: RollbackSession,
    matcher: Matcher,
    index: TokenizerIndex,
    tokenizer: Any,
    max_tokens: int,
    *,
    heal: bool = True,
    gate: CallGate | None = None,
    on_progress: Callable[[list[int]], None] | None = None,
) -> TurnOutput:
    """A whole-reply constrained turn decoded by the search (`Agent(decoding="best")`): the
    most likely valid output found within about twice greedy's forward passes, never less
    likely than greedy's. Its log-probability is the output's `logprob`. A call that repeats
    an earlier one of the turn is cut away with what follows, as the gate cuts it in a masked
    turn (`gate.drop_repeats`); `logprob` is then the kept tokens' own."""
    t0 = time.perf_counter()
    try:
        search = BestSearch(session, matcher, index, tokenizer, max_tokens=max_tokens, heal=heal)
        found = search.run()
    finally:
        session.close()
    tokens = list(found.tokens)
    logprob = found.logprob if found.complete else None
    dropped = ""
    keep = _cut_repeat(tokens, gate, index)
    if keep < len(tokens):
        del tokens[keep:]
        logprob, dropped = search.prefix_logprob(tokens), "repeat"
    text, usage = turn_result(session, index, tokens, found.passes, t0, on_progress)
    return TurnOutput(
        text,
        tokens,
        "stop" if found.complete else "length",
        found.complete,
        usage,
        dropped=dropped,
        runaway=found.runaway,
        logprob=logprob,
    )
