"""One turn's growing text as stream events: free text, call starts, argument deltas.

Fed the turn's text in pieces of any size (token by token while generating), it emits the
same events as when fed all of it at once: text that might be the start of the call opener is
held back until it is known not to be, and a call's arguments are cut out of its body by a
small JSON scanner (strings, escapes, nesting), so the body's closing brace never leaks into
them. Only runs when a run is streamed.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

import pydantic_core

from sdk.events import ArgsDelta, CallDropped, CallStarted, StreamEvent, TextDelta, TextWithdrawn

__all__ = ["TokenStream", "TurnScanner"]

_NAME = re.compile(r'\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"')
_ARGS = re.compile(r'\s*,\s*"arguments"\s*:\s*(?=\S)')


class TurnScanner:
    """Events for one turn whose calls are `opener` + JSON body `{"name", "arguments"}` +
    `closer` (None: the turn has no calls to find, all of it is text)."""

    def __init__(
        self,
        step: int,
        opener: str | None,
        closer: str | None,
        emit: Callable[[StreamEvent], None],
        *,
        parse: Callable[[str], Sequence[Any]] | None = None,
        reasoning: tuple[str, str] | None = None,
        at_start: bool = False,
    ) -> None:
        self.step = step
        self.opener = opener or None
        self.closer = closer or None
        self.emit = emit
        # Formats whose calls are not `opener {"name", "arguments"} closer`: everything from
        # the first opener on is parsed with `parse` when the turn ends, and its calls emitted
        # whole.
        self.parse = parse
        # A reasoning span `(start, end)` opening the turn: text, never searched for calls.
        self.reasoning = reasoning
        # The opener counts only at the start of the reply (calls are the whole reply).
        self.at_start = at_start
        self.thinking = reasoning is not None
        self.seen = ""  # the turn's text while deciding whether it reasons
        self.sent_think = 0  # reasoning characters emitted
        # The span is known to be open: the text began with its start marker, or the prompt
        # opened it (R1's `<think>\n`; the agent sets this).
        self.opened = False
        self.buf = ""  # text not yet consumed
        self.in_call = False
        self.index = -1  # the current (or last) call
        self._reset_call()

    def _reset_call(self) -> None:
        self.body = ""
        self.named = False
        self.args_at = -1  # where the arguments value starts in `body`
        self.args_end = -1  # where it ends (exclusive), once known
        self.scan = 0  # JSON scanner position in `body`
        self.depth = 0
        self.in_str = False
        self.esc = False
        self.sent = 0  # argument characters emitted

    def feed(self, text: str) -> None:
        if self.thinking:
            text = self._think(text)
        self.buf += text
        while self.buf:
            if not (self._call() if self.in_call else self._text()):
                break

    def withdraw(self, chars: int) -> None:
        """Take back the last `chars` characters fed: free text the decoding loop backed out of
        (`sdk.decoding._retreat`). What was held back goes first; the rest is withdrawn from
        what was emitted (`TextWithdrawn`)."""
        if chars <= 0:
            return
        if self.thinking:  # still in `seen` (deciding whether the turn reasons)
            keep = max(len(self.seen) - chars, 0)
            self.seen = self.seen[:keep]
            if self.sent_think > keep:
                self.emit(TextWithdrawn(self.step, self.sent_think - keep))
                self.sent_think = keep
            return
        held = min(chars, len(self.buf))
        self.buf = self.buf[: len(self.buf) - held]
        if chars > held:
            self.emit(TextWithdrawn(self.step, chars - held))

    def _think(self, text: str) -> str:
        """Pass reasoning text through as text; returns what follows the span."""
        assert self.reasoning is not None
        start, end = self.reasoning
        before = len(self.seen)
        self.seen += text
        if not self.opened:  # does the turn open with the start marker?
            head = self.seen.lstrip()
            if len(head) < len(start) and start.startswith(head):
                return ""  # maybe the start marker: wait
            if not head.startswith(start):
                self.thinking = False
                return self.seen  # no reasoning: all of it is ordinary text
            self.opened, before = True, 0
        at = self.seen.find(end, max(before - len(end) + 1, 0))  # only the new text
        if at < 0:
            hold = _opener_prefix_len(self.seen, end)
            cut = len(self.seen) - hold
            if cut > self.sent_think:
                self.emit(TextDelta(self.step, self.seen[self.sent_think : cut]))
                self.sent_think = cut
            return ""
        self.thinking = False
        cut = at + len(end)
        if cut > self.sent_think:
            self.emit(TextDelta(self.step, self.seen[self.sent_think : cut]))
        return self.seen[cut:]

    def finish(self) -> None:
        """End of turn: flush held-back text (an unfinished call stays as it is). Joined, the
        `TextDelta`s are the turn's text outside calls, less the whitespace right before each
        call (the calls' layout)."""
        if self.thinking and self.seen[self.sent_think :]:
            self.emit(TextDelta(self.step, self.seen[self.sent_think :]))
            self.sent_think = len(self.seen)
        if self.in_call and self.parse is not None:
            for call in self.parse((self.opener or "") + self.body):
                if not call.name:
                    continue
                self.emit(CallStarted(self.step, self.index, call.name))
                self.emit(ArgsDelta(self.step, self.index, call.raw, call.arguments))
                self.index += 1
            self.index -= 1
            self.body = ""
            return
        if not self.in_call and self.buf:
            self.emit(TextDelta(self.step, self.buf))
            self.buf = ""

    # -- free text ---------------------------------------------------------------------
    def _text(self) -> bool:
        opener = self.opener
        if opener is None:
            self.emit(TextDelta(self.step, self.buf))
            self.buf = ""
            return False
        if self.at_start:
            head = self.buf.lstrip()
            if not head.startswith(opener) and (opener.startswith(head) and head or not head):
                return False  # still undecided: hold
            if not head.startswith(opener):
                self.opener = None  # a text reply: nothing in it is a call
                return True
        at = self.buf.find(opener)
        if at >= 0:
            text = self.buf[:at].rstrip()  # whitespace before a call lays calls out
            if text:
                self.emit(TextDelta(self.step, text))
            self.buf = self.buf[at + len(opener) :]
            self.in_call = True
            self.index += 1
            self._reset_call()
            return True
        # Hold back what may still turn out to be an opener, and the whitespace before it.
        cut = len(self.buf) - _opener_prefix_len(self.buf, opener)
        cut = len(self.buf[:cut].rstrip())
        if cut:
            self.emit(TextDelta(self.step, self.buf[:cut]))
            self.buf = self.buf[cut:]
        return False

    # -- a call ------------------------------------------------------------------------
    def _call(self) -> bool:
        self.body += self.buf
        self.buf = ""
        if self.parse is not None:
            return False  # parsed whole at the end of the turn
        if not self.named:
            m = _NAME.match(self.body)
            if m is not None:
                self.named = True
                self.emit(CallStarted(self.step, self.index, json.loads(f'"{m.group(1)}"')))
                self.scan = m.end()
        if self.named and self.args_at < 0:
            m = _ARGS.match(self.body, self.scan)
            if m is not None:
                self.args_at = self.scan = m.end()
        if self.args_at >= 0 and self.args_end < 0:
            self._scan_args()
        if self.closer is None:
            return False
        start = max(self.args_end, 0)
        end = self.body.find(self.closer, start)
        if end < 0:
            return False
        if not self.named:  # a body laid out otherwise: report it whole
            self._whole(self.body[:end])
        self.buf = self.body[end + len(self.closer) :]
        self.in_call = False
        return True

    def _scan_args(self) -> None:
        body = self.body
        i = self.scan
        while i < len(body):
            c = body[i]
            if self.in_str:
                if self.esc:
                    self.esc = False
                elif c == "\\":
                    self.esc = True
                elif c == '"':
                    self.in_str = False
                    if self.depth == 0:
                        i += 1
                        self.args_end = i
                        break
            elif c == '"':
                self.in_str = True
            elif c in "{[":
                self.depth += 1
            elif c in "}]" or (self.depth == 0 and (c == "," or c.isspace())):
                if c in "}]":
                    self.depth -= 1
                if self.depth <= 0:
                    self.args_end = i + 1 if c in "}]" and self.depth == 0 else i
                    break
            i += 1
        self.scan = i
        upto = self.args_end if self.args_end >= 0 else i
        if upto - self.args_at > self.sent:
            delta = body[self.args_at + self.sent : upto]
            self.sent += len(delta)
            self._args_delta(delta)

    def _args_delta(self, delta: str) -> None:
        text = self.body[self.args_at : self.args_at + self.sent]
        try:
            partial = pydantic_core.from_json(text, allow_partial=True)
        except ValueError:
            partial = None
        self.emit(ArgsDelta(self.step, self.index, delta, partial))

    def _whole(self, body: str) -> None:
        try:
            data = json.loads(body)
        except ValueError:
            return
        if isinstance(data, dict) and isinstance(data.get("name"), str):
            self.emit(CallStarted(self.step, self.index, data["name"]))
            args = json.dumps(data.get("arguments", {}), ensure_ascii=False)
            self.emit(ArgsDelta(self.step, self.index, args, data.get("arguments", {})))


def _opener_prefix_len(text: str, opener: str) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of `opener`."""
    for k in range(min(len(text), len(opener) - 1), 0, -1):
        if opener.startswith(text[-k:]):
            return k
    return 0


class TokenStream:
    """The decoding loop's view: the turn's token ids after each step, decoded incrementally
    (a character split across tokens waits for its last byte). A shorter list means the loop
    cut the last call away (a repeat: that call is withdrawn, and the turn ends), or backed out
    of free text (a dead end: that text is withdrawn, and the turn goes on)."""

    def __init__(self, scanner: TurnScanner, decode: Callable[[Sequence[int]], bytes]) -> None:
        self.scanner = scanner
        self.decode = decode
        self.seen = 0
        self.ids: list[int] = []
        self.text = ""  # all the scanner was fed
        self.utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        self.dropped = False

    def __call__(self, out: Sequence[int]) -> None:
        if self.dropped:
            return
        if len(out) < self.seen:
            self._cut(out)
            return
        new = out[self.seen :]
        self.seen = len(out)
        if new:
            self.ids += new
            piece = self.utf8.decode(self.decode(new))
            self.text += piece
            self.scanner.feed(piece)

    def _cut(self, out: Sequence[int]) -> None:
        gone = self.decode(self.ids[len(out) :])
        opener = self.scanner.opener
        if self.scanner.in_call or (opener and opener.encode() in gone):
            self.dropped = True
            self.scanner.emit(CallDropped(self.scanner.step, self.scanner.index))
            return
        utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        text = utf8.decode(self.decode(out))
        self.scanner.withdraw(len(self.text) - len(text))
        self.utf8, self.text, self.seen, self.ids = utf8, text, len(out), list(out)

    def finish(self) -> None:
        if not self.dropped:
            self.scanner.feed(self.utf8.decode(b"", final=True))
            self.scanner.finish()


def emit_whole_turn(scanner: TurnScanner, text: str, calls: Sequence[Any] | None) -> None:
    """A turn that arrived in one piece (a remote server): the same events, at once."""
    if calls is None:
        scanner.feed(text)
        scanner.finish()
        return
    if text:
        scanner.emit(TextDelta(scanner.step, text))
    for i, call in enumerate(calls):
        scanner.emit(CallStarted(scanner.step, i, call.name))
        scanner.emit(ArgsDelta(scanner.step, i, call.raw, call.arguments))
