"""`LlamaCppModel`: the embedded SmolLM2 GGUF run by llama.cpp in process, under the SDK's masks.

Real parts throughout: the GGUF, llama.cpp's decode and tokenizer, the turn grammar.
"""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import numpy as np
import pytest
from pydantic import BaseModel, Field

pytest.importorskip("llama_cpp")

from sdk import Agent, ContextLengthError, tool  # noqa: E402
from sdk.backends.embedded import smollm2_gguf_path  # noqa: E402
from sdk.backends.llamacpp import LlamaCppModel, _LlamaSession  # noqa: E402
from sdk.backends.local import coerce_model, local_backend  # noqa: E402
from sdk.errors import ConfigError, ModelLoadError  # noqa: E402


@pytest.fixture(scope="module")
def llama() -> LlamaCppModel:
    try:
        smollm2_gguf_path()
    except ModelLoadError as exc:
        pytest.skip(str(exc))
    return LlamaCppModel("smollm2", n_ctx=2048, n_threads=1)


@tool
def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """Current weather for a city."""
    return json.dumps({"city": city, "temperature": 22, "unit": unit})


class Booking(BaseModel):
    city: str = Field(max_length=40)
    nights: int = Field(ge=1, le=30)
    breakfast: bool


_TEXTS = [
    'Hello <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
    "café 東京 ✓ naïve — 3.14e-2 \t\n  spaces",
    '{"a":  1, "b":\n    [2, 3]}',
]


@pytest.mark.parametrize("text", _TEXTS)
def test_the_tokenizers_ids_spell_the_text_in_the_index(llama: LlamaCppModel, text: str) -> None:
    """llama.cpp tokenizes, the index (built from llama.cpp's pieces) masks: the bytes of the
    ids must be the text, or forced text and masks would disagree with the prompt's tokens."""
    ids = llama.tokenizer.encode(text)
    assert llama.index.decode_bytes(ids) == text.encode()
    assert llama.tokenizer.decode(ids) == text
    assert llama.n_vocab == len(llama.tokenizer) == llama.index.vocab_size


@pytest.mark.parametrize("text", [*_TEXTS, "x =  12,\t 345", "a  1\n   22   333"])
def test_both_backends_tokenize_as_the_model_does(llama: LlamaCppModel, text: str) -> None:
    """The transformers backend's tokenizer (the GGUF converted) gives llama.cpp's ids: the
    conversion drops SmolLM2's digit split, which the SDK puts back (`"  1"` is `ĠĠ` `1`)."""
    from sdk.backends.embedded import load_tokenizer

    converted = load_tokenizer("smollm2")
    assert converted.encode(text, add_special_tokens=False) == llama.tokenizer.encode(text)


def test_special_tokens_are_parsed_in_prompts_and_carry_no_bytes(llama: LlamaCppModel) -> None:
    tok = llama.tokenizer
    ids = tok.encode("<|im_start|>user\nhi<|im_end|>")
    vocab = tok.get_vocab()
    assert ids[0] == vocab["<|im_start|>"] and ids[-1] == vocab["<|im_end|>"]
    assert vocab["<|im_end|>"] in llama.index.eos_ids
    assert llama.index.token_bytes[vocab["<|im_start|>"]] == b""
    assert tok.special_tokens_map["eos_token"] == "<|im_end|>"


def test_prompts_render_as_transformers_renders_them(llama: LlamaCppModel) -> None:
    """The chat template runs through transformers' own renderer: with the converted
    tokenizer (the transformers backend's) the prompt text is the same, tools, a call and its
    result included."""
    from sdk.backends.chat_template import render_prompt
    from sdk.backends.embedded import load_tokenizer
    from sdk.decoding import HERMES, TurnRequest
    from sdk.messages import Message, ToolCallPart
    from sdk.tools import as_tool

    call = ToolCallPart(id="c1", name="get_weather", arguments={"city": "Paris"})
    request = TurnRequest(
        [
            Message.system("Be brief."),
            Message.user("Weather in Paris?"),
            Message.assistant("", tool_calls=[call]),
            Message.tool('{"temperature": 22}', tool_call_id="c1", name="get_weather"),
        ],
        [as_tool(get_weather)],
        fmt=HERMES,
    )
    ours = render_prompt(llama.tokenizer, request)
    assert ours == render_prompt(load_tokenizer("smollm2"), request)
    assert 'Result of get_weather: {"temperature": 22}' in ours


def test_the_tokenizer_does_not_outlive_its_model() -> None:
    model = LlamaCppModel("smollm2", n_ctx=256, n_threads=1)
    tok = model.tokenizer
    assert tok.encode("hi")
    model.close()
    with pytest.raises(ModelLoadError, match="closed"):
        tok.encode("hi")


