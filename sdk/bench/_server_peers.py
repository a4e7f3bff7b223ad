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
        self.loosened = False

    def compile(self, case: Any) -> None:
        from sdk.engine.gbnf import export_gbnf

        export = export_gbnf(case.lark, loosen=True)  # what `constraint="gbnf"` sends
        self.loosened = bool(export.loosened)
        self.grammar = self.xgr.Grammar.from_ebnf(export.text)

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


class VllmLarkJudge:
    """`constraint="lark"` through vLLM. Its xgrammar backend converts Lark-looking text to
    EBNF its own way (`vllm_lark_to_ebnf`) and refuses what XGrammar cannot parse (HTTP 400),
    upon which the remote backend sends the turn's GBNF instead (`switched`: XGrammar reads
    that as it is). Its `auto` backend falls back to guidance on such a refusal itself, which
    reads our llguidance Lark."""

    def __init__(self, tokenizer: Any, *, backend: str) -> None:
        self.xgrammar = XgrammarJudge()
        self.guidance = GuidanceJudge(tokenizer) if backend == "auto" else None
        self.engine: Any = None
        self.switched = False

    def compile(self, case: Any) -> None:
        from sdk.bench._vllm_lark import vllm_xgrammar_grammar
        from sdk.engine.lark_guidance import lark_for_guidance

        self.switched = False
        try:
            self.xgrammar.grammar = vllm_xgrammar_grammar(lark_for_guidance(case.lark))
            self.engine = self.xgrammar
        except ValueError:
            if self.guidance is not None:  # vLLM's own fallback
                self.guidance.compile(case)
                self.engine = self.guidance
                return
            self.switched = True  # the remote backend's: the turn's GBNF, read as EBNF
            self.xgrammar.compile(case)
            self.engine = self.xgrammar

    @property
    def loosened(self) -> bool:
        return self.engine is self.xgrammar and bool(self.xgrammar.loosened) and self.switched

    def accepts(self, text: str) -> bool:
        return bool(self.engine.accepts(text))


class JsonSchemaJudge:
    """`constraint="json_schema"`: the typed output's JSON Schema as the server's own engine
    compiles it (XGrammar's `from_json_schema`, llguidance's `json_schema` grammar), judged
    against the grammar the agent enforces for that typed output (`close_objects`). Looser
    where it accepts what that grammar forbids: the agent validates every reply."""

    looser = True  # replies are validated against the schema by the agent
    reference = "closed"  # compared with `Case.closed_lark`

    def __init__(self, engine: str, tokenizer: Any) -> None:
        self.engine = engine
        self.tokenizer = tokenizer
        self.grammar: Any = None
        self.loosened = False
        if engine == "guidance":
            self.guidance = GuidanceJudge(tokenizer)
        else:
            import xgrammar

            self.xgr = xgrammar

    def applies(self, case: Any) -> bool:
        return case.schema is not None

    def compile(self, case: Any) -> None:
        import json

        from sdk.backends.openai import looser_schema, sent_schema

        # As `OpenAIChatModel` sends it, told the engine where no rewrite keeps it exact
        # (`schema_engine="xgrammar"`: strings that could hold escapes lose bounds and pattern).
        dropped: list[str] = []
        engine = "xgrammar" if self.engine == "xgrammar" else None  # as a user would set it
        sent = sent_schema(case.schema, engine, dropped)
        self.loosened = bool(dropped)
        try:
            self._compile(json.dumps(sent))
            return
        except Exception:  # noqa: BLE001 - HTTP 400: the backend sends it looser, then JSON alone
            self.loosened = True
        looser = looser_schema(sent)
        if looser != sent:
            try:
                self._compile(json.dumps(looser))
                return
            except Exception:  # noqa: BLE001, S110 - then `json_object`, as the backend does
                pass
        self._compile(json.dumps({}))  # any JSON value: what a server makes of `json_object`

    def _compile(self, text: str) -> None:
        if self.engine == "guidance":
            grammar = self.guidance.llg.grammar_from("json_schema", text)
            error = self.guidance.llg.LLMatcher.validate_grammar(grammar)
            if error:
                raise ValueError(error.strip().splitlines()[-1])
            self.guidance.grammar = grammar
        else:
            self.grammar = self.xgr.Grammar.from_json_schema(text)

    def accepts(self, text: str) -> bool:
        if self.engine == "guidance":
            return self.guidance.accepts(text)
        from xgrammar.testing import _is_grammar_accept_string

        return bool(_is_grammar_accept_string(self.grammar, text))
