"""The copilot's configuration: a YAML (or JSON) file, then command-line flags over it.

Every key is checked once, at start: an unknown key, a wrong type or a
missing required value stops the daemon with a message that names the key
and says what to put there. See README.md for the file format.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from . import names
from .model import Capacity, Settings

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_Section = TypeVar("_Section", bound="DataclassInstance")  # Config and its nested sections

DEFAULT_CONFIG = "/etc/hybridhpc-copilot/config.yaml"


class ConfigError(ValueError):
    """The configuration breaks a rule; the message names the key and the fix."""


@dataclass
class SlurmrestdConfig:
    url: str = "http://localhost:6820"
    unix_socket: str | None = None
    user: str = "slurm"  # X-SLURM-USER-NAME; the token's user
    timeout: float = 10.0


@dataclass
class TokenConfig:
    source: str = "key"  # key: sign from jwt_key_file | secret: ACK's Secret | file: a token file
    jwt_key_file: str = "/etc/slurm/jwt_hs256.key"
    lifespan: int = 300
    file: str | None = None
    secret_namespace: str = names.JWT_SECRET_NAMESPACE
    secret_name: str = names.JWT_SECRET_NAME
    secret_key: str | None = None  # default: the cluster name


@dataclass(slots=True)  # one per shared node: ten thousand of them
class NodeConfig:
    k8scpu: int | None = None
    k8smemory: int | None = None
    strategy: str | None = None  # over the top-level strategy for this node


@dataclass
class PlaceholderConfig:
    """Extra fields of the placeholder jobs (strategy: placeholder); empty ones are left to Slurm."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time_limit: int | None = None  # minutes; empty: the partition's limit (a job that ends is started again)


@dataclass
class MetricsConfig:
    address: str = "127.0.0.1"
    port: int = 9466  # 0: no metrics endpoint


@dataclass
class Config:
    cluster_name: str = ""
    cluster_namespace: str | None = None
    kubeconfig: str | None = None
    kube_context: str | None = None
    slurmrestd: SlurmrestdConfig = field(default_factory=SlurmrestdConfig)
    token: TokenConfig = field(default_factory=TokenConfig)
    nodes: dict[str, NodeConfig] = field(default_factory=dict)  # by Slurm node (slurm.conf's k8scpu/k8smemory)
    strategy: str = "gres"  # gres: lower k8scpu/k8smemory | placeholder: hold resources with Slurm jobs
    placeholder: PlaceholderConfig = field(default_factory=PlaceholderConfig)
    usage_source: str = "max"
    reservation_timeout: float = 60.0
    drain_sync: bool = True
    manage_finalizer: bool = True
    resync_interval: float = 60.0
    slurm_poll_interval: float = 5.0
    watch_timeout: int = 300
    # Seconds from the end of one pass to the start of the next, at the least. 0: events that come while a pass
    # runs share the next pass anyway; a wait after every pass (0.02 before) cost each admission in a row about
    # 25 ms (admission p50 38 -> 10 ms at 1,000 GenericNodes, bench_copilot) and a burst nothing measurable.
    debounce: float = 0.0
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    log_level: str = "info"
    once: bool = False
    dry_run: bool = False

    def settings(self) -> Settings:
        return Settings(
            configured={n: Capacity(c.k8scpu, c.k8smemory) for n, c in self.nodes.items()
                        if c.k8scpu is not None and c.k8smemory is not None},
            strategy=self.strategy,
            node_strategy={n: c.strategy for n, c in self.nodes.items() if c.strategy},
            usage_source=self.usage_source,
            reservation_timeout=self.reservation_timeout,
            drain_sync=self.drain_sync,
            manage_finalizer=self.manage_finalizer,
        )


_NESTED: dict[str, type] = {"slurmrestd": SlurmrestdConfig, "token": TokenConfig, "metrics": MetricsConfig,
           "placeholder": PlaceholderConfig}
