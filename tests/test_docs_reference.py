"""The API reference documents the whole public API, and each page reaches all of it.

The reference pages (`docs/reference/*.md`) are generated from the docstrings (mkdocstrings,
Google style), so an undocumented parameter is simply missing from the site. The rules this
file enforces, by introspection (no model is loaded):

- Callables: every parameter of a checked function or public method (`self`/`cls` aside) is
  an entry of its docstring's `Args:` section, and every entry names a real parameter. For a
  class the constructor's parameters are documented in the class docstring (the site merges
  `__init__` into the class). A method whose docstring says "Parameters as `other`" takes the
  entries it lacks from the `Args:` section of its sibling `other` (the `run*` family).
- Dataclasses (results, events, tools, messages): every public field is an entry of the class
  docstring's `Attributes:` section, and every entry names a field or a public attribute.
- Errors: every public attribute an error's `__init__` sets (`self.x = ...`) is an entry of
  its class docstring's `Attributes:` section.
- Reachability: every name of `sdk.__all__`, `sdk.events.__all__` and `sdk.history.__all__`,
  every public error in `sdk.errors` and every public member of `sdk.agent.Agent` is on some
  reference page: a `::: dotted.path` directive names it, or the `members: [...]` option of a
  directive names it. Those, and the public methods and properties of the checked classes,
  have a docstring of their own (mkdocstrings leaves out members without one).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import re
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import sdk
import sdk.backends.llamacpp
import sdk.errors
import sdk.events
import sdk.history
import sdk.messages
import sdk.result
import sdk.tools
from sdk.agent import Agent, ToolDenied, ToolReturn

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "docs" / "reference"

SECTION_NAMES = {
    "Args": "Args",
    "Arguments": "Args",
    "Parameters": "Args",
    "Attributes": "Attributes",
}
DELEGATE_RE = re.compile(r"Parameters as `(\w+)`")
ENTRY_RE = re.compile(r"\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:(?:\s|$)")


# ---------------------------------------------------------------------------- docstrings


def sections(doc: str | None) -> dict[str, list[str]]:
    """The entry names of a Google-style docstring's `Args:` and `Attributes:` sections."""
    out: dict[str, list[str]] = {}
    if not doc:
        return out
    current: list[str] | None = None
    entry_indent: int | None = None
    for line in inspect.cleandoc(doc).splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        header = line.strip()[:-1] if line.strip().endswith(":") else None
        if indent == 0:
            current = None
            if header in SECTION_NAMES:
                current = out.setdefault(SECTION_NAMES[header], [])
                entry_indent = None
            continue
        if current is None:
            continue
        if entry_indent is None:
            entry_indent = indent
        if indent == entry_indent:
            m = ENTRY_RE.match(line.strip())
            if m is None:
                raise AssertionError(f"malformed docstring entry: {line.strip()!r}")
            current.append(m.group(1))
    return out


def own_doc(obj: Any) -> str | None:
    """The object's own docstring: not inherited, not a dataclass's generated signature."""
    doc = obj.__dict__.get("__doc__") if isinstance(obj, type) else getattr(obj, "__doc__", None)
    generated = isinstance(obj, type) and dataclasses.is_dataclass(obj)
    if generated and doc and doc.startswith(f"{obj.__name__}("):
        return None
    return doc if doc and doc.strip() else None


def parameters(fn: Callable[..., Any]) -> list[str]:
    return [p for p in inspect.signature(fn).parameters if p not in ("self", "cls")]


def public_methods(cls: type) -> Iterator[tuple[str, Callable[..., Any]]]:
    """Public functions defined on the class itself (classmethods, staticmethods included)."""
    for name, raw in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(raw, classmethod | staticmethod):
            yield name, getattr(cls, name)
        elif inspect.isfunction(raw):
            yield name, raw


# ---------------------------------------------------------------------------- what is checked

# Classes whose public methods (and, for the class itself, its constructor) are checked.
CLASSES: list[type] = [
    Agent,
    sdk.tools.Tool,
    sdk.result.RunResult,
    sdk.result.ToolCall,
    sdk.result.Usage,
    sdk.messages.Message,
    sdk.backends.llamacpp.LlamaCppModel,
]

# Dataclasses whose public fields must be in the class docstring's `Attributes:`.
DATACLASSES: list[type] = [
    sdk.result.RunResult,
    sdk.result.ToolCall,
    sdk.result.Usage,
    sdk.tools.Tool,
    sdk.tools.RunContext,
    sdk.messages.Message,
    sdk.messages.ToolCallPart,
    ToolDenied,
    ToolReturn,
    sdk.errors.FailedAttempt,
    *(
        getattr(sdk.events, name)
        for name in sdk.events.__all__
        if isinstance(getattr(sdk.events, name), type)
    ),
]

# Errors that never reach user code (raised and caught inside a worker thread).
INTERNAL_ERRORS = {"TurnCancelled"}


