"""Kubernetes label and field selectors, parsed like the API server parses them.

Label selectors: ``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``, ``a notin (x,y)``,
``a`` (exists), ``!a`` (does not exist), joined by commas (AND).
Field selectors: ``path=value``, ``path==value``, ``path!=value`` on dotted
paths (``metadata.name``, ``spec.nodeName``, ``status.phase``, ...).
"""

from __future__ import annotations

import re

_KEY = r"(?:[A-Za-z0-9][-A-Za-z0-9_./]*)?[A-Za-z0-9]"
_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_TERM = re.compile(
    r"^\s*(?:(?P<not>!)\s*(?P<nkey>%s)|(?P<key>%s)\s*(?:(?P<op>==|=|!=)\s*(?P<value>%s)|\s+(?P<setop>in|notin)\s*\((?P<set>[^)]*)\))?)\s*$"
    % (_KEY, _KEY, _VALUE)
)


class SelectorError(ValueError):
    """A selector the API server would refuse (400 Bad Request)."""


def _split_terms(selector: str) -> list[str]:
    terms, depth, current = [], 0, []
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                raise SelectorError("unbalanced parenthesis in selector %r" % selector)
        if char == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth:
        raise SelectorError("unbalanced parenthesis in selector %r" % selector)
    terms.append("".join(current))
    return [t for t in terms if t.strip()]


def parse_label_selector(selector: str | None):
    """A predicate ``labels -> bool`` for ``selector`` (None or empty: everything)."""
    requirements = []
    for term in _split_terms(selector or ""):
        match = _TERM.match(term)
        if not match:
            raise SelectorError("unable to parse requirement: %r" % term.strip())
        if match.group("not"):
            requirements.append(("!", match.group("nkey"), None))
        elif match.group("setop"):
            values = {v.strip() for v in match.group("set").split(",") if v.strip()}
            requirements.append((match.group("setop"), match.group("key"), values))
        elif match.group("op"):
            op = "=" if match.group("op") in ("=", "==") else "!="
            requirements.append((op, match.group("key"), match.group("value") or ""))
        else:
            requirements.append(("exists", match.group("key"), None))

    def matches(labels) -> bool:
        labels = labels or {}
        for op, key, value in requirements:
            present = key in labels
            if op == "=" and labels.get(key) != value:
                return False
            if op == "!=" and present and labels[key] == value:
                return False
            if op == "in" and (not present or labels[key] not in value):
                return False
            if op == "notin" and present and labels[key] in value:
                return False
            if op == "exists" and not present:
                return False
            if op == "!" and present:
                return False
        return True

    return matches


def _lookup(obj, path: str):
    value = obj
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def parse_field_selector(selector: str | None):
    """A predicate ``object -> bool`` for a field selector."""
    requirements = []
    for term in _split_terms(selector or ""):
        match = re.match(r"^\s*([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*?)\s*$", term)
        if not match:
            raise SelectorError("invalid field selector: %r" % term.strip())
        path, op, value = match.groups()
        requirements.append((path, op != "!=", value))

    def matches(obj) -> bool:
        return all((_lookup(obj, path) == value) == equal for path, equal, value in requirements)

    return matches