def test_rollback_forgets_the_tokens_fed_after_it(llama: LlamaCppModel) -> None:
    """A rolled-back detour leaves the cache as if it never ran: the next token's logits are
    those of a turn that went straight on (same positions, same cells)."""

    def encode(text: str) -> list[int]:
        return list(llama.tokenizer.encode(text, add_special_tokens=False))

    prompt, detour, paris = (
        encode("The capital of France is"),
        encode(" Berlin, and the capital of Spain is"),
        encode(" Paris"),
    )
    straight = _LlamaSession(llama._context, prompt)
    straight.prefill()
    want = straight.feed(paris)
    straight.close()

    turn = _LlamaSession(llama._context, prompt)
    turn.prefill()
    turn.feed(detour)
    turn.rollback(len(detour))
    got = turn.feed(paris)
    turn.close()
    assert turn.cached_tokens == len(prompt) - 1  # the straight turn's cells, shared
    assert float(np.abs(got - want).max()) == 0.0


def test_a_required_call_is_valid_and_runs(llama: LlamaCppModel) -> None:
    agent = Agent(llama, tools=[get_weather], tool_choice=["required", "none"], max_tokens=96)
    result = agent.run_sync("What's the weather in Paris in celsius?")
    calls = [m for m in result.all_messages() if m.role == "assistant" and m.tool_calls]
    assert calls, result.all_messages()
    call = calls[0].tool_calls[0]
    assert call.name == "get_weather"
    assert isinstance(call.arguments["city"], str)
    assert call.arguments.get("unit", "celsius") in ("celsius", "fahrenheit")
    assert isinstance(result.output, str) and result.output.strip()


def test_typed_output_validates(llama: LlamaCppModel) -> None:
    agent = Agent(llama, output_type=Booking, max_tokens=96)
    result = agent.run_sync("Book 3 nights in Lisbon with breakfast.")
    assert isinstance(result.output, Booking)
    assert 1 <= result.output.nights <= 30


def test_the_next_turn_reuses_the_cached_prefix_and_says_so(llama: LlamaCppModel) -> None:
    agent = Agent(llama, output_type=Booking, system_prompt="You book hotels.", max_tokens=64)
    first = agent.run_sync("Book 2 nights in Rome, no breakfast.")
    second = agent.run_sync("Book 2 nights in Oslo, no breakfast.")
    assert first.usage.cached_prompt_tokens < second.usage.cached_prompt_tokens
    assert second.usage.cached_prompt_tokens >= 10
    assert isinstance(second.output, Booking) and second.output.nights == 2


def test_one_turn_at_a_time_still_keeps_several_prefixes() -> None:
    """`max_batch=1` runs one turn at a time, but an agent's turns alternate between prompts
    that share little (with tools, and the answer turn of "none" without): both stay cached."""
    from sdk.backends._llama_batch import MIN_SLOTS

    one = LlamaCppModel(smollm2_gguf_path(), n_ctx=2048, n_threads=1, max_batch=1)
    assert len(one._context.slots) == MIN_SLOTS and one._context.running == 1
    a = Agent(one, system_prompt="You answer in French.", max_tokens=4)
    b = Agent(one, system_prompt="Tu réponds en anglais, toujours très brièvement.", max_tokens=4)
    a.run_sync("Hello there.")
    b.run_sync("Bonjour.")
    again = a.run_sync("Hello there.")
    assert again.usage.cached_prompt_tokens == again.usage.prompt_tokens - 1


def test_a_prompt_longer_than_the_window_is_a_context_length_error() -> None:
    small = LlamaCppModel(smollm2_gguf_path(), n_ctx=64, n_threads=1)
    assert 64 <= small.context_length <= 512  # llama.cpp rounds the window up (to 256 here)
    with pytest.raises(ContextLengthError) as err:
        Agent(small).run_sync("Tell me about Paris. " * 120)
    assert err.value.context_length == small.context_length
    assert err.value.prompt_tokens > small.context_length


def test_streaming_and_async_runs(llama: LlamaCppModel) -> None:
    """Token-by-token events from llama.cpp's turns; the deltas spell the output."""
    from sdk.events import ArgsDelta, FinalResult, TextDelta

    agent = Agent(llama, output_type=Booking, max_tokens=64)

    async def go() -> list[Any]:
        return [e async for e in agent.run_stream("Book 1 night in Paris with breakfast.")]

    events = asyncio.run(go())
    final = events[-1]
    assert isinstance(final, FinalResult)
    assert isinstance(final.result.output, Booking)
    deltas = [e for e in events if isinstance(e, TextDelta | ArgsDelta)]
    assert len(deltas) > 3  # streamed, not one block at the end


def test_bad_arguments_are_typed_errors() -> None:
    with pytest.raises(ModelLoadError):
        LlamaCppModel("not-a-model")
    with pytest.raises(ConfigError):
        LlamaCppModel(smollm2_gguf_path(), max_batch=0)
    with pytest.raises(ConfigError):
        local_backend("vllm")


