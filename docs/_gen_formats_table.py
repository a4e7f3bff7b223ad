"""Generate the format table of docs/guides/model-families.md from the format registry.

    .venv/bin/python docs/_gen_formats_table.py          # rewrite the table in place
    .venv/bin/python docs/_gen_formats_table.py --check  # exit 1 if the page is stale

Every cell comes from the code: each format's own rendering of a sample call, its attributes,
and which of the test templates (`tests/fixtures/templates/*.jinja`) the detection really
recognises as it (run here with SmolLM2's tokenizer wearing each template).
"""

from __future__ import annotations

import copy
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "guides" / "model-families.md"
TEMPLATES = ROOT / "tests" / "fixtures" / "templates"


def _detected() -> dict[str, list[str]]:
    """Format name -> the test templates detected as it."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sdk.backends.embedded import load_tokenizer
    from sdk.backends.transformers import detect_call_format

    base = load_tokenizer("smollm2")
    found: dict[str, list[str]] = {"hermes": ["SmolLM2's own (no tool support: fallback)"]}
    for path in sorted(TEMPLATES.glob("*.jinja")):
        tok = copy.copy(base)
        tok.chat_template = path.read_text(encoding="utf-8")
        fmt = detect_call_format(tok)
        label = f"`{path.name}`" + (" (+ reasoning)" if fmt.reasoning else "")
        found.setdefault(fmt.name, []).append(label)
    return found


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "⏎")


def table() -> str:
    from sdk.decoding.formats import FORMATS

    detected = _detected()
    rows = [
        "| name | families | a call (spaced style) | body | parallel | control tokens | "
        "detected from (tests) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, fmt in FORMATS.items():
        sample = fmt.render_call("get_weather", {"city": "Paris"})
        body = (
            f'`{{"name", "{fmt.arguments_key}"}}` object'
            if fmt.body == "object"
            else "name in the envelope, "
            + {
                "python": "Python keyword arguments",
                "xml": "`<parameter=…>` blocks, strings raw",
                "gemma": "bare keys, strings between `<escape>`",
            }.get(fmt.surface, "JSON arguments")
        )
        markers = ", ".join(f"`{m}`" for m in fmt.markers) or "—"
        rows.append(
            f"| `{name}` | {fmt.family} | `` {_cell(sample)} `` | {body} | "
            f"{'yes' if fmt.parallel else 'one call'} | {_cell(markers)} | "
            f"{', '.join(detected.get(name, [])) or '—'} |"
        )
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    from _gen_common import main

    raise SystemExit(main(sys.argv[1:], PAGE, "_gen_formats_table.py", table))
