"""The BFCL bench's non-SDK modes and its token-alignment check.

- `XgrammarDriver`: XGrammar's HF `LogitsProcessor` forcing the whole reply to be one (or,
  for parallel questions, one or more newline-separated) `<tool_call>\\n BODY \\n</tool_call>`
  blocks, BODY under `call_body_schema(tools)` with the style's separators; the session is
  driven like `transformers.generate` would: one forward pass per token, greedy argmax over
  the processed scores, no fast-forward.
- `run_unconstrained`: the same prompt, plain greedy generation.
- `noncanonical_calls`: per call, do the generated ids spelling it differ from the
  tokenizer's own encoding of its text?
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

OPENER = "<tool_call>"
CLOSER = "</tool_call>"
_ROOT = "bfcl_calls"  # our root rule; the body grammar keeps its own `root`


@dataclass
class PeerTurn:
    """One generated turn of a non-SDK mode."""

    text: str
    token_ids: list[int] = field(default_factory=list)
    finish: str = "length"  # "stop" | "length" | "error"
    forward_passes: int = 0
    error: str | None = None


def _vocab_size(backend: Any) -> int:
    """Rows of the model's output layer (may exceed the tokenizer's vocabulary)."""
    model = getattr(backend, "model", None)
    if model is not None:
        try:
            return int(model.get_output_embeddings().weight.shape[0])
        except Exception:  # noqa: BLE001 - fall back to the tokenizer index
            pass
    return int(backend.index.vocab_size)


def _hf_tokenizer(backend: Any) -> Any:
    """A transformers tokenizer of the backend's vocabulary, as XGrammar reads one: the
    backend's own, or for llama.cpp's (`LlamaTokenizer`) the GGUF's converted one (the same
    ids and token texts)."""
    tok = backend.tokenizer
    if getattr(tok, "backend_tokenizer", None) is not None:
        return tok
    from sdk.backends.embedded import load_tokenizer

    return load_tokenizer(backend.path)


class XgrammarDriver:
    """Builds XGrammar call grammars for one model and runs turns under them."""

    def __init__(self, backend: Any) -> None:
        import xgrammar as xgr

        self.xgr = xgr
        self.info = xgr.TokenizerInfo.from_huggingface(
            _hf_tokenizer(backend), vocab_size=_vocab_size(backend)
        )
        self.compiler = xgr.GrammarCompiler(self.info, max_threads=1)
        self.stop_ids = set(self.info.stop_token_ids) | set(backend.index.eos_ids)

    def grammar_text(
        self, body_schema: dict[str, Any], separators: tuple[str, str] | None, parallel: bool
    ) -> str:
        """EBNF of the whole reply; `separators=None` (flexible style) allows any whitespace."""
        body = self.xgr.Grammar.from_json_schema(
            json.dumps(body_schema),
            any_whitespace=separators is None,
            separators=separators,
        )
        call = f'"{OPENER}\\n" root "\\n{CLOSER}"'
        rule = f'{call} ("\\n" {call})*' if parallel else call
        return f"{_ROOT} ::= {rule}\n{body}"

    def compile(
        self, body_schema: dict[str, Any], separators: tuple[str, str] | None, parallel: bool
    ) -> Any:
        text = self.grammar_text(body_schema, separators, parallel)
        grammar = self.xgr.Grammar.from_ebnf(text, root_rule_name=_ROOT)
        return self.compiler.compile_grammar(grammar)

    def run(self, backend: Any, request: Any, compiled: Any, max_tokens: int) -> PeerTurn:
        import torch
        from xgrammar.contrib.hf import LogitsProcessor

        proc = LogitsProcessor(compiled)
        session = backend.begin_turn(request)
        ids = list(session.prompt_ids)
        turn = PeerTurn("")
        out = turn.token_ids
        try:
            logits = session.prefill()
            turn.forward_passes += 1
            while len(out) < max_tokens:
                input_ids = cast(Any, torch.tensor([ids], dtype=torch.long))
                scores = proc(input_ids, logits.float()[None, :])
                if bool(torch.isneginf(scores).all()):
                    # Only a scripted model's one-hot logits get here (a real distribution
                    # always meets the mask): a stop the grammar allows is still a stop.
                    if _terminated(proc):
                        turn.finish = "stop"
                    else:
                        turn.finish = "error"
                        turn.error = "the grammar allows none of the model's tokens"
                    break
                tid = int(torch.argmax(scores[0]).item())
                if tid in self.stop_ids:
                    turn.finish = "stop"
                    break
                out.append(tid)
                ids.append(tid)
                if len(out) >= max_tokens:
                    break
                logits = session.feed([tid])
                turn.forward_passes += 1
        finally:
            session.close()
        turn.text = backend.index.decode_bytes(out).decode("utf-8", errors="replace")
        return turn


def _terminated(proc: Any) -> bool:
    matchers = getattr(proc, "matchers", None) or []
    return bool(matchers) and all(m.is_terminated() or m.is_completed() for m in matchers)


def run_unconstrained(backend: Any, request: Any, max_tokens: int) -> PeerTurn:
    """Plain greedy generation of one turn (calls are parsed out of the text afterwards)."""
    from sdk.decoding import generate_turn

    turn = generate_turn(
        backend.begin_turn(request), None, backend.index, backend.tokenizer, max_tokens=max_tokens
    )
    return PeerTurn(turn.text, list(turn.token_ids), turn.finish_reason, turn.usage.forward_passes)


def noncanonical_calls(
    ids: Sequence[int],
    token_bytes: Sequence[bytes],
    encode: Callable[[str], Sequence[int]],
    opener: str = OPENER,
    closer: str = CLOSER,
) -> list[bool]:
    """For each call span (opener through closer, or through the end when unclosed) in the
    text `ids` spell: do its ids differ from `encode(span text)`? A span that does not start
    and end on token boundaries is judged by the whole turn instead."""
    pieces = [token_bytes[t] if 0 <= t < len(token_bytes) else b"" for t in ids]
    at_byte: dict[int, int] = {}  # byte offset -> index of the first token starting there
    pos = 0
    for i, piece in enumerate(pieces):
        at_byte.setdefault(pos, i)
        pos += len(piece)
    at_byte.setdefault(pos, len(pieces))
    data = b"".join(pieces)
    o, c = opener.encode(), closer.encode()
    result: list[bool] = []
    start = data.find(o)
    while start != -1:
        close = data.find(c, start + len(o))
        end = len(data) if close == -1 else close + len(c)
        if start in at_byte and end in at_byte:
            got = list(ids[at_byte[start] : at_byte[end]])
            want = list(encode(data[start:end].decode("utf-8", errors="replace")))
        else:
            got = list(ids)
            want = list(encode(data.decode("utf-8", errors="replace")))
        result.append(got != want)
        start = data.find(o, end)
    return result
