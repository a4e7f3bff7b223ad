"""One model turn as the agent asks for it, and what it reads back from it.

Before the turn: the call format (the model's own, from its chat template), the turn grammar
for this turn's tool choice and tools, the gate that steers call boundaries, the request the
backend renders. After it: whether `max_tokens` cut a value (a `TruncationError`), the calls
parsed out of its text, the reasoning split from the answer.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, cast

from sdk._stream import TurnScanner
from sdk.agent._config import call_style_of, check_processors
from sdk.backends import TurnSettings
from sdk.backends.chat_template import (
    detect_call_format,
    probe_call_style,
    template_supports_tools,
)
from sdk.decoding import (
    DEFAULT_AUTO_CALL_BIAS,
    TOOL_TRAINED_CALL_BIAS,
    CallGate,
    reasoning_start,
)
from sdk.decoding.call_style import SPACED, CallStyle
from sdk.decoding.formats import (
    HERMES,
    HermesFormat,
    ParsedCall,
    ToolCallFormat,
    format_traits,
    get_format,
    strip_property_titles,
)
from sdk.decoding.generate import TurnOutput, TurnRequest
from sdk.decoding.turn_grammar import TurnGrammar, build_turn_grammar
from sdk.errors import TruncationError
from sdk.history import HistoryProcessor
from sdk.history import apply as apply_processors

if TYPE_CHECKING:
    from sdk.agent import Agent
    from sdk.agent._run import RunState

_log = logging.getLogger("sdk.agent")


@dataclass
class TurnAssembly:
    """The agent's turn settings, and the turn-by-turn work that follows from them."""

    tools: Mapping[str, Any]
    output_schema: dict[str, Any] | None
    format_spec: ToolCallFormat | str  # "auto", a format's name, or a format
    style: CallStyle | None  # None: the model's own (its chat template's)
    auto_call_bias: float | str | None
    reasoning_tokens: int
    parallel_tool_calls: bool
    drop_repeated_calls: bool
    token_healing: bool
    history_processors: tuple[HistoryProcessor, ...] = ()

    # ------------------------------------------------------------------ before the turn

    def format_for(self, tokenizer: Any) -> ToolCallFormat:
        """The call format with its body layout, for a model with this tokenizer (None: a
        server, or a model not loaded yet)."""
        spec = self.format_spec
        if isinstance(spec, str):
            if spec != "auto":
                fmt: ToolCallFormat = get_format(spec)
            elif tokenizer is not None:
                fmt = detect_call_format(tokenizer)
            else:  # a remote server parses calls itself; Hermes for text it returns raw
                fmt = HERMES
        else:
            fmt = spec
        with_style = format_traits(fmt).with_style
        if with_style is None:
            return fmt
        style = self.style
        if style is None:
            style = SPACED if tokenizer is None else probe_call_style(tokenizer)
        return cast(ToolCallFormat, with_style(style))

    def turn_grammar(
        self, tool_choice: str, fmt: ToolCallFormat, tools: Mapping[str, Any] | None = None
    ) -> TurnGrammar:
        # A reasoning model's span already precedes its call (the format's own markers).
        free_text = self.reasoning_tokens > 0 and not format_traits(fmt).reasoning
        return build_turn_grammar(
            list((self.tools if tools is None else tools).values()),
            tool_choice,
            self.output_schema,
            fmt,
            parallel_tool_calls=self.parallel_tool_calls,
            reasoning=free_text,
        )

    def system_text(self, system_prompt: str | None) -> str | None:
        parts = [system_prompt] if system_prompt else []
        if self.output_schema is not None:
            schema = json.dumps(strip_property_titles(self.output_schema), ensure_ascii=False)
            when = "When you have the final answer, reply" if self.tools else "Reply"
            parts.append(f"{when} with JSON matching this JSON schema:\n{schema}")
        return "\n\n".join(parts) if parts else None

    def request(
        self, run: RunState, tool_choice: str, fmt: ToolCallFormat
    ) -> tuple[TurnRequest, TurnGrammar]:
        grammar = self.turn_grammar(tool_choice, fmt, run.offered)
        # Every tool is shown (a named tool_choice narrows the grammar, not the prompt).
        messages = run.messages
        if self.history_processors:
            messages = apply_processors(self.history_processors, messages)
        request = TurnRequest(
            messages=tuple(messages),
            tools=list(run.offered.values()) if tool_choice != "none" else [],
            tool_choice=tool_choice,
            output_schema=self.output_schema,
            fmt=fmt,
        )
        return request, grammar

    def settings(
        self, run: RunState, grammar: TurnGrammar, fmt: ToolCallFormat, tokenizer: Any
    ) -> TurnSettings:
        return TurnSettings(
            max_tokens=run.max_tokens,
            sampling=run.sampling,
            parallel_tool_calls=self.parallel_tool_calls,
            gate=self.gate(grammar, fmt, tokenizer, look=not run.tool_calls),
            heal=self.token_healing,
            scanner=self.scanner(run, grammar, fmt) if run.sink is not None else None,
            cancel=run.cancel,
        )

    def call_bias(self, tokenizer: Any) -> float:
        """`auto_call_bias`, with "auto" resolved: models whose chat template renders tools
        were trained to call and are confident when a tool fits, so they get a stricter bias
        than generic chat models (see `sdk.decoding._gate`)."""
        if self.auto_call_bias != "auto":
            return float(cast(float, self.auto_call_bias))
        if tokenizer is not None and template_supports_tools(tokenizer):
            return TOOL_TRAINED_CALL_BIAS
        return DEFAULT_AUTO_CALL_BIAS

    def gate(
        self, grammar: TurnGrammar, fmt: ToolCallFormat, tokenizer: Any, *, look: bool = False
    ) -> CallGate | None:
        """How this turn's call boundaries are steered (see `sdk.decoding._gate`). `look`:
        the run has made no call yet, so a typed output's start that also begins an untagged
        call is looked past (`CallGate.look`)."""
        if not grammar.tool_names:
            return None
        traits = format_traits(fmt)
        closer = traits.closer
        # Several calls per turn, each closed: the loop can cut back to the last complete one.
        tracked = self.parallel_tool_calls and closer is not None
        # A reasoning model's span: no call is seen inside it; `reasoning_tokens` bounds it.
        thinking = traits.reasoning
        gate = CallGate(
            fmt.opener,
            closer,
            drop_repeats=tracked and self.drop_repeated_calls,
            keep_complete_calls=tracked,
            reasoning=thinking,
            reasoning_budget=(self.reasoning_tokens or None) if thinking else None,
            at_start_only=traits.whole_reply,
        )
        if grammar.mode == "auto" and self.auto_call_bias is not None:
            prefix = _name_prefix(fmt)
            return replace(
                gate,
                bias=self.call_bias(tokenizer),
                name_prefix=prefix,
                whole_name=tokenizer is not None and template_supports_tools(tokenizer),
                untagged=None if traits.whole_reply else _untagged(fmt, prefix),
                look=look and grammar.has_output,
            )
        budget = self.reasoning_tokens if grammar.mode == "required" and not thinking else 0
        if budget > 0 or tracked or thinking:
            return replace(gate, budget=budget or None)
        return None

    def scanner(self, run: RunState, grammar: TurnGrammar, fmt: ToolCallFormat) -> TurnScanner:
        assert run.sink is not None
        opener = fmt.opener if grammar.tool_names else None
        traits = format_traits(fmt)
        # Calls `opener {"name": .., "arguments": ..} closer` stream their arguments as they
        # are written; other layouts are parsed whole when the turn ends.
        streamed = isinstance(fmt, HermesFormat) and fmt.arguments_key == "arguments"
        return TurnScanner(
            run.usage.steps + 1,
            opener,
            traits.closer,
            run.sink,
            parse=None if streamed else lambda text: self.parse_calls(text, fmt),
            reasoning=traits.reasoning,
            at_start=traits.whole_reply,
        )

    # ------------------------------------------------------------------ after the turn

    def account(
        self, run: RunState, out: TurnOutput, grammar: TurnGrammar, fmt: ToolCallFormat
    ) -> TurnOutput:
        """Usage and the truncation check, the same for every backend."""
        run.usage.add(out.usage)
        run.last_raw = out.text
        if _log.isEnabledFor(logging.DEBUG):
            u = out.usage
            _log.debug(
                "turn %d (%s): %d tokens (%d forced), %d forward passes, mask %.3f s of "
                "%.3f s, finish=%s",
                run.usage.steps + 1,
                grammar.mode,
                u.completion_tokens,
                u.forced_tokens,
                u.forward_passes,
                u.mask_time_s,
                u.generation_time_s,
                out.finish_reason,
            )
        if out.accepting and not self._cut_inside_value(run, out, grammar, fmt):
            return out
        opener = fmt.opener
        in_call = (
            bool(out.calls)
            or not grammar.has_output
            or (
                bool(grammar.tool_names)
                and (opener in out.text or opener.startswith(out.text.lstrip()))
            )
        )
        where = "tool call" if in_call else "structured output"
        why = (
            f"a value ran away inside a {where} ({out.runaway!r} over and over)"
            if out.runaway
            else f"max_tokens={run.max_tokens} ran out inside a {where}"
        )
        raise TruncationError(
            why, partial_text=out.text, messages=list(run.messages), runaway=out.runaway
        )

    def _cut_inside_value(
        self, run: RunState, out: TurnOutput, grammar: TurnGrammar, fmt: ToolCallFormat
    ) -> bool:
        """Did `max_tokens` cut a constrained span (a call, a typed output)? Such a value
        counts only when the model or the grammar ended it, even if the cut left text the
        grammar accepts (`12` of `12345`). A cut in "auto"'s free text is an ordinary
        "length" finish."""
        if out.finish_reason != "length" or not grammar.constrained or grammar.mode == "none":
            return False  # free text (an answer) cut short is an ordinary "length" finish
        if out.dropped == "truncated":  # the cut call is gone; the turn is its complete calls
            _log.warning(
                "%s inside a call: it was dropped, the %d complete calls before it are kept",
                f"a value ran away ({out.runaway!r} over and over)"
                if out.runaway
                else f"max_tokens={run.max_tokens} ran out",
                len(self.calls(out, grammar, fmt)),
            )
            return False
        if grammar.mode != "auto" or grammar.has_output:
            return True
        opener = fmt.opener
        traits = format_traits(fmt)
        closer = traits.closer
        opened = out.text.rfind(opener)
        if traits.whole_reply:  # calls are the reply, or there are none
            head = split_reasoning(out, fmt)[1]
            opened = 0 if head.lstrip().startswith(opener) else -1
        if opened < 0:
            return False
        return not closer or out.text.find(closer, opened) < 0

    def calls(self, out: TurnOutput, grammar: TurnGrammar, fmt: ToolCallFormat) -> list[ParsedCall]:
        """The turn's calls: split by a remote server already, or parsed out of the text
        (values the format wrote as raw text typed by the named tool's schema)."""
        if out.calls is not None:
            return list(out.calls)
        if not grammar.tool_names:
            return []
        return self.parse_calls(out.text, fmt, out.reasoning_opened)

    def parse_calls(self, text: str, fmt: ToolCallFormat, opened: bool = False) -> list[ParsedCall]:
        calls = fmt.parse(reasoning_start(fmt) + text if opened else text)
        resolve = format_traits(fmt).resolve_arguments
        if resolve is not None:
            for i, call in enumerate(calls):
                tool = self.tools.get(call.name)
                schema = getattr(tool, "grammar_schema", None) or getattr(tool, "json_schema", None)
                if isinstance(schema, dict):
                    calls[i] = resolve(call, schema)
        return calls


