"""`sdk.tools`: functions and models reflected into tools (schema, validation, calling, errors)."""

import asyncio
import dataclasses
import datetime as dt
import enum
import functools
import inspect
import threading
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Annotated, Any, Literal, Optional, Union

import annotated_types as at
import jsonschema
import pytest
from pydantic import BaseModel, Field, ValidationError
from typing_extensions import TypedDict

from sdk.errors import SDKError
from sdk.tools import (
    ModelRetry,
    RunContext,
    Tool,
    ToolDefinitionError,
    as_tool,
    tool,
    tools_by_name,
)

# --- types used by the signatures --------------------------------------------------------------


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(BaseModel):
    x: int
    y: int


class Segment(BaseModel):
    start: Point
    end: Point


class TreeNode(BaseModel):
    value: int
    children: list["TreeNode"] = []


@dataclasses.dataclass
class Box:
    width: float
    height: float = 1.0


class Movie(TypedDict):
    title: str
    year: int


def check(t: Tool) -> None:
    """Every produced schema must be a valid draft 2020-12 schema titled by the tool name."""
    jsonschema.Draft202012Validator.check_schema(t.json_schema)
    assert t.json_schema["title"] == t.name
    assert t.json_schema["type"] == "object"


# --- 20+ signatures: (function, valid arguments, invalid arguments, expected call result) -------


def f_scalars(s: str, i: int, x: float, b: bool) -> tuple[Any, ...]:
    return (s, i, x, b)


def f_optional(a: Optional[int], b: int | None = None) -> tuple[Any, ...]:  # noqa: UP045
    return (a, b)


def f_none(n: None) -> Any:
    return n


def f_union(u: Union[int, str], v: int | list[int]) -> tuple[Any, ...]:  # noqa: UP007
    return (u, v)


def f_literal(mode: Literal["fast", "slow"], level: Literal[1, 2, 3] = 1) -> tuple[Any, ...]:
    return (mode, level)


def f_enum(color: Color) -> Color:
    return color


def f_list_dict(xs: list[int], m: dict[str, float]) -> tuple[Any, ...]:
    return (xs, m)


def f_tuple_fixed(pair: tuple[int, str]) -> Any:
    return pair


def f_tuple_var(values: tuple[float, ...]) -> Any:
    return values


def f_sets(tags: set[str], frozen: frozenset[int]) -> tuple[Any, ...]:
    return (tags, frozen)


def f_nested_model(seg: Segment) -> int:
    return seg.end.x - seg.start.x


def f_recursive(tree: TreeNode) -> int:
    def total(n: TreeNode) -> int:
        return n.value + sum(total(c) for c in n.children)

    return total(tree)


def f_dataclass(box: Box) -> float:
    return box.width * box.height


def f_typeddict(movie: Movie) -> str:
    return f"{movie['title']} ({movie['year']})"


def f_datetimes(
    when: dt.datetime, day: dt.date, at_: dt.time, span: dt.timedelta
) -> tuple[Any, ...]:
    return (when, day, at_, span)


def f_uuid_decimal(ident: uuid.UUID, amount: Decimal) -> tuple[Any, ...]:
    return (ident, amount)


def f_field_constraints(
    name: Annotated[str, Field(min_length=2, max_length=5)],
    count: Annotated[int, Field(ge=1, le=10)] = 1,
) -> tuple[Any, ...]:
    return (name, count)


def f_annotated_types(n: Annotated[int, at.Gt(0)], r: Annotated[float, at.Interval(ge=0, lt=1)]):
    return (n, r)


def f_defaults(a: int = 1, b: str = "x", c: list[int] = Field(default_factory=list)):  # noqa: B008
    return (a, b, c)


def f_positional_only(a: int, b: int, /, c: int = 0) -> int:
    return a * 100 + b * 10 + c


def f_keyword_only(*, a: int, b: int = 2) -> int:
    return a - b


def f_any(payload: Any) -> Any:
    return payload


def f_no_params() -> str:
    return "done"


def f_reserved_names(
    _hidden: int, json: str, model_config: int = Field(0, description="Reserved in Pydantic.")
) -> tuple[Any, ...]:
    return (_hidden, json, model_config)


UUID1 = "12345678-1234-5678-1234-567812345678"

