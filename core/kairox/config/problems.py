r"""Pydantic's validation errors as :class:`~kairox.config.errors.ConfigProblem`\ s a person can act on.

Each error becomes the file, the table, the key, what is wrong and the fix: a did-you-mean
for an unknown key, the documented form of a built-in key, or a fix read from the error's
type and bounds for a plugin's own keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from kairox.config.errors import ConfigProblem, _rename_or
from kairox.config.schema import _BUILTIN_MODELS, _FIELD_FIXES

__all__ = ["model_keys", "translate_error"]


def _render_loc(loc: tuple[int | str, ...]) -> str | None:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or None


def translate_error(
    err: Mapping[str, Any],
    model: type[BaseModel],
    origin: Path,
    table: str,
    *,
    plugin: str | None,
    kind: str | None,
) -> ConfigProblem | None:
    """Turn one pydantic error into a :class:`ConfigProblem`."""
    loc: tuple[int | str, ...] = tuple(err.get("loc", ()))
    key = _render_loc(loc)
    etype: str = err.get("type", "")
    ctx: Mapping[str, Any] = err.get("ctx") or {}
    msg: str = str(err.get("msg", "invalid value"))
    name = loc[-1] if loc else None

    if etype == "extra_forbidden":
        fields = model_keys(model) if len(loc) == 1 else []
        problem, fix = _rename_or(
            f"unknown key {name!r}",
            str(name),
            fields,
            "remove it" + (f"; the allowed keys here are: {', '.join(fields)}" if fields else ""),
        )
        return ConfigProblem(origin, table, key, problem, fix)

    if etype == "missing":
        return ConfigProblem(
            origin, table, key, "required key is missing", f"add {key} = ... to the table"
        )

    problem = msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    field_name = loc[0] if loc and isinstance(loc[0], str) else None
    fix: str | None = None
    if field_name == "headroom" and etype == "value_error":
        fix = "make headroom smaller than context_window (it is reserved for the reply)"
    elif etype == "literal_error":
        fix = f"use one of: {ctx.get('expected', '')}"
    elif field_name in _FIELD_FIXES and _is_builtin_field(model, field_name):
        fix = _FIELD_FIXES[field_name]
    else:
        fix = _generic_fix(etype, ctx)
    if fix is None:
        doc = f"kind {kind!r}" if kind else "this table"
        fix = f"see the documentation of {doc}" + (f" (plugin {plugin!r})" if plugin else "")
    return ConfigProblem(origin, table, key, problem, fix)


def model_keys(model: type[BaseModel]) -> list[str]:
    keys: list[str] = []
    for fname, info in model.model_fields.items():
        keys.append(info.alias or fname)
    return keys


def _is_builtin_field(model: type[BaseModel], field_name: str) -> bool:
    """True when ``field_name`` is declared by one of this module's schemas."""
    return any(
        issubclass(model, base) and field_name in base.model_fields for base in _BUILTIN_MODELS
    )


def _generic_fix(etype: str, ctx: Mapping[str, Any]) -> str | None:
    if etype.startswith("int_"):
        return "use a whole number (no quotes, no decimal point)"
    if etype.startswith("float_"):
        return "use a number (no quotes)"
    if etype == "finite_number":
        return "use a finite number (not inf or nan)"
    if etype.startswith("bool_"):
        return "use true or false (no quotes)"
    if etype.startswith("string_"):
        return "use a string in quotes"
    if etype.startswith("list_") or etype in {"tuple_type", "set_type"}:
        return 'use a list, e.g. ["a", "b"]'
    if etype in {"dict_type", "model_type", "model_attributes_type"}:
        return "use a table"
    bounds = {
        "greater_than": ("gt", "greater than"),
        "greater_than_equal": ("ge", "at least"),
        "less_than": ("lt", "less than"),
        "less_than_equal": ("le", "at most"),
    }
    if etype in bounds:
        ctx_key, words = bounds[etype]
        return f"use a value {words} {ctx.get(ctx_key)}"
    if etype == "enum":
        return f"use one of: {ctx.get('expected', '')}"
    return None