def assembly_of(
    agent: Agent[Any], output_schema: dict[str, Any] | None, history_processors: Any
) -> TurnAssembly:
    """The `TurnAssembly` of an agent's checked settings (`call_style` is checked against
    the format here, then `history_processors`)."""
    return TurnAssembly(
        tools=agent.tools,
        output_schema=output_schema,
        format_spec=agent.format,
        style=call_style_of(agent.call_style, agent.format),
        auto_call_bias=agent.auto_call_bias,
        reasoning_tokens=agent.reasoning_tokens,
        parallel_tool_calls=agent.parallel_tool_calls,
        drop_repeated_calls=agent.drop_repeated_calls,
        token_healing=agent.token_healing,
        history_processors=check_processors(history_processors),
    )


def split_reasoning(out: TurnOutput, fmt: ToolCallFormat) -> tuple[str, str]:
    """`(reasoning, answer)` of a final turn (reasoning "" for formats without it); a span
    the prompt opened counts from the turn's first character."""
    split = format_traits(fmt).split_reasoning
    if split is None:
        return "", out.text
    start = reasoning_start(fmt) if out.reasoning_opened else ""
    thought, answer = split(start + out.text)
    thought = thought[len(start) :]
    return thought, answer.lstrip() if thought else answer


def answer_text(out: TurnOutput, fmt: ToolCallFormat) -> str:
    answer = split_reasoning(out, fmt)[1]
    unwrap = format_traits(fmt).answer_text
    return str(unwrap(answer)) if unwrap is not None else answer


