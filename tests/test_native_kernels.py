"""The engine's compiled kernels: built once per machine, loaded without numba, typed at the
border (a wrong array is a TypeError, never memory read as another type), and equal to
numba's JIT of the same source."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sdk.engine import _chains, _dfa_kernels, _native, _pairs, _trie
from sdk.engine._automata import compile_regex
from sdk.engine._dfa import Dfa

ROOT = Path(__file__).resolve().parents[1]

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 40},
        "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}},
        "n": {"type": "integer", "minimum": 0},
    },
    "required": ["name", "tags", "n"],
}
TEXT = '{"name": "Ada Lovelace", "tags": ["red", "blue"], "n": 36}'

#: Runs a schema through the public API in a fresh process; prints what it saw.
_CHILD = """
import json, sys, hashlib
from sdk.backends.embedded import load_tokenizer
from sdk.engine import CompiledGrammar, Matcher, TokenizerIndex
from sdk.engine import _native
tok = load_tokenizer("smollm2")
index = TokenizerIndex.from_hf(tok)
g = CompiledGrammar.from_schema(json.loads(sys.argv[1]), whitespace="flexible")
m = Matcher(g, index)
digest = hashlib.sha256()
for t in tok.encode(sys.argv[2], add_special_tokens=False):
    mask = m.mask()
    digest.update(mask.tobytes())
    m.advance(t)
print(json.dumps({"numba": "numba" in sys.modules, "mode": _native.mode(),
                  "accepting": m.is_accepting(), "masks": digest.hexdigest()}))
