"""What the model is shown of a long conversation: history processors and the context check."""

from __future__ import annotations

from typing import Any

import pytest

from sdk import Agent, ConfigError, ContextLengthError, tool
from sdk.backends.test import ToolCallScript
from sdk.history import keep_last, summarize_older
from sdk.messages import Message


@tool
def lookup(city: str) -> str:
    """Look a city up."""
    return f"{city}: found"


def _chat(n: int) -> list[Message]:
    out: list[Message] = []
    for i in range(n):
        out += [Message.user(f"question {i}"), Message.assistant(f"answer {i}")]
    return out


def test_keep_last_shows_the_latest_turns_and_the_transcript_keeps_all(model: Any) -> None:
    m = model("fine")
    agent = Agent(m, system_prompt="Be brief.", history_processors=[keep_last(3)])
    result = agent.run_sync("question 9", message_history=_chat(9))
    shown = m.prompts[0]
    assert "Be brief." in shown and "question 8" in shown and "answer 8" in shown
    assert "question 7" not in shown and "answer 0" not in shown
    assert [msg.content for msg in result.all_messages()[1:3]] == ["question 0", "answer 0"]


def test_a_window_never_starts_with_a_tool_result(model: Any) -> None:
    """The cut moves to a user message: a call and its result stay together."""
    m = model(ToolCallScript("lookup", {"city": "Oslo"}), "Oslo is there.")
    agent = Agent(m, tools=[lookup], history_processors=[keep_last(1)])
    agent.run_sync("Find Oslo.", message_history=_chat(3))
    second = m.prompts[1]  # shown: the question, the call, its result
    assert "Find Oslo." in second and "Oslo: found" in second and "question 2" not in second


def test_summarize_older_replaces_the_old_part_once(model: Any) -> None:
    seen: list[int] = []

    def summary(older: list[Message]) -> str:
        seen.append(len(older))
        return f"{len(older)} older messages about questions"

    m = model(ToolCallScript("lookup", {"city": "Oslo"}), "done")
    agent = Agent(m, tools=[lookup], history_processors=[summarize_older(summary, keep=2)])
    agent.run_sync("Find Oslo.", message_history=_chat(4))
    assert seen == [8]  # the same older stretch on both turns: summarized once
    assert all("8 older messages" in p and "question 0" not in p for p in m.prompts)


def test_processor_mistakes_are_config_errors(model: Any) -> None:
    with pytest.raises(ConfigError, match="history_processors"):
        Agent(model("x"), history_processors=[42])  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="keep_last"):
        keep_last(0)
    agent = Agent(model("x"), history_processors=[lambda msgs: msgs[:-1]])
    with pytest.raises(ConfigError, match="nothing for the model to answer"):
        agent.run_sync("hi")


def test_a_prompt_longer_than_the_context_fails_before_generating(smollm2: Any) -> None:
    """Checked with the numbers before any forward pass; `keep_last` is the way out."""
    long = [Message.user("word " * 3000), Message.assistant("ok")] * 3
    agent = Agent(smollm2, max_tokens=8)
    with pytest.raises(ContextLengthError) as info:
        agent.run_sync("Say hi.", message_history=long)
    err = info.value
    assert err.prompt_tokens > err.context_length == 8192 and err.messages
    assert err.usage is not None and err.usage.completion_tokens == 0
    short = Agent(smollm2, max_tokens=8, history_processors=[keep_last(1)])
    assert short.run_sync("Say hi.", message_history=long).usage.prompt_tokens < 200
