"""Whether to open a call: decided from the model's own distribution, where a call may start.

In `"auto"` the turn grammar lets the model either write text or open a call. Left to greedy
decoding, a small model almost never opens one: the opener's first token (`<` for SmolLM2) is
rarely its single most likely token, and a tool-trained model's mass on `<tool_call>` says
little about whether an offered tool fits (Qwen2.5-Coder-0.5B puts *more* of it there on
questions no offered tool can answer). What does separate the two is what the model would
name: so at a call boundary (the turn's start, or right after a call closed, once any
whitespace is written) the gate

1. opens the call tentatively: one forward pass over the opener and the body's start
   (`<tool_call>\n{"name": "`), and, for tool-trained models (`whole_name`), one per token
   of the name the grammar lets it write, until the name closes; `fit` adds up the log of
   the share of the model's own probability that the offered names' continuations get at
   each of those tokens (a model that wants a tool nobody offered puts its mass elsewhere:
   at the name's first token, or where its name parts from the offered ones, `lookup_` then
   `orders`);
2. calls iff `fit + bias > 0`; then the probe's tokens are kept (no pass wasted); otherwise
   the session is rolled back and the opener is masked for that token only (the model may
   still open a call later in its text).

No probe runs where the opener's log-odds against everything else are below
`MIN_OPENER_ODDS` (chit-chat such as "Say hi.": the model is not considering a call).

Where both ways are not open (all the mass on one side, as with scripted models), or the
session cannot roll back, the opener's log-odds against everything else stand in for `fit`.
Whitespace-only tokens are neutral: while they are the most likely choice the decision waits
for the next token. A call, once decided, is forced as the tokenizer encodes its opener
(`<tool_call>` is one token for Qwen: a model that had picked `<` and then had to spell
`tool_call>` would be writing text it never saw).

The same mechanism bounds reasoning before a required call: after `budget` free tokens the
opener is forced. It also knows where the turn's last complete call ends, so the loop can cut
back to it: with `drop_repeats`, when a call identical to an earlier one of the turn (same
name, same arguments) closes, the turn ends after the call before it (a model writing the same
call again is looping; on BFCL "parallel", 9 of 50 SmolLM2 turns repeated one call until
`max_tokens` cut them, losing every call, and the tool would only run twice); with
`keep_complete_calls`, when `max_tokens` runs out inside a call, the calls the model finished
before it are kept and only the cut one is dropped.
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from sdk._memo import per_object
from sdk.decoding._alignment import prefix_index
from sdk.engine.logits import Logits, fill_neginf, host, log_softmax, logsumexp, neginf

if TYPE_CHECKING:
    from sdk.engine.tokenizer import TokenizerIndex

__all__ = [
    "DEFAULT_AUTO_CALL_BIAS",
    "LOOK",
    "PROBE",
    "TOOL_TRAINED_CALL_BIAS",
    "CallGate",
    "GateRun",
]

DEFAULT_AUTO_CALL_BIAS = 2.75
"""Added in favour of a call in "auto" for models whose chat template has no tool support
(small generic chat models, the embedded SmolLM2): a call opens when the offered tool names get
at least e^-2.75 ~ 6 % of the model's own probability where a name starts."""
TOOL_TRAINED_CALL_BIAS = 0.03
"""The same for models whose chat template renders tools: trained to call, they put nearly all
their mass on a name that fits (Qwen2.5-Coder-0.5B: a median share above 99.7 % of the name's
first token on BFCL "multiple", 78 % on "irrelevance"), so a weaker share (~97 %, the whole name
followed) already says the offered tools do not fit. Both values were calibrated on the dev BFCL splits and checked on questions that played
no part in the choice; see the call-quality docs page."""

_WS = b" \t\r\n"
MIN_OPENER_ODDS = -6.5
"""Below these log-odds of the opener against the rest (~0.15 %) the model is not considering a
call ("Say hi."), and no probe is run."""
PROBE = b"\x00probe"
"""`GateRun.steer`'s answer when the decision needs a look at the call the model would write."""
LOOK = b"\x00look"
"""`GateRun.steer`'s answer where the reply may open with a typed output whose first token
also begins an untagged call (`{"`): which of the two the model means shows in the token it
wants after that one (`GateRun.looked`)."""