def test_reproducible_mode_is_a_switch_and_an_environment_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`SDK_LLAMA_REPRODUCIBLE=1` reaches models named by a string; an explicit argument wins;
    a value that is not a yes or a no is a `ConfigError` before anything loads."""
    monkeypatch.setenv("SDK_LLAMA_REPRODUCIBLE", "1")
    on = LlamaCppModel(smollm2_gguf_path(), n_ctx=256, n_threads=1)
    assert on.reproducible and on._context is not None and on._context.span < 64
    off = LlamaCppModel(smollm2_gguf_path(), n_ctx=256, n_threads=1, reproducible=False)
    assert not off.reproducible and off._context is not None and off._context.span == 512
    monkeypatch.setenv("SDK_LLAMA_REPRODUCIBLE", "maybe")
    with pytest.raises(ConfigError, match="SDK_LLAMA_REPRODUCIBLE"):
        LlamaCppModel("not-loaded-because-the-setting-is-bad")
    monkeypatch.delenv("SDK_LLAMA_REPRODUCIBLE")
    assert not LlamaCppModel(smollm2_gguf_path(), n_ctx=256, n_threads=1).reproducible


def test_names_resolve_to_the_chosen_local_backend(
    llama: LlamaCppModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SDK_LOCAL_BACKEND", "llama.cpp")
    assert local_backend() == "llama.cpp"
    assert isinstance(coerce_model(str(smollm2_gguf_path())), LlamaCppModel)
    assert coerce_model(llama) is llama
    monkeypatch.setenv("SDK_LOCAL_BACKEND", "torch")
    with pytest.raises(ConfigError, match="SDK_LOCAL_BACKEND"):
        local_backend()


def test_the_log_callback_keeps_llama_cpp_quiet(capfd: pytest.CaptureFixture[str]) -> None:
    LlamaCppModel(smollm2_gguf_path(), n_ctx=128, n_threads=1).close()
    assert "llama_model_loader" not in capfd.readouterr().err


CITIES = ["Paris", "Rome", "Oslo", "Lima", "Cairo", "Seoul", "Quito", "Perth"]


def test_a_sequences_logits_do_not_depend_on_its_batch() -> None:
    """Four short prompts decoded alone, each in a fresh context, then together: prompts in
    one batch, then greedy steps in lockstep with a forced run in between. Every logit is the
    same (a lone token is padded, short requests are batched only with short ones, flash
    attention's per-token kernel skips other sequences' cells): steps and forced runs of
    concurrent turns compute what they would alone."""

    def greedy(context: Any, prompts: list[list[int]], together: bool) -> list[list[Any]]:
        slots = [context.take(p)[0] for p in prompts]
        rows: list[list[Any]] = [[] for _ in prompts]

        def step(feeds: list[list[int]]) -> None:
            if together:
                with ThreadPoolExecutor(len(slots)) as pool:
                    out = list(pool.map(context.decode, slots, feeds))
            else:
                out = [context.decode(s, f) for s, f in zip(slots, feeds, strict=True)]
            for row, logits in zip(rows, out, strict=True):
                row.append(logits)

        step(prompts)
        for i in range(6):
            nxt = [[int(r[-1].argmax())] for r in rows]
            step([n + [n[0]] * 3 for n in nxt] if i == 2 else nxt)  # a forced run of 4
        for s in slots:
            context.give_back(s)
        return rows

    model = LlamaCppModel(smollm2_gguf_path(), n_ctx=1024, n_threads=1, max_batch=4)
    enc = model.tokenizer.encode
    prompts = [
        list(enc(f"The weather in {c} today is", add_special_tokens=False)) for c in CITIES[:4]
    ]
    alone = []
    for p in prompts:
        fresh = LlamaCppModel(smollm2_gguf_path(), n_ctx=1024, n_threads=1, max_batch=4)
        alone.append(greedy(fresh._context, [p], together=False)[0])
        fresh.close()
    sizes: list[int] = []
    decode_rows = model._context._decode_rows  # type: ignore[union-attr]

    def counted(rows: Any) -> None:
        sizes.append(sum(r[2] for r in rows))
        decode_rows(rows)

    model._context._decode_rows = counted  # type: ignore[union-attr,method-assign]
    together = greedy(model._context, prompts, together=True)
    assert max(sizes) > max(len(p) for p in prompts)  # prompts shared decodes
    for a, b in zip(alone, together, strict=True):
        assert [float(np.abs(x - y).max()) for x, y in zip(a, b, strict=True)] == [0.0] * len(a)


def test_concurrent_runs_share_decodes_and_the_prompt_prefix() -> None:
    """Eight runs gathered with asyncio: one `llama_decode` serves several of them, the
    system prompt and tools are evaluated once, and every run ends with its call and answer;
    reproducible, each writes what it writes alone."""
    model = LlamaCppModel(
        smollm2_gguf_path(), n_ctx=4096, n_threads=1, max_batch=8, reproducible=True
    )
    agent = Agent(model, tools=[get_weather], tool_choice=["required", "none"], max_tokens=48)
    questions = [f"What's the weather in {c}?" for c in CITIES]
    sizes: list[int] = []
    decode_rows = model._context._decode_rows  # type: ignore[union-attr]

    def counted(rows: Any) -> None:
        sizes.append(len({id(r[0]) for r in rows}))
        decode_rows(rows)

    model._context._decode_rows = counted  # type: ignore[union-attr,method-assign]

    async def gather() -> list[Any]:
        return await asyncio.gather(*(agent.run(q) for q in questions))

    results = asyncio.run(gather())
    assert max(sizes) >= 4  # several runs' tokens in one decode
    for result in results:
        calls = [c for m in result.all_messages() for c in (m.tool_calls or [])]
        assert calls and calls[0].name == "get_weather"
        assert isinstance(result.output, str) and result.output.strip()
    assert sum(r.usage.cached_prompt_tokens > 0 for r in results) >= 7  # the shared prefix
    # Reproducible: each run writes what it writes alone, one at a time, in another process's
    # worth of cache history (a model of its own, runs in reverse order); three of the eight,
    # the first, a middle one and the last (each costs a run on one thread).
    alone = LlamaCppModel(
        smollm2_gguf_path(), n_ctx=4096, n_threads=1, max_batch=1, reproducible=True
    )
    solo = Agent(alone, tools=[get_weather], tool_choice=["required", "none"], max_tokens=48)
    pairs = list(zip(questions, results, strict=True))
    for question, result in reversed([pairs[0], pairs[len(pairs) // 2], pairs[-1]]):
        assert solo.run_sync(question).output == result.output


def test_a_turns_logits_do_not_depend_on_what_ran_before() -> None:
    """Reproducible mode: a turn computes the same logits in a fresh context and
    in one whose history split its prompt elsewhere (a cached prefix) and freed cells below
    its own while it ran (a slot taken over by another turn). No decode holds 64 tokens.
    (With prompts in one decode and no compaction, SmolLM2's logits here moved by up to 1.0.)"""
    model = LlamaCppModel(
        smollm2_gguf_path(), n_ctx=2048, n_threads=1, max_batch=2, reproducible=True
    )
    context = model._context
    assert context is not None

    def ids(text: str) -> list[int]:
        return list(model.tokenizer.encode(text, add_special_tokens=False))

    def prefilled(prompt: list[int]) -> tuple[_LlamaSession, list[Any]]:
        turn = _LlamaSession(context, prompt)
        return turn, [turn.prefill()]

    def steps(turn: _LlamaSession, rows: list[Any], n: int = 6) -> list[Any]:
        for _ in range(n):
            rows.append(turn.feed([int(rows[-1].argmax())]))
        return rows

    story = " ".join(f"{c} is a city where the weather changes often." for c in CITIES)
    prompt = ids(f"Here are some notes.\n{story}\nQuestion: which city comes first?")
    others = [ids(f"{c}: {story[: 60 * (4 - k)]}") for k, c in enumerate(CITIES[:4])]
    turn, rows = prefilled(prompt)
    want = steps(turn, rows)
    turn.close()

    sizes: list[int] = []
    decode_rows = context._decode_rows

    def counted(rows: Any) -> None:
        sizes.append(sum(r[2] for r in rows))
        decode_rows(rows)

    context._decode_rows = counted  # type: ignore[method-assign]
    context.clear()
    for other in others[:3]:  # three slots hold other prompts, lowest in the pool
        prefilled(other)[0].close()
    prefilled(prompt[:50])[0].close()
    turn, got = prefilled(prompt)
    assert turn.cached_tokens == 50  # the prompt split where the cached prefix ends
    taker, _ = prefilled(others[3])  # takes the least recent slot: cells freed below the turn's
    steps(turn, got)
    taker.close()
    turn.close()
    assert 0 < max(sizes) < 64
    assert [float(np.abs(a - b).max()) for a, b in zip(want, got, strict=True)] == [0.0] * 7
    # Rows after each token of a long forced run (what `decoding="best"` scores with) cross
    # decodes here, and equal the same tokens fed one by one.
    forced = prompt[:70]
    turn, first = prefilled(prompt)
    rows = turn.feed_rows(forced)
    turn.close()
    turn, one_by_one = prefilled(prompt)
    singles = [turn.feed([t]) for t in forced]
    turn.close()
    assert float(np.abs(first[0] - one_by_one[0]).max()) == 0.0
    assert float(np.abs(rows - np.stack(singles)).max()) == 0.0
