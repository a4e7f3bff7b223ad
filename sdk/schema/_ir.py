"""The normalised schema IR: a small algebra of hashable nodes that the grammar emitter walks.

Why an IR: JSON Schema combines keywords by intersection (`allOf`, siblings of `$ref`), which is
only tractable on a representation split by JSON type. Every node here denotes a set of JSON
values; the grammar emitter turns each node into Lark text. Only *enforced* constraints live in
the IR: what the grammar cannot express is reported as `validated` and left out (so every node
denotes a superset of the schema's valid instances, and exactly that set when nothing was
reported).
"""

from __future__ import annotations

from dataclasses import dataclass, field

Number = int | float


class Node:
    """Base class of IR nodes (all frozen dataclasses, so structural equality and hashing)."""

    __slots__ = ()


@dataclass(frozen=True)
class AnyValue(Node):
    """Every JSON value (`true`, `{}`)."""


@dataclass(frozen=True)
class Ref(Node):
    """A named definition (a `$ref` target or a memoised intersection), emitted as a rule."""

    key: str


@dataclass(frozen=True)
class Union(Node):
    """Any of the alternatives (`anyOf`, `oneOf`, `type` lists after intersection)."""

    alts: tuple[Node, ...]


@dataclass(frozen=True)
class Consts(Node):
    """A finite set of JSON values (`enum`, `const`), each stored as its JSON text."""

    texts: tuple[str, ...]


@dataclass(frozen=True)
class Num:
    """Constraints on numbers; `integer` restricts to integer literals."""

    integer: bool = False
    minimum: Number | None = None
    exclusive_minimum: bool = False
    maximum: Number | None = None
    exclusive_maximum: bool = False
    multiple_of: Number | None = None
    pointer: str = field(default="", compare=False)


@dataclass(frozen=True)
class Str:
    """Constraints on strings; patterns/formats carry the JSON pointer they came from."""

    min_length: int = 0
    max_length: int | None = None
    patterns: tuple[tuple[str, str], ...] = ()
    formats: tuple[tuple[str, str], ...] = ()
    excluded: frozenset[str] = frozenset()
    pointer: str = field(default="", compare=False)


@dataclass(frozen=True)
class Obj:
    """Constraints on objects. `props` keeps declaration order (the grammar's key order)."""

    props: tuple[tuple[str, Node], ...] = ()
    required: frozenset[str] = frozenset()
    patterns: tuple[tuple[str, Node], ...] = ()
    additional: Node = field(default_factory=AnyValue)
    names: Str | None = None
    min_props: int = 0
    max_props: int | None = None
    pointer: str = field(default="", compare=False)
    # Array-form dependencies between declared members, `(keyword, trigger, needed names)`:
    # the grammar tracks whether the trigger was written (`sdk.grammar._depends.members_tracked`).
    depends: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    # `close_objects`: a schema the object came from states `additionalProperties` (`explicit`:
    # kept through intersections where any side does), or none does and one declared
    # `properties` (`closed`). Closing waits for the whole object: `allOf` branches and `$ref`
    # siblings each declare part of its members, and closed one by one they would forbid each
    # other's. So `additional` stays what the standard says while the IR is built, and the
    # grammar reads `extra`. (Both stay False without `close_objects`: the IR is the standard's.)
    explicit: bool = False
    closed: bool = False

    @property
    def extra(self) -> Node:
        """What an undeclared member (no pattern matching) must satisfy in the grammar."""
        return NEVER if self.closed else self.additional


@dataclass(frozen=True)
class Arr:
    """Constraints on arrays: positional `prefix`, then `items` for the rest."""

    prefix: tuple[Node, ...] = ()
    items: Node = field(default_factory=AnyValue)
    min_items: int = 0
    max_items: int | None = None
    contains: Node | None = None
    pointer: str = field(default="", compare=False)


@dataclass(frozen=True)
class Typed(Node):
    """The values of the listed JSON types, each with its constraints (None: type excluded)."""

    null: bool = False
    boolean: bool = False
    number: Num | None = None
    string: Str | None = None
    obj: Obj | None = None
    arr: Arr | None = None


ANY = AnyValue()
NEVER = Typed()
FULL = Typed(True, True, Num(), Str(), Obj(), Arr())


def is_never(node: Node) -> bool:
    """True when the node denotes no value at all (conservatively: only obvious cases)."""
    if isinstance(node, Typed):
        return node == NEVER
    if isinstance(node, Union):
        return all(is_never(a) for a in node.alts)
    if isinstance(node, Consts):
        return not node.texts
    return False


def is_any(node: Node) -> bool:
    """True when the node denotes every JSON value."""
    return isinstance(node, AnyValue) or (isinstance(node, Typed) and node == FULL)


def union(alts: list[Node]) -> Node:
    """Union with flattening, NEVER-pruning and deduplication."""
    flat: dict[Node, None] = {}  # insertion-ordered; a list's `in` made 3,000 branches quadratic
    for a in alts:
        for b in a.alts if isinstance(a, Union) else (a,):
            if is_any(b):
                return ANY
            if not is_never(b):
                flat[b] = None
    if not flat:
        return NEVER
    return next(iter(flat)) if len(flat) == 1 else Union(tuple(flat))