SIGNATURES: list[tuple[Callable[..., Any], dict[str, Any], dict[str, Any], Any]] = [
    (
        f_scalars,
        {"s": "a", "i": 1, "x": 1.5, "b": True},
        {"s": "a", "i": "one", "x": 1.5, "b": True},
        ("a", 1, 1.5, True),
    ),
    (f_optional, {"a": None}, {"b": 1}, (None, None)),
    (f_none, {"n": None}, {"n": 0}, None),
    (f_union, {"u": "s", "v": [1, 2]}, {"u": [1], "v": 1}, ("s", [1, 2])),
    (f_literal, {"mode": "fast", "level": 3}, {"mode": "medium"}, ("fast", 3)),
    (f_enum, {"color": "blue"}, {"color": "green"}, Color.BLUE),
    (f_list_dict, {"xs": [1], "m": {"a": 1.0}}, {"xs": ["a"], "m": {}}, ([1], {"a": 1.0})),
    (f_tuple_fixed, {"pair": [1, "a"]}, {"pair": [1, "a", 2]}, (1, "a")),
    (f_tuple_var, {"values": [1.0, 2.5]}, {"values": ["x"]}, (1.0, 2.5)),
    (
        f_sets,
        {"tags": ["a", "b"], "frozen": [1]},
        {"tags": "a", "frozen": [1]},
        ({"a", "b"}, frozenset({1})),
    ),
    (
        f_nested_model,
        {"seg": {"start": {"x": 1, "y": 0}, "end": {"x": 4, "y": 0}}},
        {"seg": {"start": {"x": 1}, "end": {"x": 4, "y": 0}}},
        3,
    ),
    (
        f_recursive,
        {"tree": {"value": 1, "children": [{"value": 2, "children": [{"value": 3}]}]}},
        {"tree": {"value": 1, "children": [{"children": []}]}},
        6,
    ),
    (f_dataclass, {"box": {"width": 2.0, "height": 3.0}}, {"box": {"height": 3.0}}, 6.0),
    (
        f_typeddict,
        {"movie": {"title": "Up", "year": 2009}},
        {"movie": {"title": "Up"}},
        "Up (2009)",
    ),
    (
        f_datetimes,
        {"when": "2024-01-02T03:04:05", "day": "2024-01-02", "at_": "03:04", "span": "PT1H"},
        {"when": "yesterday", "day": "2024-01-02", "at_": "03:04", "span": "PT1H"},
        (
            dt.datetime(2024, 1, 2, 3, 4, 5),
            dt.date(2024, 1, 2),
            dt.time(3, 4),
            dt.timedelta(hours=1),
        ),
    ),
    (
        f_uuid_decimal,
        {"ident": UUID1, "amount": "1.10"},
        {"ident": "nope", "amount": "1.10"},
        (uuid.UUID(UUID1), Decimal("1.10")),
    ),
    (f_field_constraints, {"name": "abc"}, {"name": "a"}, ("abc", 1)),
    (f_annotated_types, {"n": 1, "r": 0.5}, {"n": 0, "r": 0.5}, (1, 0.5)),
    (f_defaults, {}, {"a": "x"}, (1, "x", [])),
    (f_positional_only, {"a": 1, "b": 2, "c": 3}, {"a": 1}, 123),
    (f_keyword_only, {"a": 5}, {"b": 1}, 3),
    (f_any, {"payload": {"free": ["form", 1]}}, {}, {"free": ["form", 1]}),
    (f_no_params, {}, {"unexpected": 1}, "done"),
    (f_reserved_names, {"_hidden": 1, "json": "j"}, {"hidden": 1, "json": "j"}, (1, "j", 0)),
]


@pytest.mark.parametrize(
    ("fn", "valid", "invalid", "expected"), SIGNATURES, ids=[s[0].__name__ for s in SIGNATURES]
)
def test_signature_round_trip(
    fn: Callable[..., Any], valid: dict[str, Any], invalid: dict[str, Any], expected: Any
) -> None:
    t = Tool.from_function(fn)
    check(t)
    assert t.name == fn.__name__
    assert list(t.json_schema["properties"]) == list(inspect.signature(fn).parameters)
    assert t.json_schema.get("additionalProperties") is False
    jsonschema.Draft202012Validator(t.json_schema).validate(valid)
    args = t.validate_args(valid)
    assert t.call(args) == expected
    with pytest.raises(ValidationError):
        t.validate_args(invalid)


