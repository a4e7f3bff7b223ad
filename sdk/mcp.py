"""The tools of an MCP server as SDK tools (optional extra: `pip install 'sdk[mcp]'`).

    async with MCPToolset(["python", "server.py"]) as mcp:   # stdio; or "http://host/mcp"
        result = await Agent(tools=mcp.tools).run("...")

Each server tool becomes a `Tool.from_schema` tool: its `inputSchema` drives the grammar and is
validated in full after parsing, and calling it calls the server. A schema the grammar cannot
compile gets a grammar for "any JSON object" plus full validation (`unsupported="validate"`);
a tool that cannot be used at all (a name the call format cannot carry, a schema that is not a
JSON Schema) is left out and listed in `skipped` with the reason. One odd tool never stops the
others.

Calls go over the toolset's connection, so run the agent inside the `async with` block and on
the same event loop (`await agent.run(...)` or `agent.run_stream(...)`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Sequence
from typing import Any

from sdk.agent import blocked_by_run_sync
from sdk.errors import ConfigError, MCPToolError
from sdk.tools import TOOL_NAME_RE, Tool, ToolDefinitionError

__all__ = ["MCPToolError", "MCPToolset", "mcp_tools"]

_log = logging.getLogger("sdk.mcp")


def _field(obj: Any, *names: str) -> Any:
    """An attribute by its mcp 2 (snake_case) or mcp 1 (camelCase) name."""
    for name in names:
        value = getattr(obj, name, None)
        if value is not None:
            return value
    return None


def _result(result: Any) -> Any:
    """A `CallToolResult` as the tool's return value: its text content (what MCP servers
    write for models), else its structured content."""
    if _field(result, "is_error", "isError"):
        raise MCPToolError(_text(result) or "the MCP tool failed")
    text = _text(result)
    structured = _field(result, "structured_content", "structuredContent")
    return text if text or structured is None else structured


def _text(result: Any) -> str:
    parts = []
    for block in _field(result, "content") or ():
        text = getattr(block, "text", None)
        parts.append(text if isinstance(text, str) else json.dumps(block.model_dump(mode="json")))
    return "\n".join(parts)


def _safe_name(name: str, taken: set[str]) -> str:
    """A name the call format can carry (`[a-zA-Z0-9_-]{1,64}`), unique among `taken`."""
    base = re.sub(r"[^a-zA-Z0-9_-]", "_", name)[:64] or "tool"
    out, k = base, 1
    while out in taken:
        k += 1
        out = f"{base[: 64 - len(str(k)) - 1]}_{k}"
    return out


async def mcp_tools(
    client: Any, *, prefix: str = "", _toolset: MCPToolset | None = None
) -> tuple[list[Tool], dict[str, str]]:
    """The tools a connected MCP client (`mcp.Client`, or a `ClientSession`) lists, as `Tool`s
    calling back through it; and the skipped ones, name → reason. `prefix` goes before each
    name (several servers in one agent)."""
    listed: list[Any] = []
    cursor = None
    while True:
        page = await (client.list_tools(cursor=cursor) if cursor else client.list_tools())
        listed += list(page.tools)
        cursor = _field(page, "next_cursor", "nextCursor")
        if not cursor:
            break
    tools: list[Tool] = []
    skipped: dict[str, str] = {}
    taken: set[str] = set()
    for spec in listed:
        remote = spec.name
        name = prefix + remote
        if not TOOL_NAME_RE.fullmatch(name):
            name = _safe_name(name, taken)
        schema = _field(spec, "input_schema", "inputSchema") or {"type": "object"}
        try:
            tool = Tool.from_schema(
                name,
                schema,
                _caller(client, remote, _toolset),
                description=_field(spec, "description") or "",
                unsupported="validate",
            )
        except ToolDefinitionError as exc:
            skipped[remote] = str(exc)
            _log.warning("MCP tool %r left out: %s", remote, exc)
            continue
        taken.add(name)
        tools.append(tool)
    return tools, skipped


def _caller(client: Any, remote: str, toolset: MCPToolset | None = None) -> Any:
    """The tool's function. Through a toolset, a call runs on the event loop that opened the
    connection (from another loop it is handed over), and fails at once, with the reason,
    where it could never be served: after the `async with` block, or while `run_sync` blocks
    that loop (the call would wait for the loop, the loop for the run: a deadlock)."""

    async def call(**arguments: Any) -> Any:
        if toolset is None:
            return _result(await client.call_tool(remote, arguments))
        if toolset._session is None:
            raise ConfigError(
                f"MCP tool {remote!r} was called after its MCPToolset closed: run the agent "
                "inside the `async with MCPToolset(...)` block"
            )
        owner = toolset._loop
        if owner is None or asyncio.get_running_loop() is owner:
            return _result(await client.call_tool(remote, arguments))
        if blocked_by_run_sync(owner):
            raise ConfigError(
                f"MCP tool {remote!r}: Agent.run_sync is blocking the event loop that holds "
                "this MCP connection; inside async code use `await agent.run(...)`"
            )
        handed = asyncio.run_coroutine_threadsafe(client.call_tool(remote, arguments), owner)
        return _result(await asyncio.wrap_future(handed))

    call.__name__ = remote
    return call


class MCPToolset:
    """An MCP server's tools for the length of an `async with` block.

    `server`: a command line (a list: `["python", "server.py"]`, run over stdio), an
    "http(s)://" URL (streamable HTTP), or anything `mcp.Client` accepts (a
    `StdioServerParameters`, a transport, an in-process server). After entering, `tools` are
    ready for `Agent(tools=...)` and `skipped` says which were left out and why.
    """

    def __init__(self, server: Any, *, prefix: str = "") -> None:
        self.server = server
        self.prefix = prefix
        self.tools: list[Tool] = []
        self.skipped: dict[str, str] = {}
        self._client: Any = None
        self._session: Any = None  # the entered client, while the block is open
        self._loop: asyncio.AbstractEventLoop | None = None

    async def __aenter__(self) -> MCPToolset:
        try:
            from mcp import Client
            from mcp.client.stdio import StdioServerParameters
        except ImportError as exc:  # pragma: no cover - the extra is missing
            raise ImportError("MCP tools need the `mcp` package: pip install 'sdk[mcp]'") from exc
        server = self.server
        if isinstance(server, Sequence) and not isinstance(server, str):
            command, *args = list(server)
            server = StdioServerParameters(command=command, args=args)
        self._client = Client(server)
        client = await self._client.__aenter__()
        self._session, self._loop = client, asyncio.get_running_loop()
        try:
            self.tools, self.skipped = await mcp_tools(client, prefix=self.prefix, _toolset=self)
        except BaseException:
            self._session = None
            await self._client.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self._session = None
        if self._client is not None:
            await self._client.__aexit__(*exc)
            self._client = None
