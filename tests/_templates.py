"""Chat templates tests set on a real tokenizer: one that renders tools marks a tool-trained
model (`template_supports_tools`), with Hermes' call envelope."""

from __future__ import annotations

# `SEPS`: the Python tuple of separators its `tojson` writes calls' arguments with.
HERMES_LIKE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n"
    "{% if m.tool_calls %}{% for c in m.tool_calls %}"
    '<tool_call>\n{"name": "{{ c.function.name }}", "arguments": '
    "{{ c.function.arguments | tojson(separators=SEPS) }}}\n</tool_call>"
    "{% endfor %}{% else %}{{ m.content }}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if tools %}{% for t in tools %}{{ t | tojson }}{% endfor %}{% endif %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
