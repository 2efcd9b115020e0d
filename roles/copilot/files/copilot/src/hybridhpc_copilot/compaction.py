"""What the caches hold of the API server's JSON: one copy of each string and of each small part.

Ten thousand GenericNodes repeat the same keys, labels, types, states,
reasons and GRES strings, and the same small parts (the labels, an
``allocated`` of zero, an empty ledger, an unchanged condition); each parse
(a list chunk, a watch event, a write's answer) makes its own copies.
Compacted, the cache holds one of each: the benchmark's 10,000 GenericNodes
stay within the daemon's memory budget (VmHWM 130 MB, tests/bench).
"""

from __future__ import annotations

import dataclasses
import sys
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from .model import Action, GenericNode, WriteStatus

_J = TypeVar("_J")

# Values no two objects share: interning them would only grow the interpreter's table of interned strings.
_UNIQUE = frozenset(("uid", "resourceVersion", "creationTimestamp"))
_SCALARS = (str, int, float, bool, type(None))
_SHARED_ITEMS = 8  # dicts and lists up to this size are shared between the objects that hold equal ones
_SHARED_LIMIT = 4096  # shared containers remembered, the least recently met forgotten first
_shared: OrderedDict[tuple[object, ...], Any] = OrderedDict()
_shared_lock = threading.Lock()

_EMPTY: Any = {}  # "no cached version" (its own object: no cached value is it)


def compact(value: _J, like: Any = None) -> _J:
    """``value`` (JSON-like) as the caches hold it: strings interned, equal small dicts and lists shared.

    Safe because cached objects are never changed in place (the copilot
    copies what it changes). A container whose parts were all compact
    already is kept as it is, so a status the copilot wrote is shared with
    the action that wrote it, not copied.

    ``like``: the version of this object the cache holds (compact already). A
    new version differs from it in a few fields (the resourceVersion, one
    ledger entry); each part equal to the cached one's is the cached one,
    found by one comparison in C instead of walking and interning it again.
    """
    return cast(_J, _compact(value, like))


def _compact(value: Any, like: Any = None) -> Any:
    # Every part of a container is compacted through this name (the module's global): the tests count the
    # parts a compaction walks by replacing it.
    if type(value) is str:
        return like if type(like) is str and like == value else sys.intern(value)
    if type(value) is dict:
        return _compact_dict(value, like)
    if type(value) is list:
        return _compact_list(value, like)
    return value


def _compact_dict(value: dict[Any, Any], like: Any) -> Any:
    was = like if type(like) is dict else _EMPTY
    items = [_compact_item(k, v, was) for k, v in value.items()]
    if was is not _EMPTY and len(was) == len(items) and all(v is was.get(k, _EMPTY) for k, v in items):
        return was  # every part is the cached one's: the cached object itself
    if not all(k is old_k and v is old_v for (k, v), (old_k, old_v) in zip(items, value.items(), strict=True)):
        value = dict(items)
    return _shared_part(value, items)


def _compact_list(value: list[Any], like: Any) -> Any:
    was = like if type(like) is list and len(like) == len(value) else None
    items = [(None, _compact(v, None if was is None else was[i])) for i, v in enumerate(value)]
    if was is not None and all(v is old for (_k, v), old in zip(items, was, strict=True)):
        return was
    if not all(v is old for (_k, v), old in zip(items, value, strict=True)):
        value = [v for _k, v in items]
    return _shared_part(value, items)


def _shared_part(value: Any, items: list[tuple[Any, Any]]) -> Any:
    """The container equal to ``value`` that other objects hold already (``value`` itself when none does)."""
    if len(items) > _SHARED_ITEMS or any(k in _UNIQUE for k, _v in items):
        return value
    # Parts are compact already: a shared part is known by its identity (the table keeps it alive).
    key = (type(value), tuple((k, type(v), v if type(v) in _SCALARS else id(v)) for k, v in items))
    with _shared_lock:
        shared = _shared.get(key)
        if shared is not None:
            _shared.move_to_end(key)
            return shared
        _shared[key] = value
        if len(_shared) > _SHARED_LIMIT:
            _shared.popitem(last=False)
    return value


def _compact_item(key: Any, value: Any, was: dict[Any, Any]) -> tuple[Any, Any]:
    """One entry of a dict compacted: the cached version's value when it is the same JSON as the new one.

    Python's ``==`` takes 1, 1.0 and True for equal, and the CRD keeps unknown
    fields (ACK's among them) without fixing their types: a value equal to
    Python is checked by :func:`_same_types` before the cached one stands for
    it, else a later PUT would write such a field back with the old type.
    """
    key = sys.intern(key) if type(key) is str else key
    old = was.get(key, _EMPTY)
    if old is not _EMPTY and (old is value or (type(old) is type(value) and old == value and _same_types(old, value))):
        return key, old
    if key in _UNIQUE:
        return key, value
    return key, _compact(value, None if old is _EMPTY else old)


def _same_types(a: Any, b: Any) -> bool:
    """Whether two values Python finds equal are the same JSON: ``==`` takes 1, 1.0 and True for equal."""
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return all(_same_types(v, b[k]) for k, v in a.items() if type(v) is not str)
    if type(a) is list:
        return all(_same_types(v, w) for v, w in zip(a, b, strict=True) if type(v) is not str)
    return True


def compact_status(action: Action, cached: Mapping[str, GenericNode] | None = None) -> Action:
    """A WriteStatus with its status compacted, like the status of the GenericNode in ``cached`` it replaces.

    A new status differs from the one it replaces in a few parts (one ledger
    entry, an allocation, a condition's time): the others are the cached
    ones, found by one comparison each instead of walking and interning them.
    """
    if not isinstance(action, WriteStatus):
        return action
    node = cached.get(action.node) if cached is not None and action.node is not None else None
    return dataclasses.replace(action, status=compact(action.status, None if node is None else node.status))
