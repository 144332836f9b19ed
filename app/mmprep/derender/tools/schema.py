"""A tool's JSON schema, read to type the values a format writes as text (qwen3_coder's
parameters, glm45's, minimax_m2's), as vLLM's parser engine types them
(tool_parsers/utils.py coerce_to_schema_type)."""

from __future__ import annotations

import json
import math
from typing import Any


def parameter_schemas(tools: list[dict]) -> dict[str, dict[str, Any]]:
    """tool name -> parameter name -> its JSON schema, from the request's tools."""
    schemas = {}
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            parameters = function.get("parameters") or {}
            properties = parameters.get("properties") if isinstance(parameters, dict) else None
            schemas[function["name"]] = properties if isinstance(properties, dict) else {}
    return schemas


# The type names vLLM reads as JSON Schema's (tool_parsers/utils.py's _TYPE_ALIASES)
_ALIASES = {
    **dict.fromkeys(("str", "text", "varchar", "char", "enum"), "string"),
    **dict.fromkeys(
        ("int", "int32", "int64", "uint", "uint32", "uint64", "long", "short", "unsigned"), "integer"
    ),
    **dict.fromkeys(("float", "float32", "float64", "double"), "number"),
    "bool": "boolean",
    "dict": "object",
    **dict.fromkeys(("arr", "list", "sequence"), "array"),
}
# what an enum's values say of its type (bool before int: True is an int too)
_ENUM_TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (list, "array"), (dict, "object"))


def _schema_types(schema: Any) -> set[str]:
    """The types a schema allows: `type` (a name or a list), what its `enum` values are, and
    its anyOf/oneOf/allOf choices; "string" when it says none (vLLM's rule)."""
    if not isinstance(schema, dict):
        return {"string"}
    kind = schema.get("type")
    types = {t for t in (kind if isinstance(kind, list) else [kind]) if isinstance(t, str)}
    types |= {_enum_type(value) for value in _listed(schema, "enum")}
    for key in ("anyOf", "oneOf", "allOf"):
        for option in _listed(schema, key):
            types |= _schema_types(option)
    return {_ALIASES.get(t.strip().lower(), t.strip().lower()) for t in types} or {"string"}


def _listed(schema: dict, key: str) -> list:
    found = schema.get(key)
    return found if isinstance(found, list) else []


def _enum_type(value: Any) -> str:
    if value is None:
        return "null"
    return next((name for python, name in _ENUM_TYPES if isinstance(value, python)), "string")


def _finite_json(value: str) -> tuple[bool, Any]:
    """(True, the value) where `value` is JSON that can be written back as JSON (no inf or nan)."""
    try:
        parsed = json.loads(value)
        json.dumps(parsed, allow_nan=False)
    except ValueError:
        return False, None
    return True, parsed


def coerce(value: str, schema: Any) -> Any:
    """A parameter's text as its schema's type, in vLLM's order of preference (null,
    integer, number, boolean, object, array, then string: the text itself); where the schema
    allows no string, the text read as JSON if it is, else the text."""
    types = _schema_types(schema)
    if "null" in types and value.lower() == "null":
        return None
    if types & {"integer", "number"}:
        try:
            return int(value)
        except ValueError:
            pass
    if "number" in types:
        try:
            number = float(value)
            if math.isfinite(number):
                return int(number) if number == int(number) else number
        except ValueError:
            pass
    if "boolean" in types:
        if value.strip().lower() in ("true", "1"):
            return True
        if value.strip().lower() in ("false", "0"):
            return False
    if "string" in types and not types & {"object", "array"}:
        return value
    found, parsed = _finite_json(value)  # an object or array; or, where no string is allowed, any JSON
    return parsed if found else value
