"""The decoding loop, independent of where logits come from.

A backend opens a `DecodeSession` for one assistant turn (prompt already rendered); the loop
asks it for logits, masks them with the turn's `Matcher` (EOS only where the output is
complete), picks a token, and feeds it back. **Fast-forward**: after each token, the bytes
every valid continuation must start with (`Matcher.forced_bytes`) are tokenized and appended
without sampling, all fed to the model in ONE forward pass: a tool call's envelope and key
names cost one pass instead of one per token.

The scripted test models implement the same session protocol (their "logits" pick the
scripted token), so tests exercise exactly this loop and the real grammar.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

from sdk.decoding._alignment import (
    give_back_extendable,
    respell,
    spell_as_tokenizer,
    utf8_prefix,
)
from sdk.decoding._gate import LOOK, PROBE, CallGate, GateRun
from sdk.decoding._retreat import DEAD_SHARE, Retreat
from sdk.decoding.formats import HERMES, ParsedCall, ToolCallFormat
from sdk.engine.logits import (
    Logits,
    Rng,
    all_neginf,
    as_float,
    choose,
    copy,
    log_softmax,
    logsumexp,
    neginf,
)
from sdk.errors import MatcherError, TurnCancelled, UnexpectedModelBehavior
from sdk.result import Usage

if TYPE_CHECKING:
    from sdk.decoding.turn_grammar import ToolSpec
    from sdk.engine.matcher import Matcher
    from sdk.engine.tokenizer import TokenizerIndex
    from sdk.messages import Message

_log = logging.getLogger("sdk.decoding")

__all__ = [
    "RUNAWAY_TOKENS",
    "TEXT_RUNAWAY_TOKENS",
    "DecodeSession",
    "RollbackSession",
    "SamplingConfig",
    "TurnCancelled",
    "TurnOutput",
    "TurnRequest",
    "generate_turn",
    "runaway_period",
    "text_runaway_period",
]


@dataclass(frozen=True)
class TurnRequest:
    """Everything a backend needs to render the prompt of one assistant turn."""

    messages: Sequence[Message]
    tools: Sequence[ToolSpec]  # tools offered (and rendered) this turn; empty for "none"
    tool_choice: str = "auto"
    output_schema: Mapping[str, Any] | None = None
    fmt: ToolCallFormat = HERMES


class DecodeSession(Protocol):
    """One turn's incremental forward passes over a fixed prompt (KV cache inside)."""

    @property
    def prompt_ids(self) -> Sequence[int]: ...

    @property
    def cached_tokens(self) -> int:
        """Prompt tokens reused from an earlier turn's KV cache."""
        ...

    def prefill(self) -> Logits:
        """Run the prompt; logits (1-D, vocab) for the first generated token.

        A session may also have `prefill_with(ids)`: the prompt and then `ids` in one forward
        pass (the turn's forced start), logits for the token after them. Without it the turn
        calls `prefill()` and then `feed(ids)`."""
        ...

    def feed(self, ids: Sequence[int]) -> Logits:
        """Append `ids` (one forward pass); logits for the token after them."""
        ...

    def close(self) -> None: ...


class RollbackSession(DecodeSession, Protocol):
    """A session that can forget its last tokens (KV cache cut back): what the call probe
    and the cut-back of a repeated or truncated call need (checked with `hasattr`)."""

    def rollback(self, n: int) -> None: ...


@dataclass(frozen=True)
class SamplingConfig:
    """Greedy when `temperature == 0`; otherwise seeded sampling with optional nucleus.
    `decoding="exact"`: whole-reply constrained turns are drawn from p(y | y in L)
    (`sdk.decoding.exact`), not masked step by step; `"best"`: they are the most likely
    valid output a search finds (`sdk.decoding.best`)."""

    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    decoding: Literal["masked", "exact", "best"] = "masked"


