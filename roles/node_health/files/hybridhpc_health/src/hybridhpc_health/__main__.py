# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Entry point: load the config, run the checks, drain or resume the node. Nothing else.

    hybridhpc-health --config /etc/slurm/healthcheck.json [--dry-run]

Prints one line per check and one action line; logs the action to syslog
(/dev/log) or stderr. Exit 0 whenever it ran (slurmd ignores the status),
2 on a bad configuration.
"""

from __future__ import annotations

import argparse
import logging
import logging.handlers
import os
import sys

from . import config as config_module
from . import runner
from .slurm import Scontrol, SlurmError

LOG = logging.getLogger("hybridhpc_health")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hybridhpc-health", description="Slurm HealthCheckProgram: run the node's checks, drain or resume it.")
    p.add_argument("--config", required=True, help="the JSON configuration (e.g. /etc/slurm/healthcheck.json)")
    p.add_argument("--dry-run", action="store_true", help="print the scontrol update instead of running it")
    return p


def setup_logging(syslog: str) -> None:
    for handler in list(LOG.handlers):
        LOG.removeHandler(handler)
        handler.close()
    handler = None
    if syslog and os.path.exists(syslog):
        try:
            handler = logging.handlers.SysLogHandler(address=syslog)
            handler.setFormatter(logging.Formatter("hybridhpc-health[%d]: %%(message)s" % os.getpid()))
        except OSError:
            handler = None
    if handler is None:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("hybridhpc-health: %(message)s"))
    LOG.addHandler(handler)
    LOG.setLevel(logging.INFO)
    LOG.propagate = False


def main(argv=None, syslog: str = "/dev/log") -> int:
    args = parser().parse_args(argv)
    try:
        cfg = config_module.load(args.config)
    except config_module.ConfigError as exc:
        print("hybridhpc-health: bad configuration %s: %s" % (args.config, exc), file=sys.stderr)
        return 2
    setup_logging(syslog)
    os.environ.setdefault("PATH", DEFAULT_PATH)  # slurmd may run us with an empty environment

    results = runner.run_checks(cfg.checks)
    for r in results:
        print("%s %s %.2fs %s" % (r.name, "pass" if r.ok else "FAIL", r.seconds, runner.clean(r.detail)))
        if not r.ok:
            LOG.warning("%s: check %s failed: %s", cfg.node, r.name, runner.clean(r.detail))

    scontrol = Scontrol(cfg.scontrol, timeout=cfg.scontrol_timeout, dry_run=args.dry_run)
    try:
        states, reason = scontrol.node_state(cfg.node)
    except SlurmError as exc:
        LOG.error("%s: cannot read the node state: %s", cfg.node, exc)
        states, reason = None, ""
    action = runner.decide(results, states, reason, cfg.reason_prefix)
    try:
        if action.kind == "drain":
            scontrol.drain(cfg.node, action.reason)
            message = "drain %s: %s" % (cfg.node, action.reason)
        elif action.kind == "resume":
            scontrol.resume(cfg.node)
            message = "resume %s (was: %s)" % (cfg.node, reason)
        else:
            message = "none %s: %s" % (cfg.node, action.reason)
    except SlurmError as exc:
        message = "%s %s failed: %s" % (action.kind, cfg.node, exc)
        LOG.error("%s", message)
    else:
        if action.kind != "none" or any(not r.ok for r in results):
            LOG.warning("%s%s", "dry-run: " if args.dry_run else "", message)
    print("action: %s%s" % ("dry-run: " if args.dry_run else "", message))
    return 0


if __name__ == "__main__":
    sys.exit(main())
