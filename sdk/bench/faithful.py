"""`python -m sdk.bench faithful`: how far the masked sampler is from the model restricted to the
grammar, p(y | y in L), and how close exact sampling (`sdk.decoding.exact`) gets.

For each small schema (enums, booleans, small integer ranges: a few dozen values) a question
is put to the model as a typed output. p(y | y in L) is computed exactly by enumerating every
token path the grammar allows (tokenizations other than the tokenizer's own included), with
the model's probability of each. Then N draws are taken with each sampler, at temperature T:

- `masked`: each step renormalized over the tokens the grammar allows (what constrained
  decoding does everywhere);
- `exact`: adaptive rejection over the same trie (`ExactSampler.draw`).

Reported per schema: KL(empirical || exact) and the total variation distance of both, the
values' exact shares, mean attempts per exact draw, and the seconds each sampler took. The samplers share the trie the enumeration built (the logits
of every prefix), so the seconds are the samplers' own work, not the model's; a draw's
distribution does not depend on what the trie knew before it.

    python -m sdk.bench faithful [--model smollm2] [--n 2000] [--temperature 1.0] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["SCHEMAS", "Case", "main"]


@dataclass(frozen=True)
class Case:
    name: str
    question: str
    schema: dict[str, Any]


SCHEMAS = (
    Case(
        "unit",
        "Name a temperature unit.",
        {"enum": ["celsius", "fahrenheit", "kelvin", "rankine"]},
    ),
    Case("sky_blue", "Is the sky blue? Answer true or false.", {"type": "boolean"}),
    Case(
        "pick_1_10", "Pick a number from 1 to 10.", {"type": "integer", "minimum": 1, "maximum": 10}
    ),
    Case("dice", "Roll a die.", {"type": "integer", "minimum": 1, "maximum": 6}),
    Case(
        "weekday",
        "Which day of the week comes after Tuesday?",
        {"enum": ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]},
    ),
    Case(
        "color",
        "What color is grass?",
        {"enum": ["red", "green", "blue", "yellow", "black", "white"]},
    ),
    Case("answer", "Should I bring an umbrella today?", {"enum": ["yes", "no", "maybe"]}),
    Case(
        "capital",
        "What is the capital of France?",
        {"enum": ["Paris", "London", "Berlin", "Madrid", "Rome"]},
    ),
    Case(
        "percent",
        "What share of the Earth is covered by water, in tens of percent?",
        {"type": "integer", "minimum": 0, "maximum": 10},
    ),
    Case("even", "Is 7 an even number?", {"type": "boolean"}),
    Case(
        "size",
        "What size is an elephant?",
        {"enum": ["tiny", "small", "medium", "large", "huge"]},
    ),
)


def kl(p: dict[str, float], q: dict[str, float]) -> float:
    """KL(p || q) in nats; inf where p has mass q lacks."""
    total = 0.0
    for k, v in p.items():
        if v > 0:
            w = q.get(k, 0.0)
            if w <= 0:
                return math.inf
            total += v * math.log(v / w)
    return total


def run_case(
    model: Any, case: Case, n: int, temperature: float, seed: int, cold: int = 0
) -> dict[str, Any]:
    import numpy as np

    from sdk.decoding.exact import ExactSampler
    from sdk.decoding.generate import TurnRequest
    from sdk.engine.grammar import CompiledGrammar
    from sdk.engine.matcher import Matcher
    from sdk.grammar import compile_schema
    from sdk.messages import Message

    index = model.index
    grammar = CompiledGrammar.from_lark(compile_schema(case.schema).lark)
    request = TurnRequest(
        messages=[Message(role="user", content=f"{case.question} Answer in JSON.")],
        tools=(),
        output_schema=case.schema,
    )
    rng = np.random.default_rng(seed)

    def fresh(session: Any) -> ExactSampler:
        return ExactSampler(
            session,
            Matcher(grammar, index),
            index.eos_ids,
            temperature=temperature,
            rng=rng,
            max_tokens=32,
        )

    cold_stats: dict[str, Any] = {}
    for name in ("exact", "masked") if cold else ():
        attempts = passes = 0
        for _ in range(cold):  # each draw on a new trie: what one call costs
            one = model.begin_turn(request)
            try:
                s = fresh(one)
                d = s.draw() if name == "exact" else s.masked_draw()
                attempts, passes = attempts + d.attempts, passes + s.forward_passes
            finally:
                one.close()
        cold_stats[f"cold_{name}_attempts"] = attempts / cold
        cold_stats[f"cold_{name}_passes"] = passes / cold
    session = model.begin_turn(request)
    try:
        sampler = fresh(session)

        def text(path: Sequence[int]) -> str:
            return index.decode_bytes([t for t in path if t not in index.eos_ids]).decode()

        t0 = time.perf_counter()
        found, cut = sampler.enumerate(1e-12)
        t_enum = time.perf_counter() - t0
        z = sum(found.values())
        exact: dict[str, float] = {}
        for path, mass in found.items():
            key = text(path)
            exact[key] = exact.get(key, 0.0) + mass / z
        out: dict[str, Any] = {
            "case": case.name,
            "values": len(exact),
            "paths": len(found),
            "cut_mass": cut / z if z else 0.0,
            "enumerate_s": round(t_enum, 2),
            "passes": sampler.forward_passes,
            **cold_stats,
            "exact": {k: round(v, 4) for k, v in sorted(exact.items(), key=lambda kv: -kv[1])},
        }
        for name in ("exact", "masked"):
            draw = sampler.draw if name == "exact" else sampler.masked_draw
            counts: Counter[str] = Counter()
            attempts = 0
            t0 = time.perf_counter()
            for _ in range(n):
                d = draw()
                counts[text(d.tokens)] += 1
                attempts += d.attempts
            seconds = time.perf_counter() - t0
            empirical = {k: v / n for k, v in counts.items()}
            out[f"kl_{name}"] = kl(empirical, exact)
            out[f"tv_{name}"] = 0.5 * sum(
                abs(empirical.get(k, 0.0) - exact.get(k, 0.0)) for k in set(empirical) | set(exact)
            )
            out[f"{name}_top"] = dict(Counter(counts).most_common(3))
            out[f"{name}_s"] = round(seconds, 2)
            out[f"{name}_attempts"] = attempts / n
        return out
    finally:
        session.close()


def format_table(rows: list[dict[str, Any]]) -> str:
    head = (
        f"{'schema':<10} {'values':>6} {'paths':>6} {'KL exact':>9} {'KL masked':>9} "
        f"{'TV exact':>8} {'TV masked':>9} {'attempts':>8} {'exact s':>7} {'masked s':>8}  "
        "top values (exact p)"
    )
    lines = [head]
    for r in rows:
        top = ", ".join(f"{k} {v:.3f}" for k, v in list(r["exact"].items())[:3])
        lines.append(
            f"{r['case']:<10} {r['values']:>6} {r['paths']:>6} {r['kl_exact']:>9.4f} "
            f"{r['kl_masked']:>9.4f} {r['tv_exact']:>8.3f} {r['tv_masked']:>9.3f} "
            f"{r['exact_attempts']:>8.2f} {r['exact_s']:>7.1f} {r['masked_s']:>8.1f}  {top}"
        )
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m sdk.bench faithful", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--model", default="smollm2", help="smollm2, gemma3 or a .gguf file")
    ap.add_argument("--n", type=int, default=2000, help="draws per sampler and schema")
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--cases", default="", help="comma-separated names (default: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--cold", type=int, default=0, help="also K draws each on a new trie (a call's cost)"
    )
    ap.add_argument("--json", action="store_true", help="print a final BENCH_JSON line")
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    from sdk.backends.local import coerce_model

    args = parse_args(argv)
    wanted = {c for c in args.cases.split(",") if c}
    cases = [c for c in SCHEMAS if not wanted or c.name in wanted]
    model = coerce_model(args.model)
    rows = []
    for i, case in enumerate(cases):
        rows.append(run_case(model, case, args.n, args.temperature, args.seed + i, args.cold))
        print(format_table(rows[-1:]).splitlines()[-1], flush=True)
    print(format_table(rows))
    if args.cold:
        print(f"\non a new trie ({args.cold} draws each): attempts, forward passes per draw")
        for r in rows:
            print(
                f"{r['case']:<10} exact {r['cold_exact_attempts']:.2f} attempts, "
                f"{r['cold_exact_passes']:.1f} passes; masked {r['cold_masked_passes']:.1f} passes"
            )
    if args.json:
        print("BENCH_JSON " + json.dumps({"bench": "faithful", "rows": rows}))
    return 0
