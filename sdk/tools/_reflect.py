"""Function signature → Pydantic arguments model and JSON Schema (the engine of `sdk.tools`).

Everything that can be wrong with a tool is checked here, once, when it is defined: the grammar
that constrains generation is derived from the schema, so a parameter without a schema cannot be
deferred to call time.
"""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.errors import PydanticUserError
from pydantic.fields import FieldInfo

from sdk.errors import ToolDefinitionError
from sdk.tools._docstrings import ParsedDocstring, parse_docstring

_BASEMODEL_NAMES = frozenset(dir(BaseModel))


def definition_error(function: str, parameter: str | None, reason: str) -> Exception:
    """A `ToolDefinitionError` naming the function (and the parameter, where there is one)."""
    where = f"{function}: parameter {parameter!r}: " if parameter else f"{function}: "
    return ToolDefinitionError(where + reason, function=function, parameter=parameter)


def display_name(fn: object) -> str:
    """The name error messages use: the qualified name when there is one."""
    target = fn.func if isinstance(fn, functools.partial) else fn
    return str(getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or fn)


def source_function(fn: Callable[..., Any]) -> Any:
    """The Python function whose globals, docstring and code stand behind `fn`.

    Partials, bound methods, classes (their `__init__`) and callable instances (their
    `__call__`) all resolve to a plain function, the one `inspect.signature` reports on.
    """
    target: Any = fn
    while isinstance(target, functools.partial):
        target = target.func
    target = getattr(target, "__func__", target)  # bound methods, staticmethod objects
    if isinstance(target, type):
        target = next(vars(k)["__init__"] for k in target.__mro__ if "__init__" in vars(k))
    elif not (inspect.isroutine(target) or isinstance(target, functools.partial)):
        target = type(target).__call__
    target = getattr(target, "__func__", target)
    return inspect.unwrap(target)


def is_async_callable(fn: Callable[..., Any]) -> bool:
    """True for coroutine functions, including partials and objects with an async `__call__`."""
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(type(fn), "__call__", None)  # noqa: B004 - the class's, not the instance's
    return not inspect.isroutine(fn) and call is not None and inspect.iscoroutinefunction(call)


@dataclass(frozen=True)
class Binding:
    """How one schema property maps back onto the function: field name, parameter name, kind."""

    field: str
    parameter: str
    positional_only: bool


@dataclass(frozen=True)
class Reflected:
    """The result of reflecting a function."""

    args_model: type[BaseModel]
    json_schema: dict[str, Any]
    bindings: tuple[Binding, ...]
    context: Binding | None  # the RunContext parameter; positional_only: pass it positionally
    docstring: ParsedDocstring

    @property
    def takes_context(self) -> bool:
        return self.context is not None


def _resolve(raw: Any, globalns: dict[str, Any], localns: dict[str, Any] | None) -> Any:
    """Evaluate one annotation (string or nested forward refs) with `typing.get_type_hints`.

    Done per parameter, through a stand-in object, so an unresolvable annotation can be pinned
    on its parameter, and the return annotation (not part of the schema) can never break it.
    """
    shim = types.SimpleNamespace(__annotations__={"a": raw}, __globals__=globalns)
    return typing.get_type_hints(shim, globalns=globalns, localns=localns, include_extras=True)["a"]


def _is_context(annotation: Any, context_type: type | None) -> bool:
    if context_type is None:
        return False
    if typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation is context_type or typing.get_origin(annotation) is context_type


def _field_name(parameter: str, index: int) -> str:
    """Pydantic refuses leading underscores and shadowing BaseModel attributes; alias those."""
    if parameter.startswith("_") or parameter in _BASEMODEL_NAMES:
        return f"p{index}_{parameter.lstrip('_')}"
    return parameter


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def _config(title: str) -> ConfigDict:
    return ConfigDict(extra="forbid", protected_namespaces=(), title=title)


