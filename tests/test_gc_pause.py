"""Compiles pause Python's cyclic garbage collector, and always give it back as they found it."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from sdk.engine import CompiledGrammar
from sdk.engine import _gc_pause as gp
from sdk.errors import SDKError

SCHEMA = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 8}}}


@pytest.fixture(autouse=True)
def gc_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_a_compile_runs_with_the_collector_off_and_restores_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sdk.grammar

    seen: list[bool] = []
    real = sdk.grammar.compile_schema

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(sdk.grammar, "compile_schema", spy)
    CompiledGrammar.from_schema(SCHEMA)
    assert seen == [False] and gc.isenabled()
    with pytest.raises(SDKError):  # a failed compile restores it too
        CompiledGrammar.from_lark("start: undefined_rule")
    assert gc.isenabled()


def test_a_collector_the_caller_turned_off_stays_off() -> None:
    gc.disable()
    CompiledGrammar.from_schema(SCHEMA)
    assert not gc.isenabled()


def test_overlapping_compiles_share_one_pause_and_do_not_hold_it_forever(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first_in, first_out = threading.Event(), threading.Event()

    def first() -> None:
        with gp.gc_paused():
            first_in.set()
            first_out.wait(10)

    t = threading.Thread(target=first)
    t.start()
    first_in.wait(10)
    assert not gc.isenabled()
    with gp.gc_paused():  # nested in time: still paused, and still after it ends
        pass
    assert not gc.isenabled()
    monkeypatch.setattr(gp, "MAX_PAUSE_S", 0.0)  # a pause this old is given back early
    with gp.gc_paused():
        pass
    assert gc.isenabled()  # although the first compile is still running
    first_out.set()
    t.join(10)
    assert gc.isenabled()
    with gp.gc_paused():  # and the next compile pauses afresh
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_long_compile_gives_its_freed_heap_back_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """glibc keeps the heap a compile freed (100-300 MB after the dev MaskBench run): the
    outermost long pause ends with one `malloc_trim`; short compiles and nested pauses
    do not pay for it."""
    import time

    trims: list[int] = []
    monkeypatch.setattr(gp, "_trim", trims.append)
    with gp.gc_paused():
        pass
    assert trims == []
    with gp.gc_paused():
        with gp.gc_paused():
            time.sleep(2 * gp.TRIM_AFTER_S)
        assert trims == []
    assert trims == [0]
    CompiledGrammar.from_schema(SCHEMA)  # the real call path reaches it without error
    monkeypatch.setattr(gp, "_trim", None)  # no glibc: nothing to call
    with gp.gc_paused():
        time.sleep(2 * gp.TRIM_AFTER_S)
