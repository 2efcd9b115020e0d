"""Every Slurm call the copilot makes, behind one small interface.

:class:`RestSlurm` talks to slurmrestd with the collection's own client
(``plugins/module_utils/slurmrestd.py``, vendored into ``_vendor`` by
``tools/vendor.sh``). The tests give it the collection's fake slurmrestd
(``tests/fakes/slurmrestd.py`` at the collection's root); nothing fake is
installed on hosts.
"""

from __future__ import annotations

import concurrent.futures
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from . import names
from .job_table import PlaceholderJobTable, Wanted
from .model import PlaceholderJob, SlurmNode
from .tokens import Tokens

if TYPE_CHECKING:
    import httpx

    from ._vendor.slurmrestd import SlurmrestdClient

_T = TypeVar("_T")

# The placeholder jobs' script: it only has to keep running; Slurm's accounting does the work.
PLACEHOLDER_SCRIPT = "#!/bin/sh\n# hybridhpc copilot: holds this node's CPUs and memory for a Kubernetes pod\nexec sleep infinity\n"


class SlurmError(Exception):
    """A Slurm call failed. ``temporary``: worth retrying later with backoff."""

    temporary = True


class SlurmUnavailable(SlurmError):
    """slurmrestd or slurmctld did not answer (or answered 502/503/504)."""


class SlurmRefused(SlurmError):
    """Slurm refused the request (bad node name, bad GRES, no permission, bad token)."""

    temporary = False


class Slurm(Protocol):
    def node_states(self, names: Iterable[str] | None = None) -> dict[str, SlurmNode]:
        """Nodes by name: all of them, or only ``names`` (an unknown name is left out)."""

    def set_node_gres(self, name: str, gres: str) -> None:
        """Replace the node's whole Gres string."""

    def set_gres_of_nodes(self, names: Sequence[str], gres: str) -> bool:
        """Replace several nodes' whole Gres string with the same one, in one request; False (nothing sent) when
        slurmrestd has no such request. After a :class:`SlurmRefused`, some of them may have it and some not."""

    def drain_node(self, name: str, reason: str) -> None: ...

    def resume_node(self, name: str) -> None: ...

    def placeholder_jobs(self, wanted: Wanted = None) -> list[PlaceholderJob]:
        """The copilot's placeholder jobs Slurm still knows (active and recently ended); those of the GenericNodes
        ``wanted`` (a name -> bool) read afresh, the others (if returned) as last read."""

    def submit_placeholder(self, name: str, node: str, cpus: int, memory_mb: int) -> int:
        """Submit a placeholder job pinned to ``node``; returns its id."""

    def cancel_job(self, job_id: int) -> None: ...


def node_from_rest(entry: Mapping[str, Any]) -> SlurmNode:
    """A :class:`SlurmNode` from slurmrestd's node JSON (v0.0.40 - v0.0.42).

    Its strings are interned: a poll of every node holds one SlurmNode each,
    and most nodes repeat the same GRES, states and reason (the name is the
    one the cached GenericNode's alias holds already).
    """
    state = entry.get("state") or []
    if isinstance(state, str):
        state = [state]
    return SlurmNode(
        name=sys.intern(str(entry.get("name") or "")),
        gres=sys.intern(str(entry.get("gres") or "")),
        gres_used=sys.intern(str(entry.get("gres_used") or "")),
        alloc_cpus=int(_number(entry.get("alloc_cpus"))),
        alloc_memory_mb=int(_number(entry.get("alloc_memory"))),
        states=tuple(sys.intern(str(s).upper()) for s in state),
        reason=sys.intern(str(entry.get("reason") or "")),
        cpus=int(_number(entry.get("cpus"))),
        memory_mb=int(_number(entry.get("real_memory"))),
        slurmd_start_time=float(_number(entry.get("slurmd_start_time"))),
    )


