"""Entry point: parse flags, load the config, build Slurm and the providers, run one command. Nothing else.

    hybridhpc-power [--config FILE] resume|suspend|resume-fail HOSTLIST   # slurmctld's programs (SlurmUser)
    hybridhpc-power [--config FILE] work                                  # the worker (root, systemd path unit)
    hybridhpc-power [--config FILE] reconcile [--dry-run]                 # the reconciler (root, systemd timer)
    hybridhpc-power [--config FILE] status [--json]
    hybridhpc-power [--config FILE] check                                 # validate the config and every provider's options

The program commands import only what queueing needs (no provider, no
subprocess): they run on slurmctld's critical path.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from . import __version__, names
from .config import Config, ConfigError, load

PROG = "hybridhpc-power"


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", default=argparse.SUPPRESS,
                        help="configuration file (default: $HYBRIDHPC_POWER_CONFIG or %s)" % names.DEFAULT_CONFIG)
    top = argparse.ArgumentParser(prog=PROG, parents=[common], description="Slurm power saving for State=CLOUD nodes.")
    top.add_argument("--version", action="version", version="%s %s" % (PROG, __version__))
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for action, what in ((names.RESUME, "ResumeProgram"), (names.SUSPEND, "SuspendProgram"), (names.RESUME_FAIL, "ResumeFailProgram")):
        command = sub.add_parser(action, parents=[common], help="%s: queue a %s request and return" % (what, action))
        command.add_argument("hostlist", help="Slurm hostlist, e.g. cloud-dy-[1-3,5]")
    sub.add_parser("work", parents=[common], help="handle every queued request (root)")
    command = sub.add_parser("reconcile", parents=[common], help="repair nodes stuck between states (root)")
    command.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    command = sub.add_parser("status", parents=[common], help="per node: Slurm state, machine, last transition")
    command.add_argument("--json", action="store_true", help="print JSON")
    sub.add_parser("check", parents=[common], help="validate the configuration and every provider's options")
    return top


def build_providers(config: Config):
    """A function node set name -> Provider, building each provider on first use."""
    from . import providers

    secrets = providers.Secrets(config.munge_key_file)
    built = {}

    def provider_for(name: str):
        if name not in built:
            nodeset = config.nodeset(name)
            try:
                built[name] = providers.build(nodeset.provider, config.cluster, nodeset.options, secrets)
            except ValueError as err:
                raise ConfigError("nodesets %r (provider %s) options: %s" % (name, nodeset.provider, err)) from None
        return built[name]

    return provider_for


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    path = getattr(args, "config", None) or os.environ.get("HYBRIDHPC_POWER_CONFIG") or names.DEFAULT_CONFIG
    try:
        config = load(path)
    except ConfigError as err:
        print("%s: %s" % (PROG, err), file=sys.stderr)
        return 2
    from .logs import TransitionLog

    if args.command in names.ACTIONS:
        from .programs import request

        return request(config, args.command, args.hostlist, TransitionLog(config.log_file))

    from .service import Power, format_status
    from .slurm import Scontrol

    provider_for = build_providers(config)
    if args.command == "check":
        try:
            for nodeset in config.nodesets:
                provider_for(nodeset.name)
        except ConfigError as err:
            print("%s: %s: %s" % (PROG, path, err), file=sys.stderr)
            return 2
        except Exception as err:  # noqa: BLE001 - e.g. the aws provider without boto3
            print("%s: %s" % (PROG, err), file=sys.stderr)
            return 2
        print("%s: %s is valid (%d node sets, %d nodes)" % (PROG, path, len(config.nodesets), len(config.node_map())))
        return 0
    # status is read-only and may run as any user: it logs nowhere.
    log = TransitionLog(None if args.command == "status" else config.log_file, stream=sys.stderr if args.command == "status" else None)
    power = Power(config, Scontrol(config.scontrol, config.scontrol_timeout), provider_for, log)
    try:
        if args.command == "work":
            return power.work()
        if args.command == "reconcile":
            return power.reconcile(dry_run=args.dry_run)
        rows = power.status()
        print(json.dumps(rows, indent=2) if args.json else format_status(rows))
        return 0
    except ConfigError as err:
        print("%s: %s: %s" % (PROG, path, err), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
