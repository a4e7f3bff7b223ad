"""Constrained decoding of assistant turns: call formats, turn grammars, the generation loop."""

from sdk.decoding._gate import DEFAULT_AUTO_CALL_BIAS, TOOL_TRAINED_CALL_BIAS, CallGate
from sdk.decoding._markers import format_index
from sdk.decoding.call_style import COMPACT, FLEXIBLE, SPACED, CallStyle
from sdk.decoding.formats import HERMES, HermesFormat, ParsedCall, ToolCallFormat
from sdk.decoding.generate import SamplingConfig, TurnOutput, TurnRequest, generate_turn
from sdk.decoding.local_turn import LocalTurn, open_turn, reasoning_start
from sdk.decoding.turn_grammar import TurnGrammar, build_turn_grammar

__all__ = [
    "COMPACT",
    "DEFAULT_AUTO_CALL_BIAS",
    "TOOL_TRAINED_CALL_BIAS",
    "CallGate",
    "LocalTurn",
    "format_index",
    "open_turn",
    "reasoning_start",
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