_ARGUMENT_KEYS = ("arguments", "parameters", "args")
_JSON_START = re.compile(r"[{\[]")
_ARGS_MEMBER = re.compile(
    r"""\\?["']?[ \t]*,?\s*\\?["']?(?:arguments|parameters|args)\\?["']?\s*[:=]"""
)
_NAME_MEMBER = re.compile(r"""\bname\\?["']?\s*[:=]\s*\\?["']?([A-Za-z0-9_-]{1,64})""")
_MAX_JSON_STARTS = 64  # bounds the scan of a long answer (each start is one JSON decode)


def _call_name(value: Any, names: Collection[str]) -> str | None:
    """The tool a call-shaped JSON value names ("" when it names no offered tool); None when
    the value is not shaped like a call."""
    if isinstance(value, list):  # calls in a list, or `["tool", {arguments}]`
        if value and isinstance(value[0], str):
            return value[0] if value[0] in names else None
        found = [_call_name(v, names) for v in value[:8]]
        return max((f for f in found if f is not None), default=None, key=len)
    if not isinstance(value, dict):
        return None
    fn = value.get("function")
    if isinstance(fn, dict):  # OpenAI's {"type": "function", "function": {...}}
        value = fn
    name = value.get("name")
    if not isinstance(name, str):
        return None
    if name in names:
        return name
    return "" if any(k in value for k in _ARGUMENT_KEYS) else None


