"""Prometheus metrics, served over HTTP at ``/metrics``.

With ``prometheus_client`` installed (python3-prometheus-client) its types and
server are used; without it a small built-in registry writes the same text
exposition format (version 0.0.4), so the package has no hard dependency on it.

The per-GenericNode gauges (``ledger_allocated``, ``admissions``,
``overcommitted``) hold no state here: :class:`LedgerGauges` computes them at
each scrape from a source the copilot sets (its GenericNode cache), so ten
thousand nodes cost no memory between scrapes and a node that went away is
gone from the next scrape.
"""

from __future__ import annotations

import abc
import bisect
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import ModuleType
from typing import Any, Protocol

from . import names

P = names.METRICS_PREFIX
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


# -- what the copilot calls on its metrics (prometheus_client's and the built-in ones alike) --


class Increments(Protocol):
    def inc(self, amount: float = 1.0) -> None: ...


class Counts(Increments, Protocol):
    def labels(self, *values: str) -> Increments: ...


class Sets(Protocol):
    def set(self, value: float) -> None: ...


class Observes(Protocol):
    def observe(self, value: float) -> None: ...


# -- the built-in fallback ------------------------------------------------------------


def _escape(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(names_: Sequence[str], values: Sequence[object], extra: Iterable[tuple[str, str]] = ()) -> str:
    pairs = list(zip(names_, values, strict=True)) + list(extra)
    return "{%s}" % ",".join('%s="%s"' % (k, _escape(v)) for k, v in pairs) if pairs else ""


def _number(value: float) -> str:
    if value == float("inf"):
        return "+Inf"
    return repr(float(value))


class _Metric(abc.ABC):
    kind = "untyped"

    def __init__(self, name: str, documentation: str, labelnames: Iterable[str] = (), registry: list[_Metric] | None = None):
        self.name, self.documentation, self.labelnames = name, documentation, tuple(labelnames)
        self._children: dict[tuple[str, ...], Any] = {}  # label values -> what the kind of metric holds for them
        self._lock = threading.Lock()
        if registry is not None:
            registry.append(self)

    def labels(self, *values: object, **kwargs: object) -> Any:
        if kwargs:
            values = tuple(kwargs[n] for n in self.labelnames)
        key = tuple(str(v) for v in values)
        with self._lock:
            if key not in self._children:
                self._children[key] = self._child()
            return self._children[key]

    def remove(self, *values: object) -> None:
        with self._lock:
            self._children.pop(tuple(str(v) for v in values), None)

    @abc.abstractmethod
    def _child(self) -> _Value | _Buckets:
        """What one set of label values holds."""

    def _default(self) -> Any:
        return self.labels()

    def inc(self, amount: float = 1.0) -> None:
        self._default().inc(amount)

    def set(self, value: float) -> None:
        self._default().set(value)

    def observe(self, value: float) -> None:
        self._default().observe(value)

    def expose(self) -> list[str]:
        lines = ["# HELP %s %s" % (self.name, self.documentation), "# TYPE %s %s" % (self.name, self.kind)]
        with self._lock:
            children = sorted(self._children.items())
        for values, child in children:
            lines.extend(child.samples(self, values))
        return lines


class _Value:
    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount

    def set(self, value: float) -> None:
        self.value = float(value)

    def samples(self, metric: _Metric, values: Sequence[str]) -> list[str]:
        suffix = "_total" if metric.kind == "counter" else ""
        return ["%s%s%s %s" % (metric.name, suffix, _labels(metric.labelnames, values), _number(self.value))]


class _Buckets:
    def __init__(self, buckets: Sequence[float]) -> None:
        self.bounds, self.counts, self.sum = list(buckets), [0] * (len(buckets) + 1), 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value

    def samples(self, metric: _Metric, values: Sequence[str]) -> list[str]:
        out: list[str] = []
        running = 0
        for bound, count in zip(self.bounds + [float("inf")], self.counts, strict=True):
            running += count
            le = _labels(metric.labelnames, values, [("le", _number(bound))])
            out.append("%s_bucket%s %s" % (metric.name, le, _number(running)))
        base = _labels(metric.labelnames, values)
        out.append("%s_count%s %s" % (metric.name, base, _number(running)))
        out.append("%s_sum%s %s" % (metric.name, base, _number(self.sum)))
        return out


class TinyCounter(_Metric):
    kind = "counter"

    def _child(self) -> _Value:
        return _Value()


class TinyGauge(_Metric):
    kind = "gauge"

    def _child(self) -> _Value:
        return _Value()


class TinyHistogram(_Metric):
    kind = "histogram"

    def __init__(self, name: str, documentation: str, labelnames: Iterable[str] = (), registry: list[_Metric] | None = None,
                 buckets: Iterable[float] = BUCKETS):
        self.buckets = tuple(buckets)
        super().__init__(name, documentation, labelnames, registry)

    def _child(self) -> _Buckets:
        return _Buckets(self.buckets)


# -- the per-GenericNode gauges, computed at scrape time ----------------------------------

# One row per GenericNode: (name, {(type, resource): value}, {state: count}, overcommitted).
LedgerRow = tuple[str, dict[tuple[str, str], float], dict[str, int], bool]
# A row as written: (name, ((type, resource, value), ...), (count per state in names.ADMISSION_STATES), overcommitted).
WrittenRow = tuple[str, tuple[tuple[str, str, float], ...], tuple[float, ...], bool]
Samples = Iterator[tuple[tuple[str, ...], float]]


def _allocated(rows: list[WrittenRow]) -> Samples:
    for node, allocations, _admissions, _over in rows:
        for kind, resource, value in allocations:
            yield (node, kind, resource), value


def _admissions(rows: list[WrittenRow]) -> Samples:
    for node, _allocations, admissions, _over in rows:
        for state, count in zip(names.ADMISSION_STATES, admissions, strict=True):
            yield (node, state), count


def _overcommitted(rows: list[WrittenRow]) -> Samples:
    for node, _allocations, _admissions, over in rows:
        yield (node,), 1 if over else 0


# name, help, labels, the (label values, value) pairs from the rows
LEDGER_FAMILIES = (
    (P + "ledger_allocated", "Allocations recorded in the GenericNode ledger (cpu in cores, memory in bytes).", ("node", "type", "resource"), _allocated),
    (P + "admissions", "Admissions in the ledger, by state.", ("node", "state"), _admissions),
    (P + "overcommitted", "1 when Slurm and Kubernetes together hold more than the node shares.", ("node",), _overcommitted),
)


class LedgerGauges:
    """The per-GenericNode gauges, from ``source()`` (an iterable of :data:`LedgerRow`) at each scrape.

    Nothing is kept between scrapes: the rows come from the copilot's cache,
    which holds the GenericNodes anyway. Without a source there are no rows.
    They are written as text in batches (the same text with or without
    prometheus_client): a scrape of ten thousand nodes (90,000 lines) never
    holds all its lines, nor a sample object for each of them.
    """

    def __init__(self, source: Callable[[], Iterable[LedgerRow]] | None = None):
        self.source = source

    def rows(self) -> list[WrittenRow]:
        """The rows, in node order, as small tuples (the source's dicts go as each row is read)."""
        rows = [
            (
                str(node),
                tuple((str(k), str(r), float(v)) for (k, r), v in allocations.items()),
                tuple(float(admissions.get(state, 0)) for state in names.ADMISSION_STATES),
                bool(over),
            )
            for node, allocations, admissions, over in (self.source() if self.source is not None else ())
        ]
        rows.sort(key=lambda row: row[0])
        return rows

    @staticmethod
    def write(rows: list[WrittenRow], write: Callable[[bytes], object], batch: int = 2000) -> None:
        for name, documentation, labelnames, samples in LEDGER_FAMILIES:
            lines = ["# HELP %s %s" % (name, documentation), "# TYPE %s gauge" % name]
            for values, value in samples(rows):
                lines.append("%s%s %s" % (name, _labels(labelnames, values), _number(value)))
                if len(lines) >= batch:
                    write(("\n".join(lines) + "\n").encode("utf-8"))
                    lines = []
            write(("\n".join(lines) + "\n").encode("utf-8") if lines else b"")


def tiny_exposition(registry: list[_Metric]) -> bytes:
    lines: list[str] = []
    for metric in registry:
        lines.extend(metric.expose())
    return ("\n".join(lines) + "\n").encode("utf-8")


# -- the copilot's metrics ---------------------------------------------------------


class Metrics:
    """The copilot's metrics on one registry (prometheus_client's when ``use_prometheus_client``)."""

    def __init__(self, use_prometheus_client: bool | None = None):
        prometheus: ModuleType | None = None
        if use_prometheus_client is not False:
            try:
                import prometheus_client as prometheus
            except ImportError:
                if use_prometheus_client:
                    raise
        self.prometheus = prometheus
        counter: Callable[..., Counts]
        gauge: Callable[..., Sets]
        histogram: Callable[..., Observes]
        self.registry: Any  # prometheus_client's CollectorRegistry, or the built-in metrics' list
        if prometheus is not None:
            self.registry = prometheus.CollectorRegistry(auto_describe=True)
            counter, gauge, histogram = prometheus.Counter, prometheus.Gauge, prometheus.Histogram
        else:
            self.registry = []
            counter, gauge, histogram = TinyCounter, TinyGauge, TinyHistogram
        reg = {"registry": self.registry}
        self.reconciles = counter(P + "reconciles", "Reconcile passes run.", ["mode"], **reg)
        self.errors = counter(P + "errors", "Errors met while reconciling, by kind.", ["kind"], **reg)
        self.actions = counter(P + "actions", "Actions carried out (or, in dry-run, planned), by kind.", ["action"], **reg)
        self.conflicts = counter(P + "conflicts", "Ledger writes refused with 409 Conflict and retried.", **reg)
        self.latency = histogram(P + "reconcile_duration_seconds", "Time one reconcile pass took.", buckets=BUCKETS, **reg)
        self.ledger = LedgerGauges()  # the copilot sets ledger.source; written after the registry's metrics
        self.ready = gauge(P + "ready", "1 once the first full sync succeeded.", **reg)
        self.last_success = gauge(P + "last_success_timestamp_seconds", "When a pass last ended without error.", **reg)
        self._server: ThreadingHTTPServer | None = None

    def exposition(self) -> bytes:
        chunks: list[bytes] = []
        self.write_exposition(self.prepare(), chunks.append)
        return b"".join(chunks)

    def prepare(self) -> tuple[bytes, list[WrittenRow]]:
        """What a scrape writes: the registry's metrics (text) and the ledger rows (errors surface here)."""
        head = self.prometheus.generate_latest(self.registry) if self.prometheus is not None else tiny_exposition(self.registry)
        return head, self.ledger.rows()

    def write_exposition(self, prepared: tuple[bytes, list[WrittenRow]], write: Callable[[bytes], object]) -> None:
        head, rows = prepared
        write(head)
        self.ledger.write(rows, write)

    def serve(self, address: str, port: int) -> ThreadingHTTPServer:
        """Serve ``/metrics`` in a thread; returns the server (``server_address`` has the port)."""
        metrics = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                if self.path.split("?")[0] not in ("/metrics", "/"):
                    self.send_error(404)
                    return
                try:
                    prepared = metrics.prepare()
                except Exception as err:  # noqa: BLE001 - a scrape must answer, not kill the thread
                    self.send_error(500, explain=repr(err))
                    return
                # HTTP/1.0 without a length: the body ends when the connection closes, so it
                # goes out in batches as it is written instead of being built whole first.
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.end_headers()
                metrics.write_exposition(prepared, self.wfile.write)

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
