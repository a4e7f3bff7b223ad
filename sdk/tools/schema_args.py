"""Arguments models for tools defined by a JSON Schema (MCP servers, OpenAPI, OpenAI dicts).

The grammar enforces what it can of the schema; `jsonschema` checks all of it after parsing,
inside a Pydantic validator, so a failure is a `pydantic.ValidationError` like any other tool's:
fed back to the model and retried, never a third-party exception escaping the run.
"""

from __future__ import annotations

from typing import Any, ClassVar, cast

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic_core import PydanticCustomError

__all__ = ["SchemaArgs", "schema_args_model", "schema_validator", "validate_schema_args"]


class SchemaArgs(BaseModel):
    """Validated arguments of a schema tool: the JSON object's members as attributes
    (`args.city`) and `model_dump()` as the dict."""

    model_config = ConfigDict(extra="allow", frozen=True)
    _validator: ClassVar[Any] = None

    @model_validator(mode="before")
    @classmethod
    def _check(cls, data: Any) -> Any:
        if isinstance(data, BaseModel):
            data = data.model_dump()
        errors = sorted(cls._validator.iter_errors(data), key=lambda e: list(e.absolute_path))
        if errors:
            e = errors[0]
            where = "/".join(str(p) for p in e.absolute_path) or "(the arguments)"
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            raise PydanticCustomError(
                "json_schema",
                "{where}: {message}{more}",
                {"where": where, "message": e.message, "more": more},
            )
        if not isinstance(data, dict):
            raise PydanticCustomError("dict_type", "the arguments must be a JSON object")
        return data


def schema_validator(schema: dict[str, Any]) -> Any:
    """A `jsonschema` validator for the schema's own draft (2020-12 when it names none);
    raises `jsonschema.SchemaError` for a schema that is not valid JSON Schema."""
    import jsonschema

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def schema_args_model(name: str, schema: dict[str, Any]) -> type[SchemaArgs]:
    namespace = {"__module__": __name__, "_validator": schema_validator(schema)}
    return cast(type[SchemaArgs], type(f"{name}_args", (SchemaArgs,), namespace))


def validate_schema_args(model: type[SchemaArgs], data: Any) -> SchemaArgs:
    """Validate with each error at its own place (`tags.1`), as Pydantic reports a
    function tool's, so the model's feedback says where to look."""
    import json

    from pydantic import ValidationError

    if isinstance(data, model):
        return data
    if isinstance(data, str | bytes | bytearray):
        try:
            data = json.loads(data)
        except ValueError:
            return model.model_validate_json(data)  # Pydantic's own JSON error
    errors = sorted(model._validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        raise ValidationError.from_exception_data(
            model.__name__,
            [
                {
                    "type": "value_error",
                    "loc": tuple(e.absolute_path),
                    "input": e.instance,
                    "ctx": {"error": e.message},
                }
                for e in errors[:8]
            ],
        )
    return model.model_validate(data)
