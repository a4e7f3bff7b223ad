"""Lowering of raw JSON Schema (drafts 04 to 2020-12) into the IR.

Why one place: every draft idiom (`definitions`, `dependencies`, array-form `items`,
`prefixItems`, boolean schemas, draft-04 boolean exclusive bounds) is translated here, so the
grammar emitter only ever sees the IR. Each constraining keyword is recorded as enforced or
reported as validated (never silently dropped).
"""

from __future__ import annotations

import json
import re
from typing import Any

from sdk.errors import SchemaError, TooComplexError, UnsupportedSchemaError

from . import _keywords as kw
from . import _pointer
from ._defs import Definitions
from ._disjoint import disjoint
from ._ir import (
    ANY,
    FULL,
    NEVER,
    Arr,
    Consts,
    Node,
    Num,
    Obj,
    Ref,
    Str,
    Typed,
    is_any,
    is_never,
    union,
)
from ._meet import Meet
from ._refs import RefIndex
from ._usage import Usage
from ._values import canonical, text

MAX_DEPTH = 120
# Candidate values (`enum`) checked one by one by the reference validator, at most.
MAX_DECIDED_VALUES = 1000
_APPLICATORS = ("allOf", "anyOf", "oneOf", "$ref", "if", "dependentSchemas", "dependencies", "not")


