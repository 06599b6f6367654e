"""The tools of MCP servers as events (`[mcp.servers.NAME]` in `chainlang.toml`).

When a project configures servers, building the registry starts each one
(a stdio `command`, or connects to an HTTP `url`), initializes a session,
lists its tools and closes it again, within the server's `timeout`; the
listing is kept for the rest of the process. Each tool becomes an event
`NAME.TOOL` whose params schema is the tool's input schema, so `chainlang
check` checks its params like any other event's. Servers publish open schemas
(no `additionalProperties`), so an input or output schema that lists its
properties is closed here (unless the server says `strict = false`): a
misspelt param or result path is an error, as for any tool. Running the
event calls the tool in the server's session of this event loop (started by
the first call, see chainlang.registry.mcp_session) and returns its
structured content (or its text content, joined), and a tool that reports an
error raises ValueError with the error's text: the step fails with it.

The official `mcp` SDK (the `mcp` extra) is imported only here, and only
when a project configures servers.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chainlang.registry.errors import ConfigError, RegistryError
from chainlang.registry.mcp_session import LiveSession, SessionPool, connection_lost
from chainlang.registry.spec import EventSpec, event_name_problem

if TYPE_CHECKING:
    from mcp import ClientSession

    from chainlang.config.model import McpServerConfig
    from chainlang.config.project import ProjectConfig

__all__ = ["closed", "mcp_specs", "tool_event_name"]

# (server name, its config, project root) -> the tools it listed, as raw dicts
_LISTINGS: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
_LOCK = threading.Lock()


def mcp_specs(config: ProjectConfig) -> list[EventSpec]:
    """The events of every MCP server `config` names (none without `[mcp]`).

    Raises ConfigError (the `mcp` package is missing) or RegistryError (a
    server that cannot be started or listed, a tool name that cannot be an
    event name) with a one-line message naming the server.
    """
    if config.mcp is None or not config.mcp.servers:
        return []
    try:
        import mcp  # noqa: F401  (the SDK is needed from here on)
    except ImportError:
        raise ConfigError(
            f"{config.path.name}: [mcp.servers] needs the MCP Python SDK: pip install 'chainlang[mcp]'"
        ) from None
    specs: list[EventSpec] = []
    for name, server in config.mcp.servers.items():
        source = f"MCP server '{name}' ({config.path.name})"
        seen: dict[str, str] = {}
        for tool in _listing(name, server, config.root):
            event = tool_event_name(name, tool["name"])
            problem = event_name_problem(event)
            if problem is not None:
                raise RegistryError(f"MCP server '{name}': tool {tool['name']!r} gives no event name: {problem}")
            if event in seen:
                raise RegistryError(
                    f"MCP server '{name}': tools {seen[event]!r} and {tool['name']!r} are both the event '{event}'")
            seen[event] = tool["name"]
            specs.append(_spec(event, name, server, config.root, tool, source))
    return specs


def tool_event_name(server: str, tool: str) -> str:
    """`SERVER.TOOL` with the tool's name in the event-name grammar: camelCase and
    other characters become snake_case (`getWeather` and `get-weather` are `get_weather`)."""
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", tool).lower()
    snake = re.sub(r"[^a-z0-9_]+", "_", snake).strip("_")
    snake = re.sub(r"_+", "_", snake)
    if not snake or not snake[0].isalpha():
        snake = "t_" + snake if snake else "tool"
    return f"{server}.{snake}"


def closed(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with `additionalProperties: false` when it lists its `properties` and says
    nothing of other properties itself (only the top level: that is what params and
    result paths are checked against)."""
    if not isinstance(schema.get("properties"), dict) or any(
            key in schema for key in ("additionalProperties", "patternProperties", "unevaluatedProperties")):
        return schema
    return {**schema, "additionalProperties": False}


def _spec(event: str, server_name: str, server: McpServerConfig, root: Path, tool: dict[str, Any],
          source: str) -> EventSpec:
    params = dict(tool.get("input_schema") or {})
    params.setdefault("type", "object")
    result = tool.get("output_schema")
    if server.strict:
        params = closed(params)
        result = closed(result) if isinstance(result, dict) else result
    annotations = tool.get("annotations") or {}
    takes_ctx = "ctx" not in (params.get("properties") or {})
    return EventSpec(
        name=event,
        params_schema=params,
        result_schema=result,
        description=str(tool.get("description") or tool.get("title") or ""),
        kind="tool",
        idempotent=bool(annotations.get("idempotent_hint")),
        effects={"side_effects": not annotations.get("read_only_hint")},
        func=_caller(server_name, server, root, tool["name"], takes_ctx),
        accepts_ctx=takes_ctx,
        source=source,
        is_async=True,
    )


_POOL = SessionPool()

# True only for benchmarks/mcp_bench.py's baseline: a session (a server start) per call, as before
FRESH_SESSION_PER_CALL = False


