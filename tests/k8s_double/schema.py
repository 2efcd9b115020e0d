"""openAPIV3Schema validation and pruning for custom resources (the structural-schema subset).

Checks what the API server checks for CRDs: ``type`` (object, array, string,
integer, number, boolean), ``nullable``, ``required``, ``enum``,
``minimum``/``maximum``, ``minLength``/``maxLength``, ``pattern``,
``minItems``/``maxItems``, ``x-kubernetes-int-or-string``; and it prunes
fields the schema does not declare unless ``x-kubernetes-preserve-unknown-fields``
(or ``additionalProperties``) keeps them, as the API server silently does.
Errors come back as ``(field path, reason, message)`` causes.
"""

from __future__ import annotations

import re

_ROOT_FIELDS = ("apiVersion", "kind", "metadata")


def _type_ok(kind: str, value) -> bool:
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    return True


def validate(schema: dict, value, path: str = "", root: bool = True) -> tuple[object, list]:
    """``(pruned value, causes)`` for ``value`` against ``schema``."""
    causes: list = []
    pruned = _walk(schema or {}, value, path, causes, root)
    return pruned, causes


def _walk(schema: dict, value, path: str, causes: list, root: bool = False):
    where = path or "<root>"
    if value is None:
        if schema.get("nullable") or root:
            return value
        causes.append((where, "FieldValueRequired", "Required value"))
        return value
    if schema.get("x-kubernetes-int-or-string"):
        if not (isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))):
            causes.append((where, "FieldValueTypeInvalid", "Invalid value: %r: must be an integer or a string" % (value,)))
        return value
    kind = schema.get("type")
    if kind and not _type_ok(kind, value):
        causes.append((where, "FieldValueTypeInvalid", 'Invalid value: "%s": %s in body must be of type %s: "%s"' % (
            type(value).__name__, where, kind, _json_type(value))))
        return value
    if "enum" in schema and value not in schema["enum"]:
        causes.append((where, "FieldValueNotSupported", "Unsupported value: %r: supported values: %s" % (
            value, ", ".join('"%s"' % v for v in schema["enum"]))))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            causes.append((where, "FieldValueInvalid", "Invalid value: %s: should be greater than or equal to %s" % (value, schema["minimum"])))
        if "maximum" in schema and value > schema["maximum"]:
            causes.append((where, "FieldValueInvalid", "Invalid value: %s: should be less than or equal to %s" % (value, schema["maximum"])))
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            causes.append((where, "FieldValueInvalid", "Invalid value: %r: should be at least %d chars long" % (value, schema["minLength"])))
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            causes.append((where, "FieldValueTooLong", "Too long: may not be more than %d bytes" % schema["maxLength"]))
        if "pattern" in schema and not re.search(schema["pattern"], value):
            causes.append((where, "FieldValueInvalid", "Invalid value: %r: should match '%s'" % (value, schema["pattern"])))
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            causes.append((where, "FieldValueInvalid", "Invalid value: should have at least %d items" % schema["minItems"]))
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            causes.append((where, "FieldValueTooMany", "Too many: %d: must have at most %d items" % (len(value), schema["maxItems"])))
        items = schema.get("items")
        if isinstance(items, dict):
            return [_walk(items, item, "%s[%d]" % (path, i), causes) for i, item in enumerate(value)]
        return value
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        for name in schema.get("required") or []:
            if name not in value:
                causes.append((_join(path, name), "FieldValueRequired", "Required value"))
        additional = schema.get("additionalProperties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields") or additional is True
        out = {}
        for key, item in value.items():
            if root and key in _ROOT_FIELDS:
                out[key] = item  # metadata is validated by the server itself
            elif key in properties:
                out[key] = _walk(properties[key], item, _join(path, key), causes)
            elif isinstance(additional, dict):
                out[key] = _walk(additional, item, _join(path, key), causes)
            elif preserve or (not properties and kind != "object" and not root):
                out[key] = item
            # else: pruned, as the API server drops unknown fields
        return out
    return value


def _join(path: str, key: str) -> str:
    return "%s.%s" % (path, key) if path else key


def _json_type(value) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer", float: "number"}.get(type(value), "null")


def unknown_fields(schema: dict, value, path: str = "") -> list[str]:
    """Paths that pruning would drop (for fieldValidation=Strict)."""
    pruned, _unused = validate(schema, value)
    dropped: list[str] = []
    _diff(value, pruned, path, dropped)
    return dropped


def _diff(before, after, path, out):
    if isinstance(before, dict) and isinstance(after, dict):
        for key, value in before.items():
            if key not in after:
                out.append(_join(path, key))
            else:
                _diff(value, after[key], _join(path, key), out)
    elif isinstance(before, list) and isinstance(after, list):
        for i, (a, b) in enumerate(zip(before, after)):
            _diff(a, b, "%s[%d]" % (path, i), out)