class Lowerer:
    def __init__(self, root: Any, usage: Usage, close_objects: bool) -> None:
        self.root = root
        self.usage = usage
        self.close_objects = close_objects
        self.index = RefIndex(root)
        self.defs = Definitions()
        self.meet = Meet(self.defs, usage)
        self.depth = 0

    # -- entry points ---------------------------------------------------------------------
    def run(self) -> Node:
        node = self.lower(self.root, "")
        self.defs.finish()
        return node

    def ref(self, ref: str, pointer: str) -> Ref:
        target = self.index.resolve(ref, pointer)
        key = "#" + target
        if key not in self.defs.names:
            schema = _pointer.resolve(self.root, target, pointer)
            if not kw.is_schema(schema):
                raise SchemaError(f"$ref {ref!r} does not point to a schema", pointer)
            tokens = _pointer.split(target)
            name = tokens[-1] if tokens else "root"
            self.defs.declare(key, name, lambda: self.lower(schema, target))
        self.usage.enforce("$ref", pointer)
        return Ref(key)

    # -- schemas --------------------------------------------------------------------------
    def lower(self, schema: Any, pointer: str) -> Node:
        if schema is True:
            return ANY
        if schema is False:
            return NEVER
        if not isinstance(schema, dict):
            raise SchemaError("a schema must be an object or a boolean", pointer)
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise TooComplexError(f"schema nesting deeper than {MAX_DEPTH} at {pointer or '/'}")
        try:
            return self._lower(schema, pointer)
        finally:
            self.depth -= 1

    def _lower(self, s: dict[str, Any], ptr: str) -> Node:
        kw.check(s, ptr)
        candidates = self._finite_candidates(s)
        if candidates is None:
            return self._lower_keywords(s, ptr)
        # A finite set of candidate values (`enum`, `const`, or those of an `allOf` member):
        # whatever the grammar cannot express of the rest (`not`, overlapping `oneOf`, ...)
        # the reference validator decides value by value, which keeps the set exact.
        mark, declared = self.usage.mark(), len(self.defs.names)
        refused: UnsupportedSchemaError | None = None
        try:
            node = self._lower_keywords(s, ptr)
            if not self.usage.validated_since(mark):
                return node
        except UnsupportedSchemaError as exc:
            refused = exc
        decided = self._decide(s, candidates)
        if decided is None:  # the validator cannot decide: the usual lowering, as it went
            if refused is not None:
                raise refused
            return node
        self.usage.rollback(mark)
        for key in list(self.defs.names)[declared:]:
            if key not in self.defs.nodes:
                self.defs.forget(key)
        for k in s:
            if k in kw.CONSTRAINING:
                self.usage.enforce(k, ptr)
        return decided

    def _finite_candidates(self, s: dict[str, Any]) -> list[Any] | None:
        """The values `s` allows at most, when its `enum`/`const` (or an `allOf` member's)
        says so, few enough to check each."""
        for part in (s, *(p for p in s.get("allOf", ()) if isinstance(p, dict))):
            if "const" in part:
                return [part["const"]]
            if isinstance(part.get("enum"), list) and len(part["enum"]) <= MAX_DECIDED_VALUES:
                return list(part["enum"])
        return None

    def _decide(self, s: dict[str, Any], candidates: list[Any]) -> Node | None:
        """The candidates that the reference validator (`jsonschema`, the root's draft)
        accepts under all of `s`, as constants; None where it cannot stand in for the grammar:
        `format` in `s` or behind its `$ref`s (checked differently, or not at all, there),
        objects under `close_objects` (a default only the grammar applies), or a validator
        error."""
        import jsonschema

        here = json.dumps(s)
        refs = any(f'"{k}"' in here for k in ("$ref", "$dynamicRef", "$recursiveRef"))
        if (
            '"format"' in here
            or (refs and '"format"' in json.dumps(self.root))  # a format behind a $ref
            or (self.close_objects and "{" in json.dumps(candidates))
        ):
            return None
        try:
            cls = jsonschema.validators.validator_for(
                self.root, default=jsonschema.Draft202012Validator
            )
            check = cls(self.root).evolve(schema=s)
            kept = [v for v in candidates if check.is_valid(v)]
        except Exception:  # noqa: BLE001 - an unresolvable $ref, a malformed part: not decided
            return None
        seen: dict[str, str] = {}
        for v in kept:
            seen.setdefault(canonical(v), text(v))
        return Consts(tuple(seen.values()))

    def _lower_keywords(self, s: dict[str, Any], ptr: str) -> Node:
        parts: list[Node] = []
        if "$ref" in s:
            parts.append(self.ref(s["$ref"], ptr))
        for dyn in ("$dynamicRef", "$recursiveRef"):
            if dyn in s and isinstance(s[dyn], str):
                parts.append(self.ref(s[dyn], ptr))
        parts.append(self.typed(s, ptr))
        if "enum" in s or "const" in s:
            parts.append(self.consts(s, ptr))
        if "allOf" in s:
            for i, sub in enumerate(s["allOf"]):
                parts.append(self.lower(sub, _pointer.join(ptr, "allOf", i)))
            self.usage.enforce("allOf", ptr)
        for key in ("anyOf", "oneOf"):
            if key in s:
                alts = [self.lower(sub, _pointer.join(ptr, key, i)) for i, sub in enumerate(s[key])]
                exact = None
                if key == "oneOf" and not self.exclusive(alts):
                    exact = self.exactly_one(s[key], alts, ptr)
                    if exact is None:
                        self.usage.validate("oneOf", ptr, "alternatives may overlap")
                    else:
                        self.usage.enforce(key, ptr)
                else:
                    self.usage.enforce(key, ptr)
                parts.append(union(alts) if exact is None else exact)
        if "not" in s:
            neg = self.negate(s["not"], _pointer.join(ptr, "not"))
            if neg is None:
                self.usage.validate("not", ptr, "negation not expressible")
            else:
                self.usage.enforce("not", ptr)
                parts.append(neg)
        if "if" in s and ("then" in s or "else" in s):
            parts.append(self.conditional(s, ptr))
        node: Node = ANY
        for part in parts:
            node = self.meet(node, part, ptr)
        if is_never(node) and "allOf" in s and not any(is_never(p) for p in parts):
            raise SchemaError("allOf: the intersection of the subschemas is empty", ptr)
        return node

    def conditional(self, s: dict[str, Any], ptr: str) -> Node:
        """`if`/`then`/`else` as `(if AND then) OR (NOT if AND else)` where `not if` is
        expressible (boolean and empty conditions included); otherwise left to validation."""
        where = _pointer.join(ptr, "if")
        neg = self.negate(s["if"], where)
        if neg is None:
            self.usage.validate("if", ptr, "conditional schemas are checked after parsing")
            return ANY
        cond = self.lower(s["if"], where)
        then = self.lower(s["then"], _pointer.join(ptr, "then")) if "then" in s else ANY
        other = self.lower(s["else"], _pointer.join(ptr, "else")) if "else" in s else ANY
        self.usage.enforce("if", ptr)
        return union([self.meet(cond, then, ptr), self.meet(neg, other, ptr)])

    def exactly_one(self, subs: list[Any], alts: list[Node], ptr: str) -> Node | None:
        """Overlapping `oneOf` alternatives made exact: each alternative AND NOT every other,
        where every alternative's negation is expressible (and there are few of them)."""
        if len(subs) > _MAX_ONE_OF:
            return None
        negs: list[Node] = []
        for i, sub in enumerate(subs):
            neg = self.negate(sub, _pointer.join(ptr, "oneOf", i))
            if neg is None:
                return None
            negs.append(neg)
        pieces: list[Node] = []
        for i, alt in enumerate(alts):
            node = alt
            for j, neg in enumerate(negs):
                if j != i:
                    node = self.meet(node, neg, ptr)
            pieces.append(node)
        return union(pieces)

    def exclusive(self, alts: list[Node]) -> bool:
        return all(
            disjoint(alts[i], alts[j], self.defs) for i in range(len(alts)) for j in range(i)
        )

    def consts(self, s: dict[str, Any], ptr: str) -> Node:
        values = list(s["enum"]) if "enum" in s else []
        if "const" in s:
            values = (
                [s["const"]]
                if "enum" not in s
                else [v for v in values if canonical(v) == canonical(s["const"])]
            )
        seen: dict[str, str] = {}
        for v in values:
            seen.setdefault(canonical(v), text(v))
        for k in ("enum", "const"):
            if k in s:
                self.usage.enforce(k, ptr)
        return Consts(tuple(seen.values()))

    # -- per-type constraints -------------------------------------------------------------
    def typed(self, s: dict[str, Any], ptr: str) -> Node:
        t = s.get("type")
        types = set(t if isinstance(t, list) else [t]) if t is not None else set(kw.TYPES)
        if t is not None:
            self.usage.enforce("type", ptr)
        has_num = bool(types & {"number", "integer"})
        node = Typed(
            "null" in types,
            "boolean" in types,
            self.number(s, ptr, "number" not in types) if has_num else None,
            self.string(s, ptr) if "string" in types else None,
            self.object(s, ptr) if "object" in types else None,
            self.array(s, ptr) if "array" in types else None,
        )
        return ANY if node == FULL else node

    def number(self, s: dict[str, Any], ptr: str, integer: bool) -> Num | None:
        lo = s.get("minimum")
        hi = s.get("maximum")
        lo_x = hi_x = False
        xmin, xmax = s.get("exclusiveMinimum"), s.get("exclusiveMaximum")
        if isinstance(xmin, bool):
            lo_x = xmin and lo is not None
        elif xmin is not None and (lo is None or xmin >= lo):
            lo, lo_x = xmin, True
        if isinstance(xmax, bool):
            hi_x = xmax and hi is not None
        elif xmax is not None and (hi is None or xmax <= hi):
            hi, hi_x = xmax, True
        for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"):
            if k in s:
                self.usage.enforce(k, ptr)
        if lo is not None and hi is not None and (lo > hi or (lo == hi and (lo_x or hi_x))):
            raise SchemaError("contradictory numeric bounds", ptr)
        m = s.get("multipleOf")
        if isinstance(m, float) and m.is_integer():
            m = int(m)
        return Num(integer, lo, lo_x, hi, hi_x, m, ptr)

    def string(self, s: dict[str, Any], ptr: str) -> Str:
        lo = kw.as_count(s.get("minLength", 0))
        hi = kw.as_count(s["maxLength"]) if "maxLength" in s else None
        patterns = ((s["pattern"], ptr),) if "pattern" in s else ()
        fmt = s.get("format")
        formats = ((fmt, ptr),) if isinstance(fmt, str) else ()
        for k in ("minLength", "maxLength", "pattern"):
            if k in s:
                self.usage.enforce(k, ptr)
        if formats:
            self.usage.enforce("format", ptr)
        return Str(lo, hi, patterns, formats, pointer=ptr)

    def object(self, s: dict[str, Any], ptr: str) -> Obj | None:
        raw_props: dict[str, Any] = s.get("properties", {})
        props = [
            (name, self.lower(sub, _pointer.join(ptr, "properties", name)))
            for name, sub in raw_props.items()
        ]
        patterns = []
        for p, sub in s.get("patternProperties", {}).items():
            kw.compile_pattern(p, _pointer.join(ptr, "patternProperties", p))
            patterns.append((p, self.lower(sub, _pointer.join(ptr, "patternProperties", p))))
        explicit = self.close_objects and "additionalProperties" in s
        if "additionalProperties" in s:
            additional = self.lower(
                s["additionalProperties"], _pointer.join(ptr, "additionalProperties")
            )
        else:
            additional = ANY
        if "unevaluatedProperties" in s and s["unevaluatedProperties"] is not True:
            if "additionalProperties" in s or any(k in s for k in _APPLICATORS):
                self.usage.validate("unevaluatedProperties", ptr, "depends on applicators")
            else:
                additional = self.lower(
                    s["unevaluatedProperties"], _pointer.join(ptr, "unevaluatedProperties")
                )
                explicit = self.close_objects
                self.usage.enforce("unevaluatedProperties", ptr)
        # Members matching a pattern must satisfy it as well as their declared schema.
        for i, (name, node) in enumerate(props):
            for p, sub in patterns:
                if re.search(p, name):
                    props[i] = (name, self.meet(node, sub, ptr))
        required = frozenset(s.get("required", []))
        declared = {n for n, _ in props}
        for name in s.get("required", []):
            if name not in declared:
                declared.add(name)
                matching = [sub for p, sub in patterns if re.search(p, name)]
                value: Node = ANY
                for sub in matching or [additional]:
                    value = self.meet(value, sub, ptr)
                props.append((name, value))
        names = self.property_names(s, ptr)
        if names is not None:
            props = [(n, v if _name_ok(names, n) else NEVER) for n, v in props]
        for k in ("properties", "patternProperties", "additionalProperties", "required"):
            if k in s:
                self.usage.enforce(k, ptr)
        if any(n in required and is_never(v) for n, v in props):
            return None
        lo = kw.as_count(s.get("minProperties", 0))
        hi = kw.as_count(s["maxProperties"]) if "maxProperties" in s else None
        for k in ("minProperties", "maxProperties"):
            if k in s:
                self.usage.enforce(k, ptr)  # the emitter reports it when it cannot count
        depends = self.dependencies(s, ptr, required, dict(props), additional, patterns)
        closed = self.close_objects and not explicit and "properties" in s
        return Obj(
            tuple(props),
            required,
            tuple(patterns),
            additional,
            names,
            lo,
            hi,
            ptr,
            depends,
            explicit=explicit,
            closed=closed,
        )

    def property_names(self, s: dict[str, Any], ptr: str) -> Str | None:
        if "propertyNames" not in s:
            return None
        sub = s["propertyNames"]
        node = self.lower(sub, _pointer.join(ptr, "propertyNames"))
        if is_any(node):
            return None
        if isinstance(node, Ref):
            node = self.defs.node(node.key)
        self.usage.enforce("propertyNames", ptr)
        if isinstance(node, Typed) and node.string is not None and not node.string.formats:
            return node.string
        if isinstance(node, Typed) and node.string is None:
            return Str(min_length=1, max_length=0)  # no names at all: only `{}`
        if isinstance(node, Consts):
            import json

            values = [json.loads(t) for t in node.texts]
            strings = [v for v in values if isinstance(v, str)]
            alt = "|".join(re.escape(v) for v in strings)
            return (
                Str(patterns=((f"^(?:{alt})$", ptr),))
                if strings
                else Str(min_length=1, max_length=0)
            )
        self.usage.validate("propertyNames", ptr, "only string constraints are enforced")
        return None

    def dependencies(
        self,
        s: dict[str, Any],
        ptr: str,
        required: frozenset[str],
        props: dict[str, Node],
        additional: Node,
        patterns: list[tuple[str, Node]],
    ) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
        """The dependencies the grammar tracks: array-form ones between declared members (a
        declared name is written only as that member, so its presence is known). Trivial
        ones are enforced as they are; the rest (schema-form, or naming undeclared members)
        are validated after parsing."""
        tracked: list[tuple[str, str, tuple[str, ...]]] = []

        def absent(name: str) -> bool:
            """No object here can hold a member `name`."""
            if name in props:
                return is_never(props[name])
            return is_never(additional) and not any(re.search(p, name) for p, _ in patterns)

        for keyword in ("dependentRequired", "dependentSchemas", "dependencies"):
            if keyword not in s:
                continue
            exact = True
            for trigger, need in s[keyword].items():
                if absent(trigger):
                    continue
                if isinstance(need, list) and set(need) <= required:
                    continue
                if need is True or need == {}:
                    continue
                if (
                    isinstance(need, list)
                    and trigger in props
                    and all(x in props or absent(x) for x in need)
                ):
                    tracked.append((keyword, trigger, tuple(dict.fromkeys(need))))
                    continue
                exact = False
            if exact:
                self.usage.enforce(keyword, ptr)
            else:
                self.usage.validate(keyword, ptr, "conditional requirements")
        return tuple(tracked)

    def array(self, s: dict[str, Any], ptr: str) -> Arr | None:
        items = s.get("items")
        prefix: list[Node] = []
        rest: Node = ANY
        if "prefixItems" in s:
            prefix = [
                self.lower(x, _pointer.join(ptr, "prefixItems", i))
                for i, x in enumerate(s["prefixItems"])
            ]
            if "items" in s:
                rest = self.lower(items, _pointer.join(ptr, "items"))
        elif isinstance(items, list):
            prefix = [self.lower(x, _pointer.join(ptr, "items", i)) for i, x in enumerate(items)]
            if "additionalItems" in s:
                rest = self.lower(s["additionalItems"], _pointer.join(ptr, "additionalItems"))
                self.usage.enforce("additionalItems", ptr)
        elif "items" in s:
            rest = self.lower(items, _pointer.join(ptr, "items"))
        for k in ("items", "prefixItems", "minItems", "maxItems"):
            if k in s:
                self.usage.enforce(k, ptr)
        lo = kw.as_count(s.get("minItems", 0))
        hi = kw.as_count(s["maxItems"]) if "maxItems" in s else None
        if s.get("uniqueItems") is True:
            if hi is not None and hi <= 1:
                self.usage.enforce("uniqueItems", ptr)
            else:
                self.usage.validate("uniqueItems", ptr, "uniqueness is checked after parsing")
        if "unevaluatedItems" in s and s["unevaluatedItems"] is not True:
            self.usage.validate("unevaluatedItems", ptr, "depends on applicators")
        contains: Node | None = None
        if "contains" in s:
            c = self.lower(s["contains"], _pointer.join(ptr, "contains"))
            simple = not prefix and lo <= 1 and hi is None and s.get("minContains", 1) == 1
            simple = simple and "maxContains" not in s
            if s.get("minContains", 1) == 0:
                self.usage.enforce("contains", ptr)
            elif simple:
                contains = self.meet(c, rest, ptr)
                self.usage.enforce("contains", ptr)
            else:
                self.usage.validate("contains", ptr, "contains with bounds or prefixItems")
        for k in ("minContains", "maxContains"):
            if k in s and "contains" in s and contains is None:
                self.usage.validate(k, ptr)
        # Positions that cannot hold any value cap the length.
        for i, p in enumerate(prefix):
            if is_never(p):
                if i < lo:
                    return None
                prefix = prefix[:i]
                hi = i if hi is None else min(hi, i)
                break
        if is_never(rest) and len(prefix) < lo:
            return None
        return Arr(tuple(prefix), rest, lo, hi, contains, ptr)

    # -- negation -------------------------------------------------------------------------
    def negate(self, sub: Any, ptr: str) -> Node | None:
        """A node for `not sub` where expressible (types, string enums, one required key)."""
        if sub is True:
            return NEVER
        if sub is False:
            return ANY
        if not isinstance(sub, dict):
            raise SchemaError("a schema must be an object or a boolean", ptr)
        kw.check(sub, ptr)
        keys = {k for k in sub if k in kw.CONSTRAINING}
        if not keys:  # annotations only: every value matches, so none matches the negation
            return NEVER
        if keys == {"not"}:
            return self.lower(sub["not"], _pointer.join(ptr, "not"))
        if keys == {"$ref"}:
            target = self.index.resolve(sub["$ref"], ptr)
            if self.depth > MAX_DEPTH:
                return None
            self.depth += 1
            try:
                return self.negate(_pointer.resolve(self.root, target, ptr), target)
            finally:
                self.depth -= 1
        if keys == {"anyOf"}:
            node: Node = ANY
            for i, alt in enumerate(sub["anyOf"]):
                neg = self.negate(alt, _pointer.join(ptr, "anyOf", i))
                if neg is None:
                    return None
                node = self.meet(node, neg, ptr)
            return node
        if keys == {"type"}:
            t = sub["type"]
            types = set(t if isinstance(t, list) else [t])
            if "integer" in types and "number" not in types:
                return None
            return Typed(
                "null" not in types,
                "boolean" not in types,
                None if "number" in types else Num(),
                None if "string" in types else Str(),
                None if "object" in types else Obj(),
                None if "array" in types else Arr(),
            )
        if keys in ({"enum"}, {"const"}):
            values = sub["enum"] if "enum" in sub else [sub["const"]]
            strings = frozenset(v for v in values if isinstance(v, str))
            if any(not isinstance(v, str | bool) and v is not None for v in values):
                return None
            bools = {v for v in values if isinstance(v, bool)}
            if len(bools) == 1:
                return None
            return Typed(None not in values, not bools, Num(), Str(excluded=strings), Obj(), Arr())
        if keys == {"required"} and isinstance(sub["required"], list):
            # objects missing any one of the names (`required` holds for every non-object,
            # so no non-object is in its negation; none listed: nothing is)
            return union(
                [Typed(obj=Obj(props=((name, NEVER),))) for name in dict.fromkeys(sub["required"])]
            )
        if keys == {"allOf"} or (len(keys) > 1 and keys <= _CONJUNCTS):
            # De Morgan: a schema is the conjunction of its subschemas (and of these
            # independent keywords), so its negation is the union of theirs
            pieces = (
                [(a, _pointer.join(ptr, "allOf", i)) for i, a in enumerate(sub["allOf"])]
                if keys == {"allOf"}
                else [({k: sub[k]}, ptr) for k in sorted(keys)]
            )
            negs = [self.negate(piece, where) for piece, where in pieces]
            if any(n is None for n in negs):
                return None
            return union([n for n in negs if n is not None])
        return None


_MAX_ONE_OF = 8  # alternatives checked pairwise for an exact oneOf (k^2 intersections)

# Keywords that assert independently of one another: a schema holding only these is their
# conjunction (unlike `properties` with `additionalProperties`, or `$ref` with siblings in
# older drafts).
_CONJUNCTS = frozenset({"type", "required", "enum", "const", "anyOf", "allOf", "not"})


def _name_ok(names: Str, name: str) -> bool:
    from ._meet import _name_ok as ok

    return ok(names, name)
