"""A move's checkpoint state, serialised from its declared attributes and their types.

A class lists the attributes that make up its state, with their types, in ``saved`` (the lists of its bases
are included); :class:`Saved` writes them as a nested dict of arrays (``bnpvi.io.h5tree``) and reads them back
exactly, so that a resumed lap goes on bit for bit. Types: ``int``, ``float``, ``bool``, ``str``,
``np.ndarray``, ``dict`` (of arrays), anything with ``to_tree`` and a class method ``from_tree`` (``SuffStats``,
``FailureLog``, ...), a dataclass, and ``list[T]``, ``tuple[T, ...]``, ``tuple[T1, T2]``, ``dict[K, V]``,
``set[int]`` and ``T | None`` of those. A None is not written (an optional attribute missing from a tree is None);
any other attribute missing from a tree keeps the value it had before ``load_state`` (its ``reset``'s).
"""
from __future__ import annotations

import dataclasses
import types
import typing

import numpy as np


def encode(value):
    """``value`` as a tree of dicts, arrays, scalars and strings."""
    if hasattr(value, "to_tree"):
        return value.to_tree()
    if dataclasses.is_dataclass(value):
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)
                if getattr(value, f.name) is not None}
    if isinstance(value, (list, tuple)):
        return dict({str(i): encode(v) for i, v in enumerate(value) if v is not None}, length=np.int64(len(value)))
    if isinstance(value, set):
        return np.array(sorted(value), dtype=np.int64)
    if isinstance(value, dict):
        return {",".join(map(str, k)) if isinstance(k, tuple) else str(k): encode(v) for k, v in value.items()
                if v is not None}
    if isinstance(value, bool):
        return np.int64(value)
    if isinstance(value, int):
        return np.int64(value)
    if isinstance(value, float):
        return np.float64(value)
    return value  # arrays, NumPy scalars, strings


def decode(hint, tree):
    """The value of type ``hint`` that :func:`encode` wrote as ``tree``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        (inner,) = [a for a in args if a is not type(None)]
        return decode(inner, tree)
    if origin is list:
        return [decode(args[0], tree[str(i)]) if str(i) in tree else None for i in range(_length(tree))]
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(decode(args[0], tree[str(i)]) for i in range(_length(tree)))
        return tuple(decode(a, tree[str(i)]) if str(i) in tree else None for i, a in enumerate(args))
    if origin is set:
        return {int(x) for x in np.asarray(tree).reshape(-1)}
    if origin is dict:
        return {_key(args[0], k): decode(args[1], v) for k, v in tree.items()}
    if hint is dict:
        return {k: np.asarray(v) for k, v in tree.items()}
    if hint is np.ndarray:
        return np.asarray(tree)
    if hint is bool:
        return bool(int(tree))
    if hint in (int, float, str):
        return hint(tree)
    if hasattr(hint, "from_tree"):
        return hint.from_tree(tree)
    if dataclasses.is_dataclass(hint):
        found = typing.get_type_hints(hint)
        return hint(**{f.name: decode(found[f.name], tree[f.name]) for f in dataclasses.fields(hint)
                       if f.name in tree})
    raise TypeError(f"internal error: no way to read a saved {hint!r}")


def _length(tree: dict) -> int:
    """Items of a list or tuple written by :func:`encode` (its Nones are not written)."""
    return int(tree["length"])


def _key(hint, text: str):
    if typing.get_origin(hint) is tuple:
        return tuple(int(x) for x in text.split(",") if x)
    return hint(text)


def saved_fields(cls) -> dict:
    """Every attribute ``cls`` and its bases save, with its type (``saved``)."""
    fields = {}
    for base in reversed(cls.__mro__):
        fields.update(vars(base).get("saved", {}))
    return fields


class Saved:
    """Mixin: ``state``/``load_state`` from the attributes named in ``saved`` (module docstring)."""

    saved: typing.ClassVar[dict] = {}

    def state(self) -> dict:
        """Everything needed to continue the lap exactly after a resume."""
        values = ((name, getattr(self, name)) for name in saved_fields(type(self)))
        return {name: encode(value) for name, value in values if value is not None}

    def load_state(self, state: dict) -> None:
        for name, hint in saved_fields(type(self)).items():
            if name in state:
                setattr(self, name, decode(hint, state[name]))
            elif _optional(hint):
                setattr(self, name, None)


def _optional(hint) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint)
