"""History processors: what the model is shown of a long conversation.

`Agent(history_processors=[...])` runs each processor, in order, over the conversation before
every model turn; the model sees the result, the run's transcript (`result.all_messages()`)
keeps everything. A processor is any callable from a list of `Message`s to a list of
`Message`s. The two here cover the usual needs: a window of the latest messages, and a
summary standing in for the older ones. Cuts fall before a user message, so a tool result
never loses the call it answers.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence

from sdk.errors import ConfigError
from sdk.messages import Message

__all__ = ["HistoryProcessor", "keep_last", "summarize_older"]

HistoryProcessor = Callable[[list[Message]], list[Message]]
"""What `Agent(history_processors=[...])` takes: the conversation in, what the model is shown
out (a non-empty list ending in a user or tool message, else `ConfigError`)."""


def _cut(messages: Sequence[Message], keep: int) -> int:
    """Where the kept tail starts: at most `keep` messages back (system messages aside),
    moved to the next user message; the last user message where none follows."""
    body = [i for i, m in enumerate(messages) if m.role != "system"]
    if len(body) <= keep:
        return body[0] if body else len(messages)
    start = body[len(body) - keep] if keep > 0 else len(messages)
    users = [i for i in body if messages[i].role == "user"]
    later = [i for i in users if i >= start]
    if later:
        return later[0]
    return users[-1] if users else start


def keep_last(n: int) -> HistoryProcessor:
    """The system message(s) and about the last `n` messages: the window starts at the first
    user message among them (a call and its results stay together), or at the last user
    message when there is none.

    Args:
        n: about how many of the latest messages to keep (system messages aside), >= 1.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"keep_last(n={n!r}): expected an int >= 1")

    def process(messages: list[Message]) -> list[Message]:
        start = _cut(messages, n)
        head = [m for m in messages[:start] if m.role == "system"]
        return head + list(messages[start:])

    return process


def summarize_older(
    summarize: Callable[[list[Message]], str], *, keep: int = 10
) -> HistoryProcessor:
    """Older messages replaced by one system note holding `summarize(older)`'s text (your
    function: an LLM call, a template), the last `keep` messages kept as `keep_last` keeps
    them. The summary of a given stretch is computed once and reused on later turns.

    Args:
        summarize: called with the older messages (system messages aside); returns the
            summary text.
        keep: how many of the latest messages to keep as they are (as `keep_last(keep)`).
    """
    if not callable(summarize):
        raise ConfigError(f"summarize_older({summarize!r}): expected a callable")
    window = keep_last(keep)
    done: dict[str, str] = {}
    lock = threading.Lock()

    def process(messages: list[Message]) -> list[Message]:
        start = _cut(messages, keep)
        older = [m for m in messages[:start] if m.role != "system"]
        if not older:
            return window(messages)
        key = json.dumps([m.to_dict() for m in older], sort_keys=True, default=repr)
        with lock:
            text = done.get(key)
        if text is None:
            text = summarize(older)
            if not isinstance(text, str):
                raise ConfigError(f"summarize_older: the summary must be a str, not {text!r}")
            with lock:
                done[key] = text
        head = [m for m in messages[:start] if m.role == "system"]
        note = Message.system(f"Summary of the earlier conversation:\n{text}")
        return [*head, note, *messages[start:]]

    return process


def apply(processors: Sequence[HistoryProcessor], messages: Sequence[Message]) -> list[Message]:
    """The conversation as the model is shown it; a processor's mistake is a `ConfigError`."""
    out = list(messages)
    for p in processors:
        got = p(list(out))
        if not isinstance(got, list) or not all(isinstance(m, Message) for m in got):
            raise ConfigError(f"history processor {p!r} must return a list of Message")
        if not got or got[-1].role == "assistant":
            raise ConfigError(
                f"history processor {p!r} left nothing for the model to answer (the shown "
                "conversation must end with a user or tool message)"
            )
        out = got
    return out
