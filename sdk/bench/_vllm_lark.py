"""How vLLM's xgrammar backend reads a grammar sent in `structured_outputs.grammar`, simulated
for `sdk.bench servers` (vLLM does not install here: no GPU).

Read from vLLM v1's source (`vllm/v1/structured_output/utils.py`, the `grammar_is_likely_lark`
and `convert_lark_to_ebnf` helpers, and the request validation that calls them), restated here
as the behaviour the bench needs, not copied:

- a grammar is taken for Lark when no line holds `::=` once everything from its first `#` or
  `//` is cut (so our GBNF export, with `::=` lines, goes to XGrammar as it is);
- Lark is converted line by line: comments cut as above, a line with a `:` that does not
  start with `|` defines the rule named before the colon (a leading `?` dropped), a `|` line
  adds an alternative to the rule above, single-quoted strings become double-quoted, a line
  with an odd number of either quote is an error, and so is a name used but not defined; the
  root is `start` where there is one, else the first rule;
- the result is parsed by `xgrammar.Grammar.from_ebnf`; any failure there is a `ValueError`,
  which vLLM answers with HTTP 400 (or, with the `auto` backend, by using guidance instead).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["looks_like_lark", "vllm_lark_to_ebnf", "vllm_xgrammar_grammar"]

_COMMENT = re.compile(r"(#|//).*$")
_QUOTED = re.compile(r"'([^']*)'")
_NAME = re.compile(r"\b[a-zA-Z_][a-zA-Z0-9_]*\b")


def _lines(text: str) -> list[str]:
    return [_COMMENT.sub("", line).strip() for line in text.split("\n")]


def looks_like_lark(text: str) -> bool:
    """vLLM's test: no `::=` outside comments."""
    return bool(text) and not any("::=" in line for line in _lines(text))


def _names_used(body: str) -> set[str]:
    body = re.sub(r'"[^"]*"', "", body)
    return set(_NAME.findall(re.sub(r"[+*?()|\[\]{}]", " ", body)))


def vllm_lark_to_ebnf(text: str) -> str:
    """The EBNF vLLM's conversion makes of Lark text (`ValueError` where it gives up)."""
    if not text.strip():
        raise ValueError("Grammar string cannot be empty")
    rules: list[tuple[str, list[str]]] = []
    used: set[str] = set()
    for number, line in enumerate(_lines(text), 1):
        if not line:
            continue
        if line.startswith("|"):
            if not rules:
                raise ValueError(f"line {number}: an alternative before any rule")
            body = line[1:].strip()
        elif ":" in line:
            name, body = line.split(":", 1)
            rules.append((name.strip().strip("?"), []))
        else:
            continue
        if body.count("'") % 2 or body.count('"') % 2:
            raise ValueError(f"line {number}: mismatched quotes in rule {rules[-1][0]!r}")
        body = _QUOTED.sub(r'"\1"', body).strip()
        used |= _names_used(body)
        rules[-1][1].append(body)
    if not rules:
        raise ValueError("No valid rules found in grammar")
    defined = {name for name, _ in rules}
    missing = used - defined - {"root"}
    if missing:
        raise ValueError(
            "Referenced rules are not defined (the conversion reads regex and string "
            f"contents as names)\n{', '.join(sorted(missing))}"
        )
    root = "start" if "start" in defined else rules[0][0]
    lines = [f"root ::= {root}"] + [f"{name} ::= {' | '.join(alts)}" for name, alts in rules]
    return "\n".join(lines)


def vllm_xgrammar_grammar(text: str) -> Any:
    """The XGrammar grammar vLLM's xgrammar backend would run for `text` (`ValueError`: the
    request gets HTTP 400)."""
    import xgrammar

    ebnf = vllm_lark_to_ebnf(text) if looks_like_lark(text) else text
    try:
        return xgrammar.Grammar.from_ebnf(ebnf)
    except Exception as exc:  # noqa: BLE001 - vLLM turns every failure into a ValueError
        raise ValueError(f"Invalid grammar specification: {str(exc).splitlines()[0]}") from exc