"""


def _child(env: dict[str, str] | None = None) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(SCHEMA), TEXT],
        cwd=ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    out["stderr"] = proc.stderr
    return out


def _aot_or_skip() -> None:
    if _native.load() != "aot":
        pytest.skip("the compiled kernels could not be built here (numba's JIT runs instead)")


def test_a_fresh_process_masks_with_the_built_kernels_and_never_imports_numba() -> None:
    """numba and LLVM cost ~85 MB per process: a process that compiles a schema and masks
    a whole call gets every kernel from the built library."""
    _aot_or_skip()
    got = _child()
    assert got["mode"] == "aot" and got["numba"] is False, got
    assert got["accepting"] is True


def test_a_wrong_array_is_a_typed_error_naming_the_kernel_and_argument() -> None:
    """A built kernel reads its arguments as declared: a wrong dtype, rank or layout would
    be memory read as another type. Each is refused before the call."""
    _aot_or_skip()
    table = np.zeros((3, 256), np.int32)
    table[1, 5] = 2
    reps, classes = _dfa_kernels.small_table_classes(table)
    assert list(reps) == [0, 5] and classes[5] == 1 and classes[4] == 0
    with pytest.raises(
        TypeError,
        match=r"small_table_classes: argument 0 must be a C-ordered int32 array of rank 2, "
        r"got an array of int64, rank 2",
    ):
        _dfa_kernels.small_table_classes(table.astype(np.int64))
    with pytest.raises(TypeError, match="C-ordered int32"):
        _dfa_kernels.small_table_classes(np.asfortranarray(table))
    with pytest.raises(TypeError, match="rank 2, got an array of int32, rank 1"):
        _dfa_kernels.small_table_classes(table[1])
    with pytest.raises(TypeError, match="got list"):
        _dfa_kernels.small_table_classes(table.tolist())
    dfa = compile_regex("abc")
    assert isinstance(dfa, Dfa)
    args = (dfa.table, dfa.classes, dfa.accepting, 1, 16)
    assert bytes(_dfa_kernels.literal_path(*args)) == b"abc"
    strided = np.repeat(dfa.classes, 2)[::2]  # equal values, not contiguous
    with pytest.raises(TypeError, match="argument 1 must be a C-ordered uint8 array"):
        _dfa_kernels.literal_path(dfa.table, strided, dfa.accepting, 1, 16)
    with pytest.raises(TypeError, match="argument 2 must be a C-ordered bool array"):
        _dfa_kernels.literal_path(dfa.table, dfa.classes, dfa.accepting.astype(np.uint8), 1, 16)
    with pytest.raises(TypeError):
        _dfa_kernels.literal_path(*args[:4])  # one argument short
    # only unusual, not wrong: a one-element view with a long stride is contiguous
    ids = np.arange(12, dtype=np.int64)[::4][1:2]
    assert ids.strides == (32,) and ids.flags.c_contiguous
    assert _trie._pack(np.arange(12, dtype=np.int64), ids, 2).tolist() == [16, 0]


def test_a_table_given_in_fortran_order_is_made_c_ordered_by_the_automaton() -> None:
    """Kernels take C-ordered tables: a Dfa normalises whatever it is given (a transposed
    or column-indexed table is Fortran-ordered), so engine paths never hit the border."""
    dfa = compile_regex("[ab]c")
    assert isinstance(dfa, Dfa)
    copy = Dfa(np.asfortranarray(dfa.trans), dfa.accepting.copy())
    assert copy.table.flags.c_contiguous and copy.table.dtype == np.int32
    assert copy.matches(b"ac") and copy.matches(b"bc") and not copy.matches(b"cc")


# ------------------------------------------------------------------ against numba's JIT


@pytest.fixture(scope="module")
def jit() -> dict[str, Any]:
    _aot_or_skip()
    return _native._jit_all()


@pytest.mark.slow
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    pattern=st.lists(
        st.sampled_from(["a", "b", "é", "[ab]", "[^a]", "(?:ab|b)", "a*", "b?", "[a-c]{0,4}"]),
        min_size=1,
        max_size=6,
    ).map("".join),
    tokens=st.lists(st.text(alphabet='abcé"', min_size=1, max_size=5), min_size=1, max_size=40),
)
def test_built_and_jit_kernels_agree_on_random_automata(
    jit: dict[str, Any], pattern: str, tokens: list[str]
) -> None:
    """Every kernel the engine calls per state gives the same arrays built and JIT-compiled:
    the class map, the literal path, the canonical form, the chains, the trie walks, the trim."""
    dfa = compile_regex(pattern)
    assume(isinstance(dfa, Dfa))
    assert isinstance(dfa, Dfa)
    t, c, acc = dfa.table, dfa.classes, dfa.accepting

    def same(module: Any, name: str, *args: Any) -> None:
        built = getattr(module, name)(*args)
        other = jit[module.__name__.rsplit(".", 1)[-1].lstrip("_") + "__" + name](*args)
        for x, y in zip(
            built if isinstance(built, tuple) else (built,),
            other if isinstance(other, tuple) else (other,),
            strict=True,
        ):
            assert np.array_equal(x, y), (name, pattern)

    same(_dfa_kernels, "small_table_classes", np.ascontiguousarray(dfa.trans[:4]))
    for q in range(1, dfa.n_states):
        same(_dfa_kernels, "literal_path", t, c, acc, q, 32)
        same(_dfa_kernels, "canonical_form", t, c, acc, q, 64)
        same(_dfa_kernels, "live_bytes", t, c, q)
        row = dfa.row(q)
        assert dfa.live_bits(q) == sum(1 << b for b in range(256) if row[b]), (pattern, q)
    same(_chains, "_chains", t, c, _trie.UTF8, _chains.CHAIN_BYTES)
    raw = sorted({s.encode() for s in tokens})
    width = max(len(b) for b in raw)
    matrix = np.zeros((len(raw), width), np.uint8)
    for i, b in enumerate(raw):
        matrix[i, : len(b)] = np.frombuffer(b, np.uint8)
    lengths = np.asarray([len(b) for b in raw], np.int64)
    trie = _trie.build_trie(matrix, lengths, np.arange(len(raw), dtype=np.int64), 8)
    chain = _chains.chains(t, c)
    for q in range(1, dfa.n_states):
        built = _trie.walk_trie(trie, t, c, acc, chain, q, 8)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(_trie, "_walk_trie", jit["trie___walk_trie"])
            other = _trie.walk_trie(trie, t, c, acc, chain, q, 8)
        for x, y in zip(built, other, strict=True):
            assert (x is None and y is None) or np.array_equal(x, y), (pattern, q)
    built_trans, jit_trans = t.copy(), t.copy()
    keep = _pairs.trim_states(built_trans, acc)
    assert np.array_equal(keep, jit["pairs__trim_states"](jit_trans, acc)), pattern
    assert np.array_equal(built_trans, jit_trans), pattern
    nodes = (trie.byte, trie.skip, trie.sub_lo, trie.sub_hi, trie.end_lo, trie.end_hi)
    for text in raw:
        same(
            _trie,
            "walk_literal",
            *nodes,
            trie.roots,
            trie.order,
            np.frombuffer(text + b"a", np.uint8),
        )


@pytest.mark.slow
def test_without_a_compiler_the_kernels_fall_back_to_the_jit_with_a_warning(
    tmp_path: Path,
) -> None:
    """Where the library cannot be built (here: a C compiler that fails), masks are the same
    from numba's JIT, and the process says why it holds more memory."""
    _aot_or_skip()
    built = _child()
    # numba's own cache in a fresh folder: a kernel it compiled before (another process, the
    # JIT mode) is loaded without typing its globals again, and hid a fallback that failed to
    # type `trim_states` on a fresh machine
    got = _child(
        {
            "SDK_KERNELS_DIR": str(tmp_path),
            "CC": "/bin/false",
            "NUMBA_CACHE_DIR": str(tmp_path / "numba"),
        }
    )
    assert got["mode"] == "jit" and got["numba"] is True
    assert "compiled kernels are unavailable" in got["stderr"]
    assert got["masks"] == built["masks"] and got["accepting"] is True
