"""`python -m sdk.bench SUBCOMMAND ...`: a thin dispatcher so new benchmarks plug in by name."""

from __future__ import annotations

import sys
from collections.abc import Callable

USAGE = """usage: python -m sdk.bench SUBCOMMAND [options]

subcommands:
  maskbench DIR   replay MaskBench JSON instances token by token through each engine's
                  mask (TBM, TTFM, correctness counts); see `maskbench --help`
  e2e             one tool call per prompt: ours vs unconstrained vs XGrammar's logits
                  processor (wall time, passes, tokens/s, mask share); see `e2e --help`
  bfcl            BFCL call quality (multiple, parallel, irrelevance): modes, call styles, peers
  concurrency     concurrent runs on the embedded model: batched vs one at a time
                  (calls/s, latency p50/p95, memory); see `concurrency --help`
  index           tokenizer index: build vs disk-cache load vs llguidance; see `index --help`
  loop            the agent's tool loop as apps use it: real answers, tool executions, repeats,
                  seconds per run, today's tree vs older checkouts; see `loop --help`
  backends        llama.cpp in process vs transformers vs a llama.cpp server on the same BFCL
                  questions (load, seconds per call, tokens/s, peak RSS, correct); see
                  `backends --help`
  servers         the grammars the remote backend sends, compiled by each server's engine
                  (llama.cpp, XGrammar, llguidance) and judged against our matcher; see
                  `servers --help`
  turns           a turn grammar over tools already defined: build time, schema compiles
                  paid; see `turns --help`
  faithful        the masked sampler against the model restricted to the grammar, exactly
                  enumerated, and exact sampling (KL per small schema); see `faithful --help`
"""


def _maskbench(argv: list[str]) -> int:
    from .maskbench import main

    main(argv)
    return 0


def _e2e(argv: list[str]) -> int:
    from .e2e import main

    return main(argv)


def _bfcl(argv: list[str]) -> int:
    from .bfcl import main

    return main(argv)


def _concurrency(argv: list[str]) -> int:
    from .concurrency import main

    return main(argv)


def _index(argv: list[str]) -> int:
    from .index import main

    return main(argv)


def _loop(argv: list[str]) -> int:
    from .loop import main

    return main(argv)


def _backends(argv: list[str]) -> int:
    from .backends import main

    return main(argv)


def _servers(argv: list[str]) -> int:
    from .servers import main

    return main(argv)


def _faithful(argv: list[str]) -> int:
    from .faithful import main

    return main(argv)


def _turns(argv: list[str]) -> int:
    from .turns import main

    return main(argv)


COMMANDS: dict[str, Callable[[list[str]], int]] = {
    "maskbench": _maskbench,
    "e2e": _e2e,
    "bfcl": _bfcl,
    "index": _index,
    "concurrency": _concurrency,
    "loop": _loop,
    "backends": _backends,
    "servers": _servers,
    "turns": _turns,
    "faithful": _faithful,
}


def main(argv: list[str] | None = None) -> int:
    """Dispatch to a subcommand; with no (or an unknown) subcommand print the usage."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, end="")
        return 0 if args else 2
    cmd = COMMANDS.get(args[0])
    if cmd is None:
        print(f"sdk.bench: unknown subcommand {args[0]!r}\n\n{USAGE}", end="", file=sys.stderr)
        return 2
    return cmd(args[1:])


if __name__ == "__main__":
    sys.exit(main())