STRATEGIES = ("gres", "placeholder")
_CHOICES = {
    "strategy": STRATEGIES,
    "usage_source": ("max", "gres"),
    "token.source": ("key", "secret", "file"),
    "log_level": ("debug", "info", "warning", "error"),
}


def _type_name(annotation: str) -> str:
    return annotation.replace(" | None", "").strip()


def _coerce(path: str, value: object, annotation: str) -> Any:
    optional = "None" in annotation
    kind = _type_name(annotation)
    if value is None:
        if optional:
            return None
        raise ConfigError("%s must not be empty" % path)
    if kind == "bool":
        if isinstance(value, bool):
            return value
        raise ConfigError("%s must be true or false, got %r" % (path, value))
    if kind in ("int", "float"):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind == "int" and not float(value).is_integer()):
            raise ConfigError("%s must be a%s number, got %r" % (path, "n integer" if kind == "int" else "", value))
        if value < 0:
            raise ConfigError("%s must not be negative, got %r" % (path, value))
        return int(value) if kind == "int" else float(value)
    if kind == "str":
        if not isinstance(value, str):
            raise ConfigError("%s must be a string, got %r" % (path, value))
        return value
    return value


def _build(cls: type[_Section], data: object, prefix: str) -> _Section:
    if not isinstance(data, dict):
        raise ConfigError("%s must be a mapping, got %r" % (prefix.rstrip(".") or "the config file", data))
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields) - {"once", "dry_run"})
    if unknown:
        raise ConfigError("unknown key%s %s in %s; known keys: %s" % (
            "s" if len(unknown) > 1 else "", ", ".join(prefix + k for k in unknown),
            prefix.rstrip(".") or "the config file", ", ".join(sorted(k for k in fields if k not in ("once", "dry_run")))))
    values: dict[str, Any] = {}
    for key, value in data.items():
        path = prefix + key
        if key in _NESTED and cls is Config:
            values[key] = _build(_NESTED[key], value if value is not None else {}, path + ".")
        elif key == "nodes" and cls is Config:
            values[key] = _nodes(value)
        else:
            values[key] = _coerce(path, value, str(fields[key].type))
            if path in _CHOICES and values[key] not in _CHOICES[path]:
                raise ConfigError("%s must be one of %s, got %r" % (path, ", ".join(_CHOICES[path]), values[key]))
    return cls(**values)


def _nodes(value: object) -> dict[str, NodeConfig]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError("nodes must map Slurm node names to {k8scpu: N, k8smemory: MB} or {strategy: placeholder}, "
                          "got %r" % (value,))
    out: dict[str, NodeConfig] = {}
    for node, entry in value.items():
        keys = set(entry) if isinstance(entry, dict) else None
        counts = keys is not None and keys - {"strategy"} == {"k8scpu", "k8smemory"}
        if keys is None or not (counts or keys == {"strategy"}):
            raise ConfigError("nodes.%s must be {k8scpu: N, k8smemory: MB} (the node's Gres counts in slurm.conf) "
                              "or {strategy: placeholder}, got %r" % (node, entry))
        strategy = _coerce("nodes.%s.strategy" % node, entry["strategy"], "str") if "strategy" in entry else None
        if strategy is not None and strategy not in STRATEGIES:
            raise ConfigError("nodes.%s.strategy must be one of %s, got %r" % (node, ", ".join(STRATEGIES), strategy))
        out[str(node)] = NodeConfig(
            _coerce("nodes.%s.k8scpu" % node, entry["k8scpu"], "int") if counts else None,
            _coerce("nodes.%s.k8smemory" % node, entry["k8smemory"], "int") if counts else None,
            strategy)
    return out


def from_dict(data: Mapping[str, Any] | None) -> Config:
    return validate(_build(Config, data or {}, ""))


