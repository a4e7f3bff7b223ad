"""MCP tools against a real server process (tests/_mcp_server.py, stdio), plus the fallbacks
for tools whose schema or name the SDK cannot use as they are."""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("mcp")

from sdk import Agent  # noqa: E402
from sdk.backends.test import TestModel, ToolCallScript  # noqa: E402
from sdk.mcp import MCPToolset, mcp_tools  # noqa: E402

SERVER = [sys.executable, str(Path(__file__).with_name("_mcp_server.py"))]


def test_server_tools_are_gated_validated_and_called(smollm2_tokenizer: Any) -> None:
    async def main() -> Any:
        async with MCPToolset(SERVER) as mcp:
            assert [t.name for t in mcp.tools] == ["get_weather", "tag", "explode"]
            assert mcp.skipped == {}
            script = [
                [
                    ToolCallScript("get_weather", {"city": "Oslo", "days": 3}),
                    ToolCallScript("explode", {"reason": "test"}),
                ],
                ToolCallScript("tag", {"labels": ["a", "a"]}),  # uniqueItems: validation
                ToolCallScript("tag", {"labels": ["a", "b"]}),
                "done",
            ]
            agent = Agent(TestModel(script, tokenizer=smollm2_tokenizer), tools=mcp.tools)
            result = await agent.run("go")
            # The grammar enforces the server's schema: days <= 14.
            with pytest.raises(Exception, match="grammar"):
                bad = TestModel(
                    [ToolCallScript("get_weather", {"city": "x", "days": 30})],
                    tokenizer=smollm2_tokenizer,
                )
                await Agent(bad, tools=mcp.tools, tool_choice="required").run("go")
            return result

    result = asyncio.run(main())
    weather, explode, dup, tag = result.tool_calls
    assert weather.result == "sunny in Oslo for 3 days"
    assert explode.error is not None and "exploded: test" in explode.error
    assert dup.args is None and "non-unique" in (dup.error or "")
    assert tag.result in ("a,b",)
    assert result.output == "done"


def test_odd_tools_never_stop_the_others(caplog: pytest.LogCaptureFixture) -> None:
    """A schema the grammar cannot compile keeps its tool (grammar: any object; validation:
    the schema); a name the format cannot carry is made safe; a schema that is not a JSON
    Schema leaves its tool out, with the reason."""
    listed = [
        SimpleNamespace(name="ok", description="", input_schema={"type": "object"}),
        SimpleNamespace(
            name="remote.ref",
            description="",
            input_schema={"type": "object", "properties": {"a": {"$ref": "https://x/y.json"}}},
        ),
        SimpleNamespace(
            name="broken", description="", input_schema={"type": "object", "properties": 3}
        ),
    ]

    class Client:
        async def list_tools(self) -> Any:
            return SimpleNamespace(tools=listed, next_cursor=None)

    caplog.set_level(logging.WARNING, logger="sdk")
    tools, skipped = asyncio.run(mcp_tools(Client()))
    assert [t.name for t in tools] == ["ok", "remote_ref"]
    assert tools[1].grammar_schema == {"type": "object"}
    assert tools[1].json_schema["properties"]["a"] == {"$ref": "https://x/y.json"}
    assert list(skipped) == ["broken"] and "invalid JSON Schema" in skipped["broken"]
    assert "left out" in caplog.text and "only validated" in caplog.text
    Agent(TestModel([]), tools=tools)  # the turn grammar compiles


def test_a_catalog_of_50_tools_compiles_once(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> tuple[int, float, float]:
        async with MCPToolset([*SERVER, "--catalog"]) as mcp:
            caplog.set_level(logging.DEBUG, logger="sdk.grammar")
            t0 = time.perf_counter()
            Agent(TestModel([]), tools=mcp.tools)
            first = time.perf_counter() - t0
            t0 = time.perf_counter()
            Agent(TestModel([]), tools=mcp.tools)
            second = time.perf_counter() - t0
            return len(mcp.tools), first, second

    n, first, second = asyncio.run(main())
    assert n == 53
    assert "cache hit" in caplog.text  # the second agent reuses the first one's grammar
    print(f"50-tool catalog: first agent {first:.3f} s, second {second:.3f} s")


def test_run_sync_inside_the_toolsets_loop_fails_fast_and_closed_toolsets_say_so(
    smollm2_tokenizer: Any,
) -> None:
    """`run_sync` inside `async with MCPToolset(...)` blocks the loop that holds the
    connection, so a call could never be served: a `ConfigError` at the call, never a hang.
    After the block, a call says the toolset is closed (it was fed to the model as a tool
    error). The whole test runs under a watchdog."""
    from sdk import ConfigError

    def script() -> TestModel:
        call = ToolCallScript("get_weather", {"city": "Oslo", "days": 1})
        return TestModel([call, "done"], tokenizer=smollm2_tokenizer)

    async def main() -> list[str]:
        seen: list[str] = []
        async with MCPToolset(SERVER) as mcp:
            with pytest.raises(ConfigError, match="run_sync is blocking") as info:
                Agent(script(), tools=mcp.tools).run_sync("go")
            seen.append(str(info.value))
            # From another thread's loop the call is handed over to the toolset's loop.
            other = await asyncio.to_thread(Agent(script(), tools=mcp.tools).run_sync, "go")
            seen.append(str(other.tool_calls[0].result))
        with pytest.raises(ConfigError, match="closed") as info:
            await Agent(script(), tools=mcp.tools).run("go")
        seen.append(str(info.value))
        return seen

    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["seen"] = asyncio.run(main())
        except BaseException as exc:  # noqa: BLE001 - reported below
            box["error"] = exc

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(90)
    assert not worker.is_alive(), "deadlock: the run never returned"
    if "error" in box:
        raise box["error"]
    blocked, handed, closed = box["seen"]
    assert "await agent.run" in blocked
    assert handed == "sunny in Oslo for 1 days"
    assert "async with MCPToolset" in closed