def named_calls(text: str, name: str) -> int:
    """How many calls a text names `name` in (`name: add`, `"name": "add"`): a call written
    as text is generated again as no more calls than it wrote."""
    return sum(1 for m in _NAME_MEMBER.finditer(text) if m.group(1) == name)


def disguised_call(text: str, fmt: ToolCallFormat, names: Collection[str]) -> str | None:
    """Is this answer a tool call written as text: the format's envelope, a `name` member
    naming an offered tool (quoted or not, even in broken JSON), or a JSON value shaped like
    a call (a `name` and its arguments), bare, in a list or in a fence, anywhere in the text?
    Returns the offered tool it names ("" for none), None for an answer. Grammars keep the
    common shapes out of local answers; this catches the rest, and what a server or a
    scripted model returns."""
    found: str | None = None
    for m in _NAME_MEMBER.finditer(text):  # `"name": "get_weather"`, `name: calculate`
        if m.group(1) in names:
            return m.group(1)
        if _ARGS_MEMBER.match(text, m.end()):  # a name, then its arguments: a call still
            found = ""
    decoder = json.JSONDecoder()
    for tries, m in enumerate(_JSON_START.finditer(text)):
        if tries >= _MAX_JSON_STARTS:
            break
        try:
            value = decoder.raw_decode(text, m.start())[0]
        except ValueError:
            continue
        name = _call_name(value, names)
        if name:
            return name
        found = found if name is None else name
    if found is not None:
        return found
    traits = format_traits(fmt)
    if traits.whole_reply:  # calls are the whole reply: an opener inside text is text
        return "" if text.lstrip().startswith(fmt.opener) else None
    if fmt.opener in text or (traits.closer and traits.closer in text):
        return ""
    return None


def _name_prefix(fmt: ToolCallFormat) -> str | None:
    """A call's text up to the first character of its tool name, as `fmt` renders it (None
    when the name is not a JSON string there)."""
    marker = "sdk\x00name"
    text = fmt.render_call(marker, {})
    at = text.find(json.dumps(marker))
    return text[: at + 1] if at >= 0 else None


def _untagged(fmt: ToolCallFormat, name_prefix: str | None) -> str | None:
    """How a call's body opens without its envelope (`{"name": "` for Hermes), where that
    is JSON: the start tool-trained models write calls with when the opener is not forced."""
    if name_prefix is None or not name_prefix.startswith(fmt.opener):
        return None
    body = name_prefix[len(fmt.opener) :].lstrip()
    return body if body.startswith(("{", "[")) else None