def reflect(
    fn: Callable[..., Any],
    *,
    tool_name: str,
    localns: dict[str, Any] | None = None,
    context_type: type | None = None,
) -> Reflected:
    """Reflect `fn` into an arguments model named and titled `tool_name`.

    Raises `ToolDefinitionError` naming the function and, where there is one, the parameter.
    """
    fname = display_name(fn)
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise definition_error(fname, None, f"cannot read its signature ({exc})") from None
    source = source_function(fn)
    globalns: dict[str, Any] = getattr(source, "__globals__", None) or {}
    doc = parse_docstring(inspect.getdoc(source) or inspect.getdoc(fn))

    fields: dict[str, Any] = {}
    bindings: list[Binding] = []
    context: Binding | None = None
    for index, (pname, param) in enumerate(signature.parameters.items()):
        _check_parameter(fname, index, pname, param)
        try:
            annotation = _resolve(param.annotation, globalns, localns)
        except Exception as exc:  # NameError, SyntaxError, TypeError from user annotations
            raise definition_error(
                fname, pname, f"cannot resolve annotation {param.annotation!r} ({_first_line(exc)})"
            ) from None
        if _is_context(annotation, context_type):
            if index != 0:
                raise definition_error(
                    fname, pname, "a RunContext parameter must be the first parameter"
                )
            context = Binding("", pname, param.kind is not param.KEYWORD_ONLY)
            continue
        field, annotation, default = _model_field(fname, index, pname, param, annotation, doc)
        fields[field] = (annotation, default)
        bindings.append(Binding(field, pname, param.kind is param.POSITIONAL_ONLY))

    try:
        model: type[BaseModel] = create_model(
            tool_name,
            __config__=_config(tool_name),
            __module__=getattr(source, "__module__", None) or __name__,
            **fields,
        )
        schema = model.model_json_schema()
    except Exception as exc:
        raise _diagnose(fname, tool_name, fields, bindings, exc) from exc
    schema["title"] = tool_name
    schema.pop("description", None)
    return Reflected(model, schema, tuple(bindings), context, doc)


def _check_parameter(fname: str, index: int, pname: str, param: inspect.Parameter) -> None:
    """Refuse what no JSON object of arguments can carry: `*args`, `**kwargs`, and parameters
    without a type annotation (no schema to derive the grammar from)."""
    if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
        star = "*" if param.kind is param.VAR_POSITIONAL else "**"
        raise definition_error(
            fname,
            pname,
            f"{star}{pname} is not supported: a tool's arguments are a JSON object with a "
            "fixed set of properties; declare each argument as a named parameter",
        )
    if param.annotation is param.empty:
        hint = (
            "; to expose a method, pass the bound method (instance.method) to Tool.from_function"
            if index == 0 and pname in ("self", "cls")
            else ""
        )
        raise definition_error(
            fname,
            pname,
            "missing type annotation: the argument grammar is derived from each parameter's "
            f"JSON Schema, so every parameter needs one (use `Any` explicitly to allow any "
            f"JSON value){hint}",
        )


def _model_field(
    fname: str,
    index: int,
    pname: str,
    param: inspect.Parameter,
    annotation: Any,
    doc: ParsedDocstring,
) -> tuple[str, Any, Any]:
    """One parameter's field of the arguments model: its name, its annotation (with the
    docstring's description, and an alias where the name had to change) and its default."""
    default: Any = ... if param.default is param.empty else param.default
    try:
        explicit = FieldInfo.from_annotated_attribute(annotation, default)
    except Exception as exc:  # e.g. conflicting Field(...) metadata
        raise definition_error(fname, pname, _first_line(exc)) from None
    described = doc.params.get(pname)
    if described and explicit.description is None:
        # Outermost Annotated metadata would override the user's, hence the check above.
        annotation = Annotated[annotation, Field(description=described)]
    field = _field_name(pname, index)
    if field != pname:
        annotation = Annotated[annotation, Field(alias=pname)]
    return field, annotation, default


def _diagnose(
    fname: str,
    tool_name: str,
    fields: dict[str, Any],
    bindings: list[Binding],
    exc: Exception,
) -> Exception:
    """Find the parameter that made model or schema generation fail, to name it in the error."""
    by_field = {b.field: b.parameter for b in bindings}
    for field, spec in fields.items():
        try:
            create_model(
                tool_name, __config__=_config(tool_name), **{field: spec}
            ).model_json_schema()
        except Exception as inner:
            return definition_error(fname, by_field[field], _schema_reason(spec[0], inner))
    return definition_error(fname, None, _schema_reason(None, exc))


def _schema_reason(annotation: Any, exc: Exception) -> str:
    what = f"type {annotation!r}" if annotation is not None else "the signature"
    if isinstance(exc, PydanticUserError):
        return (
            f"Pydantic cannot build a JSON Schema for {what} ({_first_line(exc)}); use JSON-like "
            "types, Pydantic models, dataclasses or TypedDicts"
        )
    return f"cannot build an arguments model for {what} ({_first_line(exc)})"


def schema_parameter(pointer: str, bindings: tuple[Binding, ...]) -> str | None:
    """The parameter a JSON pointer into a tool's schema falls under, if any."""
    parts = pointer.lstrip("/").split("/")
    if len(parts) >= 2 and parts[0] == "properties":
        name = parts[1].replace("~1", "/").replace("~0", "~")
        return name if any(b.parameter == name for b in bindings) else None
    return None
