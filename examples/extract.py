"""Extract a nested Pydantic model from text with the embedded SmolLM2 model, offline.

    python examples/extract.py

With `output_type`, the whole reply is generated under the model's JSON Schema (nested
objects, enums, integers), then validated into the model; invalid values would be sent back to
the model as validation feedback and retried.
"""

from __future__ import annotations

import time
from typing import Literal

from pydantic import BaseModel, Field

from sdk import Agent


class Address(BaseModel):
    street: str
    city: str
    country: str


class Person(BaseModel):
    name: str
    age: int = Field(ge=0, le=150)
    role: Literal["engineer", "doctor", "teacher", "other"]
    address: Address


TEXT = (
    "Maria Garcia is a 34 year old engineer. She lives at 12 Baker Street, London, United Kingdom."
)


def main() -> None:
    agent = Agent(
        output_type=Person,
        system_prompt="Extract the person described by the user.",
        max_tokens=96,
    )
    start = time.perf_counter()
    _ = agent.model  # the embedded model loads on first use; load it now to time separately
    print(f"[model loaded in {time.perf_counter() - start:.1f}s]")
    start = time.perf_counter()
    result = agent.run_sync(TEXT)
    person = result.output
    print(f"output: {person!r}")
    print(f"type: {type(person).__name__}, city: {person.address.city}")
    u = result.usage
    print(
        f"[{time.perf_counter() - start:.1f}s, {u.completion_tokens} tokens "
        f"({u.forced_tokens} forced), {u.forward_passes} forward passes]"
    )


if __name__ == "__main__":
    main()