@dataclass(frozen=True)
class CallGate:
    """How one turn's call boundaries are steered.

    `bias`: log-odds in favour of opening a call at a boundary (None: no decision, the model's
    own pick stands). `budget`: free tokens allowed before a call must open (reasoning before
    a required call; None: unbounded).
    """

    opener: str
    closer: str | None = None
    bias: float | None = None
    budget: int | None = None
    name_prefix: str | None = None  # a call's text up to its tool name (enables the probe)
    # The probe follows the whole name (tool-trained models, whose names are one unit to
    # them); else it reads the name's first token only: a generic chat model spells a name it
    # never saw token by token, and its doubts there are about spelling, not about the tool.
    whole_name: bool = False
    drop_repeats: bool = False
    keep_complete_calls: bool = False  # max_tokens inside a call: keep the turn's earlier ones
    # The format's reasoning span `(start, end)`: while the turn is inside it no call is seen
    # or decided; `reasoning_budget` tokens into it, its end marker is forced.
    reasoning: tuple[str, str] | None = None
    reasoning_budget: int | None = None
    reasoning_opened: bool = False  # the prompt ends inside the span (R1's `<think>\n`)
    # Calls are the whole reply (pythonic lists): the opener counts only before any text.
    at_start_only: bool = False
    # A call's body start without its envelope (`{"name": "`): how tool-trained models write
    # calls when the envelope is not forced. Where the reply opens, the model's mass on it
    # counts as mass on a call (the grammar keeps such text from being an answer).
    untagged: str | None = None
    # Where a typed output's first token also begins an untagged call, look at the token
    # after it (`LOOK`). The agent sets it until the run's first call (a history from earlier
    # runs aside): after a result, a small tool-trained model writes JSON by habit, and its
    # `{"name"` there named a tool nobody asked for (Qwen2.5-Coder-0.5B: `reserve` after
    # `lookup_stock`).
    look: bool = False


@dataclass(frozen=True)
class _Tables:
    opener_ids: npt.NDArray[np.int64]  # tokens spelling a prefix of the opener, or running past it
    neutral: npt.NDArray[np.bool_]  # whitespace-only tokens


@per_object
def _tables_by_opener(index: TokenizerIndex) -> dict[bytes, _Tables]:
    return {}


def _tables(index: TokenizerIndex, opener: bytes) -> _Tables:
    by_opener = _tables_by_opener(index)
    hit = by_opener.get(opener)
    if hit is not None:
        return hit
    pi = prefix_index(index)
    parts = [pi.spelling(opener[:k]) for k in range(1, len(opener) + 1)]
    parts.append(pi.extending(opener))
    ids = np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)
    neutral = np.fromiter(
        (bool(b) and not b.strip(_WS) for b in index.token_bytes),
        dtype=bool,
        count=len(index.token_bytes),
    )
    return by_opener.setdefault(opener, _Tables(ids, neutral))


def _canonical(body: bytes) -> Any:
    """A call body compared by value (member order and layout aside)."""
    try:
        return json.dumps(json.loads(body), sort_keys=True)
    except ValueError:
        return body.strip()


def _mass(logp: Logits, where: np.ndarray) -> float:
    """The log of the probability mass `logp` puts where `where` holds (-inf: none)."""
    if isinstance(logp, np.ndarray):
        return logsumexp(logp[where])
    import torch

    return logsumexp(logp[torch.from_numpy(where).to(logp.device)])


