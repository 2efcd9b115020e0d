"""Prometheus metrics with prometheus_client (python3-prometheus-client), served over HTTP at ``/metrics``.

The copilot's counters, gauges and histogram are prometheus_client's own.
The per-GenericNode gauges (``ledger_allocated``, ``admissions``,
``overcommitted``) are not one labelled child per node: :class:`LedgerCollector`,
a custom collector, yields their families at each scrape from a source the
copilot sets (its GenericNode cache). Ten thousand nodes then cost no memory
between scrapes, and a node that went away is gone from the next scrape
(children would stay until someone removed them).

A scrape is written in pieces, each in prometheus_client's text format (one
per family, the per-node families in pieces of 2,000 samples): at ten
thousand nodes (about 100,000 samples, 6.7 MB of text) neither the
exposition nor a family's samples sit in memory whole.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from . import names

P = names.METRICS_PREFIX
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

# One row per GenericNode: (name, {(type, resource): value}, {state: count}, overcommitted).
LedgerRow = tuple[str, dict[tuple[str, str], float], dict[str, int], bool]
Samples = Iterator[tuple[tuple[str, ...], float]]


def _allocated(rows: Iterable[LedgerRow]) -> Samples:
    for node, allocations, _admissions, _over in rows:
        for (kind, resource), value in allocations.items():
            yield (node, kind, resource), float(value)


def _admissions(rows: Iterable[LedgerRow]) -> Samples:
    for node, _allocations, admissions, _over in rows:
        for state in names.ADMISSION_STATES:
            yield (node, state), float(admissions.get(state, 0))


def _overcommitted(rows: Iterable[LedgerRow]) -> Samples:
    for node, _allocations, _admissions, over in rows:
        yield (node,), 1.0 if over else 0.0


# name, help, labels, the (label values, value) pairs from the rows
LEDGER_FAMILIES = (
    (P + "ledger_allocated", "Allocations recorded in the GenericNode ledger (cpu in cores, memory in bytes).", ("node", "type", "resource"), _allocated),
    (P + "admissions", "Admissions in the ledger, by state.", ("node", "state"), _admissions),
    (P + "overcommitted", "1 when Slurm and Kubernetes together hold more than the node shares.", ("node",), _overcommitted),
)


class LedgerCollector(Collector):
    """The per-GenericNode gauges, read from ``source()`` (an iterable of :data:`LedgerRow`) at each scrape.

    Nothing is kept between scrapes: the rows come from the copilot's cache,
    which holds the GenericNodes anyway. Without a source there are no rows.
    Each family reads the source again, row by row as it is written: the
    rows are never all in memory (held for the three families, they were the
    largest part of a scrape at 10,000 GenericNodes, 6.6 MB), for three reads
    of the cache. A source that fails when called fails the scrape before
    anything of it is written.
    """

    def __init__(self, source: Callable[[], Iterable[LedgerRow]] | None = None):
        self.source = source

    def describe(self) -> list[Metric]:
        # Registering asks what the collector yields: the families, without reading the cache.
        return [GaugeMetricFamily(name, documentation, labels=labelnames) for name, documentation, labelnames, _samples in LEDGER_FAMILIES]

    def collect(self) -> Iterator[Metric]:
        for name, documentation, labelnames, samples in LEDGER_FAMILIES:
            rows = self.source() if self.source is not None else ()
            yield _GaugeFamilyOnce(name, documentation, (Sample(name, dict(zip(labelnames, values, strict=True)), value)
                                                         for values, value in samples(rows)))


class _GaugeFamilyOnce(Metric):
    """A gauge family whose samples are made as the exposition reads them, once.

    ``generate_latest`` reads a family's samples once, in order. Made as it
    reads, the 40,000 samples of ``admissions`` at 10,000 GenericNodes (a
    tuple and a label dict each, about 14 MB) never exist at once; a
    GaugeMetricFamily would hold them all. Only :func:`exposition_chunks`
    reads these families (no registry filter reading samples twice), in
    pieces.
    """

    def __init__(self, name: str, documentation: str, samples: Iterator[Sample]):
        super().__init__(name, documentation, "gauge")
        self.samples = samples  # type: ignore[assignment]  # read once, as the comment above says


class _OneFamily(Collector):
    """One family as a collector: prometheus_client's text format for it alone."""

    def __init__(self, family: Metric):
        self.family = family

    def collect(self) -> Iterable[Metric]:
        return (self.family,)


def exposition_chunks(registry: CollectorRegistry, batch: int = 2000) -> Iterator[bytes]:
    """The registry's text exposition (format 0.0.4) in pieces, each written by ``generate_latest``.

    One piece per family, and the ledger's families in pieces of ``batch``
    samples (their HELP and TYPE lines only in the first): at 10,000
    GenericNodes the 40,000 lines of ``admissions`` are never all in memory,
    neither as samples nor as text.
    """
    for family in registry.collect():
        if not isinstance(family, _GaugeFamilyOnce):
            yield generate_latest(_OneFamily(family))
            continue
        first = True
        while True:
            part = Metric(family.name, family.documentation, family.type)
            part.samples = list(itertools.islice(family.samples, batch))
            text = generate_latest(_OneFamily(part))
            yield text if first else text.split(b"\n", 2)[2]
            if len(part.samples) < batch:
                break
            first = False


# -- the copilot's metrics ---------------------------------------------------------


class Metrics:
    """The copilot's metrics on one prometheus_client registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        # Registered first, so a scrape reads the cache before it writes anything (a failure answers 500).
        self.ledger = LedgerCollector()  # the copilot sets ledger.source
        self.registry.register(self.ledger)
        reg = self.registry
        self.reconciles = Counter(P + "reconciles", "Reconcile passes run.", ["mode"], registry=reg)
        self.errors = Counter(P + "errors", "Errors met while reconciling, by kind.", ["kind"], registry=reg)
        self.actions = Counter(P + "actions", "Actions carried out (or, in dry-run, planned), by kind.", ["action"], registry=reg)
        self.conflicts = Counter(P + "conflicts", "Ledger writes refused with 409 Conflict and retried.", registry=reg)
        self.latency = Histogram(P + "reconcile_duration_seconds", "Time one reconcile pass took.", buckets=BUCKETS, registry=reg)
        self.ready = Gauge(P + "ready", "1 once the first full sync succeeded.", registry=reg)
        self.last_success = Gauge(P + "last_success_timestamp_seconds", "When a pass last ended without error.", registry=reg)
        self._server: ThreadingHTTPServer | None = None

    def exposition(self) -> bytes:
        return b"".join(exposition_chunks(self.registry))

    def serve(self, address: str, port: int) -> ThreadingHTTPServer:
        """Serve ``/metrics`` in a thread; returns the server (``server_address`` has the port)."""
        registry = self.registry

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                if self.path.split("?")[0] not in ("/metrics", "/"):
                    self.send_error(404)
                    return
                chunks = exposition_chunks(registry)
                try:
                    first = next(chunks, b"")
                except Exception as err:  # noqa: BLE001 - a scrape must answer, not kill the thread
                    self.send_error(500, explain=repr(err))
                    return
                # HTTP/1.0 without a length: the body ends when the connection closes, so it
                # goes out one family at a time instead of being built whole first.
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.end_headers()
                self.wfile.write(first)
                for chunk in chunks:
                    self.wfile.write(chunk)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
                pass

        server = ThreadingHTTPServer((address, port), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
        self._server = server
        return server

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
