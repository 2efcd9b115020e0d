"""What ResumeProgram, SuspendProgram and ResumeFailProgram do: queue one request and return.

slurmctld runs them as SlurmUser with one argument, a hostlist. They must
never wait on a provider (a slow ResumeProgram holds slurmctld's script
daemon and makes other Slurm commands time out): they expand the hostlist,
write one request file (see queue.py), log one line per node and exit, in
milliseconds. The root worker does the rest.
"""

from __future__ import annotations

import time

from . import hostlists, queue
from .config import Config
from .logs import TransitionLog


def request(config: Config, action: str, hostlist: str, log: TransitionLog, now: float | None = None) -> int:
    """Queue ``action`` for the nodes of ``hostlist``; 0 when all were queued.

    Nodes in no node set are logged and left out (exit 1): queueing them
    would only make the worker fail later, and the log line tells the admin
    that slurm.conf and the configuration disagree.
    """
    now = time.time() if now is None else now
    try:
        nodes = hostlists.expand(hostlist)
    except hostlists.HostlistError as err:
        log.event(action=action, result="rejected", hostlist=hostlist, reason=str(err))
        log.flush()
        return 2
    node_map = config.node_map()
    known = [n for n in nodes if n in node_map]
    unknown = [n for n in nodes if n not in node_map]
    status = 0
    if known:
        try:
            sent = queue.write(config.queue_dir, action, known, now)
        except OSError as err:
            # The reconciler queues a lost resume again (resume_grace); Slurm's
            # ResumeTimeout and the leaked-machine rule cover the rest.
            for node in known:
                log.node(node, action, "failed", reason="cannot queue in %s: %s" % (config.queue_dir, err.strerror))
            status = 1
        else:
            for node in known:
                log.node(node, action, "requested", request=sent.id)
    for node in unknown:
        log.node(node, action, "rejected", reason="not in any node set of the configuration")
        status = 1
    log.flush()
    return status