@dataclass
class TurnOutput:
    """One generated turn: text, ids, why it stopped, and whether the grammar was complete."""

    text: str
    token_ids: list[int]
    finish_reason: str  # "stop" | "length"
    accepting: bool  # the matcher accepted the output (always True without a grammar)
    usage: Usage = field(default_factory=Usage)
    # Calls a remote backend returned already split (native `tool_calls`); None: parse `text`.
    calls: list[ParsedCall] | None = None
    # A call cut off the end of the turn: "repeat" (it repeated an earlier one) or "truncated"
    # (max_tokens ran out inside it; the complete calls before it are the turn).
    dropped: str = ""
    # The prompt opened the format's reasoning span (R1's `<think>\n`): the text starts in it.
    reasoning_opened: bool = False
    # A value ran away: the unit (text) its last `RUNAWAY_TOKENS` tokens repeated; the turn
    # stopped there ("length", as if max_tokens had cut it). "" otherwise.
    runaway: str = ""
    # The output's log-probability under the model, where the decoding computed it
    # (`decoding="best"`); None otherwise.
    logprob: float | None = None


#: A constrained value whose last this many tokens are one unit of at most `RUNAWAY_PERIOD`
#: tokens, over and over, has run away: greedy decoding has entered a cycle it does not leave
#: (Qwen2.5-Coder-0.5B: `"40 * 1000 / 1000000000...` until `max_tokens`, on every retry). The
#: turn stops there instead of spending the rest of `max_tokens` on it.
RUNAWAY_TOKENS = 64
RUNAWAY_PERIOD = 4
#: Free text (an answer, the text around calls) has run away where its last tokens are
#: `TEXT_RUNAWAY_COPIES` copies or more of one unit of at most `TEXT_RUNAWAY_PERIOD` tokens,
#: `TEXT_RUNAWAY_TOKENS` tokens at least: one phrase or line over and over, token for token,
#: which prose, lists and tables do not write (their numbers and words change) and a small
#: model stuck in a cycle does (SmolLM2-135M: `&qid=A-100` until `max_tokens`, 25 s of an
#: answer; Qwen2.5-Coder-0.5B: one 20-token call as a line of text, 500 tokens and 35 s). The
#: turn stops there, a "length" finish.
TEXT_RUNAWAY_TOKENS = 128
TEXT_RUNAWAY_COPIES = 8
TEXT_RUNAWAY_PERIOD = 64


def runaway_period(out: Sequence[int]) -> int:
    """The period of `out`'s last `RUNAWAY_TOKENS` tokens when they repeat one unit of at most
    `RUNAWAY_PERIOD` tokens; 0 when they do not."""
    if len(out) < RUNAWAY_TOKENS:
        return 0
    tail = list(out[-RUNAWAY_TOKENS:])
    for p in range(1, RUNAWAY_PERIOD + 1):
        if tail[p:] == tail[:-p]:
            return p
    return 0