def _caller(server_name: str, server: McpServerConfig, root: Path, tool: str,
            takes_ctx: bool) -> Callable[..., Awaitable[Any]]:
    key = f"{server_name}\0{server.key()}\0{root}"

    async def session(ctx: Any) -> LiveSession:
        from chainlang.durations import parse_duration

        def started(seconds: float, again: bool) -> None:
            if ctx is not None:
                word = "started again" if again else "started"
                ctx.progress(f"MCP server '{server_name}' {word} ({seconds * 1000:.0f} ms)")

        return await _POOL.session(key, server_name, lambda: _session(server, root),
                                   parse_duration(server.timeout) or 30.0, started)

    async def call_in_pool(ctx: Any, arguments: dict[str, Any]) -> Any:
        if FRESH_SESSION_PER_CALL:
            async with _session(server, root) as fresh:
                return await fresh.call_tool(tool, arguments)
        live = await session(ctx)
        try:
            return await live.call(lambda started: started.call_tool(tool, arguments))
        except Exception as exc:
            if not connection_lost(exc):
                raise
            live.close()
            raise ValueError(f"MCP server '{server_name}' stopped during the call to '{tool}' "
                             "(the next call starts it again)") from None

    async def call_with_ctx(ctx: Any, **arguments: Any) -> Any:
        return _result(server_name, tool, await call_in_pool(ctx, arguments))

    async def call_without_ctx(**arguments: Any) -> Any:
        # the tool has a param named ctx: it is the tool's, and the start-up goes unrecorded
        return _result(server_name, tool, await call_in_pool(None, arguments))

    call: Callable[..., Awaitable[Any]] = call_with_ctx if takes_ctx else call_without_ctx
    call.__name__ = call.__qualname__ = f"mcp_{server_name}_{tool}"
    return call


def _result(server_name: str, tool: str, result: Any) -> Any:
    """The JSON a tool call gives the step (ValueError for a tool error)."""
    if not hasattr(result, "content"):  # an InputRequiredResult: the tool asks for input we cannot give
        raise ValueError(f"MCP tool '{tool}' of server '{server_name}' asked for input instead of answering")
    content = result.content or []
    text = "\n".join(str(getattr(block, "text", "")) for block in content if getattr(block, "type", None) == "text")
    if getattr(result, "is_error", False):
        raise ValueError(text or f"MCP tool '{tool}' of server '{server_name}' failed")
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        return structured
    return text


@asynccontextmanager
async def _session(server: McpServerConfig, root: Path) -> AsyncIterator[ClientSession]:
    """An initialized session with `server` (started for a stdio server), closed on exit."""
    from mcp import ClientSession

    from chainlang.durations import parse_duration

    timeout = parse_duration(server.timeout) or 30.0
    if server.url is not None:
        from mcp.client.streamable_http import streamable_http_client

        transport = streamable_http_client(server.url)
    else:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        assert server.command is not None
        params = StdioServerParameters(command=server.command, args=list(server.args), env=dict(server.env) or None,
                                       cwd=str(root))
        transport = stdio_client(params, errlog=_devnull())
    async with transport as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=timeout) as session:
            await session.initialize()
            yield session


_DEVNULL: Any = None


def _devnull() -> Any:
    """Where a stdio server's stderr goes: its log is not chainlang's output."""
    global _DEVNULL
    if _DEVNULL is None:
        _DEVNULL = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 (kept for the process)
    return _DEVNULL


def _listing(name: str, server: McpServerConfig, root: Path) -> list[dict[str, Any]]:
    key = (name, server.key(), str(root))
    with _LOCK:
        cached = _LISTINGS.get(key)
    if cached is not None:
        return cached
    box: dict[str, Any] = {}

    def work() -> None:
        import anyio

        try:
            box["tools"] = anyio.run(_list_tools, server, root)
        except BaseException as exc:  # reported below, in the caller's thread
            box["error"] = exc

    # a thread of its own: the registry may be built inside a running event loop
    thread = threading.Thread(target=work, name=f"mcp-list-{name}", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        where = f"command {server.command!r}" if server.command is not None else f"url {server.url}"
        raise RegistryError(f"MCP server '{name}' ({where}): cannot list its tools: {_describe(box['error'], server)}")
    tools: list[dict[str, Any]] = box["tools"]
    with _LOCK:
        _LISTINGS[key] = tools
    return tools


async def _list_tools(server: McpServerConfig, root: Path) -> list[dict[str, Any]]:
    import anyio
    from mcp.types import PaginatedRequestParams

    from chainlang.durations import parse_duration

    tools: list[dict[str, Any]] = []
    with anyio.fail_after(parse_duration(server.timeout) or 30.0):
        async with _session(server, root) as session:
            cursor: str | None = None
            while True:
                page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
                tools.extend(tool.model_dump() for tool in page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
    return tools


def _describe(error: BaseException, server: McpServerConfig) -> str:
    """One line for what went wrong (the first error inside exception groups)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, TimeoutError):
        return f"no answer within {server.timeout} (the timeout)"
    if isinstance(error, FileNotFoundError):
        return f"no such command: {server.command}"
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