def job_from_rest(entry: Mapping[str, Any]) -> PlaceholderJob:
    """A :class:`PlaceholderJob` from slurmrestd's job JSON (v0.0.40 - v0.0.42)."""
    state = entry.get("job_state") or []
    if isinstance(state, str):
        state = [state]
    nodes = str(entry.get("nodes") or "")
    if not nodes and isinstance(entry.get("required_nodes"), list):
        nodes = ",".join(str(n) for n in entry["required_nodes"])
    memory = _number(entry.get("memory_per_node"))
    if not memory:
        memory = _number(entry.get("memory_per_cpu")) * _number(entry.get("cpus"))
    return PlaceholderJob(
        job_id=int(_number(entry.get("job_id"))),
        name=str(entry.get("name") or ""),
        state=str(state[0]).upper() if state else "",
        node=nodes,
        cpus=int(_number(entry.get("cpus"))),
        memory_mb=int(memory),
        reason=str(entry.get("state_reason") or ""),
    )


def _number(value: Any) -> float:
    """slurmrestd numbers are plain, or ``{"set", "infinite", "number"}`` structs."""
    if isinstance(value, dict):
        if value.get("infinite") or not value.get("set", True):
            return 0
        number: float = value.get("number") or 0
        return number
    plain: float = value or 0
    return plain


def vendored_client() -> ModuleType:
    """The vendored slurmrestd client module, httpx imported without its command-line client.

    httpx's ``__init__`` imports ``httpx._main`` (click, rich and pygments: 4 MB
    of RSS beyond the modules the daemon loads anyway, held for good) whenever they are installed,
    and Debian's python3-httpx depends on them; when that import fails, httpx
    defines a stub ``main`` instead. The daemon never runs httpx's command line,
    so the import is made to fail (a ``None`` in ``sys.modules``) while httpx loads.
    """
    if "httpx" not in sys.modules and "httpx._main" not in sys.modules:
        sys.modules["httpx._main"] = None  # type: ignore[assignment]
        try:
            import httpx  # noqa: F401 - loaded here, before the client imports it
        finally:
            del sys.modules["httpx._main"]
    from ._vendor import slurmrestd

    return slurmrestd


# slurm_errno.h: slurmrestd could not talk to slurmctld (SLURM_COMMUNICATIONS_* 1001-1004,
# SLURMCTLD_COMMUNICATIONS_* 1800-1804). 1007 (authentication) is not one of them.
# Single-node reads of one pass that go to slurmrestd at once.
READERS = 4

_COMMUNICATION_ERRORS = frozenset((1001, 1002, 1003, 1004, 1800, 1801, 1802, 1803, 1804))


