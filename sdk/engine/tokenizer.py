"""`TokenizerIndex`: the exact bytes every token id contributes to the output text.

The grammar engine works on bytes, never on token strings: a token's *surface string* is an
encoding artefact (``Ġ`` for a space in byte-level BPE, ``▁`` in SentencePiece, ``<0xE6>`` for a
byte-fallback piece), and ``tokenizer.decode`` is lossy (it turns partial UTF-8 into U+FFFD). The
index undoes the tokenizer's decoder one token at a time, so that for ordinary text::

    b"".join(index.token_bytes[i] for i in tok.encode(text, add_special_tokens=False)) == text.encode()

Conventions that mask builders rely on:

* ``token_bytes[i] == b""`` means the token can never appear inside grammar-constrained text:
  special / control tokens, unused ids, and tokens that decode to nothing. EOS handling goes
  through ``eos_ids``, not through the bytes.
* Bytes are the *mid-sequence* contribution of a token. Decoders that strip a leading space from
  the very first token (``Strip`` / ``Metaspace`` with a dummy prefix) are deliberately not
  applied. The GGUF Gemma-3 tokenizer adds no dummy prefix at all (``"Hello"`` → ``Hello``), so
  nothing needs undoing there.
* Ids ``>= vocab_size`` (models often pad their logits, e.g. to a multiple of 64) are never
  valid; use ``padded(n)`` to get an index whose arrays cover the whole logits row.

Building is vectorised enough for 262k-token vocabularies (a few seconds); the result is cached in
memory and as an uncompressed ``.npz`` on disk (``$SDK_CACHE_DIR/tokenizers/index/``, default
``~/.cache/sdk``), keyed by a fingerprint of the vocabulary, added tokens and the
normalizer / pre-tokenizer / decoder configuration.
"""

from __future__ import annotations

import functools
import hashlib
import json
import marshal
import os
import re
import sys
import tempfile
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from sdk.engine._paths import default_cache_dir
from sdk.errors import SDKError, TokenizerError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = [
    "KNOWN_EOS_TOKENS",
    "TokenizerIndex",
    "byte_level_decoding_table",
    "clear_memory_cache",
    "default_cache_dir",
]

#: Bumped whenever the on-disk layout or the decoding rules change (invalidates old caches).
_FORMAT_VERSION = 2

#: End-of-turn / end-of-text tokens of common chat models. Counted as EOS only when the
#: tokenizer marks them special, so an ordinary word can never become a stop token.
KNOWN_EOS_TOKENS: frozenset[str] = frozenset(
    {
        "</s>",
        "<eos>",
        "<end_of_turn>",
        "<|endoftext|>",
        "<|im_end|>",
        "<|eot_id|>",
        "<|end_of_text|>",
        "<|eom_id|>",
        "<|end|>",
        "<|return|>",
        "<|END_OF_TURN_TOKEN|>",
        "<｜end▁of▁sentence｜>",
    }
)

