"""A typed output next to tools: the model's call is made when it means one, and only that one.

A tool-trained model writes its calls as JSON without tags (Qwen2.5-Coder-0.5B: `{"name":
"lookup_stock", ...}`, its first token `{"`), which is also how a typed output opens; after a
call it writes a newline and then ends its turn. A model whose next token follows a script of
texts (the real SmolLM2 tokenizer, the real turn grammar, an agent run) shows both, and how
the call decision reads a tool name the model means but nobody offered.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import torch
from pydantic import BaseModel

from sdk import Agent, tool
from sdk.backends.chat_template import encode_prompt, render_prompt
from sdk.backends.test import TestModel
from sdk.decoding.generate import TurnRequest
from tests._templates import HERMES_LIKE

# (the turn's request, its text so far) -> texts the model may be writing, best first
Plan = Callable[[TurnRequest, str], Sequence[str]]


class Stock(BaseModel):
    sku: str
    units: int


executed: list[str] = []


@tool
def lookup_stock(sku: str) -> int:
    """How many units of a product are in stock."""
    executed.append(sku)
    return 12


class _Session:
    def __init__(self, model: _Follows, request: TurnRequest, prompt_ids: list[int]) -> None:
        self.model, self.request, self.prompt_ids = model, request, prompt_ids
        self.cached_tokens = 0
        self.fed: list[int] = []

    def _logits(self) -> torch.Tensor:
        model = self.model
        done = model.index.decode_bytes(self.fed).decode("utf-8", "replace")
        logits = torch.full((model.index.vocab_size,), -30.0)
        texts = [t for t in model.plan(self.request, done) if t.startswith(done)]
        for rank, text in enumerate(texts or [done]):  # off its plan: it ends
            at = model.next_id(text, done)
            logits[at] = max(float(logits[at]), -2.0 * rank)  # texts may share a token
        return logits

    def prefill(self) -> torch.Tensor:
        return self._logits()

    def feed(self, ids: Sequence[int]) -> torch.Tensor:
        self.fed += ids
        return self._logits()

    def rollback(self, n: int) -> None:
        del self.fed[len(self.fed) - n :]

    def close(self) -> None:
        return None


class _Follows(TestModel):
    """Each step ranks the next token of each text `plan` names (EOS where it is complete)."""

    def __init__(self, plan: Plan, tokenizer: Any) -> None:
        super().__init__((), tokenizer=tokenizer)
        self.plan = plan

    def next_id(self, text: str, done: str) -> int:
        if text == done:
            return min(self.index.eos_ids)
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        for i in range(len(ids) + 1):
            if self.tokenizer.decode(ids[:i]) == done:
                return int(ids[i])
        # `done` ends inside one of the text's tokens (the grammar forced another split)
        rest = text[len(done) :].encode()
        return max(
            (t for t, b in enumerate(self.index.token_bytes) if b and rest.startswith(b)),
            key=lambda t: len(self.index.token_bytes[t]),
        )

    def begin_turn(self, request: TurnRequest) -> _Session:  # type: ignore[override]
        prompt = render_prompt(self.tokenizer, request)
        return _Session(self, request, encode_prompt(self.tokenizer, prompt))


CALL = '{"name": "lookup_stock", "arguments": {"sku": "A-100"}}'
TAGGED = f"<tool_call>\n{CALL}\n</tool_call>"


def _plan(means_call: bool) -> Plan:
    def plan(request: TurnRequest, done: str) -> Sequence[str]:
        users = [i for i, m in enumerate(request.messages) if m.role == "user"]
        if any(m.role == "tool" for m in request.messages[users[-1] :]):
            return ['{"sku": "A-100", "units": 12}']  # the result is in: the answer
        if done.startswith("<tool_call>"):
            return [TAGGED + "\n"]  # the call the probe opened, a newline, then the end
        return [CALL] if means_call else ['{"sku": "A-100", "units": 100}']

    return plan


def test_a_typed_output_turn_makes_the_call_the_model_means(smollm2_tokenizer: Any) -> None:
    """The model opens with `{"` either way; the token it wants after that says whether it
    calls. Meaning a call, the tool runs once and the output holds its result (the turn
    ends after the call's newline: no second call forced by it), in a later run of the
    conversation as well; meaning the output, it is written at once."""
    executed.clear()
    model = _Follows(_plan(means_call=True), smollm2_tokenizer)
    agent = Agent(
        model, tools=[lookup_stock], output_type=Stock, auto_call_bias=0.03, max_tokens=80
    )
    result = agent.run_sync("How many A-100 do we have?")
    assert result.output == Stock(sku="A-100", units=12) and executed == ["A-100"]
    (call,) = [m for m in result.messages if m.role == "assistant" and m.tool_calls]
    assert call.content.rstrip() == TAGGED  # one call: its newline did not force another
    # a new question after a history that holds a tool result: its call is made too
    again = agent.run_sync("And now?", message_history=result.all_messages())
    assert again.output == Stock(sku="A-100", units=12) and executed == ["A-100", "A-100"]

    executed.clear()
    model = _Follows(_plan(means_call=False), smollm2_tokenizer)
    agent = Agent(
        model, tools=[lookup_stock], output_type=Stock, auto_call_bias=0.03, max_tokens=80
    )
    result = agent.run_sync("How many A-100 do we have?")
    assert result.output == Stock(sku="A-100", units=100) and executed == []


@tool
def lookup_price(sku: str) -> float:
    """The unit price of a product."""
    executed.append(f"price {sku}")
    return 9.5


def _wants(name: str) -> Plan:
    """A model that opens a call to `name`, and else answers in words."""

    def plan(request: TurnRequest, done: str) -> Sequence[str]:
        if any(m.role == "tool" for m in request.messages):
            return ["It costs 9.50."]
        call = f'<tool_call>\n{{"name": "{name}", "arguments": {{"sku": "A-100"}}}}\n</tool_call>'
        return [call, "I cannot tell."]

    return plan


def test_a_name_that_parts_from_the_offered_ones_after_their_shared_start_is_no_call(
    smollm2_tokenizer: Any,
) -> None:
    """A tool-trained model (its template renders tools) wants `lookup_orders`, which nobody
    offered: its first name token (`look`) is the offered names' too, and only later does its
    mass leave them. The call decision follows the whole name, so no tool runs and the model
    answers; wanting `lookup_price`, it calls that."""
    tok = copy.deepcopy(smollm2_tokenizer)
    tok.chat_template = HERMES_LIKE.replace("SEPS", "(', ', ': ')")  # a tool-trained model
    shared = tok.encode("lookup_orders", add_special_tokens=False)[0]
    assert shared == tok.encode("lookup_stock", add_special_tokens=False)[0]
    for name, output, runs in (
        ("lookup_orders", "I cannot tell.", []),
        ("lookup_price", "It costs 9.50.", ["price A-100"]),
    ):
        executed.clear()
        agent = Agent(_Follows(_wants(name), tok), tools=[lookup_stock, lookup_price])
        result = agent.run_sync("What do our orders say about A-100?")
        assert (result.output, executed) == (output, runs)
