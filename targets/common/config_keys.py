"""A target config's keys: their types, ``--set key=value`` parsing and coercion, and their
documented meanings (re-exported by :mod:`targets.base`)."""
from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from typing import Any


def config_fields(config_cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(config_cls)
    return {f.name: hints.get(f.name, Any) for f in dataclasses.fields(config_cls)}


def _coerce(value: Any, hint: Any, key: str) -> Any:
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.lower() in ("none", "null"):
        return None
    args = typing.get_args(hint)
    candidates = [a for a in args if a is not type(None)] if args else [hint]
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        pass
    for kind in candidates:
        try:
            if kind is bool:
                if text.lower() in ("1", "true", "yes", "on"):
                    return True
                if text.lower() in ("0", "false", "no", "off"):
                    return False
                raise ValueError
            if kind is int:
                return int(float(text)) if float(text).is_integer() else int(text)
            if kind is float:
                return float(text)
            if kind is str:
                return text
        except ValueError:
            continue
    raise ValueError(f"the {key!r} parameter must be {hint}; got {value!r}")


def replace_config(config: Any, **changes: Any) -> Any:
    """`dataclasses.replace` with string values coerced to the field types and unknown keys named."""
    fields = config_fields(type(config))
    unknown = [k for k in changes if k not in fields]
    if unknown:
        raise ValueError(
            f"unknown parameter(s) {', '.join(map(repr, unknown))} for {type(config).__name__}; "
            f"valid: {', '.join(fields)}"
        )
    coerced = {k: _coerce(v, fields[k], k) for k, v in changes.items()}
    return dataclasses.replace(config, **coerced)


def parse_assignments(items: list[str] | None) -> dict[str, str]:
    """``["hops=10", "beta=1"]`` → ``{"hops": "10", "beta": "1"}``."""
    out: dict[str, str] = {}
    for item in items or []:
        for part in item.split():
            if "=" not in part:
                raise ValueError(f"--set takes key=value pairs, got {part!r}")
            key, value = part.split("=", 1)
            out[key.strip()] = value.strip()
    return out


def config_help(config_cls: type) -> list[dict[str, str]]:
    """Every config key of a target with its default, type and one-line meaning (from the
    ``Args:`` sections of the config class's docstrings, base classes included)."""
    import re

    meaning: dict[str, tuple[str, str]] = {}
    for klass in reversed(config_cls.__mro__):
        doc = inspect.getdoc(klass) or ""
        for m in re.finditer(r"^\s*(\w+)\s*\(([^)]*)\):\s*(.+?)(?=^\s*\w+\s*\([^)]*\):|\Z)", doc,
                             re.MULTILINE | re.DOTALL):
            text = re.sub(r"\s*\(default:[^)]*\)\.?\s*$", "", " ".join(m.group(3).split()))
            meaning[m.group(1)] = (m.group(2).strip(), text)
    rows = []
    for f in dataclasses.fields(config_cls):
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
        kind, text = meaning.get(f.name, ("", ""))
        hint = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        rows.append({"key": f.name, "default": repr(default), "type": kind or hint, "meaning": text})
    return rows