def text_runaway_period(out: Sequence[int]) -> int:
    """The period of the unit free text's last tokens repeat where it ran away (see
    `TEXT_RUNAWAY_TOKENS`); 0 where it did not."""
    n = len(out)
    if n < TEXT_RUNAWAY_TOKENS:
        return 0
    last = out[-1]
    for p in range(1, min(TEXT_RUNAWAY_PERIOD, n // TEXT_RUNAWAY_COPIES) + 1):
        if out[-1 - p] != last:
            continue
        span = max(TEXT_RUNAWAY_TOKENS, TEXT_RUNAWAY_COPIES * p)
        if span <= n and out[n - span + p :] == out[n - span : n - p]:
            return p
    return 0


def forced_token_ids(
    matcher: Matcher,
    index: TokenizerIndex,
    tokenizer: Any,
    budget: int,
    *,
    heal: bool = True,
    committed: bytes = b"",
    extend: bool = True,
) -> list[int]:
    """Tokenize the matcher's forced bytes and advance through them (at most `budget` tokens).

    Keeps only the prefix whose tokens spell forced bytes exactly and that the matcher accepts,
    so the appended tokens are always ones the model could have sampled. With `heal`, trailing
    tokens that an allowed token could run past are given back to the model
    (`_alignment.give_back_extendable`): forced text ends where the model's own tokens would.
    `committed`: bytes the caller decided must come next (the rest of a call opener), forced
    together with whatever the grammar forces after them (`extend=False`: only them).
    """
    if committed and extend:
        probe = matcher.fork()
        try:
            probe.advance_bytes(committed)
        except MatcherError:
            committed = b""
        else:
            committed += probe.forced_bytes()
    forced = committed or matcher.forced_bytes()
    if not forced or budget <= 0:
        return []
    text = utf8_prefix(forced)
    if not text:
        return []
    ids = tokenizer.encode(text, add_special_tokens=False)
    taken: list[int] = []
    pos = 0
    tb = index.token_bytes
    for tid in ids:
        if len(taken) >= budget:
            break
        piece = tb[tid] if 0 <= tid < len(tb) else b""
        if not piece or forced[pos : pos + len(piece)] != piece:
            break
        if not matcher.try_advance(tid):
            break
        taken.append(tid)
        pos += len(piece)
    if heal:
        del taken[give_back_extendable(matcher, index, taken) :]
    return taken


def _choose(logits: Logits, cfg: SamplingConfig, generator: Rng | None) -> int:
    return choose(logits, cfg.temperature, cfg.top_p, generator)


def generate_turn(
    session: DecodeSession,
    matcher: Matcher | None,
    index: TokenizerIndex,
    tokenizer: Any,
    *,
    max_tokens: int,
    sampling: SamplingConfig = SamplingConfig(),  # noqa: B008 - frozen dataclass
    fast_forward: bool = True,
    gate: CallGate | None = None,
    heal: bool = True,
    on_progress: Callable[[list[int]], None] | None = None,
    cancel: threading.Event | None = None,
    runaways: Literal["reply", "calls"] | None = None,
    dead_ends: bool = False,
) -> TurnOutput:
    """Generate one turn. Raises `UnexpectedModelBehavior` if the grammar leaves no token the
    model may pick (only scripted test models can get there: a real model's full distribution
    always meets a non-empty mask).

    `gate` steers call boundaries (the "auto" call decision, a reasoning budget): see
    `sdk.decoding._gate`. `heal`: forced runs end where the model's own tokens would
    (`forced_token_ids`). `on_progress`: called with the turn's token ids after every step (a
    streamed run's events; shorter than before when a repeated call was cut away).
    `cancel`: once set, the turn stops before its next forward pass (`TurnCancelled`).
    `runaways`: where a value that ran away (`runaway_period`) stops the turn: anywhere in
    the reply ("reply": it is all calls or a typed output), inside calls ("calls": the gate
    tells where they are), or nowhere (None: free text).
    `dead_ends`: the reply's text outside calls is free text (an answer, not a typed value):
    where the mask leads it into a dead end, it backs out (`_retreat`).
    `finish_reason` is "length" when `max_tokens` ran out; the caller
    decides whether the cut fell inside a value (the agent raises `TruncationError` then, even
    when the cut happens to leave text the grammar accepts).
    """
    usage = Usage(prompt_tokens=len(session.prompt_ids))
    turn = _Turn(
        session,
        matcher,
        index,
        tokenizer,
        max_tokens,
        sampling,
        fast_forward,
        heal,
        on_progress,
        runaways,
        _generator(sampling),
        GateRun(gate, index) if gate is not None and matcher is not None else None,
        usage,
        Retreat(index) if dead_ends else None,
    )
    t_start = time.perf_counter()
    try:
        logits = turn.start()
        if logits is not None:
            turn.decode(logits, cancel)
        turn.keep_complete_calls()
    finally:
        session.close()
    return turn.output(t_start)


def _generator(sampling: SamplingConfig) -> Rng | None:
    """The seeded random source of a sampled turn; None when it decodes greedily."""
    return None if sampling.temperature <= 0 else Rng(sampling.seed)


@dataclass(eq=False, slots=True)
class _Turn:
    """One turn's decoding state: its inputs, the tokens so far and why it stopped.

    `generate_turn` runs `start` (the prompt and the forced start), `decode` (the token loop),
    `keep_complete_calls` (a call `max_tokens` cut) and `output`, in that order."""

    session: DecodeSession
    matcher: Matcher | None
    index: TokenizerIndex
    tokenizer: Any
    max_tokens: int
    sampling: SamplingConfig
    fast_forward: bool
    heal: bool
    on_progress: Callable[[list[int]], None] | None
    runaways: Literal["reply", "calls"] | None
    generator: Rng | None
    steer: GateRun | None
    usage: Usage
    retreat: Retreat | None  # free text's dead ends (`_retreat`); None: all of it is a value
    out: list[int] = field(default_factory=list)
    feed: list[int] = field(default_factory=list)  # the last step's tokens (maybe not fed)
    finish: str = "length"
    dropped: str = ""  # what was cut off the end: "repeat" (a repeated call), "truncated"
    runaway: str = ""
    mask_time: float = 0.0
    resume: Logits | None = None  # the logits to go on from after backing out of a dead end

    def start(self) -> Logits | None:
        """Run the prompt and the turn's forced start; the logits after them, None when the
        start completed the turn.

        What the turn must start with (a required call's opener) is forced as the tokenizer
        encodes it: left to sample, a model may spell it in pieces it was never trained on.
        It goes in with the prompt: one forward pass fewer."""
        matcher, usage = self.matcher, self.usage
        start: list[int] = []
        if matcher is not None and self.fast_forward:
            t0 = time.perf_counter()
            start = forced_token_ids(
                matcher, self.index, self.tokenizer, self.max_tokens, heal=self.heal
            )
            self.mask_time += time.perf_counter() - t0
        logits, passes = _prefill(self.session, start)
        usage.cached_prompt_tokens = self.session.cached_tokens
        usage.forward_passes += passes
        if start:
            usage.forced_tokens += len(start)
            self.out += start
            if self.steer is not None:
                self.steer.after(self.index.decode_bytes(start), len(start))
            if self.on_progress is not None:
                self.on_progress(self.out)
            if matcher is not None and matcher.is_terminated():
                self.finish = "stop"
                return None
        return logits

    def decode(self, logits: Logits, cancel: threading.Event | None) -> None:
        """The token loop: mask, pick (or force), extend, feed, until EOS, `max_tokens`, a
        stop `_extend` finds or `cancel` (`TurnCancelled`)."""
        matcher, session, index, out = self.matcher, self.session, self.index, self.out
        tokenizer, usage, heal = self.tokenizer, self.usage, self.heal
        sampling, generator, eos = self.sampling, self.generator, index.eos_ids
        max_tokens, fast_forward = self.max_tokens, self.fast_forward
        while len(out) < max_tokens:
            logits = as_float(logits)
            feed: list[int] = []
            preset: int | None = None  # a token already chosen (by the call probe)
            retreat = self._free_text()
            total: float | None = None  # the model's own mass, where a collapse is watched for
            if retreat is not None:
                retreat.at_step(logits, len(out), matcher, self.steer)
                if matcher is not None and self.steer is None and self._can_back_out(retreat):
                    total = logsumexp(logits)  # an answer turn (no calls: `_retreat`)
            t0 = time.perf_counter()
            if matcher is not None:
                feed, preset = self._constrain(matcher, logits)
                if not feed and all_neginf(logits):
                    raise _rejected(index, out, "the grammar allows none of the model's tokens")
            self.mask_time += time.perf_counter() - t0
            dead = (
                total is not None
                and not feed
                and preset is None
                and logsumexp(logits) - total < DEAD_SHARE
            )
            if retreat is not None and not feed and preset is None:
                retreat.ban(logits)
                if all_neginf(logits):  # every way on was a dead end
                    self.runaway = " "
                    return
            if not feed:
                tid = _choose(logits, sampling, generator) if preset is None else preset
                if (
                    dead
                    and retreat is not None
                    and tid not in eos  # (no gate here: no call can open)
                    and self._back_out(retreat, unfed=0, why="the mask left it almost nothing")
                ):  # more text of next to no mass: back out (an end or a call is no dead end)
                    logits, self.resume = cast("Logits", self.resume), None
                    continue
                if retreat is not None:
                    retreat.chose(tid)
                if tid in eos:
                    if matcher is not None:
                        matcher.advance(tid)
                    self.finish = "stop"
                    return
                t0 = time.perf_counter()
                feed = [tid]
                if matcher is not None:
                    matcher.advance(tid)
                    if fast_forward:
                        forced = forced_token_ids(
                            matcher, index, tokenizer, max_tokens - len(out) - 1, heal=heal
                        )
                        feed += forced
                        if heal and forced:
                            feed = respell(matcher, index, tokenizer, feed)
                        usage.forced_tokens += len(feed) - 1
                self.mask_time += time.perf_counter() - t0
            if self._extend(feed):
                return
            if self.resume is not None:  # backed out of a dead end: on from its origin
                logits, self.resume = self.resume, None
                continue
            if cancel is not None and cancel.is_set():
                raise TurnCancelled("the run was cancelled")
            logits = session.feed(feed)
            usage.forward_passes += 1

    def _free_text(self) -> Retreat | None:
        """The dead-end watch where the turn is in free text now (None inside a call, whose
        free text after it starts afresh, in reasoning, free by design, or where all of the
        reply is a value)."""
        retreat, steer = self.retreat, self.steer
        if retreat is not None and steer is not None and (steer.in_call or steer.thinking):
            retreat.reset()
            return None
        return retreat

    def _can_back_out(self, retreat: Retreat) -> bool:
        return retreat.can_back(len(self.out)) and hasattr(self.session, "rollback")

    def _dead_end(self, retreat: Retreat) -> bool:
        """Free text wrote `BLANK_RUN` blanks in a row: back out of it (`_back_out`); True
        when the turn stops there instead."""
        if self._can_back_out(retreat):
            self._back_out(retreat, unfed=len(self.feed), why="it ran into blanks")
            return False
        self.runaway = self.index.decode_bytes(self.out[-1:]).decode("utf-8", errors="replace")
        return True  # finish stays "length": cut where it stopped making progress

    def _back_out(self, retreat: Retreat, *, unfed: int, why: str) -> bool:
        """Go back to where the free text began, the token it began with banned there
        (`_retreat`); `self.resume` holds the logits to go on from. `unfed`: the last tokens
        of `out` the session has not seen yet."""
        out, session, matcher = self.out, self.session, self.matcher
        origin = retreat.back(out)
        if origin is None:
            return False
        cast("RollbackSession", session).rollback(len(out) - unfed - origin.n_out)
        if matcher is not None:
            matcher.rollback(len(matcher.tokens) - origin.n_matcher)
        _log.info(
            "free text %r: %s; backed out, %r banned where it began",
            self.index.decode_bytes(out[origin.n_out :][-16:]),
            why,
            self.index.decode_bytes(out[origin.n_out : origin.n_out + 1]),
        )
        del out[origin.n_out :]
        self.usage.dead_ends += 1
        self.resume, self.steer = retreat.restore(origin)
        if self.on_progress is not None:
            self.on_progress(out)
        return True

    def _constrain(self, matcher: Matcher, logits: Logits) -> tuple[list[int], int | None]:
        """Mask `logits` with the grammar, and let the gate steer them. The tokens to force
        (a call opener the gate decided on) and the token the call probe chose, if any."""
        steer = self.steer
        raw = copy(logits) if steer is not None and steer.wants_raw() else None
        try:
            matcher.apply_to_logits(logits)
        except MatcherError as exc:  # dead state: cannot happen with a sound grammar
            raise _rejected(self.index, self.out, str(exc)) from exc
        if self.heal:
            spell_as_tokenizer(matcher, self.index, self.tokenizer, logits)
        feed: list[int] = []
        preset: int | None = None
        if steer is not None:
            opener = steer.steer(logits, raw)
            if opener == LOOK:
                opener = steer.looked(logits, self._look(steer.look_id))
            if opener == PROBE:
                opener, preset = self._probe(matcher, steer, logits)
            if opener:
                feed = forced_token_ids(
                    matcher,
                    self.index,
                    self.tokenizer,
                    self.max_tokens - len(self.out),
                    heal=self.heal,
                    committed=opener,
                )
                if not feed:  # cannot be forced as tokens: let the model spell it
                    steer.only_opener(logits)
        self.usage.forced_tokens += len(feed)
        return feed, preset

    def _look(self, token: int) -> Logits | None:
        """The model's next-token logits after `token` (the gate's `LOOK`: a start a typed
        output and an untagged call share), the session rolled back after them; None where
        it cannot roll back."""
        if token < 0 or not hasattr(self.session, "rollback"):
            return None
        t0 = time.perf_counter()
        after = as_float(self.session.feed([token]))
        cast("RollbackSession", self.session).rollback(1)
        self.usage.forward_passes += 1
        self.mask_time -= time.perf_counter() - t0  # a forward pass, not mask time
        return after

    def _probe(self, matcher: Matcher, steer: GateRun, logits: Logits) -> tuple[bytes, int | None]:
        """The gate asked for the call probe (`_probe_call`): the opener to force (b"" for
        none) and, where the probe's start of a call is kept, the token it chose."""
        t_probe = time.perf_counter()
        probe = _probe_call(
            self.session,
            matcher,
            self.index,
            self.tokenizer,
            steer.name_prefix,
            self.sampling,
            self.generator,
            self.max_tokens - len(self.out),
            PROBE_NAME_TOKENS if steer.gate.whole_name else 0,
        )
        self.usage.forward_passes += 1 + len(probe.fed) - probe.forced if probe else 0
        self.mask_time -= time.perf_counter() - t_probe  # a forward pass, not mask time
        if steer.settle(logits, probe.fit if probe else None):
            if probe is None:
                return steer.opener, None
            # the probe's tokens are the call's start: keep them
            for x in probe.fed:
                matcher.advance(x)
            self.out += probe.fed
            self.usage.forced_tokens += probe.forced
            steer.after(self.index.decode_bytes(probe.fed), len(probe.fed))
            return b"", probe.last
        if probe is not None:
            cast("RollbackSession", self.session).rollback(len(probe.fed))
        return b"", None

    def _extend(self, feed: list[int]) -> bool:
        """Append a step's tokens to the turn; True when the turn stops there (a repeated
        call cut away, a runaway value, the grammar's end, `max_tokens`)."""
        out, steer, matcher = self.out, self.steer, self.matcher
        self.feed = feed
        out += feed
        if steer is not None:
            steer.after(self.index.decode_bytes(feed), len(feed))
            if steer.repeat_from is not None and matcher is not None:
                _cut_back(self.session, matcher, out, steer.repeat_from, len(feed))
                self.dropped, self.finish = "repeat", "stop"
                self.usage.repeated_calls += 1
        if self.on_progress is not None:
            self.on_progress(out)
        if self.dropped:
            return True
        retreat = self._free_text()
        if retreat is not None and retreat.blank(feed):
            return self._dead_end(retreat)
        period = self._runaway()
        if period:
            self.runaway = self.index.decode_bytes(out[-period:]).decode("utf-8", errors="replace")
            return True  # finish stays "length": a cut value (never used), or cut text
        if matcher is not None and matcher.is_terminated():
            self.finish = "stop"  # only EOS could follow: skip the forward pass
            return True
        return len(out) >= self.max_tokens

    def _runaway(self) -> int:
        """The period of the unit the turn's last tokens repeat, where they ran away: a value
        (`runaways`) after `RUNAWAY_TOKENS`, free text after `TEXT_RUNAWAY_TOKENS`; 0 where
        they did not. Reasoning is left to its budget."""
        runaways, steer, out = self.runaways, self.steer, self.out
        if runaways == "reply" or (runaways == "calls" and steer is not None and steer.in_call):
            return runaway_period(out)
        if steer is not None and (steer.in_call or steer.thinking):
            return 0
        period = text_runaway_period(out)
        if period:
            _log.warning(
                "free text repeated %r %d times: stopped there, as if max_tokens ran out",
                self.index.decode_bytes(out[-period:]),
                max(TEXT_RUNAWAY_TOKENS, TEXT_RUNAWAY_COPIES * period) // period,
            )
        return period

    def keep_complete_calls(self) -> None:
        """Where `max_tokens` cut a call, cut the turn back to the calls finished before it
        (when the gate keeps complete calls)."""
        steer, matcher = self.steer, self.matcher
        if (
            self.finish == "length"
            and steer is not None
            and matcher is not None
            and steer.in_call
            and steer.kept_tokens > 0
            and steer.gate.keep_complete_calls
        ):
            _cut_back(self.session, matcher, self.out, steer.kept_tokens, len(self.feed))
            self.dropped = "truncated"
            self.usage.cut_calls += 1
            if self.on_progress is not None:
                self.on_progress(self.out)

    def output(self, t_start: float) -> TurnOutput:
        """The finished turn, its usage completed (`t_start`: when generation began)."""
        out, usage, finish, matcher = self.out, self.usage, self.finish, self.matcher
        usage.completion_tokens = len(out)
        usage.mask_time_s = self.mask_time
        usage.generation_time_s = time.perf_counter() - t_start
        text = self.index.decode_bytes(out).decode("utf-8", errors="replace")
        accepting = matcher is None or finish == "stop" or matcher.is_accepting()
        return TurnOutput(
            text, out, finish, accepting, usage, dropped=self.dropped, runaway=self.runaway
        )


def _prefill(session: DecodeSession, start: list[int]) -> tuple[Logits, int]:
    """The prompt and the turn's forced `start` run (logits after them, forward passes): in
    one pass where the session can."""
    if not start:
        return session.prefill(), 1
    both = getattr(session, "prefill_with", None)
    if both is not None:
        return cast("Logits", both(start)), 1
    session.prefill()
    return session.feed(start), 2


@dataclass
class _Probe:
    fed: list[int]  # tokens fed to the session: the opener, the call's start, the name's start
    last: int  # the next token of the tool name, chosen under the grammar (not yet fed)
    fit: float  # log of the share of the model's own mass that the offered names get
    forced: int  # how many of `fed` were forced (the rest were chosen under the grammar)


#: The probe follows a tool name for at most this many tokens.
PROBE_NAME_TOKENS = 16


def _probe_call(
    session: DecodeSession,
    matcher: Matcher,
    index: TokenizerIndex,
    tokenizer: Any,
    prefix: bytes,
    sampling: SamplingConfig,
    generator: Rng | None,
    budget: int,
    follow: int = PROBE_NAME_TOKENS,
) -> _Probe | None:
    """Open a call tentatively (one forward pass over the opener and the forced start of the
    body) and measure how much of the model's own probability the offered tool names get: a
    model that wants a tool nobody offered puts its mass elsewhere. The name is followed for
    up to `follow` tokens, as chosen under the grammar, until it closes: at each step the
    share the offered names' continuations get counts, so a name that parts from the offered
    ones after a shared start (`math.` then a function nobody offered) shows. None where the
    session cannot be rolled back or the budget is too small; the matcher is not moved."""
    if not prefix or not hasattr(session, "rollback"):
        return None
    fork = matcher.fork()
    ids = forced_token_ids(
        fork, index, tokenizer, budget, heal=False, committed=prefix, extend=False
    )
    if index.decode_bytes(ids) != prefix:
        return None
    if not ids or len(ids) + 1 >= budget:
        return None
    fed, forced, fit = list(ids), len(ids), 0.0
    logits = as_float(session.feed(ids))
    while True:
        logp = log_softmax(logits)
        fork.apply_to_logits(logits)
        fit += min(logsumexp(logp[~neginf(logits)]), 0.0)
        tid = _choose(logits, sampling, generator)
        closed = b'"' in index.decode_bytes([tid])
        if closed or len(fed) - forced >= follow or len(fed) + 2 >= budget:
            return _Probe(fed, tid, fit, forced)
        fork.advance(tid)
        fed.append(tid)
        logits = as_float(session.feed([tid]))


def _cut_back(
    session: DecodeSession, matcher: Matcher, out: list[int], keep: int, unfed: int
) -> None:
    """Cut `out` back to its first `keep` tokens (the end of the last call kept), further if
    that left a separator half-written, so the turn ends where the grammar may end."""
    cut = len(out) - keep
    matcher.rollback(cut)
    while not matcher.is_accepting() and cut < len(out):
        matcher.rollback(1)
        cut += 1
    if hasattr(session, "rollback"):  # the last `unfed` tokens never reached the model
        session.rollback(max(0, cut - unfed))
    del out[len(out) - cut :]


def _rejected(index: TokenizerIndex, out: list[int], why: str) -> UnexpectedModelBehavior:
    partial = index.decode_bytes(out).decode("utf-8", errors="replace")
    return UnexpectedModelBehavior(
        f"output rejected by the turn grammar after {partial[-80:]!r}: {why}", raw_output=partial
    )
