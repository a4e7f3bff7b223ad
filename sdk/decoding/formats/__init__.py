"""How tool calls look in the model's text: one protocol, a registry of the families' formats.

See `_base` for the protocol and the two body kinds, `registry` for detection from a chat
template. The JSON arguments are always compiled by the one schema compiler.
"""

from sdk.decoding.formats._base import (
    CallFormat,
    FormatTraits,
    ParsedCall,
    ToolCallFormat,
    format_traits,
    lark_literal,
    strip_property_titles,
    tagged_result_text,
)
from sdk.decoding.formats._history import openai_message, prompt_content
from sdk.decoding.formats.functiongemma import FUNCTIONGEMMA, FunctionGemmaFormat
from sdk.decoding.formats.harmony import HARMONY, HarmonyFormat
from sdk.decoding.formats.hermes import HERMES, HermesFormat
from sdk.decoding.formats.json_formats import (
    GRANITE,
    LLAMA3_JSON,
    MISTRAL_LIST,
    GraniteFormat,
    JsonListFormat,
    Llama3JsonFormat,
    MistralListFormat,
)
from sdk.decoding.formats.named import (
    DEEPSEEK_V3,
    MISTRAL_ARGS,
    DeepSeekV3Format,
    MistralArgsFormat,
)
from sdk.decoding.formats.pythonic import PYTHONIC, PythonicFormat
from sdk.decoding.formats.registry import FORMATS, get_format
from sdk.decoding.formats.xml_params import QWEN_XML, QwenXmlFormat

__all__ = [
    "FormatTraits",
    "format_traits",
    "DEEPSEEK_V3",
    "FORMATS",
    "FUNCTIONGEMMA",
    "GRANITE",
    "HARMONY",
    "HERMES",
    "LLAMA3_JSON",
    "MISTRAL_ARGS",
    "MISTRAL_LIST",
    "PYTHONIC",
    "QWEN_XML",
    "CallFormat",
    "DeepSeekV3Format",
    "FunctionGemmaFormat",
    "GraniteFormat",
    "HarmonyFormat",
    "HermesFormat",
    "JsonListFormat",
    "Llama3JsonFormat",
    "MistralArgsFormat",
    "MistralListFormat",
    "ParsedCall",
    "PythonicFormat",
    "QwenXmlFormat",
    "ToolCallFormat",
    "get_format",
    "lark_literal",
    "strip_property_titles",
    "openai_message",
    "prompt_content",
    "tagged_result_text",
]
