"""The benchmark peers' judges for `sdk.bench.servers` (XGrammar, llguidance: the `peers`
extra), apart so that a setup without them covers everything else."""

from __future__ import annotations

from typing import Any


class XgrammarJudge:
    """XGrammar's EBNF parser over the GBNF export, strings accepted as XGrammar's tests do."""

    def __init__(self) -> None:
        import xgrammar

        self.xgr = xgrammar
        self.grammar: Any = None

    def compile(self, case: Any) -> None:
        from sdk.engine.gbnf import lark_to_gbnf

        self.grammar = self.xgr.Grammar.from_ebnf(lark_to_gbnf(case.lark))

    def accepts(self, text: str) -> bool:
        from xgrammar.testing import _is_grammar_accept_string

        return bool(_is_grammar_accept_string(self.grammar, text))


class GuidanceJudge:
    """llguidance over the Lark text `constraint="lark"` sends (`lark_for_guidance`: vLLM's
    guidance backend), fed the text's tokens."""

    def __init__(self, tokenizer: Any) -> None:
        import llguidance
        import llguidance.hf

        self.llg = llguidance
        self.tokenizer = tokenizer
        self.lltok = llguidance.hf.from_tokenizer(tokenizer)
        self.grammar = ""

    def compile(self, case: Any) -> None:
        from sdk.engine.lark_guidance import lark_for_guidance

        grammar = self.llg.grammar_from("lark", lark_for_guidance(case.lark))
        error = self.llg.LLMatcher.validate_grammar(grammar)  # "" when it compiles
        if error:
            raise ValueError(error.split("error: ")[-1].strip() if "error: " in error else error)
        self.grammar = grammar

    def accepts(self, text: str) -> bool:
        m = self.llg.LLMatcher(self.lltok, self.grammar, log_level=0)
        for token in self.tokenizer(text, add_special_tokens=False)["input_ids"]:
            if not m.consume_token(token):
                return False
        return bool(m.is_accepting())


class StructuralTagJudge:
    """XGrammar's structural-tag API over `constraint="structural_tag"`'s response format."""

    looser = True  # the text around calls is free by design

    def __init__(self) -> None:
        import xgrammar

        self.xgr = xgrammar
        self.grammar: Any = None

    def applies(self, case: Any) -> bool:
        return case.tag is not None

    def compile(self, case: Any) -> None:
        import json

        self.grammar = self.xgr.Grammar.from_structural_tag(json.dumps(case.tag))

    def accepts(self, text: str) -> bool:
        from xgrammar.testing import _is_grammar_accept_string

        return bool(_is_grammar_accept_string(self.grammar, text))