def test_schema_shapes() -> None:
    props = Tool.from_function(f_tuple_fixed).json_schema["properties"]
    assert props["pair"]["prefixItems"] == [{"type": "integer"}, {"type": "string"}]
    props = Tool.from_function(f_tuple_var).json_schema["properties"]
    assert props["values"]["items"] == {"type": "number"}
    props = Tool.from_function(f_sets).json_schema["properties"]
    assert props["tags"]["uniqueItems"] is True and props["frozen"]["uniqueItems"] is True
    props = Tool.from_function(f_literal).json_schema["properties"]
    assert props["mode"]["enum"] == ["fast", "slow"]
    assert props["level"]["default"] == 1
    schema = Tool.from_function(f_recursive).json_schema
    assert "TreeNode" in schema["$defs"]
    assert schema["properties"]["tree"] == {"$ref": "#/$defs/TreeNode"}
    props = Tool.from_function(f_field_constraints).json_schema["properties"]
    assert (props["name"]["minLength"], props["name"]["maxLength"]) == (2, 5)
    assert (props["count"]["minimum"], props["count"]["maximum"]) == (1, 10)
    assert (
        Tool.from_function(f_annotated_types).json_schema["properties"]["n"]["exclusiveMinimum"]
        == 0
    )
    schema = Tool.from_function(f_defaults).json_schema
    assert schema.get("required", []) == []
    assert "default" not in schema["properties"]["c"]  # a factory has no static default
    assert Tool.from_function(f_optional).json_schema["required"] == ["a"]
    props = Tool.from_function(f_reserved_names).json_schema["properties"]
    assert list(props) == ["_hidden", "json", "model_config"]
    assert props["model_config"]["description"] == "Reserved in Pydantic."


def test_default_factory_gives_fresh_values() -> None:
    t = Tool.from_function(f_defaults)
    first = t.call({})
    first[2].append(1)
    assert t.call({})[2] == []


def test_validation_errors() -> None:
    t = Tool.from_function(f_scalars)
    with pytest.raises(ValidationError) as info:
        t.validate_args({"s": "a", "i": 1, "x": 1.0, "b": True, "extra": 1})
    assert info.value.errors()[0]["type"] == "extra_forbidden"
    with pytest.raises(ValidationError) as info:
        t.validate_args('{"s": "a"}')
    assert {e["loc"][0] for e in info.value.errors()} == {"i", "x", "b"}
    assert info.value.title == "f_scalars"
    with pytest.raises(ValidationError):
        t.validate_args("{not json")
    with pytest.raises(ValidationError):
        t.validate_args([1, 2])  # type: ignore[arg-type]
    # JSON text and dicts validate alike; an instance of the model passes through.
    args = t.validate_args('{"s": "a", "i": 1, "x": 1, "b": false}')
    assert t.validate_args(args) is args
    assert t.call('{"s": "a", "i": 1, "x": 1, "b": false}') == ("a", 1, 1.0, False)


# --- docstrings ----------------------------------------------------------------------------------


def google(city: str, days: int = 1) -> str:
    """Get the forecast.

    Uses the national service.

    Args:
        city: Name of the city,
            as spoken.
        days (int): Number of days.

    Returns:
        The forecast.
    """
    return city


def numpy_style(city: str, days: int = 1) -> str:
    """Get the forecast.

    Parameters
    ----------
    city : str
        Name of the city.
    days : int, optional
        Number of days.

    Returns
    -------
    str
        The forecast.
    """
    return city


def sphinx(city: str, days: int = 1) -> str:
    """Get the forecast.

    :param city: Name of the city.
    :type city: str
    :param days: Number of days.
    :returns: The forecast.
    """
    return city


@pytest.mark.parametrize("fn", [google, numpy_style, sphinx])
def test_docstring_styles(fn: Callable[..., Any]) -> None:
    t = Tool.from_function(fn)
    check(t)
    props = t.json_schema["properties"]
    assert props["city"]["description"].startswith("Name of the city")
    assert props["days"]["description"] == "Number of days."
    assert t.description.startswith("Get the forecast.")
    assert "Returns" not in t.description and "forecast." in t.description
    assert "description" not in t.json_schema  # the description travels beside the schema


def test_docstring_long_description_and_continuation() -> None:
    t = Tool.from_function(google)
    assert t.description == "Get the forecast.\n\nUses the national service."
    assert t.json_schema["properties"]["city"]["description"] == "Name of the city,\nas spoken."


def test_explicit_field_description_wins() -> None:
    def f(
        city: Annotated[str, Field(description="From Field.")],
        days: int = Field(2, description="Default Field."),
    ) -> None:
        """Do it.

        Args:
            city: From the docstring.
            days: From the docstring too.
        """

    props = Tool.from_function(f).json_schema["properties"]
    assert props["city"]["description"] == "From Field."
    assert props["days"]["description"] == "Default Field."
    assert props["days"]["default"] == 2


