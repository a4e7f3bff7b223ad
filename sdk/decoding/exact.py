"""Sampling from the model restricted to the grammar, exactly: p(y | y in L).

Masking each step and renormalizing draws from q(y) = prod_t p(y_t | y_<t) / Z_t, where Z_t
is the share of the model's mass the grammar allows at step t. That is not p(y | y in L): q
favours prefixes whose continuations the grammar allows more of, whatever the model thought of
them (the seed documents' central limit of constrained decoding).

Exact draws come from adaptive rejection, after CARS (Parys et al., 2025). A trie of the
prefixes visited keeps, for each, the model's next-token distribution and `alive`: the share
of its mass not proven to lead to no valid output (the tokens the grammar's mask rejects there
are taken off, and what its children proved). A draw walks the trie from the top choosing each
token with weight p(a | s) alive(s a), the model's mass on valid continuations as far as the
trie knows. At a prefix the trie did not know, the mask rejects a share m of its mass that the
walk did not account for. So the draw is kept with probability prod (1 - m) over those new
prefixes, and otherwise drawn again from the top, the trie now knowing them. (Shares are kept
as logarithms: a prefix's valid mass can be far below what 1 - dead resolves.) A kept draw is exactly
p(y | y in L), whatever the trie knew before. Each draw teaches the trie, so later ones are
kept more often, and prefixes already visited cost no forward pass.

An output ends where the grammar does: at the end token where the grammar may end, or where
nothing but the end token could follow (the turn stops there without sampling it, as the
masked sampler does). `max_tokens` bounds the outputs considered. In a one-call turn, the end
token may also stand for the call's closer where only the closer is left (`open_end`): a model
that ends its turn right after the call's JSON gives the closer almost nothing, the same for
every call, and each new call drawn was rejected at its very end.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from sdk.decoding._search import Cursor, turn_result, valid_tokens
from sdk.decoding.generate import TurnOutput, forced_token_ids
from sdk.engine.logits import host, log_softmax, logsumexp
from sdk.errors import ConfigError, UnexpectedModelBehavior

if TYPE_CHECKING:
    from collections.abc import Callable

    from sdk.decoding.generate import RollbackSession, SamplingConfig
    from sdk.engine.matcher import Matcher
    from sdk.engine.tokenizer import TokenizerIndex

__all__ = ["ExactDraw", "ExactSampler", "exact_turn"]


@dataclass(frozen=True)
class ExactDraw:
    """One output: its tokens, the attempts it took (1: the first was kept) and the forward
    passes the sampler ran for it."""

    tokens: tuple[int, ...]
    attempts: int
    passes: int


@dataclass(eq=False)
class _Node:
    path: tuple[int, ...]
    matcher: Matcher | None  # None at a leaf
    leaf: bool = False  # a complete output: nothing to choose here
    # The tokens the grammar allows here (ascending) and the model's tempered
    # log-probabilities of them: a walk's work is over these, not the vocabulary (a full row
    # per node cost a millisecond a step and 0.4-2 MB a node)
    ids: np.ndarray | None = None
    logp: np.ndarray | None = None
    log_kept: float = 0.0  # log of the mass the mask allows here
    # log of the mass not proven to lead nowhere valid (the mask's rejections and what the
    # children proved taken off): logs, as that mass can be far below float precision of 1
    log_alive: float = 0.0
    kids: dict[int, _Node] = field(default_factory=dict)
    # where the end token also ends the output, the call's closer implied (`open_end`): the
    # closer's tokens, written in its place
    implied: list[int] | None = None

    @property
    def opened(self) -> bool:
        return self.leaf or self.logp is not None


def _log_softmax(logits: Any, temperature: float) -> np.ndarray:
    """The tempered next-token log-probabilities as a float64 NumPy row."""
    return np.asarray(log_softmax(host(logits).astype(np.float64) / temperature))


class ExactSampler:
    """Exact draws from p(y | y in L) over one session (see the module's doc).

    Args:
        session: The turn's session, not yet prefilled; it must roll back (`rollback`).
        matcher: The grammar's matcher at the output's start (not moved: forks are).
        eos_ids: The model's end tokens.
        temperature: The model's distribution is p^(1/T), renormalized (T > 0).
        rng: The random source.
        max_tokens: Outputs longer than this are not considered.
        forced: `(index, tokenizer)`: where a new prefix is opened, the forced text after it,
            as the masked turn spells it (healed where `heal`), is opened in the same
            forward pass (the logits after each token). Draws stay exact over every
            spelling; a walk that follows that spelling costs no more passes. None: one
            pass a new prefix.
        heal: With `forced`: the run ends where the model's own tokens would.
        open_end: With `forced`, a call format's closer (`</tool_call>`): where nothing but it
            (after whitespace) is left before the output must end, the end token also ends
            the output, the closer written in its place. The outputs are those of the
            grammar and those that leave that closer out; both parse to the same calls.
            (Qwen2.5-Coder-0.5B ends its turn after a call's JSON, giving the closer about
            e^-23: each new call drawn was rejected at its very end.)
    """

    def __init__(
        self,
        session: RollbackSession,
        matcher: Matcher,
        eos_ids: frozenset[int],
        *,
        temperature: float = 1.0,
        rng: np.random.Generator | None = None,
        max_tokens: int = 256,
        forced: tuple[TokenizerIndex, Any] | None = None,
        heal: bool = True,
        open_end: str | None = None,
    ) -> None:
        if temperature <= 0:
            raise ConfigError("exact sampling needs temperature > 0 (greedy has no distribution)")
        self.temperature = temperature
        self.rng = rng if rng is not None else np.random.default_rng()
        self.max_tokens = max_tokens
        self.eos_ids = eos_ids
        self.forced = forced
        self.heal = heal
        self.open_end = open_end.encode() if open_end and forced is not None else None
        self._cursor = Cursor(session)
        self.root = _Node((), matcher.fork())
        self._open(self.root)

    @property
    def forward_passes(self) -> int:
        return self._cursor.passes

    # ------------------------------------------------------------------ the trie

    def _open(self, node: _Node) -> float:
        """The model's distribution and the grammar's mask at `node`, and at each node of the
        forced run after it (`forced`), in one forward pass; `node`'s `log_alive` after
        that, which is what the walk that opened it must be kept by: the mass it counted as
        alive, less what the masks along the run proved dead."""
        assert node.matcher is not None
        chain: list[int] = []
        if self.forced is not None:
            index, tokenizer = self.forced
            budget = self.max_tokens - len(node.path)
            chain = forced_token_ids(node.matcher.fork(), index, tokenizer, budget, heal=self.heal)
        cursor = self._cursor
        if cursor.root is None:
            rows = cursor.start(chain)
        else:
            rows = cursor.rows((*node.path, *chain), len(chain))
        run = [node]
        self._fill(node, rows[0])
        for row, token in zip(rows[1:], chain, strict=False):
            run.append(self._child(run[-1], token))
            if run[-1].leaf:
                break
            self._fill(run[-1], row)
        self._settle(run)
        return node.log_alive

    def _fill(self, node: _Node, row: Any) -> None:
        """`node`'s distribution from the logits after it, and its mask."""
        assert node.matcher is not None
        logp = _log_softmax(row, self.temperature)
        at_limit = len(node.path) >= self.max_tokens
        allowed = valid_tokens(node.matcher, logp.shape[0], self.eos_ids, at_limit)
        node.implied = self._implied(node)
        if node.implied is not None:
            allowed[[i for i in self.eos_ids if i < len(allowed)]] = True
        node.ids = np.flatnonzero(allowed)
        node.logp = logp[node.ids]
        node.log_kept = node.log_alive = logsumexp(node.logp)

    def _implied(self, node: _Node) -> list[int] | None:
        """The closer's tokens where the end token may stand for them at `node` (`open_end`:
        nothing but the closer left before the output must end); else None."""
        if self.open_end is None or node.matcher is None:
            return None
        rest = node.matcher.forced_bytes()
        if rest.lstrip() != self.open_end:
            return None
        assert self.forced is not None  # (`open_end` is set only with it)
        index, tokenizer = self.forced
        fork = node.matcher.fork()
        budget = self.max_tokens - len(node.path)
        chain = forced_token_ids(fork, index, tokenizer, budget, heal=False)
        # only where the output must end after it: where another call may follow (parallel
        # calls), the model's end token after a call's JSON is not its last call (see
        # docs/concepts/faithful-sampling.md)
        if index.decode_bytes(chain) != rest or not fork.is_terminated():
            return None
        return chain

    def output(self, path: tuple[int, ...]) -> tuple[int, ...]:
        """A drawn path as the output's tokens: an end token that stood for the closer
        (`open_end`) is preceded by the closer's tokens."""
        if not path or path[-1] not in self.eos_ids:
            return path
        node = self.root
        for token in path[:-1]:
            node = node.kids[token]
        if node.implied is None:  # (set only where forced text is left: not accepting)
            return path
        return (*path[:-1], *node.implied, path[-1])

    def _child(self, node: _Node, token: int) -> _Node:
        kid = node.kids.get(token)
        if kid is not None:
            return kid
        path = (*node.path, token)
        if token in self.eos_ids:
            kid = _Node(path, None, leaf=True)
        else:
            assert node.matcher is not None
            fork = node.matcher.fork()
            fork.advance(token)
            kid = _Node(path, fork, leaf=fork.is_terminated())
            if kid.leaf:
                kid.matcher = None
        node.kids[token] = kid
        return kid

    @staticmethod
    def _log_weights(node: _Node, *, exact: bool) -> np.ndarray:
        """The log weight of each of `node.ids`: its log-probability, plus (`exact`) its
        child's `log_alive` where the child was visited."""
        assert node.logp is not None and node.ids is not None
        if not exact or not node.kids:
            return node.logp
        w = node.logp.copy()
        ids = node.ids
        for token, kid in node.kids.items():
            at = int(np.searchsorted(ids, token))
            if at < len(ids) and ids[at] == token:  # (every kid is: picks and forced runs)
                w[at] += kid.log_alive
        return w

    def _pick(self, node: _Node, log_weights: np.ndarray) -> int:
        """A token of `node.ids` drawn with the weights' share."""
        top = float(np.max(log_weights)) if len(log_weights) else -math.inf
        if top == -math.inf:
            raise UnexpectedModelBehavior("no valid output has any probability under the model")
        cdf = np.cumsum(np.exp(log_weights - top))
        pick = int(np.searchsorted(cdf, self.rng.random() * cdf[-1], side="right"))
        assert node.ids is not None
        return int(node.ids[min(pick, len(cdf) - 1)])

    def _settle(self, nodes: list[_Node]) -> None:
        """Recompute `log_alive` up the path just walked (children first)."""
        for node in reversed(nodes):
            if not node.leaf and node.logp is not None:
                node.log_alive = logsumexp(self._log_weights(node, exact=True))

    # ------------------------------------------------------------------ draws

    def draw(self, max_attempts: int = 10_000, max_passes: int | None = None) -> ExactDraw:
        """One exact draw from p(y | y in L) (`UnexpectedModelBehavior` where none was kept
        within `max_attempts`, or `max_passes` forward passes)."""
        passes = self._cursor.passes
        for attempt in range(1, max_attempts + 1):
            if max_passes is not None and self._cursor.passes - passes > max_passes:
                raise UnexpectedModelBehavior(
                    f"no exact draw was kept in {max_passes} forward passes ({attempt - 1} "
                    "attempts): the model puts little mass on valid outputs here; "
                    "decoding='masked' does not reject"
                )
            # The draw is kept where log u < log(prod (1 - m)); the product only falls along
            # the walk, so u is drawn first and a doomed walk stops where it falls below it:
            # the same decision, without the forward passes of the rest of the walk.
            log_u = math.log(1.0 - self.rng.random())  # u in (0, 1]
            node, walked, log_keep = self.root, [self.root], 0.0
            while not node.leaf and log_keep > log_u:
                node = self._child(node, self._pick(node, self._log_weights(node, exact=True)))
                walked.append(node)
                if not node.opened:  # the walk counted the node's whole mass as alive
                    log_keep += self._open(node)
            self._settle(walked)
            if node.leaf and log_keep > log_u:
                return ExactDraw(self.output(node.path), attempt, self._cursor.passes - passes)
        raise UnexpectedModelBehavior(
            f"no draw was kept in {max_attempts} attempts (valid outputs have too little mass)"
        )

    def masked_draw(self) -> ExactDraw:
        """One draw of the usual masked sampler (each step renormalized over the allowed
        tokens), on the same trie: the baseline `draw` corrects."""
        passes = self._cursor.passes
        node = self.root
        while not node.leaf:
            node = self._child(node, self._pick(node, self._log_weights(node, exact=False)))
            if not node.opened:
                self._open(node)
        return ExactDraw(node.path, 1, self._cursor.passes - passes)

    # ------------------------------------------------------------------ enumeration

    def enumerate(self, floor: float = 1e-9) -> tuple[dict[tuple[int, ...], float], float]:
        """Every output (a token path) with p(y) under the model (not normalized), skipping
        prefixes whose probability is below `floor` (0: none), and the mass of what was
        skipped (an upper bound on what is missing). Opens every prefix on the way: for small
        grammars (a few hundred outputs)."""
        found: dict[tuple[int, ...], float] = {}
        cut = 0.0
        least = math.log(floor) if floor > 0 else -math.inf
        for path, mass, complete in self._walk(self.root, 0.0, least):
            if complete:
                found[path] = mass
            else:
                cut += mass
        return found, cut

    def _walk(
        self, node: _Node, logmass: float, least: float
    ) -> Iterator[tuple[tuple[int, ...], float, bool]]:
        if node.leaf:
            yield node.path, math.exp(logmass), True
            return
        if not node.opened:
            self._open(node)
        assert node.logp is not None and node.ids is not None
        for token, logp in zip(node.ids.tolist(), node.logp.tolist(), strict=True):
            lm = logmass + logp
            if lm < least:
                yield (*node.path, token), math.exp(lm), False
                continue
            yield from self._walk(self._child(node, token), lm, least)


def exact_turn(
    session: RollbackSession,
    matcher: Matcher,
    index: TokenizerIndex,
    max_tokens: int,
    sampling: SamplingConfig,
    on_progress: Callable[[list[int]], None] | None = None,
    *,
    tokenizer: Any = None,
    heal: bool = True,
    open_end: str | None = None,
) -> TurnOutput:
    """A whole-reply constrained turn drawn exactly (`Agent(decoding="exact")`): its output
    never runs past `max_tokens` (longer outputs are not drawn), so it always ends where the
    grammar does. With `tokenizer`, forced text is opened with the prefix before it, in one
    forward pass (`ExactSampler`'s `forced`), and a call's closer (`open_end`) may be left to
    the end token."""
    t0 = time.perf_counter()
    try:
        sampler = ExactSampler(
            session,
            matcher,
            index.eos_ids,
            temperature=sampling.temperature,
            rng=np.random.default_rng(sampling.seed),
            max_tokens=max_tokens,
            forced=(index, tokenizer) if tokenizer is not None else None,
            heal=heal,
            open_end=open_end,
        )
        drawn = sampler.draw(max_passes=16 * max_tokens + 64)
    finally:
        session.close()
    tokens = [t for t in drawn.tokens if t not in index.eos_ids]
    text, usage = turn_result(
        session,
        index,
        tokens,
        sampler.forward_passes,
        t0,
        on_progress,
        exact_attempts=drawn.attempts,
    )
    return TurnOutput(text, tokens, "stop", True, usage)