def public_errors() -> list[type[BaseException]]:
    return [
        obj
        for name, obj in vars(sdk.errors).items()
        if isinstance(obj, type)
        and issubclass(obj, BaseException)
        and obj.__module__ == "sdk.errors"
        and not name.startswith("_")
        and name not in INTERNAL_ERRORS
    ]


def callables() -> list[tuple[str, Callable[..., Any], str | None, type | None]]:
    """(qualified name, function, docstring, owner class) of every checked callable."""
    out: list[tuple[str, Callable[..., Any], str | None, type | None]] = [
        ("sdk.tools.tool", sdk.tools.tool, own_doc(sdk.tools.tool), None),
        ("sdk.history.keep_last", sdk.history.keep_last, own_doc(sdk.history.keep_last), None),
        (
            "sdk.history.summarize_older",
            sdk.history.summarize_older,
            own_doc(sdk.history.summarize_older),
            None,
        ),
    ]
    for cls in CLASSES:
        qual = f"{cls.__module__}.{cls.__qualname__}"
        if "__init__" in vars(cls) and not dataclasses.is_dataclass(cls):
            out.append((qual, cls.__init__, own_doc(cls), None))  # type: ignore[misc]
        for name, fn in public_methods(cls):
            out.append((f"{qual}.{name}", fn, own_doc(fn), cls))
    return out


def undocumented_parameters() -> list[str]:
    problems: list[str] = []
    for qual, fn, doc, owner in callables():
        params = parameters(fn)
        documented = set(sections(doc).get("Args", []))
        for name in documented - set(params):
            problems.append(f"{qual}: documents {name!r}, which is not a parameter")
        delegate = DELEGATE_RE.search(doc or "")
        if delegate is not None:
            target = getattr(owner, delegate.group(1), None) if owner else None
            if target is None:
                problems.append(f"{qual}: 'Parameters as `{delegate.group(1)}`': no such method")
            else:
                documented |= set(sections(own_doc(target)).get("Args", []))
        for name in params:
            if name not in documented:
                problems.append(f"{qual}: parameter {name!r} is not documented")
    return problems


def undocumented_fields() -> list[str]:
    problems: list[str] = []
    for cls in DATACLASSES:
        qual = f"{cls.__module__}.{cls.__qualname__}"
        documented = sections(own_doc(cls)).get("Attributes", [])
        fields = [f.name for f in dataclasses.fields(cls) if not f.name.startswith("_")]
        for name in fields:
            if name not in documented:
                problems.append(f"{qual}: field {name!r} is not in its docstring's Attributes")
        for name in documented:
            if name not in fields and not hasattr(cls, name):
                problems.append(f"{qual}: documents {name!r}, which is not an attribute")
    return problems


def init_attributes(cls: type) -> list[str]:
    """The public attributes `cls.__init__` sets on `self` (read from its source)."""
    init = vars(cls).get("__init__")
    if init is None:
        return []
    tree = ast.parse(textwrap.dedent(inspect.getsource(init)))
    names: list[str] = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        for t in targets:
            if (
                isinstance(t, ast.Attribute)
                and isinstance(t.value, ast.Name)
                and t.value.id == "self"
                and not t.attr.startswith("_")
                and t.attr not in names
            ):
                names.append(t.attr)
    return names


def undocumented_error_attributes() -> list[str]:
    problems: list[str] = []
    for cls in public_errors():
        documented = sections(own_doc(cls)).get("Attributes", [])
        for name in init_attributes(cls):
            if name not in documented:
                problems.append(
                    f"sdk.errors.{cls.__name__}: attribute {name!r} is not in its docstring's "
                    "Attributes"
                )
    return problems


# ---------------------------------------------------------------------------- the pages

DIRECTIVE_RE = re.compile(r"^::: *([\w.]+) *$")
MEMBERS_RE = re.compile(r"^\s+members:\s*(.*?)\s*$")


def directives() -> list[tuple[str, str, list[str] | None]]:
    """(page, dotted path, `members` option) of every `:::` directive; `members` is None
    when the option is absent (all public members), [] for `members: false`."""
    out: list[tuple[str, str, list[str] | None]] = []
    for page in sorted(REFERENCE.glob("*.md")):
        lines = page.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            m = DIRECTIVE_RE.match(line)
            if m is None:
                continue
            members: list[str] | None = None
            for option in lines[i + 1 :]:
                if option.strip() and not option.startswith((" ", "\t")):
                    break
                o = MEMBERS_RE.match(option)
                if o is None:
                    continue
                value = o.group(1)
                if value.lower() == "false":
                    members = []
                elif value.startswith("[") and value.endswith("]"):
                    members = [v.strip() for v in value[1:-1].split(",") if v.strip()]
                else:
                    raise AssertionError(
                        f"{page.name}: write `members:` as a flow list ([a, b]) or false"
                    )
            out.append((page.name, m.group(1), members))
    return out


def resolve(path: str) -> Any:
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(path)


