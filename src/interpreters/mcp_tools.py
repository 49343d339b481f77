"""MCP toolsets: the tools of a Model Context Protocol server, as tools an agent takes.

    async with MCPToolset.stdio("python", ["weather_server.py"]) as weather:
        agent = Agent.create("openai/gpt-4o-mini", tools=[*weather.tools, my_tool])
        result = await AsyncInterpreter(resolve=AsyncResolver()).run(agent, "Paris?")

    async with MCPToolset.http("http://127.0.0.1:8000/mcp") as remote: ...

Each MCP tool becomes a `Tool` with the server's own JSON schema and description and an
async function that calls the server, so MCP tools run on the async interpreter (the
sync one refuses async tools, naming them). A call the server answers with an error
result, or that fails or outlives `call_timeout`, is an error result the model sees;
the run goes on. The server's lifecycle is the `async with`: open it around one run, or
once for the whole app (in an ASGI lifespan) and share its tools between runs; a stdio
server's process is started on entry and stopped on exit, and a tool of a closed
toolset fails with `MCPToolsetError`.

Needs the optional extra: `pip install "pipeline-agents[mcp]"` (the official `mcp` SDK).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack, suppress
from typing import TYPE_CHECKING, TypedDict, Unpack

import msgspec

from pipeline.tools import Tool
from pipeline.values.bounds import check_cap

if TYPE_CHECKING:
    from mcp import Client
    from mcp_types import ContentBlock

MAX_TOOL_PAGES = 100
"""Pages of `tools/list` read at most (a server whose pages never end cannot hang us)."""
MAX_DESCRIPTION_BYTES = 8 << 10
"""A tool's description (UTF-8) at most: it goes into every model request."""
MAX_SCHEMA_BYTES = 64 << 10
"""A tool's input schema (encoded JSON) at most: it goes into every model request."""


class MCPToolsetError(Exception):
    """An MCP server could not be reached, or the toolset is not open."""


class MCPToolError(Exception):
    """An MCP tool answered with an error result (its text is the message)."""


class ToolsetOptions(TypedDict, total=False):
    """What both kinds of server take (`MCPToolset.stdio`, `MCPToolset.http`); the
    defaults and the meaning are `MCPToolset`'s."""

    prefix: str | None
    include: Sequence[str] | None
    connect_timeout: float
    call_timeout: float
    max_result_bytes: int | None
    max_description_bytes: int
    max_schema_bytes: int