_BYTE_FALLBACK = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def byte_level_decoding_table() -> dict[str, int]:
    """GPT-2's printable-unicode → byte table (the inverse of ``bytes_to_unicode``)."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars = printable[:]
    n = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


# ---------------------------------------------------------------------------------------------
# Decoder interpretation: a tokenizers `decoder` JSON → one function str -> bytes per token.
# ---------------------------------------------------------------------------------------------

_TokenFn = Callable[[str], "str | bytes"]


def _byte_level_step() -> _TokenFn:
    # str.translate + latin-1 is ~50x faster than a per-char dict lookup in Python.
    table = {ord(ch): b for ch, b in byte_level_decoding_table().items()}

    def step(tok: str) -> str | bytes:
        mapped = tok.translate(table)
        try:
            return mapped.encode("latin-1")
        except UnicodeEncodeError:
            # Like tokenizers' ByteLevel decoder: a token with a char outside the table is
            # taken verbatim (only happens for added tokens with raw content).
            return tok.encode("utf-8")

    return step


def _replace_step(cfg: Mapping[str, Any]) -> _TokenFn:
    pattern = cfg.get("pattern", {})
    content = str(cfg.get("content", ""))
    if "String" in pattern:
        old = str(pattern["String"])
        return lambda tok: tok.replace(old, content)
    if "Regex" in pattern:
        rx = re.compile(str(pattern["Regex"]))
        return lambda tok: rx.sub(content.replace("\\", "\\\\"), tok)
    raise TokenizerError(f"unsupported Replace decoder pattern: {pattern!r}")


def _byte_fallback_step(tok: str) -> str | bytes:
    m = _BYTE_FALLBACK.fullmatch(tok)
    return bytes([int(m.group(1), 16)]) if m else tok


def _decoder_steps(cfg: Mapping[str, Any] | None) -> list[_TokenFn]:
    """Per-token steps of a decoder config; sequence-level steps (Fuse, Strip) are dropped."""
    if cfg is None:
        return []
    kind = cfg.get("type")
    if kind == "Sequence":
        steps: list[_TokenFn] = []
        for sub in cfg.get("decoders", []):
            steps.extend(_decoder_steps(sub))
        return steps
    if kind == "ByteLevel":
        return [_byte_level_step()]
    if kind == "Replace":
        return [_replace_step(cfg)]
    if kind == "ByteFallback":
        return [_byte_fallback_step]
    if kind == "Metaspace":
        repl = str(cfg.get("replacement", "▁"))
        return [lambda tok: tok.replace(repl, " ")]
    if kind in ("Fuse", "Strip"):
        # Fuse only concatenates; Strip removes the dummy-prefix space of the *first* token,
        # which is not part of a token's mid-sequence bytes.
        return []
    raise TokenizerError(
        f"decoder type {kind!r} does not decode token by token; cannot build a byte index"
    )


def _compose(steps: list[_TokenFn]) -> Callable[[str], bytes]:
    def run(tok: str) -> bytes:
        cur: str | bytes = tok
        for step in steps:
            if isinstance(cur, bytes):
                break
            cur = step(cur)
        return cur if isinstance(cur, bytes) else cur.encode("utf-8")

    return run


# ---------------------------------------------------------------------------------------------
# The index
# ---------------------------------------------------------------------------------------------


def _readonly(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    a.setflags(write=False)
    return a


#: What `TokenizerIndex.warm_up` compiles and walks: a pattern with a length bound, a number
#: with a bound, an enum, a format and an open object (key exclusions, products, trie walks).
_WARM_UP_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 40},
        "n": {"type": "number", "minimum": 0},
        "kind": {"enum": ["a", "b"]},
        "when": {"type": "string", "format": "date-time"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    },
    "required": ["name"],
}
_WARM_UP_TEXT = '{"name": "abc", "n": 1.5e3, "kind": "a", "tags": ["x"], "extra": null}'


@dataclass(frozen=True, eq=False)
class TokenizerIndex:
    """Exact bytes of every token id, plus EOS/special sets and numpy views for masking.

    Immutable and shared: ``from_hf`` returns the same object for the same tokenizer content.
    Arrays are read-only. ``byte_matrix[i, :lengths[i]] == token_bytes[i]``; the rest of each
    row is 0 (lengths, not a terminator, say where a token ends). The matrices are built on
    first use: the engine keeps its own (`sdk.engine._vocab`), and for a 152k vocabulary each
    is 19 MB that a process would otherwise hold twice over.
    """

    vocab_size: int
    token_bytes: tuple[bytes, ...]
    eos_ids: frozenset[int]
    special_ids: frozenset[int]
    fingerprint: str
    lengths: npt.NDArray[np.int32] = field(repr=False)

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_token_bytes(
        cls,
        token_bytes: Iterable[bytes],
        *,
        eos_ids: Iterable[int] = (),
        special_ids: Iterable[int] = (),
        fingerprint: str | None = None,
    ) -> TokenizerIndex:
        """Build from explicit bytes (tests, synthetic vocabularies); derives the numpy views."""
        tb = tuple(bytes(b) for b in token_bytes)
        n = len(tb)
        lengths = np.fromiter((len(b) for b in tb), dtype=np.int32, count=n)
        eos = frozenset(int(i) for i in eos_ids)
        special = frozenset(int(i) for i in special_ids)
        bad = [i for i in eos | special if not 0 <= i < n]
        if bad:
            raise TokenizerError(f"special/eos ids out of range [0, {n}): {sorted(bad)[:5]}")
        if fingerprint is None:
            h = hashlib.sha256()
            h.update(lengths.tobytes())
            h.update(b"".join(tb))
            h.update(repr((sorted(eos), sorted(special))).encode())
            fingerprint = "bytes-" + h.hexdigest()[:32]
        return cls._assemble(tb, lengths, eos, special, fingerprint)

    @classmethod
    def _assemble(
        cls,
        token_bytes: tuple[bytes, ...],
        lengths: npt.NDArray[np.int32],
        eos_ids: frozenset[int],
        special_ids: frozenset[int],
        fingerprint: str,
    ) -> TokenizerIndex:
        return cls(
            vocab_size=len(token_bytes),
            token_bytes=token_bytes,
            eos_ids=eos_ids,
            special_ids=special_ids,
            fingerprint=fingerprint,
            lengths=_readonly(lengths),
        )

    # ------------------------------------------------------------------ derived views

    @functools.cached_property
    def byte_matrix(self) -> npt.NDArray[np.uint8]:
        """``[vocab_size, max_len]`` uint8: row i holds ``token_bytes[i]``, zero padded."""
        n, lengths = self.vocab_size, self.lengths
        matrix = np.zeros((n, self.max_len), dtype=np.uint8)
        blob = np.frombuffer(b"".join(self.token_bytes), dtype=np.uint8)
        if blob.size:
            rows = np.repeat(np.arange(n, dtype=np.int64), lengths)
            starts = np.cumsum(lengths, dtype=np.int64) - lengths
            cols = np.arange(blob.size, dtype=np.int64) - np.repeat(starts, lengths)
            matrix[rows, cols] = blob
        return _readonly(matrix)

    @functools.cached_property
    def order_by_length_desc(self) -> npt.NDArray[np.int32]:
        """Token ids, longest bytes first (ties by id)."""
        return _readonly(np.argsort(-self.lengths, kind="stable").astype(np.int32))

    @functools.cached_property
    def byte_matrix_sorted(self) -> npt.NDArray[np.uint8]:
        """``byte_matrix`` rows in ``order_by_length_desc`` order."""
        return _readonly(self.byte_matrix[self.order_by_length_desc])

    @functools.cached_property
    def lengths_sorted(self) -> npt.NDArray[np.int32]:
        """``lengths`` in ``order_by_length_desc`` order."""
        return _readonly(self.lengths[self.order_by_length_desc])

    @classmethod
    def from_hf(
        cls,
        tokenizer: PreTrainedTokenizerBase,
        *,
        cache_dir: str | os.PathLike[str] | None = None,
        extra_eos_ids: Iterable[int] = (),
        use_disk_cache: bool = True,
    ) -> TokenizerIndex:
        """Index a fast Hugging Face tokenizer; cached in memory and under ``cache_dir``.

        ``cache_dir`` defaults to ``default_cache_dir() / "tokenizers" / "index"``.
        ``extra_eos_ids`` adds model-specific stop ids (e.g. from a generation config that the
        tokenizer cannot see); ``generation_config.json`` next to the tokenizer is read too.
        """
        extra = frozenset(int(i) for i in extra_eos_ids)
        with _LOCK:
            hit = _object_cache_get(tokenizer, extra)
        if hit is not None:
            return hit

        src = _HFSource(tokenizer)
        eos = src.eos_ids() | extra
        # The file holds what depends on the vocabulary only; the index fingerprint also covers
        # the EOS set, so two indexes with the same fingerprint are interchangeable.
        fp = _index_fingerprint(src.fingerprint, eos)
        with _LOCK:
            index = _BY_FINGERPRINT.get(fp)
        if index is None:
            directory = Path(cache_dir) if cache_dir is not None else _index_dir()
            path = directory / f"{src.fingerprint}.npz"
            index = _load_npz(path, src.fingerprint, eos, fp) if use_disk_cache else None
            if index is None:
                index = src.build(eos, fp)
                if use_disk_cache:
                    _save_npz(path, index, src.fingerprint)
            with _LOCK:
                index = _BY_FINGERPRINT.setdefault(fp, index)
        with _LOCK:
            _object_cache_put(tokenizer, extra, index)
        return index

    # ------------------------------------------------------------------ queries

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """Concatenated bytes of ``ids`` (special tokens contribute nothing)."""
        tb = self.token_bytes
        try:
            return b"".join([tb[int(i)] for i in ids])
        except IndexError as exc:
            raise TokenizerError(f"token id out of range [0, {self.vocab_size})") from exc

    def padded(self, n: int) -> TokenizerIndex:
        """This index widened to ``n`` ids (a model's logits width); extra ids get ``b""``."""
        if n == self.vocab_size:
            return self
        if n < self.vocab_size:
            raise TokenizerError(
                f"cannot pad a {self.vocab_size}-token index down to {n}: the model's vocabulary "
                "is smaller than the tokenizer's"
            )
        tb = self.token_bytes + (b"",) * (n - self.vocab_size)
        lengths = np.concatenate([self.lengths, np.zeros(n - self.vocab_size, np.int32)])
        return TokenizerIndex._assemble(
            tb, lengths, self.eos_ids, self.special_ids, f"{self.fingerprint}-pad{n}"
        )

    def with_token_text(self, texts: Mapping[int, bytes]) -> TokenizerIndex:
        """This index with special tokens ``texts`` (id -> bytes) written as text.

        Call formats mark calls with control tokens (Mistral's ``[TOOL_CALLS]``): the grammar
        spells such a marker as text, so the token that IS the marker must carry its bytes
        (otherwise only the marker spelled in ordinary pieces would match, which the model
        never writes). The ids stay special for everything else (EOS handling)."""
        texts = {int(i): bytes(b) for i, b in texts.items() if self.token_bytes[int(i)] != b}
        if not texts:
            return self
        bad = [i for i in texts if not 0 <= i < self.vocab_size or i in self.eos_ids]
        if bad:
            raise TokenizerError(f"cannot give text to token ids {sorted(bad)[:5]}")
        tb = tuple(texts.get(i, b) for i, b in enumerate(self.token_bytes))
        lengths = np.fromiter((len(b) for b in tb), dtype=np.int32, count=len(tb))
        h = hashlib.sha256(repr(sorted(texts.items())).encode()).hexdigest()[:16]
        return TokenizerIndex._assemble(
            tb, lengths, self.eos_ids, self.special_ids, f"{self.fingerprint}-text{h}"
        )

    def warm_up(self) -> TokenizerIndex:
        """Build the engine's per-vocabulary arrays now, and load its compiled kernels (one
        small grammar compiled and walked). Otherwise the first grammar of a process pays for
        both: ~150 ms of its first mask and ~40 ms of its compile with SmolLM2's 49k tokens,
        more for 262k. A server calls this at start so its first request is as fast as the
        next. Returns this index."""
        from ._vocab import vocab_of
        from .grammar import CompiledGrammar
        from .matcher import Matcher

        vocab_of(self)
        grammar = CompiledGrammar.from_schema(_WARM_UP_SCHEMA, whitespace="flexible")
        m = Matcher(grammar, self)
        try:
            m.packed_mask()
            for b in _WARM_UP_TEXT.encode():
                m.advance_bytes(bytes([b]))
                m.packed_mask()
        except SDKError:  # a vocabulary that cannot write the text: the walks ran anyway
            pass
        return self

    @property
    def max_len(self) -> int:
        """Longest token in bytes (width of ``byte_matrix``; at least 1)."""
        return max(int(self.lengths.max()) if self.vocab_size else 0, 1)

    def __len__(self) -> int:
        return self.vocab_size

    def __repr__(self) -> str:
        return (
            f"TokenizerIndex(vocab_size={self.vocab_size}, max_len={self.max_len}, "
            f"eos_ids={sorted(self.eos_ids)}, n_special={len(self.special_ids)}, "
            f"fingerprint={self.fingerprint!r})"
        )


# ---------------------------------------------------------------------------------------------
# Hugging Face side
# ---------------------------------------------------------------------------------------------

_LOCK = threading.RLock()
_BY_FINGERPRINT: dict[str, TokenizerIndex] = {}
_BY_OBJECT: weakref.WeakKeyDictionary[Any, tuple[Any, dict[frozenset[int], TokenizerIndex]]] = (
    weakref.WeakKeyDictionary()
)


def _index_fingerprint(vocab_fingerprint: str, eos: frozenset[int]) -> str:
    raw = f"{vocab_fingerprint}:{sorted(eos)}".encode()
    return hashlib.sha256(raw).hexdigest()[:32]


def _object_cache_get(tokenizer: Any, extra: frozenset[int]) -> TokenizerIndex | None:
    try:
        entry = _BY_OBJECT.get(tokenizer)
    except TypeError:  # not weak-referenceable
        return None
    if entry is None or entry[0] != _cheap_state(tokenizer):
        return None
    return entry[1].get(extra)


def _object_cache_put(tokenizer: Any, extra: frozenset[int], index: TokenizerIndex) -> None:
    state = _cheap_state(tokenizer)
    try:
        entry = _BY_OBJECT.get(tokenizer)
        if entry is None or entry[0] != state:
            entry = (state, {})
            _BY_OBJECT[tokenizer] = entry
    except TypeError:  # not weak-referenceable: the fingerprint cache still applies
        return
    entry[1][extra] = index


def clear_memory_cache() -> None:
    """Forget in-process indexes (tests; long-lived processes that cycle through tokenizers)."""
    with _LOCK:
        _BY_FINGERPRINT.clear()
        _BY_OBJECT.clear()


def _cheap_state(tokenizer: Any) -> tuple[int, Any]:
    """Detects the common mutations (added tokens, new EOS) that invalidate a per-object hit."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    size = backend.get_vocab_size(with_added_tokens=True) if backend is not None else len(tokenizer)
    return (size, getattr(tokenizer, "eos_token_id", None))


def _index_dir() -> Path:
    return default_cache_dir() / "tokenizers" / "index"


class _HFSource:
    """Everything read from a HF tokenizer, read once (``get_vocab`` is the slow part)."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is None or not getattr(tokenizer, "is_fast", True):
            raise TokenizerError(
                f"{type(tokenizer).__name__} is not a fast (tokenizers-backed) tokenizer; "
                "load it with use_fast=True"
            )
        self.tokenizer = tokenizer
        self.backend = backend
        self.added = dict(backend.get_added_tokens_decoder())  # id -> AddedToken
        # `id_to_token` in a loop is ~2x faster than `get_vocab` (no dict) and, like decode,
        # lets the added vocabulary win over the model's. Ids are assumed dense (true for BPE,
        # Unigram and WordPiece vocabularies built by `tokenizers`).
        n = max(backend.get_vocab_size(with_added_tokens=True), max(self.added, default=-1) + 1)
        if n == 0:
            raise TokenizerError("tokenizer has an empty vocabulary")
        id_to_token = backend.id_to_token
        strings: list[str | None] = [id_to_token(i) for i in range(n)]
        self.strings = strings
        self.decoder_cfg = _state(backend.decoder)
        self.special_ids = frozenset(i for i, tok in self.added.items() if tok.special) | frozenset(
            i for i in getattr(tokenizer, "all_special_ids", []) if i is not None and 0 <= i < n
        )
        self.fingerprint = self._fingerprint()

    def _fingerprint(self) -> str:
        b = self.backend
        h = hashlib.sha256()
        h.update(f"sdk-token-index-v{_FORMAT_VERSION}\0".encode())
        # NUL-joined strings plus their lengths: injective, and 4x faster than json.dumps.
        h.update(
            "\0".join([s if s is not None else "" for s in self.strings]).encode(
                "utf-8", "surrogatepass"
            )
        )
        lengths = [len(s) if s is not None else -1 for s in self.strings]
        h.update(np.asarray(lengths, dtype=np.int64).tobytes())
        added = sorted(
            (i, t.content, bool(t.special), bool(t.normalized)) for i, t in self.added.items()
        )
        h.update(json.dumps(added, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        h.update(json.dumps(sorted(self.special_ids)).encode())
        for part in (b.normalizer, b.pre_tokenizer, b.decoder):
            h.update(b"\0" + json.dumps(_state(part), sort_keys=True).encode())
        return h.hexdigest()[:32]

    def eos_ids(self) -> frozenset[int]:
        tok = self.tokenizer
        n = len(self.strings)
        ids: set[int] = set()
        eos = getattr(tok, "eos_token_id", None)
        if isinstance(eos, int):
            ids.add(eos)
        ids.update(_generation_config_eos(tok))
        for i in self.special_ids:
            if self.strings[i] in KNOWN_EOS_TOKENS:
                ids.add(i)
        return frozenset(i for i in ids if 0 <= i < n)

    def build(self, eos: frozenset[int], fingerprint: str) -> TokenizerIndex:
        decode = _compose(_decoder_steps(self.decoder_cfg))
        special = self.special_ids
        out: list[bytes] = []
        append = out.append
        added = self.added
        for i, s in enumerate(self.strings):
            if s is None or i in special:
                append(b"")
            elif i in added:
                # Non-special added tokens are matched verbatim in the raw text (our tokenizers
                # all have normalized=False), so their bytes are their content.
                tok = added[i]
                append(s.encode("utf-8") if not tok.normalized else decode(s))
            else:
                append(decode(s))
        return TokenizerIndex.from_token_bytes(
            out, eos_ids=eos, special_ids=special, fingerprint=fingerprint
        )


def _state(part: Any) -> Any:
    if part is None:
        return None
    try:
        return json.loads(part.__getstate__())
    except Exception as exc:  # pragma: no cover - depends on tokenizers internals
        raise TokenizerError(f"cannot serialise tokenizer component {part!r}") from exc


def _generation_config_eos(tokenizer: Any) -> list[int]:
    """``eos_token_id`` of a ``generation_config.json`` beside a locally loaded tokenizer."""
    name = getattr(tokenizer, "name_or_path", "") or ""
    try:
        path = Path(name) / "generation_config.json"
        if not path.is_file():
            return []
        value = json.loads(path.read_text(encoding="utf-8")).get("eos_token_id")
    except (OSError, ValueError):
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, int)]
    return []


# ---------------------------------------------------------------------------------------------
# Disk cache
# ---------------------------------------------------------------------------------------------


def _save_npz(path: Path, index: TokenizerIndex, vocab_fingerprint: str) -> None:
    """Atomic write (tmp + rename): concurrent processes may build the same index.

    Stores the token bytes as a marshal blob (``marshal.loads`` rebuilds 262k ``bytes`` ~4x
    faster than slicing).
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.stem, suffix=".tmp.npz")
        try:
            with os.fdopen(fd, "wb") as fh:
                np.savez(
                    fh,
                    version=np.array([_FORMAT_VERSION], dtype=np.int64),
                    fingerprint=np.frombuffer(vocab_fingerprint.encode(), dtype=np.uint8),
                    python=np.frombuffer(_MARSHAL_TAG, dtype=np.uint8),
                    token_bytes=np.frombuffer(marshal.dumps(index.token_bytes), dtype=np.uint8),
                    special_ids=np.array(sorted(index.special_ids), dtype=np.int64),
                    lengths=index.lengths,
                )
            os.chmod(tmp, 0o644)  # mkstemp makes 0600; the cache is meant to be shared
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    except OSError:
        pass  # a read-only cache is not an error: the index is simply rebuilt next time


_MARSHAL_TAG = f"{sys.implementation.name}-{marshal.version}".encode()


def _load_npz(
    path: Path, vocab_fingerprint: str, eos: frozenset[int], fingerprint: str
) -> TokenizerIndex | None:
    """The cached index, or None when absent, stale, corrupt or from another Python."""
    try:
        with np.load(path, allow_pickle=False) as z:
            if int(z["version"][0]) != _FORMAT_VERSION:
                return None
            if z["fingerprint"].tobytes().decode() != vocab_fingerprint:
                return None
            if z["python"].tobytes() != _MARSHAL_TAG:
                return None
            token_bytes = marshal.loads(z["token_bytes"].tobytes())
            special = frozenset(int(i) for i in z["special_ids"])
            lengths = np.ascontiguousarray(z["lengths"], dtype=np.int32)
    except (OSError, KeyError, ValueError, EOFError, TypeError, UnicodeDecodeError):
        return None
    n = lengths.size
    if (
        not isinstance(token_bytes, tuple)
        or len(token_bytes) != n
        or any(not 0 <= i < n for i in eos | special)
    ):
        return None
    return TokenizerIndex(
        vocab_size=n,
        token_bytes=token_bytes,
        eos_ids=eos,
        special_ids=special,
        fingerprint=fingerprint,
        lengths=_readonly(lengths),
    )