def test_dashed_name_titles_schema_and_errors() -> None:
    t = Tool.from_function(f_scalars, name="get-scalars")
    assert t.json_schema["title"] == "get-scalars"
    with pytest.raises(ValidationError, match="get-scalars"):
        t.validate_args({})


def test_no_docstring_and_overrides() -> None:
    t = Tool.from_function(f_scalars, name="scalars", description="Custom.")
    assert (t.name, t.description, t.json_schema["title"]) == ("scalars", "Custom.", "scalars")
    assert Tool.from_function(f_no_params).description == ""


# --- the decorator -------------------------------------------------------------------------------


@tool
def add(a: int, b: int = 2) -> int:
    """Add two numbers.

    Args:
        a: First addend.
        b: Second addend.
    """
    return a + b


@tool(name="subtract_numbers", description="Subtract.", strict=True)
def subtract(a: int, b: int) -> int:
    return a - b


def test_decorator_keeps_function() -> None:
    assert add(1) == 3 and add(1, b=5) == 6
    assert add.__name__ == "add" and "Add two numbers" in (add.__doc__ or "")
    assert str(inspect.signature(add)) == "(a: int, b: int = 2) -> int"
    t = add.__sdk_tool__
    assert isinstance(t, Tool) and t.name == "add" and t.description == "Add two numbers."
    assert t.json_schema["properties"]["a"]["description"] == "First addend."
    assert t.call({"a": 4}) == 6
    check(t)


def test_decorator_with_options() -> None:
    assert subtract(5, 3) == 2
    t = subtract.__sdk_tool__
    assert (t.name, t.description, t.strict) == ("subtract_numbers", "Subtract.", True)
    assert t.json_schema["title"] == "subtract_numbers"


def test_decorating_twice_gives_independent_tools() -> None:
    a = tool(name="one")(f_scalars)
    b = tool(name="two")(f_scalars)
    assert (a.__sdk_tool__.name, b.__sdk_tool__.name) == ("one", "two")
    assert not hasattr(f_scalars, "__sdk_tool__")


def test_string_annotations_resolve_with_caller_locals() -> None:
    class Local(BaseModel):
        q: str

    @tool
    def search(item: "Local", limit: "int" = 3) -> str:
        return item.q * limit

    t = search.__sdk_tool__
    assert t.call({"item": {"q": "ab"}, "limit": 2}) == "abab"
    assert t.json_schema["properties"]["limit"] == {
        "default": 3,
        "title": "Limit",
        "type": "integer",
    }


def test_unresolvable_return_annotation_is_ignored() -> None:
    def f(a: int) -> "DoesNotExist":  # type: ignore[name-defined]  # noqa: F821
        return a

    assert Tool.from_function(f).call({"a": 1}) == 1


# --- async ---------------------------------------------------------------------------------------


@tool
async def fetch(url: str, retries: int = 0) -> str:
    """Fetch a URL."""
    await asyncio.sleep(0)
    return f"{url}#{retries}"


def test_async_tool() -> None:
    t = fetch.__sdk_tool__
    assert t.is_async and inspect.iscoroutinefunction(fetch)
    assert asyncio.run(fetch("u")) == "u#0"  # the decorated function is still awaitable
    assert asyncio.run(t.acall({"url": "a", "retries": 2})) == "a#2"
    assert asyncio.run(t.acall('{"url": "b"}')) == "b#0"
    with pytest.raises(TypeError, match="acall"):
        t.call({"url": "a"})


def test_acall_runs_sync_tools_in_a_thread() -> None:
    def where(tag: str) -> int:
        return threading.get_ident()

    t = Tool.from_function(where)
    assert not t.is_async
    assert asyncio.run(t.acall({"tag": "x"})) != threading.get_ident()


def test_async_callable_object_and_partial() -> None:
    class Fetcher:
        async def __call__(self, url: str) -> str:
            return url.upper()

    t = Tool.from_function(Fetcher(), name="fetcher")
    assert t.is_async and asyncio.run(t.acall({"url": "a"})) == "A"

    async def scaled(x: int, factor: int) -> int:
        return x * factor

    p = Tool.from_function(functools.partial(scaled, factor=3))
    assert p.is_async and p.name == "scaled"
    assert asyncio.run(p.acall({"x": 2})) == 6


# --- methods and other callables -----------------------------------------------------------------


