"""Tool input schemas and the one check of arguments against them.

A schema here is the JSON Schema a client shows the model, written by hand in the small
subset the tools need (`string`, `integer`, `number`, `boolean`, `array`, one flat `object`),
so what is checked is exactly what is declared: lengths, ranges, a non-blank pattern, item
counts, closed choices, no argument the tool does not take. Refusals name the argument and
read as the other doors' (`limit: Input should be less than or equal to 30`).

Pure: no I/O, nothing imported beyond the standard library and `errors`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from errors import InvalidInputError

Schema = dict[str, Any]

ID_MAX = 2**63 - 1
"""The largest id a database row can have (as `memory.inputs.ID_MAX`)."""


def text(description: str = "", *, max_length: int | None = None) -> Schema:
    """A string that says something: at least one character that is not a space."""
    schema: Schema = {"type": "string", "minLength": 1, "pattern": r"\S"}
    if max_length is not None:
        schema["maxLength"] = max_length
    return _described(schema, description)


def plain(description: str = "") -> Schema:
    """Any string (an optional label that may be empty)."""
    return _described({"type": "string"}, description)


def choice(*values: str, description: str = "") -> Schema:
    return _described({"type": "string", "enum": list(values)}, description)


def whole(low: int, high: int, description: str = "") -> Schema:
    return _described({"type": "integer", "minimum": low, "maximum": high}, description)


def number(low: float, high: float, description: str = "") -> Schema:
    return _described({"type": "number", "minimum": low, "maximum": high}, description)


def flag(description: str = "") -> Schema:
    """A JSON true or false: no "yes", no 1."""
    return _described({"type": "boolean"}, description)


def array(items: Schema, low: int, high: int, description: str = "") -> Schema:
    schema = {"type": "array", "items": items, "minItems": low, "maxItems": high}
    return _described(schema, description)


def tool_input(required: tuple[str, ...] = (), **properties: Schema) -> Schema:
    """The `inputSchema` of a tool: these arguments, no others."""
    schema: Schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    schema["additionalProperties"] = False
    return schema


def _described(schema: Schema, description: str) -> Schema:
    return {**schema, "description": description} if description else schema


def check(name: str, schema: Schema, arguments: object) -> dict[str, Any]:
    """The arguments, checked: `InvalidInputError` saying what is wrong (every problem, one
    line), else a dict of the arguments given. A JSON null for an optional argument counts as
    not given (models send it for arguments they mean to leave out)."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise InvalidInputError(f"{name}: arguments must be a JSON object")
    properties: dict[str, Schema] = schema.get("properties", {})
    unknown = sorted(str(key) for key in arguments if key not in properties)
    if unknown:
        takes = ", ".join(sorted(properties)) or "none"
        raise InvalidInputError(
            f"{name}: unknown argument(s) {', '.join(unknown)}; it takes {takes}"
        )
    problems: list[str] = []
    given: dict[str, Any] = {}
    for key in schema.get("required", ()):
        if arguments.get(key) is None:
            problems.append(f"{key}: Field required")
    for key, value in arguments.items():
        if value is None:
            continue
        problems += _problems(str(key), properties[key], value)
        given[str(key)] = value
    if problems:
        raise InvalidInputError(f"{name}: {'; '.join(problems)}")
    return given


def _problems(where: str, schema: Schema, value: object) -> list[str]:
    match schema["type"]:
        case "string":
            return _string(where, schema, value)
        case "integer":
            if isinstance(value, bool) or not isinstance(value, int):
                return [f"{where}: Input should be a valid integer"]
            return _range(where, schema, value)
        case "number":
            if isinstance(value, bool) or not isinstance(value, int | float):
                return [f"{where}: Input should be a valid number"]
            if not math.isfinite(value):
                return [f"{where}: Input should be a finite number"]
            return _range(where, schema, value)
        case "boolean":
            if not isinstance(value, bool):
                return [f"{where}: Input should be a valid boolean (JSON true or false)"]
            return []
        case "array":
            return _array(where, schema, value)
    raise AssertionError(f"schema type {schema['type']!r} is not one the tools use")


def _string(where: str, schema: Schema, value: object) -> list[str]:
    if not isinstance(value, str):
        return [f"{where}: Input should be a valid string"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{where}: Input should be {' or '.join(repr(v) for v in schema['enum'])}"]
    low = schema.get("minLength", 0)
    if len(value) < low:
        return [f"{where}: String should have at least {low} character{'s' * (low != 1)}"]
    high = schema.get("maxLength")
    if high is not None and len(value) > high:
        return [f"{where}: String should have at most {high} characters"]
    if "pattern" in schema and not value.strip():
        return [f"{where}: String should match pattern '\\S' (not blank)"]
    return []


def _range(where: str, schema: Schema, value: float) -> list[str]:
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None and value < low:
        return [f"{where}: Input should be greater than or equal to {low}"]
    if high is not None and value > high:
        return [f"{where}: Input should be less than or equal to {high}"]
    return []


def _array(where: str, schema: Schema, value: object) -> list[str]:
    if not isinstance(value, list):
        return [f"{where}: Input should be a valid list"]
    low, high = schema.get("minItems", 0), schema.get("maxItems")
    if len(value) < low:
        return [f"{where}: List should have at least {low} item{'s' * (low != 1)}"]
    if high is not None and len(value) > high:
        return [f"{where}: List should have at most {high} items"]
    problems: list[str] = []
    for index, item in enumerate(value):
        problems += _problems(f"{where}.{index}", schema["items"], item)
    return problems


class Arguments:
    """Checked arguments, read with their types (a value `check` let through has them)."""

    def __init__(self, given: Mapping[str, Any]) -> None:
        self.given = dict(given)

    def __contains__(self, name: str) -> bool:
        return name in self.given

    def text(self, name: str, default: str | None = None) -> str | None:
        value = self.given.get(name, default)
        return value if isinstance(value, str) else default

    def required(self, name: str) -> str:
        value = self.given.get(name)
        if not isinstance(value, str):
            raise InvalidInputError(f"{name}: Field required")
        return value

    def whole(self, name: str, default: int) -> int:
        value = self.given.get(name, default)
        return value if isinstance(value, int) and not isinstance(value, bool) else default

    def number(self, name: str, default: float | None = None) -> float | None:
        value = self.given.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return default
        return float(value)

    def flag(self, name: str) -> bool:
        return self.given.get(name) is True

    def texts(self, name: str) -> list[str] | None:
        value = self.given.get(name)
        return [str(v) for v in value] if isinstance(value, list) else None

    def wholes(self, name: str) -> list[int]:
        value = self.given.get(name)
        return [int(v) for v in value] if isinstance(value, list) else []
