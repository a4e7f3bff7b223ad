"""JSON Schema → Lark grammar compilation (see docs/internals/grammar-dialect.md)."""

from sdk.schema import KeywordUse

from .compiler import SchemaGrammar, compile_schema

__all__ = ["KeywordUse", "SchemaGrammar", "compile_schema"]
