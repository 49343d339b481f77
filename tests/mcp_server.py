"""A tiny MCP server for the MCP toolset tests, on the official SDK's MCPServer (the
FastMCP of mcp 1.x). `python tests/mcp_server.py` serves stdio;
`python tests/mcp_server.py http FD` serves streamable HTTP at /mcp on the listening socket
inherited as file descriptor FD (bound by the test: it can connect at once, no waiting for
the server to listen)."""

from __future__ import annotations

import os
import socket
import sys

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("test-tools")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def refuse(reason: str) -> str:
    """Always fails, with the reason given (an error result the client sees)."""
    raise ToolError(f"refused: {reason}")


@server.tool()
async def slow(seconds: float) -> str:
    """Answers after `seconds` (to check the client's call timeout)."""
    await anyio.sleep(seconds)
    return "done"


@server.tool()
def big(n: int) -> str:
    """n characters (to check the client's cap on a result)."""
    return "x" * n


@server.tool()
def pid() -> int:
    """The server process's id (to check its lifecycle)."""
    return os.getpid()


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        import uvicorn

        listening = socket.socket(fileno=int(sys.argv[2]))
        app = server.streamable_http_app(host="127.0.0.1")
        uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[listening])
    else:
        server.run()