class GateRun:
    """The gate's state over one turn; the decoding loop calls `steer` before each pick and
    `after` with the bytes each step added."""

    def __init__(self, gate: CallGate, index: TokenizerIndex) -> None:
        self.gate = gate
        self.opener = gate.opener.encode()
        self.name_prefix = (gate.name_prefix or "").encode()
        self.closer = gate.closer.encode() if gate.closer else None
        self.tables = _tables(index, self.opener)
        self.untagged = _tables(index, gate.untagged.encode()).opener_ids if gate.untagged else None
        self.index = index
        self.p_shared = -math.inf  # (log) mass on a start both an output and a call share
        self.p_open = -math.inf
        self.p_other = -math.inf
        self.look_id = -1  # the token `LOOK` writes: the likeliest shared start
        self.text = bytearray()
        self.boundary = gate.bias is not None  # the turn's start is a boundary
        self.since = 0  # where the text after the last call (or the turn's start) begins
        self.free_tokens = 0  # tokens since the turn's start or the last call, outside calls
        self.in_call = False
        self.odds = 0.0
        self.pending_no: Any = None
        self.decisions: list[tuple[float, bool]] = []  # (log-odds incl. bias, opened)
        self.tokens = 0  # tokens accounted so far
        self.body_at = 0  # where the open call's body starts in `text`
        self.bodies: set[Any] = set()  # the turn's calls so far, canonical
        self.kept_tokens = 0  # tokens up to the end of the last complete call kept
        self.repeat_from: int | None = None  # set when a call repeats: cut the turn here
        marks = gate.reasoning
        self.think = (marks[0].encode(), marks[1].encode()) if marks else None
        self.thinking = self.think is not None  # until the text shows it does not reason
        self.think_tokens = 0
        # The span is known to be open: the turn began with its start marker, or the prompt
        # itself opened it (R1's `<think>\n`).
        self.think_open = self.thinking and gate.reasoning_opened
        if self.thinking:
            self.boundary = False  # the decision waits for the reasoning's end

    def snapshot(self) -> GateRun:
        """An independent copy of this state (a turn that backs out of its text, `_retreat`,
        restores it)."""
        other = copy.copy(self)
        other.text = bytearray(self.text)
        other.decisions = list(self.decisions)
        other.bodies = set(self.bodies)
        return other

    def wants_raw(self) -> bool:
        """Does the next `steer` need the logits before the grammar's mask (to read the
        model's mass on an untagged call, which the mask removes)?"""
        return (
            self.untagged is not None
            and self.boundary
            and not self.in_call
            and not self.thinking
            and self.since == 0
            and not self.text.strip(_WS)
        )

    def steer(self, logits: Logits, raw: Logits | None = None) -> bytes:
        """At a decision point: the opener, when a call must open now (the caller forces its
        tokens instead of sampling), else b"" after restricting `logits` (already masked by
        the grammar) in place where the decision is "no call". `raw`: the same logits
        before the mask, where `wants_raw()` asked for them."""
        if self.in_call:
            return b""
        if self.thinking:
            limit = self.gate.reasoning_budget
            if limit is not None and self.think_tokens >= limit and self.think is not None:
                return self.think[1]
            return b""
        budget = self.gate.budget
        if budget is not None and self.free_tokens >= budget:
            return self.opener
        if not self.boundary or self.text[self.since :].strip(_WS):
            return b""
        return self._decide(logits, raw)

    def _decide(self, logits: Logits, raw: Logits | None = None) -> bytes:
        width = logits.shape[-1]
        n = min(width, len(self.tables.neutral))
        lp = log_softmax(logits)
        masked = host(neginf(logits))
        is_open = self._opener_mask(width)
        neutral = np.zeros(width, dtype=bool)
        neutral[:n] = self.tables.neutral[:n]
        neutral &= ~is_open
        bare = np.zeros(width, dtype=bool)
        shared = np.zeros(width, dtype=bool)
        if raw is not None and self.untagged is not None:
            bare[self.untagged[self.untagged < width]] = True
            # A typed output's `{"` begins an untagged call too: `looked` tells them apart.
            shared = bare & ~masked & ~(is_open | neutral)
            # Only where the grammar rules it out as text.
            bare &= masked & ~(is_open | neutral)
        p_open = _mass(lp, is_open)
        if bool(bare.any()):
            # The untagged call's mass, in the units of `lp` (the share of what the mask
            # allows): the grammar removed it from the text the model may write.
            assert raw is not None
            raw_lp = log_softmax(raw)
            allowed = _mass(raw_lp, ~masked)
            p_bare = _mass(raw_lp, bare)
            if p_bare > -math.inf:
                p_bare = p_bare - allowed if allowed > -math.inf else math.inf
                hi, lo = max(p_open, p_bare), min(p_open, p_bare)
                p_open = (
                    hi if math.isinf(hi) or lo == -math.inf else hi + math.log1p(math.exp(lo - hi))
                )
        p_neutral = _mass(lp, neutral)
        p_other = _mass(lp, ~(is_open | neutral | bare))
        if p_neutral > max(p_open, p_other):
            return b""  # whitespace first: decide on the token after it
        self.boundary = False
        if p_open == -math.inf:  # no mass on a call at all
            return b""
        if p_other == -math.inf:  # nothing but a call
            self.decisions.append((math.inf, True))
            return self.opener
        self.odds = p_open - p_other
        self.pending_no = is_open
        if self.odds < MIN_OPENER_ODDS and self.gate.look and bool(shared.any()):
            self.p_open, self.p_other, self.p_shared = p_open, p_other, _mass(lp, shared)
            scores = host(lp).astype(np.float64)
            self.look_id = int(np.flatnonzero(shared)[np.argmax(scores[shared])])
            return LOOK
        return self._probe_or_not(logits)

    def _probe_or_not(self, logits: Logits) -> bytes:
        if self.odds < MIN_OPENER_ODDS:  # not even considering a call: no probe
            self.decisions.append((self.odds, False))
            fill_neginf(logits, self.pending_no)
            return b""
        return PROBE

    def looked(self, logits: Logits, after: Logits | None) -> bytes:
        """After `LOOK`: `after` is the model's own next-token logits once the shared start is
        written (None: it could not be looked at). The share of it that goes on to spell the
        untagged call (`"name": "`) is the share of the shared start's mass that means a
        call; the decision goes on from there (`PROBE`, or b"" with the opener masked)."""
        untagged = self.gate.untagged
        if after is not None and untagged is not None:
            done = bytes(self.index.token_bytes[self.look_id])
            rest = _tables(self.index, untagged.encode()[len(done) :]).opener_ids
            lp = log_softmax(after)
            ahead = np.zeros(after.shape[-1], dtype=bool)
            ahead[rest[rest < after.shape[-1]]] = True
            share = min(_mass(lp, ahead), 0.0)
            call = self.p_shared + share
            p_open = float(np.logaddexp(self.p_open, call))
            # what stays the output's: p_other less the shared start's call share
            gone = math.exp(call - self.p_other) if self.p_other > -math.inf else 1.0
            left = self.p_other + math.log1p(-gone) if gone < 1.0 else -math.inf
            self.odds = p_open - left if left > -math.inf else math.inf
        return self._probe_or_not(logits)

    def settle(self, logits: Logits, fit: float | None) -> bool:
        """Decide after the probe: `fit` is the log of the share of the model's own
        (unmasked) probability that the offered names got along the name it wrote under the
        grammar (None: no probe could run, the opener's odds decide). Returns whether to
        call; if not, masks the opener in `logits`."""
        bias = self.gate.bias
        assert bias is not None
        score = (self.odds if fit is None else fit) + bias
        opened = score > 0
        self.decisions.append((score, opened))
        if not opened:
            fill_neginf(logits, self.pending_no)
        return opened

    def _opener_mask(self, width: int) -> np.ndarray:
        keep = np.zeros(width, dtype=bool)
        keep[self.tables.opener_ids[self.tables.opener_ids < width]] = True
        return keep

    def only_opener(self, logits: Logits) -> None:
        """Leave the model only the tokens that begin the opener (when its text could not be
        forced as tokens)."""
        fill_neginf(logits, ~self._opener_mask(logits.shape[-1]))

    def _still_thinking(self, tokens: int, new_from: int) -> bool:
        """Track the reasoning span; False once the turn is past it (or never opened one).
        `new_from`: where this step's bytes begin (only they are searched for the end)."""
        assert self.think is not None
        start, end = self.think
        if not self.think_open:  # is the turn opening with the start marker?
            head = bytes(self.text).lstrip(_WS)
            if len(head) < len(start) and start.startswith(head):
                self.think_tokens += tokens
                return True  # nothing but (a prefix of) the start marker yet
            if not head.startswith(start):
                self.thinking = False  # no reasoning this turn
                self.boundary = self.gate.bias is not None
                return False
            self.think_open, new_from = True, 0
        at = self.text.find(end, max(new_from - len(end) + 1, 0))
        if at < 0:
            self.think_tokens += tokens
            return True
        self.thinking = False
        self.since = at + len(end)
        self.boundary = self.gate.bias is not None
        return False

    def after(self, data: bytes, tokens: int = 1) -> None:
        """Account for the bytes one step wrote (the sampled token and what was forced).

        Only the new bytes (plus an overlap for a marker split across steps) are searched, so
        a long turn costs linear time."""
        start = len(self.text)
        self.text += data
        self.tokens += tokens
        if self.thinking and not self._still_thinking(tokens, start):
            start = self.since
        elif self.thinking:
            return
        if not self.in_call:
            at = self.text.find(self.opener, max(self.since, start - len(self.opener) + 1))
            if at >= 0 and self.gate.at_start_only and self.text[self.since : at].strip(_WS):
                at = -1  # an opener inside text is text
            if at < 0:
                self.free_tokens += tokens
                return
            self.in_call = True
            self.boundary = False
            start = self.body_at = at + len(self.opener)  # the closer follows the opener
        elif self.closer is not None:
            start = max(self.since, start - len(self.closer) + 1)
        end = self.text.find(self.closer, start) if self.closer is not None else -1
        if end >= 0:
            if self.gate.drop_repeats:
                body = _canonical(bytes(self.text[self.body_at : end]))
                if body in self.bodies:
                    self.repeat_from = self.kept_tokens
                self.bodies.add(body)
            if self.repeat_from is None:
                self.kept_tokens = self.tokens
            self.in_call = False
            self.free_tokens = 0
            self.boundary = self.gate.bias is not None
            self.since = len(self.text)