def reachable() -> tuple[list[Any], dict[int, set[str]]]:
    """The objects the pages document, and for each documented class (by id) the members
    rendered with it."""
    objects: list[Any] = []
    members_of: dict[int, set[str]] = {}
    for page, path, members in directives():
        try:
            obj = resolve(path)
        except (ImportError, AttributeError) as exc:
            raise AssertionError(f"{page}: `::: {path}` does not resolve: {exc}") from exc
        objects.append(obj)
        if members is None:
            names = set(getattr(obj, "__all__", ())) if inspect.ismodule(obj) else set()
            if isinstance(obj, type):
                names = {n for n in vars(obj) if not n.startswith("_")}
        else:
            names = set(members)
        for name in names:
            if not hasattr(obj, name):
                raise AssertionError(f"{page}: `::: {path}` lists {name!r}, which it lacks")
            objects.append(getattr(obj, name))
        members_of.setdefault(id(obj), set()).update(names)
    return objects, members_of


def public_names() -> list[tuple[str, Any]]:
    names = [(f"sdk.{n}", getattr(sdk, n)) for n in sdk.__all__]
    for module in (sdk.events, sdk.history):
        names += [(f"{module.__name__}.{n}", getattr(module, n)) for n in module.__all__]
    names += [(f"sdk.errors.{e.__name__}", e) for e in public_errors()]
    unique: list[tuple[str, Any]] = []
    for name, obj in names:
        if not any(o is obj for _, o in unique):
            unique.append((name, obj))
    return unique


def unreachable() -> list[str]:
    objects, members_of = reachable()
    problems = [
        f"{name} is on no docs/reference page"
        for name, obj in public_names()
        if not any(o is obj for o in objects)
    ]
    agent_members = members_of.get(id(Agent), set())
    for name in vars(Agent):
        if name.startswith("_"):
            continue
        if name not in agent_members:
            problems.append(f"sdk.agent.Agent.{name} is not listed in the `members:` of any page")
        elif own_doc(vars(Agent)[name]) is None:
            problems.append(f"sdk.agent.Agent.{name} has no docstring (the page leaves it out)")
    for name, obj in public_names():
        if own_doc(obj) is None and (inspect.isclass(obj) or inspect.isfunction(obj)):
            problems.append(f"{name} has no docstring (the page leaves it out)")
    for cls in dict.fromkeys([*CLASSES, *DATACLASSES]):
        for name, member in vars(cls).items():
            if name.startswith("_") or not callable_or_property(member):
                continue
            if own_doc(member.__func__ if isinstance(member, classmethod) else member) is None:
                problems.append(
                    f"{cls.__module__}.{cls.__qualname__}.{name} has no docstring (the page "
                    "leaves it out)"
                )
    return problems


def callable_or_property(member: Any) -> bool:
    return isinstance(member, property | classmethod | staticmethod) or inspect.isfunction(member)


# ---------------------------------------------------------------------------- the tests


def _report(problems: list[str]) -> str:
    return "\n".join(["", *problems])


def test_every_parameter_is_documented() -> None:
    problems = undocumented_parameters()
    assert not problems, _report(problems)


def test_every_dataclass_field_is_documented() -> None:
    problems = undocumented_fields()
    assert not problems, _report(problems)


def test_every_error_attribute_is_documented() -> None:
    problems = undocumented_error_attributes()
    assert not problems, _report(problems)


def test_every_public_name_is_on_a_reference_page() -> None:
    problems = unreachable()
    assert not problems, _report(problems)


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (
            "Summary.\n\n    Args:\n        a: one.\n            more of a.\n        b (int): two.\n"
            "\n    Attributes:\n        x: an attribute.\n\n    Tail text, a: not an entry.\n",
            {"Args": ["a", "b"], "Attributes": ["x"]},
        ),
        ("Summary without sections.", {}),
    ],
)
def test_section_parser(doc: str, expected: dict[str, list[str]]) -> None:
    assert sections(doc) == expected


def drop_entry(doc: str, name: str) -> str:
    """`doc` without the docstring entry `name` (its line and its continuation lines)."""
    lines = inspect.cleandoc(doc).splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith(f"{name}:"))
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = start + 1
    while end < len(lines) and len(lines[end]) - len(lines[end].lstrip()) > indent:
        end += 1
    return "\n".join(lines[:start] + lines[end:])


def test_the_checks_catch_a_missing_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Remove one documented entry of each kind: each check names what is now missing."""
    monkeypatch.setattr(Agent, "__doc__", drop_entry(own_doc(Agent) or "", "max_steps"))
    with pytest.raises(AssertionError, match="Agent: parameter 'max_steps' is not documented"):
        test_every_parameter_is_documented()
    usage = sdk.result.Usage
    monkeypatch.setattr(usage, "__doc__", drop_entry(own_doc(usage) or "", "steps"))
    with pytest.raises(AssertionError, match="Usage: field 'steps' is not in its docstring"):
        test_every_dataclass_field_is_documented()
    truncation = sdk.errors.TruncationError
    monkeypatch.setattr(
        truncation, "__doc__", drop_entry(own_doc(truncation) or "", "partial_text")
    )
    with pytest.raises(AssertionError, match="attribute 'partial_text' is not in its"):
        test_every_error_attribute_is_documented()
