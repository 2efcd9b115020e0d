"""Entry point: parse flags, load the config, build the clients, start the loop. Nothing else."""

from __future__ import annotations

import dataclasses
import json
import signal
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from . import __version__, config, logs
from .metrics import Metrics
from .passes import Copilot
from .runner import Runner
from .systemd import Notifier

if TYPE_CHECKING:
    from .kube import Kube
    from .tokens import Tokens


def build_tokens(cfg: config.Config, kube: Kube) -> Tokens:
    from . import tokens

    if cfg.token.source == "key":
        return tokens.KeyFileTokens(cfg.token.jwt_key_file, cfg.slurmrestd.user, cfg.token.lifespan)
    if cfg.token.source == "file":
        assert cfg.token.file is not None  # config.validate() requires it with this source
        return tokens.FileTokens(cfg.token.file)
    return tokens.SecretTokens(kube.read_secret, cfg.token.secret_key or cfg.cluster_name,
                               cfg.token.secret_namespace, cfg.token.secret_name)


def main(argv: Sequence[str] | None = None) -> int:
    args = config.parser().parse_args(argv)
    if args.version:
        print("hybridhpc-copilot %s" % __version__)
        return 0
    try:
        cfg = config.load(argv)
    except config.ConfigError as err:
        print("hybridhpc-copilot: %s" % err, file=sys.stderr)
        return 2
    log = logs.setup(cfg.log_level)

    from .kube import KubeClient, PermanentError
    from .slurm import RestSlurm

    try:
        kube = KubeClient(cfg.kubeconfig, cfg.kube_context)
    except Exception as err:  # noqa: BLE001 - kubernetes.config raises several kinds
        log.error("cannot load the Kubernetes configuration", extra={"fields": {"error": str(err)}})
        return 2
    slurm = RestSlurm(cfg.slurmrestd.url, build_tokens(cfg, kube), cfg.slurmrestd.user,
                      cfg.slurmrestd.unix_socket, cfg.slurmrestd.timeout,
                      placeholder_job={k: v for k, v in dataclasses.asdict(cfg.placeholder).items() if v is not None})
    metrics = Metrics()
    notifier = Notifier()
    runner = None
    copilot = Copilot(kube, slurm, cfg.settings(), cfg.cluster_name, cfg.cluster_namespace, metrics,
                      dry_run=cfg.dry_run, on_change=lambda what: runner.changed(what) if runner else None)
    try:
        if cfg.once:
            result = copilot.sync(full=True)
            summary = {"rounds": result.rounds, "dry_run": cfg.dry_run, "conflicts": result.conflicts,
                       "actions": [a.kind for a in result.actions], "errors": [e[1] for e in result.errors]}
            print(json.dumps(summary))
            return 0 if result.ok else 1
        if cfg.metrics.port:
            metrics.serve(cfg.metrics.address, cfg.metrics.port)
        runner = Runner(copilot, notifier, cfg.resync_interval, cfg.slurm_poll_interval, cfg.watch_timeout, cfg.debounce)
        signal.signal(signal.SIGTERM, runner.request_stop)
        signal.signal(signal.SIGINT, runner.request_stop)
        log.info("starting", extra={"fields": {"version": __version__, "cluster": cfg.cluster_name,
                                               "dry_run": cfg.dry_run, "slurmrestd": cfg.slurmrestd.url}})
        return runner.run()
    except PermanentError as err:
        log.error("cannot go on: %s" % err, extra={"fields": {"status": err.status}})
        notifier.status("error: %s" % err)
        return 1
    finally:
        metrics.close()
        slurm.close()


if __name__ == "__main__":
    sys.exit(main())
