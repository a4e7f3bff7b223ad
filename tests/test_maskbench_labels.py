"""MaskBench's labels as the oracle: every valid instance is accepted token by token, every
invalid one is rejected somewhere, and at every step the mask agrees with `advance`.

The schemas are the small vendored sample in `tests/fixtures/maskbench/` (a few of each source
of the dev split, so this runs on every clone), widened by every 40th file of the dev split
(`tests/_data.py`) where it is present. The protocol is MaskBench's: each instance serialised
with `json.dumps(data, ensure_ascii=False)`, tokenized without special tokens, flexible
whitespace, strict mode; members in any order, so a valid instance is never rejected for the
order of its keys. A schema may be refused, but only with a typed error that names why
(`UnsupportedSchemaError` names the keyword and its JSON pointer).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sdk.engine import CompiledGrammar, Matcher
from sdk.errors import SchemaError, UnsupportedSchemaError
from tests._data import MASKBENCH_DEV

FIXTURES = sorted((Path(__file__).parent / "fixtures" / "maskbench").glob("*.json"))
WIDER = sorted(MASKBENCH_DEV.glob("*.json"))[::40] if MASKBENCH_DEV.is_dir() else []
FILES = FIXTURES + [p for p in WIDER if p.name not in {f.name for f in FIXTURES}]


def replay(grammar: CompiledGrammar, index: Any, ids: list[int]) -> tuple[bool, str]:
    """Feed `ids` under the mask: (accepted, where it stopped). Every token the mask allows
    must advance, and EOS must be allowed exactly where the output is complete."""
    m = Matcher(grammar, index)
    eos = min(index.eos_ids)
    for pos, tid in enumerate(ids):
        mask = m.mask()
        assert bool(mask[eos]) == m.is_accepting(), f"EOS bit wrong at token {pos}"
        if not mask[tid]:
            return False, f"masked at token {pos} ({index.token_bytes[tid]!r})"
        assert m.try_advance(tid), f"token {pos} allowed by the mask but refused by advance"
    mask = m.mask()
    assert bool(mask[eos]) == m.is_accepting(), "EOS bit wrong at the end"
    return m.is_accepting(), "end" + ("" if m.is_accepting() else " (not accepting)")


def test_the_fixtures_cover_every_source() -> None:
    sources = {p.name.split("---")[0].split("_")[0] for p in FIXTURES}
    assert len(FIXTURES) >= 40 and len(sources) >= 10, sources


@pytest.mark.parametrize("path", FILES, ids=[p.stem[:60] for p in FILES])
def test_labels_hold(path: Path, smollm2_tokenizer: Any, smollm2_index: Any) -> None:
    doc = json.loads(path.read_text())
    try:
        grammar = CompiledGrammar.from_schema(
            doc["schema"], whitespace="flexible", strict=True, member_order="any"
        )
    except UnsupportedSchemaError as exc:  # refused, naming the keyword and where it is
        assert exc.keyword and exc.keyword in str(exc)
        return
    except SchemaError as exc:  # a schema no value satisfies: refused as such
        assert "no value" in str(exc) or "unsatisfiable" in str(exc), exc
        return
    for test in doc.get("tests") or []:
        text = json.dumps(test["data"], ensure_ascii=False)
        ids = list(smollm2_tokenizer.encode(text, add_special_tokens=False))
        accepted, where = replay(grammar, smollm2_index, ids)
        assert accepted == test["valid"], (test.get("description"), text[:200], where)
