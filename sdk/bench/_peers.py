"""Engine adapters: one small common interface over our engine and the peer libraries.

The benchmark loop (`maskbench._run_schema`) only talks to `Adapter`, so every engine is
timed by exactly the same code and differences come from the engines, not the harness.
Tokenizer-level setup happens in each adapter's constructor, once per worker, outside timing.
Peer libraries are optional: they are imported lazily so the package imports without them.
"""

from __future__ import annotations

import json
from typing import Any, Literal, Protocol, cast

import numpy as np

ENGINES: tuple[str, ...] = ("ours", "llguidance", "xgrammar")


class CompileFailed(Exception):
    """The engine refused the schema on purpose (counted as a compile error, not a crash)."""


class EngineUnavailable(Exception):
    """The engine cannot run in this environment (library missing); the run skips it."""


class Adapter(Protocol):
    """What the replay loop needs from an engine; all state lives in the returned objects."""

    name: str
    eos_ids: list[int]

    def compile(self, schema: Any) -> Any:
        """Compile `schema`; raise `CompileFailed` for schemas the engine rejects."""
        ...

    def new_matcher(self, state: Any) -> Any:
        """A fresh matcher at the start of the grammar."""
        ...

    def mask(self, m: Any) -> Any:
        """The allowed-token mask for the next token (format private to the adapter)."""
        ...

    def allowed(self, m: Any, mask: Any, token_id: int) -> bool:
        """Whether `token_id` is set in `mask`."""
        ...

    def advance(self, m: Any, token_id: int) -> bool:
        """Consume `token_id`; False when the engine rejects it."""
        ...

    def accepting(self, m: Any) -> bool:
        """Whether the output may end here (EOS allowed)."""
        ...


def _bit_set(words: np.ndarray, token_id: int) -> bool:
    """Test bit `token_id` of a little-endian int32 bitmask (the layout both peers use)."""
    if token_id < 0 or (token_id >> 5) >= words.shape[-1]:
        return False
    return bool((int(words.flat[token_id >> 5]) >> (token_id & 31)) & 1)


