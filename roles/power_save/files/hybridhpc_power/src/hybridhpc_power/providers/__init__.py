"""Providers by name (the ``provider`` setting of a node set).

A provider's module is imported only when a node set uses it: the aws
provider needs boto3, which a site running only docker or command node sets
does not install, and the programs slurmctld runs never import a provider.

A provider class rejects bad ``options`` by raising ValueError from its
constructor, with a message naming the option (``hybridhpc-power check``
reports it with the node set's name).
"""

from __future__ import annotations

import importlib

from .base import Instance, Provider, ProviderError, ResumeResult, Secrets, SuspendResult

# name -> module under hybridhpc_power.providers; the module holds one Provider subclass with that ``name``.
_MODULES = {
    "aws": "aws",
    "command": "command",
    "docker": "docker",
}
NAMES = tuple(sorted(_MODULES))

__all__ = ["NAMES", "Instance", "Provider", "ProviderError", "ResumeResult", "Secrets", "SuspendResult", "get", "build"]


def get(name: str) -> type[Provider]:
    """The Provider class registered as ``name`` (imports its module now)."""
    if name not in _MODULES:
        raise KeyError("unknown provider %r; known: %s" % (name, ", ".join(NAMES)))
    try:
        module = importlib.import_module("%s.%s" % (__name__, _MODULES[name]))
    except ImportError as err:
        raise ProviderError("the %s provider cannot be loaded: %s%s" % (
            name, err, " (install boto3: apt-get install python3-boto3)" if name == "aws" else "")) from err
    for value in vars(module).values():
        if isinstance(value, type) and issubclass(value, Provider) and value is not Provider and getattr(value, "name", None) == name:
            return value
    raise ProviderError("%s.%s defines no Provider subclass with name = %r" % (__name__, _MODULES[name], name))


def build(name: str, cluster: str, options, secrets: Secrets) -> Provider:
    """An instance of the ``name`` provider; ValueError for bad options."""
    return get(name)(cluster, options, secrets)