def validate(config: Config) -> Config:
    if not config.cluster_name:
        raise ConfigError("cluster_name is required: the Slurm cluster's name, as in the GenericNodes' label "
                          "%s (set it in the config file or with --cluster-name)" % names.LABEL_CLUSTER_NAME)
    if config.token.source == "key" and not config.token.jwt_key_file:
        raise ConfigError("token.jwt_key_file is required with token.source: key (Slurm's jwt_hs256.key)")
    if config.token.source == "file" and not config.token.file:
        raise ConfigError("token.file is required with token.source: file")
    if config.token.lifespan < 30:
        raise ConfigError("token.lifespan must be at least 30 seconds, got %d" % config.token.lifespan)
    if config.resync_interval < 1 or config.slurm_poll_interval < 0.1:
        raise ConfigError("resync_interval must be >= 1 and slurm_poll_interval >= 0.1 seconds")
    if config.debounce > 5:
        raise ConfigError("debounce must be at most 5 seconds (every admission waits up to that long), got %g" % config.debounce)
    if config.metrics.port > 65535:
        raise ConfigError("metrics.port must be 0 (off) or a TCP port, got %d" % config.metrics.port)
    return config


def read_file(path: str) -> object:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as err:
        raise ConfigError("cannot read the config file %s: %s" % (path, err)) from err
    if path.endswith(".json"):
        try:
            return json.loads(text) or {}
        except ValueError as err:
            raise ConfigError("%s is not valid JSON: %s" % (path, err)) from err
    try:
        import yaml
    except ImportError:
        try:
            return json.loads(text) or {}
        except ValueError as err:
            raise ConfigError("%s: YAML needs PyYAML (install python3-yaml), or write the file as JSON" % path) from err
    try:
        # libyaml's loader when PyYAML was built with it: the config lists every shared node,
        # and the pure-Python loader takes seconds over ten thousand of them.
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
    except yaml.YAMLError as err:
        raise ConfigError("%s is not valid YAML: %s" % (path, err)) from err


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="hybridhpc-copilot",
        description="Share nodes between Kubernetes pods and Slurm jobs without double allocation: grant the "
                    "admissions on GenericNode objects by lowering the nodes' k8scpu/k8smemory GRES in Slurm.")
    p.add_argument("--config", default=None, help="YAML or JSON config file (default %s, if it exists)" % DEFAULT_CONFIG)
    p.add_argument("--once", action="store_true", help="one full sync, then exit (0: no error)")
    p.add_argument("--dry-run", action="store_true", help="decide and log, change nothing in Kubernetes or Slurm")
    p.add_argument("--cluster-name", help="the Slurm cluster (GenericNode label %s)" % names.LABEL_CLUSTER_NAME)
    p.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster account, else ~/.kube/config)")
    p.add_argument("--slurmrestd-url", help="slurmrestd base URL (default http://localhost:6820)")
    p.add_argument("--metrics-port", type=int, help="Prometheus metrics port (0: off; default 9466)")
    p.add_argument("--log-level", choices=_CHOICES["log_level"], help="default info")
    p.add_argument("--version", action="store_true", help="print the version and exit")
    return p


def load(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """The config file (``--config``, else the default path if present) with the flags over it."""
    environ = os.environ if environ is None else environ
    args = parser().parse_args(argv)
    path = args.config or environ.get("HYBRIDHPC_COPILOT_CONFIG")
    if path is None and os.path.exists(DEFAULT_CONFIG):
        path = DEFAULT_CONFIG
    data = read_file(path) if path else {}
    if not isinstance(data, dict):
        raise ConfigError("%s must hold a mapping of settings" % path)
    data = dict(data)
    for flag, key in (("cluster_name", "cluster_name"), ("kubeconfig", "kubeconfig"), ("log_level", "log_level")):
        if getattr(args, flag) is not None:
            data[key] = getattr(args, flag)
    if args.slurmrestd_url is not None:
        data["slurmrestd"] = dict(data.get("slurmrestd") or {}, url=args.slurmrestd_url)
    if args.metrics_port is not None:
        data["metrics"] = dict(data.get("metrics") or {}, port=args.metrics_port)
    config = from_dict(data)
    config.once, config.dry_run = args.once, args.dry_run
    return config
