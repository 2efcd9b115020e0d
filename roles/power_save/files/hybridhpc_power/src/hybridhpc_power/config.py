"""The configuration: one JSON file (default /etc/hybridhpc/power.json), read by every command.

Every key is checked once, on load: an unknown key, a wrong type, a bad
hostlist or a node in two node sets stops the command with a message that
names the key and says what to put there. The file is read by SlurmUser (the
programs slurmctld runs), so it holds no secret: the munge key is only named
by its path, and providers read credentials from their usual places.

Provider options are checked by the provider itself (its constructor raises
ValueError), because importing a provider can be slow (aws imports boto3) and
the programs slurmctld runs must stay fast: ``hybridhpc-power check`` builds
every provider and so checks them too.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field

from . import hostlists, providers


class ConfigError(ValueError):
    """The configuration breaks a rule; the message names the key and the fix."""


@dataclass(frozen=True)
class NodeSet:
    """Nodes one provider serves with one set of options."""

    name: str
    nodes: str  # the hostlist expression as written
    provider: str
    options: dict = field(default_factory=dict)
    members: tuple[str, ...] = ()  # ``nodes`` expanded


@dataclass(frozen=True)
class Config:
    cluster: str
    nodesets: tuple[NodeSet, ...]
    queue_dir: str = "/var/spool/hybridhpc-power"
    state_file: str = "/var/lib/hybridhpc-power/state.json"
    lock_file: str = "/run/hybridhpc-power.lock"
    log_file: str | None = "/var/log/slurm/hybridhpc-power.log"  # null: stdout only
    scontrol: str = "/usr/bin/scontrol"
    scontrol_timeout: float = 30.0
    munge_key_file: str = "/etc/munge/munge.key"
    # A node this tool set DOWN (resume failed, instance gone, resume timed out)
    # goes back to idle~ this many seconds after the reason was set.
    failed_retry_after: float = 300.0
    # A POWERING_UP node without a machine and without a queued request is
    # resumed again once its last resume request is this old.
    resume_grace: float = 60.0
    _node_map: dict = field(default_factory=dict, repr=False, compare=False)

    def node_map(self) -> dict[str, str]:
        """Node name -> node set name (built once on load)."""
        return self._node_map

    def nodeset(self, name: str) -> NodeSet:
        for nodeset in self.nodesets:
            if nodeset.name == name:
                return nodeset
        raise KeyError(name)


_TOP = {f.name: f for f in dataclasses.fields(Config) if not f.name.startswith("_")}
_NODESET_KEYS = ("name", "nodes", "provider", "options")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_PATH_KEYS = ("queue_dir", "state_file", "lock_file", "log_file", "scontrol", "munge_key_file")


def _unknown(keys, known, where: str) -> None:
    unknown = sorted(set(keys) - set(known))
    if unknown:
        raise ConfigError("unknown key%s %s in %s; known keys: %s (check the spelling)" % (
            "s" if len(unknown) > 1 else "", ", ".join(repr(k) for k in unknown), where, ", ".join(sorted(known))))


def _string(path: str, value, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError("%s must be a non-empty string, got %r" % (path, value))
    return value


def _seconds(path: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ConfigError("%s must be a number of seconds (0 or more), got %r" % (path, value))
    return float(value)


def _nodeset(index: int, data, seen: dict[str, str]) -> NodeSet:
    where = "nodesets[%d]" % index
    if not isinstance(data, dict):
        raise ConfigError("%s must be an object like {\"name\": \"dy\", \"nodes\": \"cloud-dy-[1-4]\", \"provider\": \"docker\", "
                          "\"options\": {...}}, got %r" % (where, data))
    _unknown(data, _NODESET_KEYS, where)
    for key in ("name", "nodes", "provider"):
        if key not in data:
            raise ConfigError("%s.%s is required" % (where, key))
    name = _string(where + ".name", data["name"])
    if not _NAME.match(name):
        raise ConfigError("%s.name must be letters, digits, '_', '.' or '-' (it names the node set in logs), got %r" % (where, name))
    where = "nodesets[%d] (%s)" % (index, name)
    expression = _string(where + ".nodes", data["nodes"])
    try:
        members = tuple(hostlists.expand(expression))
    except hostlists.HostlistError as err:
        raise ConfigError("%s.nodes: %s" % (where, err)) from None
    if not members:
        raise ConfigError("%s.nodes names no node; write a Slurm hostlist such as cloud-dy-[1-4]" % where)
    for node in members:
        other = seen.get(node)
        if other is not None:
            raise ConfigError("node %s is in node sets %r and %r; a node belongs to one node set (one provider): "
                              "remove it from one of them" % (node, other, name))
        seen[node] = name
    provider = _string(where + ".provider", data["provider"])
    if provider not in providers.NAMES:
        raise ConfigError("%s.provider must be one of %s, got %r" % (where, ", ".join(providers.NAMES), provider))
    options = data.get("options", {})
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise ConfigError("%s.options must be an object (the %s provider's settings), got %r" % (where, provider, options))
    return NodeSet(name, expression, provider, dict(options), members)


def from_dict(data) -> Config:
    if not isinstance(data, dict):
        raise ConfigError("the configuration must be a JSON object, got %s" % type(data).__name__)
    _unknown(data, _TOP, "the configuration")
    if "cluster" not in data:
        raise ConfigError("cluster is required: the Slurm ClusterName; machines are labelled with it")
    cluster = _string("cluster", data["cluster"])
    if not _NAME.match(cluster):
        raise ConfigError("cluster must be letters, digits, '_', '.' or '-' (it becomes a label value), got %r" % cluster)
    raw_sets = data.get("nodesets")
    if not isinstance(raw_sets, list) or not raw_sets:
        raise ConfigError("nodesets must be a non-empty list of {name, nodes, provider, options}: the State=CLOUD nodes this tool powers")
    seen: dict[str, str] = {}
    nodesets = tuple(_nodeset(i, entry, seen) for i, entry in enumerate(raw_sets))
    set_names = [s.name for s in nodesets]
    duplicates = sorted({n for n in set_names if set_names.count(n) > 1})
    if duplicates:
        raise ConfigError("node set names must be unique; %s appears more than once" % ", ".join(duplicates))
    values = {}
    for key in _TOP:
        if key in ("cluster", "nodesets") or key not in data:
            continue
        value = data[key]
        if key in _PATH_KEYS:
            value = _string(key, value, optional=key == "log_file")
            if value is not None and not value.startswith("/"):
                raise ConfigError("%s must be an absolute path, got %r" % (key, value))
        else:
            value = _seconds(key, value)
        values[key] = value
    return Config(cluster=cluster, nodesets=nodesets, _node_map=seen, **values)


def load(path: str) -> Config:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as err:
        raise ConfigError("cannot read the configuration %s: %s (give another file with --config)" % (path, err.strerror)) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError("%s is not valid JSON: %s at line %d column %d" % (path, err.msg, err.lineno, err.colno)) from None
    try:
        return from_dict(data)
    except ConfigError as err:
        raise ConfigError("%s: %s" % (path, err)) from None