class RestSlurm:
    """Slurm through slurmrestd.

    ``tokens`` (see ``tokens.py``) hands out a current JWT before each call and a
    fresh one when slurmrestd rejects it; ``client`` is a vendored
    ``SlurmrestdClient`` (built here from ``url`` when not given).
    """

    def __init__(self, url: str = "http://localhost:6820", tokens: Tokens | None = None, user: str | None = None,
                 unix_socket: str | None = None, timeout: float = 10.0, client: SlurmrestdClient | None = None,
                 transport: httpx.BaseTransport | None = None, placeholder_job: Mapping[str, Any] | None = None,
                 job_table: PlaceholderJobTable | None = None, clock: Callable[[], float] = time.monotonic):
        rest = vendored_client()
        self._rest = rest
        self.tokens = tokens
        self.placeholder_job = dict(placeholder_job or {})  # extra job_desc fields: partition, account, qos, time_limit
        self.job_table = job_table or PlaceholderJobTable()
        self._clock = clock
        self._reader_pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._readers_lock = threading.Lock()
        refresh = tokens.refresh if tokens is not None else None
        self.client = client or rest.SlurmrestdClient(
            url=url, user=user, token_provider=refresh, unix_socket=unix_socket, timeout=timeout, retries=2,
            transport=transport)

    def _call(self, method: Callable[..., _T], *args: Any) -> _T:
        if self.tokens is not None:
            self.client.token = self.tokens.current()
        try:
            return method(*args)
        except self._rest.SlurmrestdUnavailable as err:
            raise SlurmUnavailable(str(err)) from err
        except self._rest.SlurmrestdError as err:
            numbers = {e.get("error_number") for e in err.errors if isinstance(e, dict)}
            if any(n in _COMMUNICATION_ERRORS for n in numbers if isinstance(n, int)):
                raise SlurmUnavailable(str(err)) from err
            raise SlurmRefused(str(err)) from err

    def node_states(self, names: Iterable[str] | None = None) -> dict[str, SlurmNode]:
        if names is None:
            # Each node made a SlurmNode as it is decoded: the whole answer is never held as dicts.
            nodes: list[SlurmNode] = self._call(self.client.nodes, node_from_rest)
        else:
            wanted = list(names)
            if len(wanted) > 1:
                # Each read is a round trip that mostly waits: several go at once.
                answers = list(self._readers().map(lambda name: self._call(self.client.node, name), wanted))
            else:
                answers = [self._call(self.client.node, name) for name in wanted]
            nodes = [node_from_rest(e) for e in answers if e]
        return {node.name: node for node in nodes}

    def _readers(self) -> concurrent.futures.ThreadPoolExecutor:
        with self._readers_lock:
            if self._reader_pool is None:
                self._reader_pool = concurrent.futures.ThreadPoolExecutor(max_workers=READERS, thread_name_prefix="slurm-read")
            return self._reader_pool

    def set_node_gres(self, name: str, gres: str) -> None:
        self._call(self.client.set_node_gres, name, gres)

    def set_gres_of_nodes(self, names: Sequence[str], gres: str) -> bool:
        """``POST /nodes`` (v0.0.42, Slurm 24.11, on): one request where a round's reservations on many nodes of
        the same size took one each (the copilot's CPU per request is most of what an admission costs)."""
        if not self._call(lambda: self.client.updates_nodes_together):  # probes the version once
            return False
        self._call(self.client.set_nodes_gres, list(names), gres)
        return True

    def drain_node(self, name: str, reason: str) -> None:
        self._call(self.client.drain_node, name, reason)

    def resume_node(self, name: str) -> None:
        self._call(self.client.resume_node, name)

    def placeholder_jobs(self, wanted: Wanted = None) -> list[PlaceholderJob]:
        """From the table (``job_table``): a whole ``GET /jobs`` only when a listing is due, else ``GET /job/{id}``
        for each active job of the ``wanted`` GenericNodes."""
        table, now = self.job_table, self._clock()
        if table.listing_due(now):
            entries = self._call(self.client.jobs)
            table.listed((job_from_rest(e) for e in entries if str(e.get("name") or "").startswith(names.PLACEHOLDER_JOB_PREFIX)), now)
        else:
            for job_id in table.to_read(wanted):  # a failed read leaves the job as it was: read again next pass
                entry = self._call(self.client.job, job_id)
                table.read(job_id, job_from_rest(entry) if entry else None, now)
        return table.snapshot(now)

    def submit_placeholder(self, name: str, node: str, cpus: int, memory_mb: int) -> int:
        fields = {
            "current_working_directory": "/",
            "standard_output": "/dev/null",
            "standard_error": "/dev/null",
            "time_limit": None,  # partition's limit unless placeholder_job says otherwise
            **self.placeholder_job,
            "name": name,
            "required_nodes": [node],
            "minimum_nodes": 1,
            "maximum_nodes": 1,
            "tasks": 1,
            "cpus_per_task": cpus,
            "memory_per_node": memory_mb,
            "comment": "hybridhpc copilot placeholder for a Kubernetes pod",
        }
        job_id: int = self._call(lambda: self.client.submit_job(PLACEHOLDER_SCRIPT, **fields))
        self.job_table.submitted(PlaceholderJob(job_id, name, "PENDING", node, cpus, memory_mb), self._clock())
        return job_id

    def cancel_job(self, job_id: int) -> None:
        self._call(self.client.cancel_job, job_id)

    def close(self) -> None:
        self.client.close()
