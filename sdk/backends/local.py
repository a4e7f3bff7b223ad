"""Which local backend a model name gets, and one loaded model per name and process.

A GGUF file (the embedded "smollm2" and "gemma3" included) runs on llama.cpp when
llama-cpp-python is installed (`LlamaCppModel`: quantized weights as they are, ~3x faster per
token and a fraction of the memory), else on transformers, which de-quantizes it to float32
(`TransformersModel`; also the backend for Hugging Face directories and GPUs).
`SDK_LOCAL_BACKEND=transformers` (or `llama.cpp`) makes the choice for every name; `local_backend`
is the same switch in code.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from sdk.errors import ConfigError

__all__ = ["coerce_model", "default_model", "local_backend"]

_BACKENDS = ("llama.cpp", "transformers")
_NAMED: dict[tuple[str, str], Any] = {}
_NAMED_LOCK = threading.Lock()
_CHOICE: str | None = None


def local_backend(name: str | None = None) -> str:
    """Set the backend GGUF names get from now on ("llama.cpp" or "transformers") and return
    it; with no argument, the one they get now: the one set here, else `SDK_LOCAL_BACKEND`,
    else llama.cpp where llama-cpp-python is installed. Models already loaded stay loaded."""
    global _CHOICE
    if name is not None:
        _CHOICE = _checked(name, "local_backend")
    if _CHOICE is not None:
        return _CHOICE
    env = os.environ.get("SDK_LOCAL_BACKEND")
    if env:
        return _checked(env, "SDK_LOCAL_BACKEND")
    from sdk.backends.llamacpp import llama_cpp_available

    return "llama.cpp" if llama_cpp_available() else "transformers"


def _checked(name: str, where: str) -> str:
    value = name.strip().lower().replace("llamacpp", "llama.cpp").replace("llama_cpp", "llama.cpp")
    if value not in _BACKENDS:
        raise ConfigError(f"{where}={name!r}: expected one of {', '.join(_BACKENDS)}")
    return value


def coerce_model(model: Any) -> Any:
    """An agent's `model=` argument as a local backend (see `Agent`)."""
    if model is None:
        return default_model()
    if hasattr(model, "begin_turn") and hasattr(model, "index"):
        return model
    if isinstance(model, tuple) and len(model) == 2:
        from sdk.backends.transformers import TransformersModel

        return TransformersModel(*model)
    if isinstance(model, str | os.PathLike):
        return _named_model(str(model))
    raise TypeError(
        f"model={model!r}: expected None (embedded SmolLM2), a TransformersModel, a "
        "LlamaCppModel, a (model, tokenizer) pair, a model name or path, or a test model"
    )


def _is_gguf(spec: str) -> bool:
    from sdk.backends.embedded import EMBEDDED_MODELS

    return spec in EMBEDDED_MODELS or Path(spec).suffix.lower() == ".gguf"


def _named_model(spec: str) -> Any:
    """Loaded once per process, spec and backend: loading weights costs seconds."""
    kind = local_backend() if _is_gguf(spec) else "transformers"
    with _NAMED_LOCK:
        hit = _NAMED.get((kind, spec))
        if hit is None:
            if kind == "llama.cpp":
                from sdk.backends.llamacpp import LlamaCppModel

                hit = LlamaCppModel(spec)
            else:
                from sdk.backends.transformers import TransformersModel

                hit = TransformersModel.from_pretrained(spec)
            _NAMED[(kind, spec)] = hit
        return hit


def default_model() -> Any:
    """The embedded SmolLM2-135M-Instruct (offline), on the default local backend."""
    return _named_model("smollm2")
