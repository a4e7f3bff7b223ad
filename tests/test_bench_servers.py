"""`python -m sdk.bench servers`: the grammars the remote backend sends, judged by the servers'
own engines against our matcher (a tiny BFCL-shaped folder written here; llama.cpp is part of
every setup, XGrammar and llguidance are benchmark peers, checked where installed)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from sdk.bench import servers

_FUNCTIONS = [
    {
        "name": "get_weather",
        "description": "Weather in a city.",
        "parameters": {
            "type": "dict",
            "properties": {
                "city": {"type": "string", "description": "The city."},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
    {
        "name": "add",
        "description": "Add two numbers.",
        "parameters": {
            "type": "dict",
            "properties": {"a": {"type": "integer"}, "b": {"type": "float"}},
            "required": ["a", "b"],
        },
    },
]


@pytest.fixture(scope="module")
def bfcl_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bfcl")
    questions = [
        {"id": "multiple_0", "question": [[{"role": "user", "content": "Weather in Oslo?"}]],
         "function": _FUNCTIONS},
        {"id": "multiple_1", "question": [[{"role": "user", "content": "2 + 0.5?"}]],
         "function": _FUNCTIONS},
    ]  # fmt: skip
    answers = [
        {"id": "multiple_0", "ground_truth": [{"get_weather": {"city": ["Oslo"], "unit": [""]}}]},
        {"id": "multiple_1", "ground_truth": [{"add": {"a": [2], "b": [0.5]}}]},
    ]
    for name, rows in (("multiple.jsonl", questions), ("multiple.answers.jsonl", answers)):
        (folder / f"BFCL_v4_{name}").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


@pytest.fixture(scope="module")
def ours(smollm2_index: Any) -> servers.Ours:
    return servers.Ours(smollm2_index)


def test_cases_hold_the_expected_call_and_its_mutations(bfcl_dir: Path) -> None:
    cases = list(servers.bfcl_cases(bfcl_dir, 5, ["multiple"]))
    assert [c.source for c in cases] == [
        "multiple_0:required", "multiple_0:auto", "multiple_1:required", "multiple_1:auto",
    ]  # fmt: skip
    texts = cases[0].texts
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    assert texts[0] == call and call[:-3] in texts and "" in texts
    assert any('"not_a_tool"' in t for t in texts)


class _Everything:
    """A judge that accepts every text (a server that enforces nothing)."""

    def compile(self, case: servers.Case) -> None:
        pass

    def accepts(self, text: str) -> bool:
        return True


class _Refuses:
    def compile(self, case: servers.Case) -> None:
        raise ValueError("unsupported construct\nmore detail")

    def accepts(self, text: str) -> bool:  # pragma: no cover - never asked
        raise AssertionError


def test_disagreements_and_refusals_are_counted(bfcl_dir: Path, ours: servers.Ours) -> None:
    cases = list(servers.bfcl_cases(bfcl_dir, 1, ["multiple"]))
    tallies = servers.compare(iter(cases), ours, {"lax": _Everything(), "strict": _Refuses()})
    lax, strict = tallies["lax"], tallies["strict"]
    rejected_by_ours = sum(not ours.accepts(t) for c in cases[:1] for t in c.texts)
    assert lax.compiled == 2 and lax.texts == 2 * len(cases[0].texts)
    assert len(lax.disagreements) >= rejected_by_ours > 0
    assert strict.compiled == 0 and strict.refused == {"unsupported construct": 2}
    report = lax.as_dict()
    assert report["disagreements"] == report["unexplained_disagreements"] > 0
    assert "unsupported construct" in servers.format_table(tallies, "t")


@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="no llama-cpp-python")
def test_llama_cpp_enforces_the_gbnf_export_as_we_do(
    bfcl_dir: Path, ours: servers.Ours, smollm2_tokenizer: Any
) -> None:
    """llama-server's grammar sampler, token by token, agrees with our matcher on every text
    of every turn grammar (required and auto)."""
    from sdk.backends.embedded import smollm2_gguf_path

    judge = servers.LlamaCppJudge(smollm2_tokenizer, smollm2_gguf_path())
    try:
        tallies = servers.compare(
            servers.bfcl_cases(bfcl_dir, 5, ["multiple"]), ours, {"llama.cpp": judge}
        )
    finally:
        judge.close()
    t = tallies["llama.cpp"]
    assert t.compiled == t.grammars == 4 and t.texts > 30
    assert t.disagreements == []


@pytest.mark.skipif(importlib.util.find_spec("xgrammar") is None, reason="xgrammar not installed")
def test_xgrammar_reads_the_gbnf_export_as_we_do(bfcl_dir: Path, ours: servers.Ours) -> None:
    """XGrammar (vLLM, SGLang) reads `\\\\x` escapes greedily: the export avoids them, and every
    "auto" grammar compiles and agrees."""
    from sdk.bench._server_peers import XgrammarJudge

    tallies = servers.compare(
        servers.bfcl_cases(bfcl_dir, 5, ["multiple"]), ours, {"x": XgrammarJudge()}
    )
    t = tallies["x"]
    assert t.compiled == t.grammars == 4 and t.disagreements == []


@pytest.mark.skipif(importlib.util.find_spec("xgrammar") is None, reason="xgrammar not installed")
def test_structural_tags_are_only_ever_looser(bfcl_dir: Path, ours: servers.Ours) -> None:
    """`constraint="structural_tag"` leaves the text around calls free (an empty "auto" reply,
    text after a required call): such acceptances are `looser`, counted apart; the tag never
    rejects what our turn grammar accepts."""
    from sdk.bench._server_peers import StructuralTagJudge

    cases = list(servers.bfcl_cases(bfcl_dir, 5, ["multiple"]))
    assert all(c.tag is not None for c in cases)
    t = servers.compare(iter(cases), ours, {"tag": StructuralTagJudge()})["tag"]
    assert t.compiled == t.grammars == 4
    assert t.looser == len(t.disagreements) > 0  # the empty "auto" reply at least
    assert t.as_dict()["unexplained_disagreements"] == 0
    maskbench = servers.Case("maskbench:x", 'start: "a"', ["a"])
    assert (
        servers.compare(iter([maskbench]), ours, {"tag": StructuralTagJudge()})["tag"].grammars == 0
    )  # not a turn grammar: no tag to send


def test_vllm_reads_gbnf_as_ebnf_and_converts_what_looks_like_lark() -> None:
    """vLLM's xgrammar backend: text with a `::=` line goes to XGrammar as it is; anything else
    is converted as vLLM does (rules, `|` lines, single quotes), refusing names it cannot
    find, which is what becomes of our regex terminals."""
    from sdk.bench._vllm_lark import looks_like_lark, vllm_lark_to_ebnf

    assert not looks_like_lark('root ::= "a" # start: b')
    assert looks_like_lark('start: a\n// x ::= y\na: "x"')
    assert vllm_lark_to_ebnf("?start: a\na: 'x'\n  | \"y\"  // comment\n") == (
        'root ::= start\nstart ::= a\na ::= "x" | "y"'
    )
    with pytest.raises(ValueError, match="not defined"):
        vllm_lark_to_ebnf("start: /[a-z]+/ B\n")
    with pytest.raises(ValueError, match="quotes"):
        vllm_lark_to_ebnf('start: "\\""\n')


@pytest.mark.skipif(
    importlib.util.find_spec("xgrammar") is None or importlib.util.find_spec("llguidance") is None,
    reason="xgrammar or llguidance not installed",
)
def test_vllm_refuses_our_lark_and_both_fallbacks_are_exact(
    bfcl_dir: Path, ours: servers.Ours, smollm2_tokenizer: Any
) -> None:
    from sdk.bench._server_peers import VllmLarkJudge

    cases = list(servers.bfcl_cases(bfcl_dir, 5, ["multiple"]))
    tallies = servers.compare(
        iter(cases),
        ours,
        {
            "x": VllmLarkJudge(smollm2_tokenizer, backend="xgrammar"),
            "auto": VllmLarkJudge(smollm2_tokenizer, backend="auto"),
        },
    )
    # xgrammar refuses the Lark; the remote backend then sends GBNF, which it reads exactly
    x, auto = tallies["x"], tallies["auto"]
    assert x.compiled == x.switched == 4 and not x.refused and x.disagreements == []
    assert auto.compiled == 4 and auto.switched == 0 and auto.disagreements == []


@pytest.mark.skipif(importlib.util.find_spec("xgrammar") is None, reason="xgrammar not installed")
def test_json_schema_as_the_server_compiles_it(ours: servers.Ours, smollm2_tokenizer: Any) -> None:
    """`constraint="json_schema"`: XGrammar compiles the schema the backend sends and is
    compared with the grammar the agent enforces for the typed output (`close_objects`):
    the undeclared key refused by both, an object made of parts sent open, so XGrammar takes
    what the agent's grammar does not (`looser`: the agent validates replies)."""
    from sdk.bench._server_peers import JsonSchemaJudge
    from sdk.grammar import compile_schema

    def case(schema: dict[str, Any], texts: list[str]) -> servers.Case:
        def lark(closed: bool) -> str:
            return compile_schema(schema, whitespace="compact", close_objects=closed).lark

        return servers.Case(
            "maskbench:x", lark(False), texts, schema=schema, closed_lark=lark(True)
        )

    judge = {"x": JsonSchemaJudge("xgrammar", smollm2_tokenizer)}
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    t = servers.compare(
        iter([case(schema, ['{"a":1}', '{"a":1,"b":2}', '{"a":"x"}'])]), ours, judge
    )
    assert t["x"].compiled == 1 and t["x"].texts == 3 and t["x"].disagreements == []
    parts = {"type": "object", "allOf": [schema, {"properties": {"b": {}}}]}
    t = servers.compare(iter([case(parts, ['{"a":1,"b":2}', '{"a":1,"b":2,"c":3}'])]), ours, judge)
    assert [d[1] for d in t["x"].disagreements] == ['{"a":1,"b":2,"c":3}'] and t["x"].looser == 1
