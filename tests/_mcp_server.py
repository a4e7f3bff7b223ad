"""A real MCP server for tests/test_mcp.py (stdio): a few tools, one with a keyword the grammar
leaves to validation, one that fails, and optionally a catalog of many tools."""

from __future__ import annotations

import sys
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

server = MCPServer("sdk-test")


@server.tool()
def get_weather(city: str, days: Annotated[int, Field(ge=1, le=14)] = 1) -> str:
    """Weather in a city for the next days."""
    return f"sunny in {city} for {days} days"


@server.tool()
def tag(labels: set[str]) -> str:
    """Attach distinct labels."""
    return ",".join(sorted(labels))


@server.tool()
def explode(reason: str) -> str:
    """Always fails."""
    raise ToolError(f"exploded: {reason}")


if "--catalog" in sys.argv:
    for i in range(50):

        def make(i: int):  # noqa: ANN202
            def fn(query: str, limit: Annotated[int, Field(ge=1, le=100)] = 10) -> str:
                return f"{i}:{query}:{limit}"

            fn.__name__ = f"search_{i}"
            fn.__doc__ = f"Search index {i}."
            return fn

        server.tool()(make(i))

if __name__ == "__main__":
    server.run("stdio")
