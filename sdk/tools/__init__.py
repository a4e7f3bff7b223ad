"""Python functions and Pydantic models as tools a language model can call.

`@tool` reflects a function's signature, type hints and docstring into a Pydantic arguments
model and its JSON Schema. The schema drives the grammar that constrains generation, and the
model validates what was generated, so a tool's arguments always parse and validate. All
checks happen when the tool is defined: a parameter that cannot be described as JSON Schema is
an error there, never a surprise mid-conversation.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import functools
import inspect
import logging
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeVar, cast, overload, runtime_checkable

from pydantic import BaseModel

from sdk.errors import ModelRetry, ToolDefinitionError
from sdk.tools._docstrings import parse_docstring
from sdk.tools._reflect import (
    Binding,
    definition_error,
    display_name,
    is_async_callable,
    reflect,
    schema_parameter,
)

__all__ = [
    "ModelRetry",
    "RunContext",
    "Tool",
    "ToolDefinitionError",
    "ToolLike",
    "as_tool",
    "tool",
    "tools_by_name",
]

_log = logging.getLogger("sdk.tools")
F = TypeVar("F", bound=Callable[..., Any])
DepsT = TypeVar("DepsT")

TOOL_NAME_RE = re.compile(r"[a-zA-Z0-9_-]{1,64}")
"""Tool names as the OpenAI-style function-calling format allows them (matched in full)."""


@dataclass
class RunContext(Generic[DepsT]):
    """Run state for tools whose first parameter is annotated `RunContext[...]`.

    That parameter is not part of the schema: the runner passes it, the model never sees it.
    The run's `prepare_tools` and `requires_approval` callables get one too.

    Attributes:
        deps: the run's `deps=` (`Agent.run(deps=...)`): your database handle, user, ...
        tool_name: the tool being called ("" for `prepare_tools`).
        retry: for a tool's call, how many of this tool's calls failed so far in this run
            (validation errors, `ModelRetry`): 0 on the first try; 0 for the callables.
        step: the model turn (1-based) the call was made in (0 for a call approved when a
            paused run resumes); for `prepare_tools`, the turn being prepared.
    """

    deps: DepsT
    tool_name: str = ""
    retry: int = 0
    step: int = 0  # the model turn (1-based) the call was made in, or is about to be prepared


def _check_name(name: Any, function: str) -> str:
    if not isinstance(name, str) or not TOOL_NAME_RE.fullmatch(name):
        raise definition_error(
            function,
            None,
            f"invalid tool name {name!r}: names must match ^[a-zA-Z0-9_-]{{1,64}}$ "
            "(pass name=... to choose one)",
        )
    return name


def _check_strict(schema: dict[str, Any], function: str, bindings: tuple[Binding, ...]) -> None:
    """Compile-check the schema now, so `strict=True` fails at definition, not at first use."""
    from sdk.errors import SchemaError
    from sdk.grammar import compile_schema

    try:  # the whole compiler: some keywords are only classified when the grammar is emitted
        compile_schema(schema, strict=True)
    except SchemaError as exc:
        parameter = schema_parameter(getattr(exc, "pointer", ""), bindings)
        raise definition_error(function, parameter, f"strict=True, but {exc}") from exc


def not_runnable_message(name: str) -> str:
    return (
        f"tool {name!r} was declared from a schema without a function: pass function= to run "
        "it (Agent.plan_sync returns its calls without running them)"
    )


def _object_schema(parameters: Any, name: str) -> dict[str, Any]:
    """Arguments are a JSON object: the schema must say so (or say nothing of the type)."""
    if not isinstance(parameters, Mapping):
        raise ToolDefinitionError(
            f"tool {name!r}: parameters must be a JSON Schema object, not "
            f"{type(parameters).__name__}",
            function=name,
        )
    schema = copy.deepcopy(dict(parameters))
    kind = schema.get("type", "object")
    if kind != "object" and not (isinstance(kind, list) and "object" in kind):
        raise ToolDefinitionError(
            f"tool {name!r}: the arguments schema must describe an object (type: object), "
            f"not type {kind!r}",
            function=name,
        )
    schema["type"] = "object"
    return schema


def _check_compiles(schema: dict[str, Any], name: str, strict: bool) -> None:
    """Compile the schema's grammar now: a schema it cannot express fails at definition, and
    every turn grammar that offers the tool reuses the compiled piece (`sdk.engine.pieces`)."""
    from sdk.engine.pieces import schema_piece
    from sdk.errors import SchemaError
    from sdk.grammar import compile_schema

    try:
        piece = schema_piece(schema)
        if strict and piece.grammar.validated:  # raises, naming the keyword and its pointer
            compile_schema(schema, strict=True, close_objects=True)
    except SchemaError as exc:
        raise ToolDefinitionError(f"tool {name!r}: {exc}", function=name) from exc


def _precompile(schema: dict[str, Any]) -> None:
    """Compile the arguments' grammar piece now, so that the turn grammars offering the tool
    compile no schema (`sdk.engine.pieces`). A schema the grammar cannot express still
    fails where it did, when a turn grammar needs it: a tool may serve a model that takes
    no grammar."""
    from sdk.engine.pieces import schema_piece
    from sdk.errors import SchemaError

    with contextlib.suppress(SchemaError):
        schema_piece(schema)


def _caller_locals() -> dict[str, Any] | None:
    """The locals of our caller's caller: they resolve string annotations naming classes local
    to a function (as `from __future__ import annotations` produces); None at module level."""
    frame = sys._getframe(2)
    return None if frame.f_locals is frame.f_globals else dict(frame.f_locals)


@runtime_checkable
class ToolLike(Protocol):
    """What the agent needs of a tool. `Tool` has it; an adapter of your own (a tool over a
    raw JSON Schema, a remote tool) passes as it is when it has these too. Optional:
    `is_async` with `acall(args, ctx)`, and `grammar_schema` (the schema the grammar is
    compiled from, when it differs from `json_schema`)."""

    @property
    def name(self) -> str: ...

    @property
    def json_schema(self) -> dict[str, Any]: ...

    def validate_args(self, data: Any) -> Any: ...

    def to_openai(self) -> dict[str, Any]: ...

    def call(self, args: Any, ctx: RunContext[Any]) -> Any: ...


@dataclass(frozen=True, eq=False)
class Tool:
    """A callable the model can invoke: its name, description, arguments model and schema.

    Build with `@tool`, `Tool.from_function` or `Tool.from_model`. `strict` asks the grammar to
    enforce every schema keyword (checked at definition); otherwise keywords the grammar can
    only approximate are left to Pydantic validation after parsing.

    Attributes:
        name: the name the model calls it by.
        description: what the model is told the tool does.
        args_model: the Pydantic model generated arguments are validated into.
        json_schema: the arguments' JSON Schema: shown to the model, compiled into the
            grammar.
        function: what a call runs (a model tool's is the model class, and a call returns
            the validated instance; None for a schema tool declared without one).
        is_async: the function is async (run it with `acall`).
        takes_context: the function takes a `RunContext` first (not part of the schema).
        strict: the grammar enforces every schema keyword (checked at definition).
        grammar_schema: set when the grammar cannot express `json_schema`
            (`from_schema(unsupported="validate")`): the looser schema the grammar enforces;
            validation still checks all of `json_schema`.
        repeatable: the same call may run again within one run (see `tool(repeatable=...)`).
        requires_approval: a person approves each call before it runs (see
            `tool(requires_approval=...)`).
    """

    name: str
    description: str
    args_model: type[BaseModel]
    json_schema: dict[str, Any]
    function: Callable[..., Any]
    is_async: bool = False
    takes_context: bool = False
    strict: bool = False
    # None for model tools, whose call returns the validated arguments themselves.
    _bindings: tuple[Binding, ...] | None = field(default=None, repr=False)
    _context: Binding | None = field(default=None, repr=False)
    # Schema tools: the function takes the arguments object's members as keywords.
    _kwargs: bool = field(default=False, repr=False)
    # Set when the grammar cannot express `json_schema` (unsupported="validate"): the grammar
    # enforces this looser schema, validation the whole `json_schema`.
    grammar_schema: dict[str, Any] | None = field(default=None, repr=False)
    # The same call (name and arguments) may run again within one run, and so may a call fed
    # values from the run's results: for tools whose result changes between calls (a clock, a
    # queue) or that page through results. False: a repeat gets the first result back, and a
    # turn of such calls only is answered instead (`sdk.agent._loops`).
    repeatable: bool = False
    # A person approves each call before it runs: the run stops with the validated calls
    # (`ApprovalRequired`) and resumes with the decisions (`Agent.run(approvals=...)`).
    requires_approval: bool = False

    @classmethod
    def from_schema(
        cls,
        name: str,
        parameters: Mapping[str, Any],
        function: Callable[..., Any] | None = None,
        *,
        description: str = "",
        strict: bool = False,
        unsupported: Literal["error", "validate"] = "error",
    ) -> Tool:
        """A tool from a JSON Schema of its arguments (an MCP tool's `inputSchema`, an OpenAPI
        operation, another framework's definition) and a sync or async function that takes
        the arguments object's members as keywords.

        The grammar enforces the schema as far as it can (`strict=True`: entirely, or
        `ToolDefinitionError`); `jsonschema` validates all of it after parsing, and a failure
        is fed back to the model and retried like any tool's. Without `function` the tool is
        declared only: `Agent.plan_sync` returns its calls; `run` refuses to execute it.
        Raises `ToolDefinitionError` for a bad name or a schema that is not a JSON Schema of
        an object; and for one the grammar cannot compile (a remote `$ref`, a grammar over the
        size cap) unless `unsupported="validate"`: then the grammar only makes the arguments
        a JSON object and validation enforces the schema (for schemas you do not control,
        such as an MCP server's: one odd tool must not stop the others).

        Args:
            name: the tool's name (`^[a-zA-Z0-9_-]{1,64}$`).
            parameters: the JSON Schema of the arguments object.
            function: a sync or async function taking the arguments as keywords; None
                declares the tool only.
            description: what the model is told the tool does.
            strict: the grammar must enforce every keyword, or `ToolDefinitionError`.
            unsupported: "error" (refuse a schema the grammar cannot compile) or "validate"
                (accept it: the grammar only makes a JSON object, validation does the rest).
        """
        from sdk.tools.schema_args import schema_args_model

        tool_name = _check_name(name, repr(name))
        schema = _object_schema(parameters, tool_name)
        try:
            args_model = schema_args_model(tool_name, schema)
        except Exception as exc:  # jsonschema.SchemaError: not a JSON Schema
            raise ToolDefinitionError(
                f"tool {tool_name!r}: invalid JSON Schema: {getattr(exc, 'message', exc)}",
                function=tool_name,
            ) from exc
        grammar_schema = None
        try:
            _check_compiles(schema, tool_name, strict)
        except ToolDefinitionError as exc:
            if unsupported != "validate":
                raise
            _log.warning("%s; its arguments are only validated", exc)
            grammar_schema = {"type": "object"}
        if function is not None and not callable(function):
            raise ToolDefinitionError(
                f"tool {tool_name!r}: function={function!r} is not callable", function=tool_name
            )
        return cls(
            name=tool_name,
            description=description,
            args_model=args_model,
            json_schema=schema,
            function=cast(Callable[..., Any], function),
            is_async=function is not None and is_async_callable(function),
            strict=strict,
            _bindings=(),
            _kwargs=True,
            grammar_schema=grammar_schema,
        )

    @classmethod
    def from_openai(
        cls,
        spec: Mapping[str, Any],
        function: Callable[..., Any] | None = None,
        *,
        strict: bool = False,
    ) -> Tool:
        """A tool from an OpenAI function declaration, `{"type": "function", "function":
        {"name", "description", "parameters"}}` or the bare inner dict (see `from_schema`).

        Args:
            spec: the declaration (no `parameters`: the tool takes no arguments).
            function: as in `from_schema`.
            strict: as in `from_schema`; the declaration's own `"strict": true` sets it too.
        """
        inner = spec.get("function", spec) if isinstance(spec, Mapping) else None
        if not isinstance(inner, Mapping) or not isinstance(inner.get("name"), str):
            raise ToolDefinitionError(
                f"{spec!r}: not an OpenAI function declaration "
                '({"type": "function", "function": {"name": ..., "parameters": {...}}})',
                function=repr(spec),
            )
        parameters = inner.get("parameters") or {"type": "object", "properties": {}}
        return cls.from_schema(
            inner["name"],
            parameters,
            function,
            description=str(inner.get("description") or ""),
            strict=strict or bool(inner.get("strict")),
        )

    @classmethod
    def from_function(
        cls,
        fn: Callable[..., Any],
        name: str | None = None,
        description: str | None = None,
        *,
        strict: bool = False,
    ) -> Tool:
        """Reflect a function, bound method, partial or callable object (undecorated).

        `self`/`cls` of bound methods are skipped (they are already bound). Pydantic model
        classes are routed to `from_model`. Raises `ToolDefinitionError`.

        Args:
            fn: the callable.
            name: the tool's name (default: the function's name).
            description: what the model is told (default: the docstring's text).
            strict: the grammar must enforce every schema keyword, checked now.
        """
        return cls._build(fn, name, description, strict, _caller_locals())

    @classmethod
    def _build(
        cls,
        fn: Any,
        name: str | None,
        description: str | None,
        strict: bool,
        localns: dict[str, Any] | None,
    ) -> Tool:
        if isinstance(fn, type) and issubclass(fn, BaseModel):
            return cls.from_model(fn, name, description, strict=strict)
        if not callable(fn):
            raise ToolDefinitionError(
                f"{fn!r}: not callable; a tool is a function or a Pydantic model",
                function=repr(fn),
            )
        fname = display_name(fn)
        target = fn.func if isinstance(fn, functools.partial) else fn
        if inspect.isgeneratorfunction(target) or inspect.isasyncgenfunction(target):
            raise ToolDefinitionError(
                f"{fname}: a generator function cannot be a tool (the model would be sent the "
                "generator object); return the values, e.g. as a list",
                function=fname,
            )
        if name is None:
            name = getattr(target, "__name__", None) or type(fn).__name__
        tool_name = _check_name(name, fname)
        ref = reflect(fn, tool_name=tool_name, localns=localns, context_type=RunContext)
        if strict:
            _check_strict(ref.json_schema, fname, ref.bindings)
        _precompile(ref.json_schema)
        return cls(
            name=tool_name,
            description=description if description is not None else ref.docstring.description or "",
            args_model=ref.args_model,
            json_schema=ref.json_schema,
            function=fn,
            is_async=is_async_callable(fn),
            takes_context=ref.takes_context,
            strict=strict,
            _bindings=ref.bindings,
            _context=ref.context,
        )

    @classmethod
    def from_model(
        cls,
        model: type[BaseModel],
        name: str | None = None,
        description: str | None = None,
        *,
        strict: bool = False,
    ) -> Tool:
        """A Pydantic model as a tool: the schema is the model's; calling returns the instance.

        For structured output ("answer in this shape") through the same machinery as tools.

        Args:
            model: the Pydantic model class.
            name: the tool's name (default: the class name).
            description: what the model is told (default: the class docstring's text).
            strict: the grammar must enforce every schema keyword, checked now.
        """
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise ToolDefinitionError(
                f"{model!r}: not a Pydantic model class", function=repr(model)
            )
        fname = model.__qualname__
        tool_name = _check_name(model.__name__ if name is None else name, fname)
        try:
            schema = model.model_json_schema()
        except Exception as exc:
            raise definition_error(
                fname, None, f"Pydantic cannot build its JSON Schema ({type(exc).__name__}: {exc})"
            ) from exc
        schema["title"] = tool_name
        if strict:
            _check_strict(schema, fname, ())
        _precompile(schema)
        if description is None:
            description = parse_docstring(model.__doc__).description or ""
        return cls(
            name=tool_name,
            description=description,
            args_model=model,
            json_schema=schema,
            function=model,
            strict=strict,
        )

    def validate_args(self, data: BaseModel | dict[str, Any] | str | bytes) -> BaseModel:
        """Validate generated arguments (a JSON text or a decoded dict; an instance passes).

        Raises `pydantic.ValidationError`, whose message is fit to show the model on retry.

        Args:
            data: the arguments: JSON text, a dict, or an `args_model` instance.
        """
        if self._kwargs:
            from sdk.tools.schema_args import SchemaArgs, validate_schema_args

            return validate_schema_args(cast(type[SchemaArgs], self.args_model), data)
        if isinstance(data, str | bytes | bytearray):
            return self.args_model.model_validate_json(data)
        if isinstance(data, self.args_model):
            return data
        return self.args_model.model_validate(data)

    def _arguments(
        self, args: BaseModel | dict[str, Any] | str, ctx: RunContext[Any] | None
    ) -> tuple[list[Any], dict[str, Any]]:
        model = self.validate_args(args) if not isinstance(args, self.args_model) else args
        positional: list[Any] = []
        keywords: dict[str, Any] = {}
        if self._context is not None:
            if ctx is None:
                raise TypeError(f"tool {self.name!r} takes a RunContext; pass ctx=")
            if self._context.positional_only:
                positional.append(ctx)
            else:
                keywords[self._context.parameter] = ctx
        for binding in self._bindings or ():
            value = getattr(model, binding.field)
            if binding.positional_only:
                positional.append(value)
            else:
                keywords[binding.parameter] = value
        return positional, keywords

    def call(
        self, args: BaseModel | dict[str, Any] | str, ctx: RunContext[Any] | None = None
    ) -> Any:
        """Call the function with validated arguments (dicts and JSON text are validated first).

        Raises `TypeError` for async tools: blocking on an event loop from here would deadlock
        callers that are already inside one; use `acall`.

        Args:
            args: the arguments: JSON text, a dict, or an `args_model` instance.
            ctx: the `RunContext`, required when the tool takes one (`takes_context`).
        """
        if self._bindings is None:
            return self.validate_args(args)
        if self._kwargs:
            fn = self._declared()
            if self.is_async:
                raise TypeError(f"tool {self.name!r} is async; use `await tool.acall(args)`")
            return fn(**self._keywords(args))
        if self.is_async:
            raise TypeError(f"tool {self.name!r} is async; use `await tool.acall(args)`")
        positional, keywords = self._arguments(args, ctx)
        return self.function(*positional, **keywords)

    async def acall(
        self, args: BaseModel | dict[str, Any] | str, ctx: RunContext[Any] | None = None
    ) -> Any:
        """Call from async code: awaits async functions, runs sync ones in a worker thread.

        The thread keeps a slow sync tool from stalling the event loop (and token generation).

        Args:
            args: as in `call`.
            ctx: as in `call`.
        """
        if self._bindings is None:
            return self.validate_args(args)
        if self._kwargs:
            self._declared()
            positional: list[Any] = []
            keywords = self._keywords(args)
        else:
            positional, keywords = self._arguments(args, ctx)
        if self.is_async:
            result = await self.function(*positional, **keywords)
        else:
            result = await asyncio.to_thread(self.function, *positional, **keywords)
        if inspect.isawaitable(result):  # a sync wrapper around a coroutine function
            result = await result
        return result

    def _keywords(self, args: BaseModel | dict[str, Any] | str) -> dict[str, Any]:
        return dict(self.validate_args(args).model_dump())

    @property
    def runnable(self) -> bool:
        """False for a schema tool declared without a function (its calls can be planned,
        not run)."""
        return self.function is not None

    def _declared(self) -> Callable[..., Any]:
        if self.function is None:
            raise ToolDefinitionError(not_runnable_message(self.name), function=self.name)
        return self.function

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI function-calling declaration (a copy: callers may mutate it)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": copy.deepcopy(self.json_schema),
            },
        }


def _decorate(
    fn: Any,
    name: str | None,
    description: str | None,
    strict: bool,
    localns: dict[str, Any] | None,
    repeatable: bool = False,
    requires_approval: bool = False,
) -> Any:
    if isinstance(fn, type) and issubclass(fn, BaseModel):
        model_tool = Tool.from_model(fn, name, description, strict=strict)
        fn.__sdk_tool__ = dataclasses.replace(  # type: ignore[attr-defined]
            model_tool, repeatable=repeatable, requires_approval=requires_approval
        )
        return fn
    built = dataclasses.replace(
        Tool._build(fn, name, description, strict, localns),
        repeatable=repeatable,
        requires_approval=requires_approval,
    )
    # A wrapper rather than an attribute on `fn`: the same function may back several tools.
    wrapper: Any
    if built.is_async:

        @functools.wraps(fn)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            return await fn(*args, **kwargs)

    else:

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return fn(*args, **kwargs)

    wrapper.__sdk_tool__ = built
    return wrapper


@overload
def tool(fn: F, /) -> F: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    strict: bool = False,
    repeatable: bool = False,
    requires_approval: bool = False,
) -> Callable[[F], F]: ...


def tool(
    fn: Any = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    strict: bool = False,
    repeatable: bool = False,
    requires_approval: bool = False,
) -> Any:
    """Make a function (or Pydantic model) a tool, bare (`@tool`) or with options.

    The result calls the function unchanged and carries the `Tool` as `__sdk_tool__`.
    Parameter descriptions come from the docstring (Google, NumPy or Sphinx) unless `Field`
    sets one. Raises `ToolDefinitionError` at decoration time.

    Args:
        fn: the function or Pydantic model class (bare `@tool`; omitted with options).
        name: the name the model calls it by (default: the function's name).
        description: what the model is told it does (default: its docstring's text).
        strict: the grammar must enforce every schema keyword (checked now); otherwise
            keywords it can only approximate are left to validation after parsing.
        repeatable: the same call (name and arguments), or one fed values from the run's
            results with otherwise the same arguments (pagination), may run again within
            one run. By default a repeat is not run (the model gets the first call's result
            again: a tool with side effects never runs twice for one request), and a turn of
            nothing but such calls is answered instead.
        requires_approval: a person approves each call before it runs (the run stops with
            `ApprovalRequired`; see the approvals guide).
    """
    localns = _caller_locals()

    def decorate(f: F) -> F:
        return cast(
            F, _decorate(f, name, description, strict, localns, repeatable, requires_approval)
        )

    return decorate if fn is None else decorate(fn)


def as_tool(obj: Any) -> Tool:
    """Coerce a `Tool`, a decorated function, a Pydantic model class or a callable to a `Tool`."""
    if isinstance(obj, Tool):
        return obj
    # Look in the class's own namespace: subclasses of a decorated model are different tools.
    attached = vars(obj).get("__sdk_tool__") if isinstance(obj, type) else None
    if attached is None and not isinstance(obj, type):
        attached = getattr(obj, "__sdk_tool__", None)
    if isinstance(attached, Tool):
        return attached
    return Tool._build(obj, None, None, False, None)


def tools_by_name(tools: Iterable[Tool | Callable[..., Any] | type[BaseModel]]) -> dict[str, Tool]:
    """Index tools by name; raises `ToolDefinitionError` on duplicates (the model picks by name)."""
    out: dict[str, Tool] = {}
    for item in tools:
        built = as_tool(item)
        if built.name in out:
            raise ToolDefinitionError(
                f"duplicate tool name {built.name!r}: {display_name(out[built.name].function)} "
                f"and {display_name(built.function)}",
                function=display_name(built.function),
            )
        out[built.name] = built
    return out
