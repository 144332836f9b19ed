"""A tool's JSON schema, read to type the values a format writes as text (qwen3_coder's
parameters): vLLM's order of preference, and the text itself when no type fits."""

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


def _schema_types(schema: Any) -> set[str]:
    if not isinstance(schema, dict):
        return set()
    kind = schema.get("type")
    types = (
        {kind}
        if isinstance(kind, str)
        else {t for t in kind if isinstance(t, str)}
        if isinstance(kind, list)
        else set()
    )
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key) or []:
            types |= _schema_types(option)
    return {
        "integer" if t == "int" else "number" if t == "float" else "boolean" if t == "bool" else t
        for t in types
    }


def coerce(value: str, schema: Any) -> Any:
    """A parameter's text as its schema's type, in vLLM's order of preference (null,
    integer, number, boolean, object, array, string); the text itself if none fits."""
    types = _schema_types(schema)
    if "null" in types and value.lower() == "null":
        return None
    if "integer" in types:
        try:
            return int(value)
        except ValueError:
            pass
    if "number" in types:
        try:
            return int(value)
        except ValueError:
            pass
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
    for kind, python in (("object", dict), ("array", list)):
        if kind in types:
            try:
                parsed = json.loads(value)
            except ValueError:
                continue
            if isinstance(parsed, python):
                return parsed
    return value