class OursAdapter:
    """`sdk.engine`: schema → CompiledGrammar; SDKError means a deliberate compile refusal."""

    name = "ours"

    def __init__(
        self, tokenizer: Any, whitespace: str = "flexible", member_order: str = "declared"
    ) -> None:
        try:
            from sdk.engine import CompiledGrammar, Matcher, TokenizerIndex
            from sdk.errors import SDKError, TokenRejectedError
        except (ImportError, AttributeError) as e:  # engine not written yet
            raise EngineUnavailable(f"sdk.engine not importable: {e}") from e
        self._grammar_cls = CompiledGrammar
        self._matcher_cls = Matcher
        self._sdk_error = SDKError
        self._rejected = TokenRejectedError
        self._whitespace = whitespace
        self._member_order: Literal["declared", "any"] = (
            "any" if member_order == "any" else "declared"
        )
        # Per-process work (vocabulary arrays, compiled kernels) in setup, as the peers build
        # their tokenizer tries there: otherwise the first schema's TTFM carries ~200 ms of it.
        self.index = TokenizerIndex.from_hf(tokenizer).warm_up()
        eos = getattr(tokenizer, "eos_token_id", None)
        self.eos_ids = [eos] if isinstance(eos, int) else []
        # The same contract as the peers' adapters: the mask is written into one reused int32
        # bitmask (XGrammar's layout), not expanded to a bool per token.
        size = max(self.index.vocab_size, len(self.index.token_bytes))
        self._buf = np.zeros((size + 31) // 32, dtype=np.int32)

    def compile(self, schema: Any) -> Any:
        try:
            whitespace: Literal["compact", "flexible"] = (
                "compact" if self._whitespace == "compact" else "flexible"
            )
            return self._grammar_cls.from_schema(
                schema, whitespace=whitespace, strict=True, member_order=self._member_order
            )
        except self._sdk_error as e:
            raise CompileFailed(f"{type(e).__name__}: {e}") from e

    def new_matcher(self, state: Any) -> Any:
        return self._matcher_cls(state, self.index)

    def mask(self, m: Any) -> Any:
        m.fill_bitmask(self._buf)
        return self._buf

    def allowed(self, m: Any, mask: Any, token_id: int) -> bool:
        return _bit_set(mask, token_id)

    def advance(self, m: Any, token_id: int) -> bool:
        try:
            m.advance(token_id)
        except self._rejected:
            return False
        return True

    def accepting(self, m: Any) -> bool:
        return bool(m.is_accepting())


class LLGuidanceAdapter:
    """llguidance ≥1.0: `LLMatcher` over a JSON-schema grammar; errors are matcher states."""

    name = "llguidance"

    def __init__(self, tokenizer: Any, whitespace: str = "flexible") -> None:
        try:
            import llguidance
            import llguidance.hf
        except ImportError as e:
            raise EngineUnavailable(f"llguidance not installed: {e}") from e
        self._ll = llguidance
        self.tok = llguidance.hf.from_tokenizer(tokenizer)
        self.eos_ids = list(self.tok.eos_tokens)
        # One reused buffer and its raw address: replay reads a mask before asking for the next,
        # and this keeps numpy/ctypes overhead (~1.5 µs) out of the measured time.
        self._buf = np.zeros((self.tok.vocab_size + 31) // 32, dtype=np.int32)
        self._ptr = self._buf.ctypes.data
        if whitespace == "flexible":
            # Flexible whitespace accepts json.dumps' ", " and ": " around the "," ":" defaults.
            self._opts: dict[str, Any] = {"whitespace_flexible": True}
        else:
            self._opts = {
                "whitespace_flexible": False,
                "item_separator": ", ",
                "key_separator": ": ",
            }

    def compile(self, schema: Any) -> Any:
        try:
            grammar = self._ll.LLMatcher.grammar_from_json_schema(
                json.dumps(schema),
                defaults=cast(Any, self._opts),  # the peer's TypedDict; absent without [peers]
            )
            matcher = self._ll.LLMatcher(self.tok, grammar, log_level=0)
        except Exception as e:  # peer refusals come in many shapes; all are compile errors
            raise CompileFailed(f"{type(e).__name__}: {e}") from e
        if matcher.is_error():
            raise CompileFailed(matcher.get_error())
        return matcher

    def new_matcher(self, state: Any) -> Any:
        # Constructing an LLMatcher re-parses the grammar; a copy of the pristine one is what a
        # server with a grammar cache does per request.
        return state.deep_copy()

    def mask(self, m: Any) -> Any:
        m.unsafe_compute_mask_ptr(self._ptr, self._buf.nbytes)
        return self._buf

    def allowed(self, m: Any, mask: Any, token_id: int) -> bool:
        return _bit_set(mask, token_id)

    def advance(self, m: Any, token_id: int) -> bool:
        return bool(m.consume_token(token_id))

    def accepting(self, m: Any) -> bool:
        return bool(m.is_accepting()) and not m.is_error()


class XGrammarAdapter:
    """xgrammar ≥0.1.20: `GrammarCompiler.compile_json_schema` + `GrammarMatcher`."""

    name = "xgrammar"

    def __init__(self, tokenizer: Any, whitespace: str = "flexible") -> None:
        try:
            import xgrammar
        except ImportError as e:
            raise EngineUnavailable(f"xgrammar not installed: {e}") from e
        self._xg = xgrammar
        self.info = xgrammar.TokenizerInfo.from_huggingface(tokenizer)
        # One compile thread and no cache: TTFM must measure a cold compile of each schema.
        self.compiler = xgrammar.GrammarCompiler(self.info, max_threads=1, cache_enabled=False)
        self.eos_ids = list(self.info.stop_token_ids)
        self._buf = np.zeros((1, (self.info.vocab_size + 31) // 32), dtype=np.int32)
        self._flexible = whitespace == "flexible"

    def compile(self, schema: Any) -> Any:
        try:
            if self._flexible:
                return self.compiler.compile_json_schema(
                    json.dumps(schema), any_whitespace=True, strict_mode=False
                )
            return self.compiler.compile_json_schema(
                json.dumps(schema),
                any_whitespace=False,
                separators=(", ", ": "),
                strict_mode=False,
            )
        except Exception as e:  # RuntimeError / tvm_ffi errors for unsupported schemas
            raise CompileFailed(f"{type(e).__name__}: {e}") from e

    def new_matcher(self, state: Any) -> Any:
        return self._xg.GrammarMatcher(state)

    def mask(self, m: Any) -> Any:
        m.fill_next_token_bitmask(self._buf)  # reused like llguidance's, see there
        return self._buf

    def allowed(self, m: Any, mask: Any, token_id: int) -> bool:
        return _bit_set(mask, token_id)

    def advance(self, m: Any, token_id: int) -> bool:
        return bool(m.accept_token(token_id))

    def accepting(self, m: Any) -> bool:
        return bool(m.is_completed())


def make_adapter(
    name: str, tokenizer: Any, whitespace: str = "flexible", member_order: str = "declared"
) -> Adapter:
    """Build the adapter for `name`; raises `EngineUnavailable` when it cannot run here.
    `member_order` is ours alone (the peers' own member order is what it is)."""
    classes: dict[str, Any] = {
        "ours": OursAdapter,
        "llguidance": LLGuidanceAdapter,
        "xgrammar": XGrammarAdapter,
    }
    if name not in classes:
        raise EngineUnavailable(f"unknown engine {name!r} (known: {', '.join(ENGINES)})")
    if name == "ours":
        return OursAdapter(tokenizer, whitespace, member_order)
    adapter: Adapter = classes[name](tokenizer, whitespace)
    return adapter