class Calculator:
    """A calculator."""

    def __init__(self, base: int) -> None:
        self.base = base

    def plus(self, n: int) -> int:
        """Add to the base.

        Args:
            n: Amount.
        """
        return self.base + n

    @classmethod
    def make(cls, base: int) -> "Calculator":
        return cls(base)

    @staticmethod
    def double(n: int) -> int:
        return 2 * n


def test_bound_methods_skip_self_and_cls() -> None:
    t = Tool.from_function(Calculator(10).plus)
    assert list(t.json_schema["properties"]) == ["n"]
    assert t.json_schema["properties"]["n"]["description"] == "Amount."
    assert t.call({"n": 5}) == 15
    m = Tool.from_function(Calculator.make)
    assert list(m.json_schema["properties"]) == ["base"]
    assert m.call({"base": 3}).base == 3
    assert Tool.from_function(Calculator.double).call({"n": 4}) == 8


def test_unbound_method_points_at_bound_method() -> None:
    with pytest.raises(ToolDefinitionError, match=r"plus.*'self'.*instance\.method"):
        Tool.from_function(Calculator.plus)


# --- RunContext and ModelRetry -------------------------------------------------------------------


def test_run_context_is_not_in_schema() -> None:
    @tool
    def greet(ctx: RunContext[str], name: str) -> str:
        return f"{ctx.deps}, {name}"

    t = greet.__sdk_tool__
    assert t.takes_context and list(t.json_schema["properties"]) == ["name"]
    assert t.call({"name": "Ann"}, ctx=RunContext(deps="Hi")) == "Hi, Ann"
    assert asyncio.run(t.acall({"name": "Bo"}, RunContext(deps="Yo"))) == "Yo, Bo"
    with pytest.raises(TypeError, match="RunContext"):
        t.call({"name": "Ann"})

    def late(name: str, ctx: RunContext[None]) -> None: ...

    with pytest.raises(ToolDefinitionError, match="late.*'ctx'.*first"):
        Tool.from_function(late)


def test_model_retry_carries_message() -> None:
    @tool
    def lookup(city: str) -> str:
        raise ModelRetry(f"unknown city {city!r}; try a capital")

    with pytest.raises(ModelRetry) as info:
        lookup.__sdk_tool__.call({"city": "Atlantis"})
    assert info.value.message == "unknown city 'Atlantis'; try a capital"


# --- definition errors ---------------------------------------------------------------------------


class Opaque:
    pass


def bad_unannotated(a: int, b) -> None: ...  # type: ignore[no-untyped-def]


def bad_varargs(a: int, *rest: int) -> None: ...


def bad_kwargs(a: int, **options: str) -> None: ...


def bad_class(a: int, thing: Opaque) -> None: ...


def bad_callable(a: int, callback: Callable[[int], int]) -> None: ...


def bad_forward_ref(a: int, b: "Missing") -> None: ...  # type: ignore[name-defined]  # noqa: F821


@pytest.mark.parametrize(
    ("fn", "param", "needle"),
    [
        (bad_unannotated, "b", "annotation"),
        (bad_varargs, "rest", "*rest"),
        (bad_kwargs, "options", "**options"),
        (bad_class, "thing", "JSON Schema"),
        (bad_callable, "callback", "JSON Schema"),
        (bad_forward_ref, "b", "Missing"),
    ],
)
def test_definition_errors_name_function_and_parameter(
    fn: Callable[..., Any], param: str, needle: str
) -> None:
    with pytest.raises(ToolDefinitionError) as info:
        Tool.from_function(fn)
    message = str(info.value)
    assert fn.__name__ in message and repr(param) in message and needle in message
    assert (info.value.function, info.value.parameter) == (fn.__qualname__, param)
    assert isinstance(info.value, SDKError) and isinstance(info.value, TypeError)
    with pytest.raises(ToolDefinitionError):
        tool(fn)


def test_unannotated_message_says_why() -> None:
    with pytest.raises(ToolDefinitionError, match="grammar"):
        Tool.from_function(bad_unannotated)


@pytest.mark.parametrize("name", ["", "has space", "dot.ted", "x" * 65, "ünï", "a\n"])
def test_invalid_names(name: str) -> None:
    with pytest.raises(ToolDefinitionError, match="invalid tool name"):
        Tool.from_function(f_scalars, name=name)


