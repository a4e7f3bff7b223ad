"""Constrained decoding of assistant turns: call formats, turn grammars, the generation loop."""

from sdk.decoding.call_style import COMPACT, FLEXIBLE, SPACED, CallStyle
from sdk.decoding.formats import HERMES, HermesFormat, ParsedCall, ToolCallFormat
from sdk.decoding.generate import SamplingConfig, TurnOutput, TurnRequest, generate_turn
from sdk.decoding.turn_grammar import TurnGrammar, build_turn_grammar

__all__ = [
    "COMPACT",
    "FLEXIBLE",
    "HERMES",
    "SPACED",
    "CallStyle",
    "HermesFormat",
    "ParsedCall",
    "SamplingConfig",
    "ToolCallFormat",
    "TurnGrammar",
    "TurnOutput",
    "TurnRequest",
    "build_turn_grammar",
    "generate_turn",
]
