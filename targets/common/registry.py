"""One registry class for every role that users extend by name: targets, canaries and attacks.

A registry maps names to classes, or to ``package.module:Class`` strings imported on first use (so
a module that fails to import names itself only when asked for). Every lookup also takes
``package.module:Class`` (an importable module) or ``path/to/file.py:Class`` (a file anywhere), so a
user's own class needs no registration. Registering a name twice without ``force`` is an error; an
unknown name lists the known ones.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


def load_file(path: str) -> Any:
    """A module from a source file, registered under a name derived from its resolved path and
    content: every worker loading the same file shares it, and an edited file is a new module."""
    file = Path(path).expanduser().resolve()
    if not file.is_file():
        raise ValueError(f"no such file: {path}")
    name = f"_user_module_{file.stem}_{hashlib.sha256(str(file).encode() + file.read_bytes()).hexdigest()[:12]}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, file)
        if spec is None or spec.loader is None:
            raise ValueError(f"cannot import {path}: not a Python source file")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception:
            del sys.modules[name]
            raise
    return sys.modules[name]


class Registry(Generic[T]):
    """Named classes of one kind (``kind``: "target", "canary", "attack"), all subclasses of ``base``.

    Args:
        kind: the word error messages use.
        base: the class every entry must subclass.
        sort: ``available()`` sorted by name (else in registration order).
        reserved: ``prefix:ARGS`` names that are not import paths (e.g. the canary ``edge:12-272``).
        adapt: what a class is turned into once checked (e.g. a bare target core completed with the
            protocols' defaults); the identity by default.
    """

    def __init__(self, kind: str, base: type, *, sort: bool = False, reserved: tuple[str, ...] = (),
                 adapt: Callable[[type], type] | None = None) -> None:
        self.kind, self.base, self.sort, self.reserved = kind, base, sort, reserved
        self.adapt: Callable[[type], type] = adapt or (lambda cls: cls)
        self._lazy: dict[str, str] = {}
        self._classes: dict[str, type[T]] = {}

    def register(self, name: str, cls: type[T] | str, *, force: bool = False) -> None:
        """Register a class, or a ``package.module:Class`` imported on first use."""
        if (name in self._classes or name in self._lazy) and not force:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._classes.pop(name, None)
        self._lazy.pop(name, None)
        if isinstance(cls, str):
            self._lazy[name] = cls
        else:
            self._classes[name] = self.adapt(cls)

    def unregister(self, name: str) -> None:
        self._classes.pop(name, None)
        self._lazy.pop(name, None)

    def load(self, spec: str) -> type[T]:
        """The class at ``package.module:Class`` or ``path/to/file.py:Class``, checked."""
        module_name, _, attr = spec.rpartition(":")
        module = load_file(module_name) if module_name.endswith(".py") else importlib.import_module(module_name)
        try:
            cls = getattr(module, attr)
        except AttributeError:
            raise ValueError(f"module {module_name!r} has no attribute {attr!r}") from None
        if not (isinstance(cls, type) and issubclass(cls, self.base)):
            raise ValueError(f"{spec!r} is not a {self.base.__name__} subclass")
        return self.adapt(cls)

    def names(self) -> list[str]:
        """Every registered name, in registration order (nothing is imported)."""
        return list(dict.fromkeys([*self._lazy, *self._classes]))

    def available(self) -> list[str]:
        """Registered names whose classes import."""
        names = []
        for name in self.names():
            try:
                self.get(name)
            except (ImportError, ValueError):
                continue
            names.append(name)
        return sorted(names) if self.sort else names

    def get(self, name: str) -> type[T]:
        """A class by registered name, ``package.module:Class`` or ``path/to/file.py:Class``."""
        if name in self._classes:
            return self._classes[name]
        if name in self._lazy:
            spec = self._lazy[name]
            try:
                cls = self.load(spec)
            except ModuleNotFoundError as err:
                if err.name == spec.partition(":")[0]:
                    raise ValueError(f"{self.kind} {name!r} is not available in this version") from None
                raise
            self._classes[name] = cls
            return cls
        if ":" in name and name.partition(":")[0] not in self.reserved:
            try:
                return self.load(name)
            except ModuleNotFoundError as err:
                raise ValueError(f"cannot import {name!r}: {err}") from None
        known = ", ".join(sorted(self.available()))
        raise ValueError(f"unknown {self.kind} {name!r}; known: {known} (or package.module:Class)")
