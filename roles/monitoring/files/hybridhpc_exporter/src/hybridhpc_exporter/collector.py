# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One scrape: ask slurmrestd, turn the answers into metric families (prometheus_client's Collector).

Each scrape asks slurmrestd anew (``/ping``, ``/nodes``, ``/jobs``): no
cache to go stale, nothing held between scrapes. Node entries are reduced
while they are decoded (the client's ``each`` hook). When slurmrestd or
slurmctld does not answer, the scrape still succeeds with
``hybridhpc_slurm_up 0`` and the controllers' answers, so an alert can tell
"Slurm is down" from "the exporter is down" (``up == 0``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from . import model

log = logging.getLogger("hybridhpc_exporter")


class SlurmCollector(Collector):
    """``client``: a SlurmrestdClient; ``token_expiry``: the token's exp claim; ``federation``: ``scontrol show federation``'s text.

    slurmrestd has no federation view, so the federation's members come from
    scontrol on the controller the exporter runs on (MUNGE authenticates it).
    """

    def __init__(self, client: Any, slurm_names: bool, token_expiry: Callable[[], float | None] = lambda: None,
                 clock: Callable[[], float] = time.time, federation: Callable[[], str | None] | None = None):
        self.client = client
        self.federation = federation
        self.slurm_names = slurm_names
        self.token_expiry = token_expiry
        self.clock = clock

    def describe(self) -> list[Metric]:
        return []  # families vary with what Slurm answers: no fixed description

    def collect(self) -> Iterator[Metric]:
        started = time.monotonic()
        families: list[model.Family] = []
        up = 0.0
        try:
            pings = self.client.ping()
            families += model.controller_families(pings)
            if any(model.pinged_up(p) for p in pings):
                nodes = self.client.nodes(each=model.node_of)
                jobs = [model.job_of(j) for j in self.client.jobs()]
                families += model.node_families(nodes, self.slurm_names)
                families += model.job_families(jobs, self.clock(), self.slurm_names)
                up = 1.0
        except Exception as err:  # any failure of Slurm or the network is a sample, not a failed scrape
            log.warning("scrape failed: %s", err)
        if self.federation is not None:
            try:
                text = self.federation()
                if text is not None:
                    families += model.federation_families(text)
            except Exception as err:
                log.warning("scontrol show federation failed: %s", err)
        families.append(("hybridhpc_slurm_up", "1 when slurmrestd and a slurmctld answered this scrape.", (), [((), up)]))
        expiry = self.token_expiry()
        if expiry is not None:
            families.append(("hybridhpc_slurm_exporter_token_expiry_timestamp_seconds",
                             "When the exporter's slurmrestd token expires (Unix time).", (), [((), float(expiry))]))
        families.append(("hybridhpc_slurm_scrape_duration_seconds", "How long this scrape of slurmrestd took.", (),
                         [((), round(time.monotonic() - started, 6))]))
        for name, documentation, labels, samples in families:
            family = GaugeMetricFamily(name, documentation, labels=list(labels))
            for values, value in samples:
                family.add_metric(list(values), value)
            yield family
