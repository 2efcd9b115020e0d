"""Pure conversions: Kubernetes quantities and Slurm GRES strings.

Kubernetes quantities (``"2"``, ``"2735m"``, ``"2Gi"``, ``"1.5"``, ``"1e3"``)
are parsed exactly (``Fraction``) and rounded *up* to whole millicores and
bytes, so a request is never under-counted. Slurm counts memory in MB that are
MiB (``RealMemory``, ``--mem``), and the ``k8smemory`` GRES follows Slurm.

>>> cpu_millis("2735m"), memory_bytes("2Gi")
(2735, 2147483648)
>>> format_cpu(3000), format_cpu(2735), format_memory(4000 * MIB)
('3', '2735m', '4000Mi')
>>> parse_gres("gpu:a100:2(S:0-1),k8scpu:4,k8smemory:1000")["k8scpu"]
4
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction

MIB = 1024 * 1024

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL: dict[str, Fraction | int] = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": 1,
            "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$")


class QuantityError(ValueError):
    """A Kubernetes quantity that cannot be parsed."""


def parse_quantity(value: object) -> Fraction:
    """A Kubernetes quantity as an exact number (``"100m"`` -> 1/10)."""
    if isinstance(value, bool):
        raise QuantityError("a quantity must be a number or a string, not %r" % value)
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError("a quantity must be finite, not %r" % value)
        return Fraction(str(value))
    if not isinstance(value, str):
        raise QuantityError("a quantity must be a number or a string, not %r" % (value,))
    match = _QUANTITY.match(value.strip())
    if not match:
        raise QuantityError("%r is not a Kubernetes quantity (examples: 2, 500m, 1.5, 2Gi, 4000Mi)" % value)
    number, exponent, suffix = match.groups()
    result = Fraction(number)
    if exponent:
        result *= Fraction(10) ** int(exponent[1:])
    elif suffix in _BINARY:
        result *= _BINARY[suffix]
    elif suffix:
        result *= _DECIMAL[suffix]
    return result


def _non_negative(value: object, what: str) -> Fraction:
    quantity = parse_quantity(value)
    if quantity < 0:
        raise QuantityError("%s must not be negative, got %r" % (what, value))
    return quantity


@functools.lru_cache(maxsize=4096)
def _cpu_millis(value: object) -> int:
    return math.ceil(_non_negative(value, "a CPU quantity") * 1000)


@functools.lru_cache(maxsize=4096)
def _memory_bytes(value: object) -> int:
    return math.ceil(_non_negative(value, "a memory quantity"))


def cpu_millis(value: object) -> int:
    """CPU quantity -> whole millicores, rounded up."""
    return _cpu_millis(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else _cpu_millis.__wrapped__(value)


def memory_bytes(value: object) -> int:
    """Memory quantity -> whole bytes, rounded up."""
    return _memory_bytes(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else _memory_bytes.__wrapped__(value)


def cpus_for(millis: int) -> int:
    """Whole CPUs needed to hold ``millis`` millicores (Slurm's GRES counts are integers)."""
    return -(-int(millis) // 1000)


def mib_for(nbytes: int) -> int:
    """Whole MiB (Slurm MB) needed to hold ``nbytes``."""
    return -(-int(nbytes) // MIB)


def format_cpu(millis: int) -> str:
    """Millicores as Kubernetes prints them: ``"3"`` or ``"2735m"``."""
    millis = int(millis)
    return str(millis // 1000) if millis % 1000 == 0 else "%dm" % millis


def format_memory(nbytes: int) -> str:
    """Bytes as a quantity in the largest binary unit that divides them (``"4000Mi"``)."""
    nbytes = int(nbytes)
    if nbytes == 0:
        return "0"
    for suffix, factor in (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if nbytes % factor == 0:
            return "%d%s" % (nbytes // factor, suffix)
    return str(nbytes)


# -- Slurm GRES strings ----------------------------------------------------------

_SLURM_SUFFIX = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50}
_GRES_COUNT = re.compile(r"^(\d+)([KMGTP]?)$", re.IGNORECASE)


def _strip_parens(text: str) -> str:
    """``gpu:a100:2(S:0-1)`` -> ``gpu:a100:2``; ``(IDX:0,2)`` may hold commas."""
    out, depth = [], 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(char)
    return "".join(out)


@functools.lru_cache(maxsize=4096)
def split_gres(gres: str | None) -> tuple[tuple[str, str | None, int], ...]:
    """Entries ``(name, type or None, count)`` of a Gres string, in order.

    Socket/index annotations in parentheses are dropped; ``(null)`` and empty
    strings give no entries; an entry without a count counts 1 (Slurm's rule).
    """
    if not gres or gres.strip() in ("(null)", "N/A"):
        return ()
    entries = []
    for raw in _strip_parens(gres).split(","):
        raw = raw.strip()
        if not raw:
            continue
        parts = raw.split(":")
        name, gres_type, count = parts[0], None, 1
        if len(parts) >= 2:
            match = _GRES_COUNT.match(parts[-1])
            if match:
                count = int(match.group(1)) * _SLURM_SUFFIX[match.group(2).upper()]
                gres_type = ":".join(parts[1:-1]) or None
            else:
                gres_type = ":".join(parts[1:])
        entries.append((name, gres_type, count))
    return tuple(entries)


def parse_gres(gres: str | None) -> dict[str, int]:
    """Total count per GRES name (types summed): ``{"k8scpu": 4, "gpu": 2}``."""
    totals: dict[str, int] = {}
    for name, _type, count in split_gres(gres):
        totals[name] = totals.get(name, 0) + count
    return totals


def replace_gres(gres: str | None, counts: dict[str, int]) -> str:
    """The whole Gres string with ``counts`` replacing (or adding) untyped entries.

    Slurm replaces a node's whole Gres string on update, so every other GRES
    is kept as it was (without socket annotations, which an update refuses).
    """
    out, done = [], set()
    for name, gres_type, count in split_gres(gres):
        if name in counts:
            if name not in done:
                out.append("%s:%d" % (name, counts[name]))
                done.add(name)
            continue
        out.append(":".join([name] + ([gres_type] if gres_type else []) + [str(count)]))
    for name in sorted(counts):
        if name not in done:
            out.append("%s:%d" % (name, counts[name]))
    return ",".join(out)
