"""The GGUF's tokenizer as llama.cpp runs it, read from the loaded model: no second copy.

`LlamaCppModel` used to tokenize with the GGUF's vocabulary converted for transformers: a
second copy of the vocabulary (~130 MB resident for Qwen2.5's 152k tokens, and the
transformers import), converted on first use. The model llama.cpp loaded already holds the
vocabulary, and `llama_tokenize` is the tokenizer the model runs with. Prompts are rendered as
transformers renders them (`_jinja`, checked against transformers' own renderer, without
importing transformers), so a prompt reads the same on both local backends.

Only what the SDK asks of a tokenizer is here (`encode`, `decode`, `get_vocab`,
`apply_chat_template`, the special tokens), plus `token_index()`: the byte index straight from
llama.cpp's pieces, which are the bytes each token adds to the text.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from sdk.errors import TokenizerError

if TYPE_CHECKING:
    from sdk.engine.tokenizer import TokenizerIndex

__all__ = ["LlamaTokenizer"]

# GGUF metadata keys of the special tokens transformers' conversion names (and templates read).
_SPECIAL_KEYS = {
    "bos_token": "tokenizer.ggml.bos_token_id",
    "eos_token": "tokenizer.ggml.eos_token_id",
    "unk_token": "tokenizer.ggml.unknown_token_id",
    "pad_token": "tokenizer.ggml.padding_token_id",
}


class LlamaTokenizer:
    """The tokenizer of a GGUF model loaded by llama.cpp, shaped like the part of a
    transformers tokenizer the SDK uses.

    Args:
        lib: llama-cpp-python's C API.
        vocab: Returns the model's `llama_vocab` pointer; raises once the model is freed.
        meta: Reads a GGUF metadata string by key (None where absent).
        chat_template: The GGUF's chat template (None where it has none).
        name_or_path: The GGUF's path, for messages.
    """

    is_fast = True

    def __init__(
        self,
        lib: Any,
        vocab: Callable[[], Any],
        meta: Callable[[str], str | None],
        chat_template: str | None,
        name_or_path: str,
    ) -> None:
        self._lib = lib
        self._vocab = vocab
        self.chat_template = chat_template
        self.name_or_path = name_or_path
        v = vocab()
        self._n = int(lib.llama_vocab_n_tokens(v))
        attr = lib.llama_vocab_get_attr
        control = lib.LLAMA_TOKEN_ATTR_CONTROL
        self.all_special_ids = [i for i in range(self._n) if int(attr(v, i)) & control]
        self._eog = frozenset(i for i in self.all_special_ids if lib.llama_vocab_is_eog(v, i))
        self._eog |= {
            i
            for i in (int(lib.llama_vocab_eos(v)), int(lib.llama_vocab_eot(v)))
            if 0 <= i < self._n
        }
        for name, key in _SPECIAL_KEYS.items():
            tid = _int_or_none(meta(key))
            ok = tid is not None and 0 <= tid < self._n
            setattr(self, f"{name}_id", tid if ok else None)
            setattr(self, name, self._text(tid) if ok and tid is not None else None)
        self._lock = threading.Lock()
        self._index: TokenizerIndex | None = None
        self._render = _renderer()  # imported now: loading, not the first turn, pays for it

    bos_token: str | None
    eos_token: str | None
    unk_token: str | None
    pad_token: str | None
    bos_token_id: int | None
    eos_token_id: int | None
    unk_token_id: int | None
    pad_token_id: int | None

    def __len__(self) -> int:
        return self._n

    @property
    def special_tokens_map(self) -> dict[str, str]:
        """The named special tokens' texts, as transformers passes them to templates."""
        names = ("bos_token", "eos_token", "unk_token", "pad_token")
        return {n: t for n in names if (t := getattr(self, n)) is not None}

    # ------------------------------------------------------------------ text <-> ids

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """The ids of `text`; special tokens written in it are parsed as themselves (as
        transformers does); `add_special_tokens`: BOS/EOS where the model adds them."""
        if not isinstance(text, str):
            raise TokenizerError(f"cannot tokenize {type(text).__name__}: expected str")
        data = text.encode("utf-8", "surrogatepass")
        lib, vocab = self._lib, self._vocab()
        cap = len(data) + 8
        while True:
            buf = (ctypes.c_int32 * cap)()
            n = int(lib.llama_tokenize(vocab, data, len(data), buf, cap, add_special_tokens, True))
            if n >= 0:
                return list(buf[:n])
            if -n <= cap:  # pragma: no cover - llama.cpp reports a failure, not a size
                raise TokenizerError(f"llama.cpp could not tokenize {text[:40]!r}")
            cap = -n

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
        return {"input_ids": self.encode(text, add_special_tokens=add_special_tokens)}

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = False) -> str:
        """The text of `ids` (special tokens as their text unless skipped)."""
        out = b"".join(self._piece(int(i), not skip_special_tokens) for i in ids)
        return out.decode("utf-8", "replace")

    def get_vocab(self) -> dict[str, int]:
        """Token text (the vocabulary's own spelling, `Ġ`/`▁` included) to id."""
        return {self._text(i): i for i in range(self._n)}

    def _text(self, tid: int) -> str:
        raw = self._lib.llama_vocab_get_text(self._vocab(), tid)
        return raw.decode("utf-8", "surrogateescape") if raw else ""

    def _piece(self, tid: int, special: bool) -> bytes:
        if not 0 <= tid < self._n:
            raise TokenizerError(f"token id {tid} out of range [0, {self._n})")
        lib, vocab = self._lib, self._vocab()
        size = 64
        while True:
            buf = ctypes.create_string_buffer(size)
            n = int(lib.llama_token_to_piece(vocab, tid, buf, size, 0, special))
            if n >= 0:
                return buf.raw[:n]
            size = -n

    # ------------------------------------------------------------------ chat template

    def apply_chat_template(
        self,
        conversation: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        chat_template: str | None = None,
        add_generation_prompt: bool = False,
        tokenize: bool = False,
        **kwargs: Any,
    ) -> str | list[int]:
        """The conversation rendered by the chat template, exactly as transformers renders
        it (`_jinja`, with this tokenizer's special tokens); ids where `tokenize`."""
        template = chat_template if chat_template is not None else self.chat_template
        if template is None:
            raise TokenizerError(f"{self.name_or_path} has no chat template; pass chat_template=")
        normalize, render = self._render
        if not conversation:
            raise TokenizerError("cannot render an empty conversation")
        texts, _ = render(
            conversations=[normalize(conversation)],
            tools=tools,
            chat_template=template,
            add_generation_prompt=add_generation_prompt,
            **{**self.special_tokens_map, **kwargs},
        )
        text = str(texts[0])
        return self.encode(text) if tokenize else text

    # ------------------------------------------------------------------ byte index

    def token_index(self) -> TokenizerIndex:
        """Each token's bytes as llama.cpp writes it mid-text (control tokens: none), the
        end-of-generation tokens as EOS; built once (152k tokens: well under a second)."""
        from sdk.engine.tokenizer import TokenizerIndex

        with self._lock:
            if self._index is None:
                special = frozenset(self.all_special_ids)
                pieces = [b"" if i in special else self._piece(i, False) for i in range(self._n)]
                self._index = TokenizerIndex.from_token_bytes(
                    pieces, eos_ids=self._eog, special_ids=special
                )
            return self._index


def _renderer() -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The message normalizer and the Jinja renderer (`_jinja`: transformers' behaviour,
    without importing transformers)."""
    from sdk.backends._jinja import normalize_messages, render_chat

    return normalize_messages, render_chat


def _int_or_none(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def gguf_tokenizer(lib: Any, model: Any, vocab: Callable[[], Any], path: str) -> LlamaTokenizer:
    """The tokenizer of `model` (a loaded `llama_model`), its metadata read now."""

    def meta(key: str) -> str | None:
        size = 256
        while True:
            buf = ctypes.create_string_buffer(size)
            n = int(lib.llama_model_meta_val_str(model, key.encode(), buf, size))
            if n < 0:
                return None
            if n < size:
                return buf.value.decode("utf-8", "replace")
            size = n + 1

    raw = lib.llama_model_chat_template(model, None)
    template = raw.decode("utf-8") if raw else None
    return LlamaTokenizer(lib, vocab, meta, template, path)