class MCPToolset:
    """The tools of one MCP server; use `MCPToolset.stdio(...)` or `MCPToolset.http(...)`.

    `prefix` renames tools to `<prefix>_<name>` (the server still gets its own names);
    `include` keeps only the tools named. `connect_timeout` bounds starting the server
    and listing its tools, `call_timeout` each tool call (seconds). `max_result_bytes`
    caps each tool's result (encoded JSON; None: the agent's cap, 1 MiB by default);
    a tool whose description or schema is over `max_description_bytes` or
    `max_schema_bytes` makes opening the toolset fail with `MCPToolsetError`.
    """

    def __init__(
        self,
        *,
        command: str | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        url: str | None = None,
        prefix: str | None = None,
        include: Sequence[str] | None = None,
        connect_timeout: float = 30.0,
        call_timeout: float = 60.0,
        max_result_bytes: int | None = None,
        max_description_bytes: int = MAX_DESCRIPTION_BYTES,
        max_schema_bytes: int = MAX_SCHEMA_BYTES,
    ) -> None:
        if max_result_bytes is not None:
            check_cap("max_result_bytes", max_result_bytes)
        check_cap("max_description_bytes", max_description_bytes)
        check_cap("max_schema_bytes", max_schema_bytes)
        if (command is None) == (url is None):
            raise ValueError("give either command= (a stdio server) or url= (streamable HTTP)")
        for what, t in (("connect_timeout", connect_timeout), ("call_timeout", call_timeout)):
            if not t > 0:
                raise ValueError(f"{what} must be a number of seconds > 0, got {t!r}")
        self._command = command
        self._args = tuple(args)
        self._env = dict(env) if env is not None else None
        self._cwd = cwd
        self._url = url
        self._prefix = prefix
        self._include = None if include is None else frozenset(include)
        self._connect_timeout = connect_timeout
        self._call_timeout = call_timeout
        self._max_result_bytes = max_result_bytes
        self._max_description_bytes = max_description_bytes
        self._max_schema_bytes = max_schema_bytes
        self._client: Client | None = None
        self._stack: AsyncExitStack | None = None
        self._tools: tuple[Tool, ...] = ()

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        **options: Unpack[ToolsetOptions],
    ) -> MCPToolset:
        """A server started as a subprocess, spoken to over its stdin and stdout."""
        return cls(command=command, args=args, env=env, cwd=cwd, **options)

    @classmethod
    def http(cls, url: str, **options: Unpack[ToolsetOptions]) -> MCPToolset:
        """A server at a streamable HTTP endpoint (usually ending in `/mcp`)."""
        return cls(url=url, **options)

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The server's tools (empty until the toolset is open)."""
        return self._tools

    def __repr__(self) -> str:
        state = "open" if self._client is not None else "closed"
        return f"MCPToolset({self._describe()}, {state}, {len(self._tools)} tools)"

    # --- lifecycle ---------------------------------------------------------------------
    async def __aenter__(self) -> MCPToolset:
        if self._stack is not None:
            raise MCPToolsetError(f"{self!r} is already open")
        from mcp import Client, StdioServerParameters

        target: str | StdioServerParameters
        if self._command is not None:
            target = StdioServerParameters(
                command=self._command, args=list(self._args), env=self._env, cwd=self._cwd
            )
        else:
            assert self._url is not None
            target = self._url
        # The read timeout bounds every request of the handshake and the listing; calls
        # pass their own. (A cancel scope around entering cannot do it: the client's task
        # group outlives the scope.)
        client = Client(target, read_timeout_seconds=self._connect_timeout)
        stack = AsyncExitStack()
        try:
            await stack.enter_async_context(client)
            tools = await self._list(client)
        except _TooBig as e:
            await _close_quietly(stack)
            raise MCPToolsetError(f"MCP server {self._describe()}: {e}") from None
        except Exception as e:
            await _close_quietly(stack)
            raise MCPToolsetError(
                f"could not connect to MCP server {self._describe()}: {_leaf(e)}"
            ) from e
        except BaseException:
            await _close_quietly(stack)
            raise
        self._stack, self._client, self._tools = stack, client, tools
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection (and stop a stdio server); its tools then fail."""
        stack, self._stack, self._client = self._stack, None, None
        if stack is not None:
            await stack.aclose()

    # --- tools -------------------------------------------------------------------------
    async def _list(self, client: Client) -> tuple[Tool, ...]:
        out: list[Tool] = []
        cursor: str | None = None
        for _ in range(MAX_TOOL_PAGES):
            page = await client.list_tools(cursor=cursor)
            out.extend(
                self._tool(t.name, t.description or t.title or "", t.input_schema)
                for t in page.tools
                if self._include is None or t.name in self._include
            )
            cursor = page.next_cursor
            if not cursor:
                break
        return tuple(out)

    def _tool(self, remote: str, description: str, schema: Mapping[str, object]) -> Tool:
        name = f"{self._prefix}_{remote}" if self._prefix else remote
        parameters = {k: v for k, v in schema.items() if k != "$schema"}
        for what, size, cap in (
            ("description", len(description.encode("utf-8", "surrogatepass")),
             self._max_description_bytes),
            ("input schema", _json_size(parameters), self._max_schema_bytes),
        ):
            if size > cap:
                raise _TooBig(
                    f"MCP tool {remote!r} has a {what} of {size} bytes, over the cap of "
                    f"{cap} (max_{what.split()[-1]}_bytes)"
                )

        async def call_mcp_tool(**arguments: object) -> object:
            return await self._call(remote, arguments)

        return Tool.define(
            name, description, parameters, call_mcp_tool, max_result_bytes=self._max_result_bytes
        )

    async def _call(self, name: str, arguments: Mapping[str, object]) -> object:
        client = self._client
        if client is None:
            raise MCPToolsetError(f"the MCP toolset for {self._describe()} is closed")
        result = await client.call_tool(
            name, dict(arguments), read_timeout_seconds=self._call_timeout
        )
        text = _text(result.content)
        if result.is_error:
            raise MCPToolError(text or f"MCP tool {name!r} failed")
        structured = result.structured_content
        if structured is not None:
            # A tool returning a plain value has it wrapped as {"result": value}.
            if set(structured) == {"result"}:
                return structured["result"]
            return structured
        return text

    def _describe(self) -> str:
        if self._command is not None:
            return " ".join((self._command, *self._args))
        return str(self._url)


class _TooBig(Exception):
    """A tool's description or schema over its cap (made an `MCPToolsetError`)."""


def _json_size(value: object) -> int:
    try:
        return len(msgspec.json.encode(value))
    except (TypeError, ValueError, RecursionError):  # a schema that cannot be sent at all
        return sys.maxsize


def _text(content: Sequence[ContentBlock]) -> str:
    """The text of an MCP result; other content (images, audio...) is named, not sent."""
    parts: list[str] = []
    for block in content:
        text = getattr(block, "text", None)
        if isinstance(text, str):
            parts.append(text)
        else:
            kind = getattr(block, "type", "content")
            mime = getattr(block, "mime_type", None)
            parts.append(f"[{kind}{' ' + mime if mime else ''}]")
    return "\n".join(parts)


def _leaf(e: BaseException) -> str:
    """The first real error inside (nested) exception groups, as text."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    text = str(e)
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


async def _close_quietly(stack: AsyncExitStack) -> None:
    with suppress(Exception):  # the connect error is what the caller needs to see
        await stack.aclose()