def test_lambda_needs_a_name_and_non_callables_fail() -> None:
    with pytest.raises(ToolDefinitionError, match="lambda"):
        Tool.from_function(lambda: None)
    assert Tool.from_function(lambda: 1, name="one").call({}) == 1
    with pytest.raises(ToolDefinitionError, match="not callable"):
        Tool.from_function(42)  # type: ignore[arg-type]
    with pytest.raises(ToolDefinitionError, match="not callable"):
        tool(42)  # type: ignore[call-overload]


def test_strict_rejects_unenforceable_keywords_at_definition() -> None:
    with pytest.raises(ToolDefinitionError, match=r"tagged.*'tags'.*uniqueItems"):

        @tool(strict=True)
        def tagged(name: str, tags: set[str]) -> None: ...

    assert tool(strict=False)(f_sets).__sdk_tool__.strict is False


def test_strict_rejects_keywords_classified_at_grammar_emission() -> None:
    """`multipleOf` on a float is only found unenforceable when the grammar is emitted."""
    with pytest.raises(ToolDefinitionError, match=r"'step'.*multipleOf.*/properties/step"):

        @tool(strict=True)
        def stepped(step: Annotated[float, Field(multiple_of=0.3)]) -> None: ...


# --- models as tools -----------------------------------------------------------------------------


class Weather(BaseModel):
    """Report the weather.

    Used for structured answers.
    """

    city: str
    temperature: float = Field(description="In Celsius.")


def test_from_model() -> None:
    t = Tool.from_model(Weather)
    check(t)
    assert t.name == "Weather"
    assert t.description == "Report the weather.\n\nUsed for structured answers."
    assert t.json_schema["properties"] == Weather.model_json_schema()["properties"]
    result = t.call('{"city": "Oslo", "temperature": -3}')
    assert result == Weather(city="Oslo", temperature=-3)
    assert asyncio.run(t.acall({"city": "Oslo", "temperature": 1})) == Weather(
        city="Oslo", temperature=1
    )
    with pytest.raises(ValidationError):
        t.validate_args({"city": "Oslo"})
    named = Tool.from_model(Weather, name="report", description="Say it.")
    assert (named.name, named.description, named.json_schema["title"]) == (
        "report",
        "Say it.",
        "report",
    )
    with pytest.raises(ToolDefinitionError, match="not a Pydantic model"):
        Tool.from_model(Box)  # type: ignore[arg-type]


def test_decorated_model_and_from_function_routing() -> None:
    @tool(name="point")
    class P(BaseModel):
        x: int

    assert P(x=1).x == 1  # still the class
    assert as_tool(P).name == "point"
    assert Tool.from_function(P).name == "P"  # undecorated route: from_model

    class Sub(P):
        y: int = 0

    assert as_tool(Sub).name == "Sub"  # a subclass is not the decorated tool


# --- registries and wire format ------------------------------------------------------------------


def test_tools_by_name() -> None:
    registry = tools_by_name([add, fetch, Weather, f_scalars, Tool.from_function(f_enum)])
    assert list(registry) == ["add", "fetch", "Weather", "f_scalars", "f_enum"]
    assert registry["add"] is add.__sdk_tool__
    with pytest.raises(ToolDefinitionError, match="duplicate tool name 'add'"):
        tools_by_name([add, Tool.from_function(f_scalars, name="add")])
    with pytest.raises(ToolDefinitionError, match="not callable"):
        tools_by_name(["add"])  # type: ignore[list-item]


def test_to_openai_shape() -> None:
    t = add.__sdk_tool__
    decl = t.to_openai()
    assert decl == {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two numbers.",
            "parameters": t.json_schema,
        },
    }
    decl["function"]["parameters"]["properties"].clear()
    assert t.json_schema["properties"]  # a copy
    jsonschema.Draft202012Validator.check_schema(
        Tool.from_model(Weather).to_openai()["function"]["parameters"]
    )


def test_tool_is_frozen() -> None:
    t = add.__sdk_tool__
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.name = "other"  # type: ignore[misc]


def test_docstring_parser_edge_cases() -> None:
    from sdk.tools._docstrings import parse_docstring

    assert parse_docstring(":param int x: The x.\n:param y: The y.").params == {
        "x": "The x.",
        "y": "The y.",
    }
    numpy_pair = parse_docstring("Sum.\n\nParameters\n----------\na, b : int\n    Both.\n")
    assert numpy_pair.params == {"a": "Both.", "b": "Both."}
    assert parse_docstring("Just text.\n\nMore.").description == "Just text.\n\nMore."
    assert parse_docstring(None).description is None
    assert parse_docstring("   ").params == {}
