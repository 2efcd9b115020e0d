"""Slurm hostlist expressions, through the collection's own implementation.

``_vendor/hostlist.py`` is the collection's ``plugins/module_utils/hostlist.py``
(copied by tools/vendor.sh; it matches ``scontrol show hostnames`` /
``hostlistsorted`` byte for byte), so the tool needs neither Ansible nor a
``scontrol`` call to read the argument slurmctld passes.
"""

from __future__ import annotations

from collections.abc import Iterable

try:
    from ._vendor.hostlist import HostlistError, expand as _expand, compress as _compress  # noqa: I001
except ImportError as err:  # pragma: no cover - only on a broken install
    raise ImportError("hybridhpc_power._vendor.hostlist is missing: run tools/vendor.sh (it copies plugins/module_utils/hostlist.py)") from err

__all__ = ["HostlistError", "expand", "compress"]


def expand(text: str) -> list[str]:
    """Host names of ``text`` (``cloud-dy-[1-3,5]``), duplicates removed, order kept."""
    return list(dict.fromkeys(_expand(text)))


def compress(names: Iterable[str]) -> str:
    """One sorted hostlist expression for ``names`` (duplicates removed), as ``scontrol show hostlistsorted`` writes it."""
    unique = sorted(set(names))
    if not unique:
        return ""
    try:
        return _compress(unique, sort=True)
    except HostlistError:
        # Slurm's own sort breaks on some mixes of zero padding; an unsorted
        # (still valid, just longer) expression names the same nodes.
        return _compress(unique)
