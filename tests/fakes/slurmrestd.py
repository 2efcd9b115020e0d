"""The tests' one slurmrestd: slurmrestd's HTTP API in front of :class:`~fakes.slurm_state.FakeSlurm`.

Serves, with slurmrestd 24.11's JSON shapes and error envelope (every JSON
answer carries ``meta``, ``errors`` and ``warnings``):

* ``GET /openapi/v3`` (the served versions' paths), and ``/slurm/{version}/...``
  for the served ``versions`` only (v0.0.40-42 by default, as 24.11; any other
  answers 404 ``Unable to find requested URL``, like an unknown endpoint);
* ``GET ping`` (``pinged: DOWN`` when the token is rejected or slurmctld is
  down), ``GET diag``, ``GET nodes``, ``GET node/{name}``, ``POST node/{name}``
  (gres, state DRAIN/RESUME, reason, features, comment, extra, weight; the
  list and no_val fields' types checked as data_parser does: 400), ``POST
  nodes`` (v0.0.42 on: the same update for every node its ``name`` lists), ``POST
  job/submit`` (script and environment required; ``submit_answers_result_only``
  answers v0.0.40/41's ``{"result": {...}}`` shape), ``GET``/``DELETE
  job/{id}``, ``GET jobs`` and ``DELETE jobs`` (``{"jobs": [ids]}``);
  ``rejects_federated_ids``: ``job/{id}`` refuses ids above 0x03FFFFFF (26.05
  in a federation), so a client must find those jobs through ``/jobs``.

Authentication, with ``jwt_key`` set (HS256, ``exp`` checked on this server's
clock, ``clock`` plus the ``/fake/clock`` skew): no token is 401 before any
routing; a token slurmctld rejects (bad signature, expired, its ``sun`` not
one of ``users``, or an ``X-SLURM-USER-NAME`` other than ``sun`` when ``sun``
is not one of ``admins``) is 511, error 1007, except on ``ping``. Only
``admins`` may update nodes (else error 2002). Without ``jwt_key`` nothing is
checked and the user is the ``X-SLURM-USER-NAME`` header (root without one).
``slurm.controller_up = False`` (or a ``fault`` raising ``SlurmctldDown``)
answers 500 with error 1001, as slurmrestd does when slurmctld is away.

Faults and what a test sees of the traffic: ``inject`` is a queue of answers
used before anything else (``(status, body dict or text)``, or an exception
class: the transport raises it, the HTTP server closes the connection);
:meth:`fail` answers matching requests with a Slurm error; holds keep
requests before or after Slurm applies them until :meth:`release`;
``requests`` records every API request (:class:`Request`; :meth:`calls`
filters them); ``audit_file`` gets every API request as a JSON line (its
token's expiry, the answer's status and size); ``state_file`` keeps Slurm's
state across restarts (slurmctld keeps it when slurmrestd restarts);
``foreign_jobs`` fills ``GET /jobs`` with that many other users' jobs (about
1 kB each, as slurmrestd describes a job: 30,000 make a 30 MB listing).
``/fake/...`` endpoints do all of that over HTTP for the process form, and
stand in for Slurm's users and admins (``POST /fake/job`` ``{"node", "cpus",
"memory"}``, ``/fake/end_job``, ``/fake/reconfigure``, ``/fake/delete_node``,
``/fake/drain`` and ``/fake/resume`` ``{"node", "reason"}``).

Three forms that answer alike (the semantics live in :meth:`FakeSlurmrestd.respond`):
a thread of the test (``with FakeSlurmrestd(slurm) as rest: rest.url``), no
socket at all (``httpx.Client(transport=rest.transport())``, with
``listen=False``), or a process of its own (the copilot's tests run it with
``copilot_process.FakeSlurmrestdProcess``; the copilot's benchmark too)::

    python tests/fakes/slurmrestd.py --port 6820 --node c1:4:8000 [--stock-node c2:8:16000:gpu:2] [--jwt-key FILE]
        [--state-file F] [--audit-file F] [--foreign-jobs N] [--version v0.0.42 ...] [--user alice ...]

Test code only: no role installs anything from tests/.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import importlib.util
import json
import os
import pathlib
import re
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, NamedTuple
from urllib.parse import unquote

import httpx

if not __package__:  # run as a script: tests/ on the path instead of tests/fakes, so ``fakes`` imports as a package
    sys.path[0] = str(pathlib.Path(__file__).resolve().parents[1])

from fakes.slurm_state import FakeNode, FakeSlurm, Job, NodeView, SlurmctldDown, SlurmctldRefused  # noqa: E402

COLLECTION = pathlib.Path(__file__).resolve().parents[2]
VERSIONS = ("v0.0.40", "v0.0.41", "v0.0.42")  # what slurmrestd 24.11 serves (the lab's default suite)
SLURM_VERSION = {"major": "24", "minor": "11", "micro": "5"}
ADMINS = ("root", "slurm")  # root and the SlurmUser: may impersonate, and update nodes
TOKEN_HEADER = "x-slurm-user-token"
USER_HEADER = "x-slurm-user-name"
FEDERATED_IDS = 0x03FFFFFF  # job ids above carry a federation's cluster id


def _load_jwt():
    """The collection's JWT module (``plugins/module_utils/jwt.py``, standard library only), from its file."""
    spec = importlib.util.spec_from_file_location("fakes._jwt", COLLECTION / "plugins" / "module_utils" / "jwt.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


jwt = _load_jwt()


class Request(NamedTuple):
    """One API request as the fake received it."""

    method: str
    path: str  # as sent (still quoted), without the query
    body: Any  # the decoded JSON body; None without one
    headers: dict  # lower-case names


class Dropped(Exception):
    """The connection closes without an answer (a request held and released with ``apply=False``, or an injected fault)."""

    def __init__(self, error: type | None = None):
        super().__init__()
        self.error = error  # the exception class the transport raises (httpx's RemoteProtocolError when None)


@dataclasses.dataclass
class Hold:
    """A held request: ``phase`` "before" Slurm applies it or "after" (applied, the answer held back)."""

    method: str
    path: str
    phase: str
    released: threading.Event = dataclasses.field(default_factory=threading.Event)
    apply: bool = True


def job_json(job: Job) -> dict:
    """slurmrestd's description of one job (the fields clients read, with v0.0.42's shapes)."""
    return {"job_id": job.job_id, "name": job.name, "user_name": job.user_name, "partition": job.partition, "job_state": [job.state],
            "nodes": job.node if job.state == "RUNNING" else "", "required_nodes": [job.node] if job.node else [], "cpus": job.cpus,
            "state_reason": job.reason or "None", "memory_per_node": {"set": True, "infinite": False, "number": job.memory_mb}}


def foreign_jobs_json(count: int, first_id: int = 1_000_000) -> bytes:
    """``count`` other users' running jobs, serialised once (the inside of a JSON list, about 1 kB each)."""
    entries = []
    for number in range(count):
        job = {"job_id": first_id + number, "name": "sim-%06d" % number, "job_state": ["RUNNING"], "nodes": "n%05d" % number,
               "user_name": "user%03d" % (number % 500), "account": "physics", "partition": "batch", "cpus": 4,
               "memory_per_node": {"set": True, "infinite": False, "number": 4000}, "state_reason": "None",
               "command": "/home/user%03d/run.sh" % (number % 500), "current_working_directory": "/scratch/run-%06d" % number,
               "comment": "x" * 640}
        entries.append(json.dumps(job))
    return ",".join(entries).encode()


def node_json(view: NodeView) -> dict:
    entry = {"name": view.name, "hostname": view.name, "gres": view.gres, "gres_used": view.gres_used,
             "alloc_cpus": view.alloc_cpus, "alloc_memory": view.alloc_memory_mb, "state": list(view.states),
             "reason": view.reason, "cpus": view.cpus, "real_memory": view.memory_mb}
    for key in ("features", "weight", "comment", "extra"):  # left out when the node has none (a smaller poll)
        value = getattr(view, key)
        if value is not None:
            entry[key] = list(value) if key == "features" else value
    return entry


def _plain(value) -> int:
    """A number, or slurmrestd's ``{"set", "infinite", "number"}`` struct of one."""
    return int(value.get("number") or 0) if isinstance(value, dict) else int(value or 0)


def _ok(body: dict, status: int = 200) -> tuple[int, bytes, str]:
    return status, json.dumps({"meta": {"slurm": {"version": SLURM_VERSION}}, "errors": [], "warnings": [], **body}).encode(), "application/json"


def _error(status: int, description: str, error: str | None = None, number: int = 0, source: str = "fake") -> tuple[int, bytes, str]:
    """slurmrestd's error envelope."""
    return _ok({"errors": [{"description": description, "error": error or description, "error_number": number, "source": source}]}, status)


def _controller_down(detail: str) -> tuple[int, bytes, str]:
    return _error(500, "Failure to query", "Unable to contact slurm controller (%s)" % detail, 1001, "_dump")


def _text(status: int, text: str) -> tuple[int, bytes, str]:
    return status, text.encode(), "text/plain"


NOT_FOUND = (404, b"Unable to find requested URL", "text/plain")
# Where slurmrestd says a refusal came from, by method and endpoint.
_SOURCES = {("POST", "node"): "_update_node", ("POST", "nodes"): "_update_nodes", ("GET", "node"): "_dump_nodes", ("GET", "nodes"): "_dump_nodes",
            ("POST", "job"): "_submit", ("DELETE", "job"): "_signal_job", ("GET", "job"): "_handle_job_get"}


class FakeSlurmrestd:
    HOLD_LIMIT = 60.0  # a held request nobody releases goes on after this, so no thread waits forever
    # Every FakeNode field but slurm.conf's (name, configured counts, other GRES) is Slurm's state.
    _CONFIGURED = ("name", "cpus", "memory_mb", "other_gres")

    def __init__(self, slurm: FakeSlurm, address="127.0.0.1", port=0, jwt_key: bytes | None = None, foreign_jobs: int = 0,
                 state_file: pathlib.Path | None = None, audit_file: pathlib.Path | None = None, keep_requests: int | None = None,
                 listen: bool = True, *, versions=VERSIONS, users=None, admins=ADMINS, clock: Callable[[], float] = time.time):
        self.slurm, self.jwt_key, self.state_file = slurm, jwt_key, state_file
        self.versions = tuple(versions)
        self.users = None if users is None else set(users)  # the users slurmctld knows (None: anyone)
        self.admins = set(admins)
        self.clock = clock
        self.foreign_jobs = foreign_jobs_json(foreign_jobs) if foreign_jobs else b""
        self.rejects_federated_ids = False
        self.submit_answers_result_only = False
        self.inject: list = []  # answers used before anything else: (status, body dict or text), or an exception class
        self.requests: list[Request] = []  # the last ``keep_requests`` (all of them when None)
        self.keep_requests = keep_requests
        self.lock = threading.Lock()  # Slurm's state
        self._controls = threading.Lock()  # the rules below
        self.holds: list = []  # [method, compiled path, phase, count]
        self.held: list[Hold] = []
        self.failures: list = []  # [method, compiled path, HTTP status, Slurm's error text, error number, count]
        self.skew = 0.0
        self._audit = open(audit_file, "a", encoding="utf-8") if audit_file else None  # noqa: SIM115 - open for the server's life
        self.load()
        self.httpd = ThreadingHTTPServer((address, port), _handler(self)) if listen else None  # None: transport() only
        if self.httpd is not None:
            self.httpd.daemon_threads = True

    @property
    def url(self) -> str:
        return "http://%s:%d" % self.httpd.server_address[:2]

    def start(self):
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def stop(self):
        self.release(apply=False)  # held handler threads would outlive the server otherwise
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._audit is not None:
            self._audit.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def transport(self) -> httpx.MockTransport:
        """This slurmrestd without a socket, for an httpx client in the test's own thread."""
        def handle(request: httpx.Request) -> httpx.Response:
            try:
                status, data, kind = self.respond(request.method, request.url.raw_path.decode("ascii"), request.headers, request.content)
            except Dropped as dropped:
                if dropped.error is not None:
                    raise dropped.error("injected failure", request=request) from None
                raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request) from None
            return httpx.Response(status, content=data, headers={"Content-Type": kind})

        return httpx.MockTransport(handle)

    def calls(self, method: str | None = None, path: str | None = None) -> list[Request]:
        """The recorded requests, those of ``method`` and ``path`` (without the query) when given."""
        return [r for r in self.requests if (method is None or r.method == method) and (path is None or r.path == path)]

    def now(self) -> float:
        """This server's clock, which checks the tokens' expiry."""
        return self.clock() + self.skew

    # -- the API ------------------------------------------------------------------------------
    def respond(self, method: str, path: str, headers, content: bytes) -> tuple[int, bytes, str]:
        """The answer (status, body, content type) to one request; raises :class:`Dropped` for a connection closed unanswered."""
        headers = {name.lower(): value for name, value in headers.items()}
        try:
            body = json.loads(content) if content else None
        except ValueError:
            return _error(400, "Unable to parse request body", "Unable to parse", 9001, "data_parser")
        where = path.split("?", 1)[0]
        parts = where.strip("/").split("/")
        if parts[:1] == ["fake"]:
            return self._fake(parts[1:], body or {})
        self.requests.append(Request(method, where, body, headers))
        if self.keep_requests is not None and len(self.requests) > self.keep_requests:
            del self.requests[0]
        token = headers.get(TOKEN_HEADER) or ""
        record = {"t": time.time(), "method": method, "path": path, "now": self.now(), "exp": _token_exp(token),
                  "token": token[-12:], "status": None, "bytes": 0} if self._audit is not None else {}  # the benchmark audits nothing
        try:
            answer = self._injected() or self._failure(method, where)
            if answer is None:
                answer = self._held(method, where, lambda: self._api(method, parts, body, headers))
            record.update(status=answer[0], bytes=len(answer[1]))
            return answer
        finally:
            if record:
                self.record(record)

    def _injected(self) -> tuple[int, bytes, str] | None:
        if not self.inject:
            return None
        item = self.inject.pop(0)
        if isinstance(item, type) and issubclass(item, Exception):
            raise Dropped(item)
        status, payload = item
        return _text(status, payload) if isinstance(payload, str) else _ok(dict(payload or {}), status)

    def _held(self, method, path, serve):
        hold = self._take_hold(method, path)
        if hold is not None and hold.phase == "before" and not self._wait(hold):
            raise Dropped()
        answer = serve()
        if method in ("POST", "DELETE"):
            with self.lock:
                self.save()
        if hold is not None and hold.phase == "after" and not self._wait(hold):
            raise Dropped()
        return answer

    def _api(self, method, parts, body, headers) -> tuple[int, bytes, str]:
        if self.jwt_key is not None and not headers.get(TOKEN_HEADER):
            return _text(401, "Authentication failure")  # before the path is looked at, as slurmrestd does
        if parts == ["openapi", "v3"] and method == "GET":
            paths = {"/slurm/%s/%s" % (v, e): {} for v in self.versions for e in ("ping", "diag", "nodes", "node/{node_name}", "jobs")}
            return 200, json.dumps({"openapi": "3.0.2", "paths": paths}).encode(), "application/json"
        if len(parts) < 3 or parts[0] != "slurm" or parts[1] not in self.versions:
            return NOT_FOUND
        user, endpoint = self.user(headers), parts[2:]
        if endpoint == ["nodes"] and method == "POST" and parts[1] in ("v0.0.40", "v0.0.41"):
            return NOT_FOUND  # POST nodes came with v0.0.42 (Slurm 24.11)
        if endpoint == ["ping"] and method == "GET":
            up = user is not None and self.slurm.controller_up
            return _ok({"pings": [{"hostname": "ctl1", "pinged": "UP" if up else "DOWN", "responding": up, "latency": 1234 if up else 0,
                                   "mode": "primary", "primary": True}]})
        if user is None:
            return _error(511, "Unable to query", "Protocol authentication error", 1007, "slurm_rest_auth")
        if not self.slurm.controller_up:
            return _controller_down("connect failure")
        with self.lock:
            try:
                return self._slurm(method, endpoint, body or {}, user)
            except SlurmctldRefused as err:
                return _error(500, err.description, err.error, err.number, _SOURCES.get((method, endpoint[0]), "slurmctld"))
            except SlurmctldDown as err:  # a fault the test had slurmctld raise: it did not answer
                return _controller_down(str(err) or "connect failure")

    def user(self, headers) -> str | None:
        """The user slurmctld authenticates for these headers, or None when it rejects the token."""
        if self.jwt_key is None:
            return headers.get(USER_HEADER) or "root"
        try:
            claims = jwt.decode_hs256_token(headers.get(TOKEN_HEADER) or "", self.jwt_key, now=self.now())
        except ValueError:
            return None
        sun = jwt.token_username(claims)
        if sun is None or (self.users is not None and sun not in self.users):
            return None
        user = headers.get(USER_HEADER) or sun
        return user if user == sun or sun in self.admins else None

    def _slurm(self, method, endpoint, body, user) -> tuple[int, bytes, str]:
        slurm = self.slurm
        if endpoint == ["diag"] and method == "GET":
            return _ok({"statistics": {"server_thread_count": 1}})
        if endpoint == ["nodes"] and method == "GET":
            return _ok({"nodes": [node_json(v) for v in slurm.node_states().values()]})
        if endpoint == ["nodes"] and method == "POST":
            return self._update_nodes(body, user)
        if len(endpoint) == 2 and endpoint[0] == "node":
            return self._node(method, unquote(endpoint[1]), body, user)
        if endpoint == ["job", "submit"] and method == "POST":
            return self._submit(body, user)
        if endpoint == ["jobs"] and method == "GET":
            ours = json.dumps([job_json(j) for j in slurm.list_jobs()])[1:-1].encode()
            listed = b",".join(part for part in (ours, self.foreign_jobs) if part)
            status, envelope, kind = _ok({})
            return status, b'{"jobs": [' + listed + b"], " + envelope[1:], kind
        if endpoint == ["jobs"] and method == "DELETE":
            for job_id in body.get("jobs") or []:
                if str(job_id).isdigit() and int(job_id) in slurm.jobs:
                    slurm.cancel_job(int(job_id))
            return _ok({"status": []})
        if len(endpoint) == 2 and endpoint[0] == "job" and endpoint[1].isdigit():
            return self._job(method, int(endpoint[1]))
        return NOT_FOUND

    def _node(self, method, name, body, user) -> tuple[int, bytes, str]:
        slurm = self.slurm
        known = name in slurm.nodes and not slurm.nodes[name].deleted
        if method == "GET":
            if not known:
                return _error(500, "Failure to query node %s" % name, "Invalid node name specified", 2018, "_dump_nodes")
            return _ok({"nodes": [node_json(slurm.node_states([name])[name])]})
        if method != "POST":
            return NOT_FOUND
        if user not in self.admins:
            return _error(500, "Failure to update node %s" % name, "Access/permission denied", 2002, "_update_node")
        if not known:
            return _error(500, "Failure to update node %s" % name, "Invalid node name specified", 2018, "_update_node")
        refused = self._update_refused(name, body)
        if refused is not None:
            return refused
        if "gres" in body:
            slurm.set_node_gres(name, body["gres"])
        self._update_node(name, body)
        return _ok({})

    def _update_nodes(self, body, user) -> tuple[int, bytes, str]:
        """``POST nodes`` (v0.0.42, Slurm 24.11, on): one update for the nodes ``name`` lists, as slurmctld applies it.

        An unknown node fails the whole update; a GRES refused for one node
        leaves that node as it was, the others get it, and the first refusal is
        the answer.
        """
        names = body.get("name")
        names = names.split(",") if isinstance(names, str) else names
        what = "Failure to update node %s" % ",".join(str(n) for n in names or ())
        if user not in self.admins:
            return _error(500, what, "Access/permission denied", 2002, "_update_nodes")
        if not names or any(n not in self.slurm.nodes or self.slurm.nodes[n].deleted for n in names):
            return _error(500, what, "Invalid node name specified", 2018, "_update_nodes")
        refused = self._update_refused(",".join(names), dict(body, name=list(names)))
        if refused is not None:
            return refused
        first_refusal = None
        for name in names:
            try:
                if "gres" in body:
                    self.slurm.set_node_gres(name, body["gres"])
            except SlurmctldRefused as err:
                first_refusal = first_refusal or err
                continue
            self._update_node(name, body)
        if first_refusal is not None:
            raise first_refusal
        return _ok({})

    def _update_refused(self, names, body) -> tuple[int, bytes, str] | None:
        """data_parser's and slurmctld's checks of an update_node_msg for ``names`` before anything changes (None: it passes)."""
        for key in ("state", "features", "features_act", "address", "hostname", "name"):
            if key in body and not isinstance(body[key], list):
                return _error(400, "Expected list for %s" % key, "Unable to parse", 9001, "data_parser")
        for key in ("weight", "resume_after"):
            if key in body and not isinstance(body[key], dict):
                return _error(400, "Expected no_val struct for %s" % key, "Unable to parse", 9001, "data_parser")
        states = [str(s).upper() for s in body.get("state") or []]
        if "DRAIN" in states and not body.get("reason"):
            return _error(500, "Failure to update node %s" % names, "You must specify a reason", 2064, "_update_node")
        return None

    def _update_node(self, name, body) -> None:
        """An update_node_msg's fields but the GRES, on one node."""
        slurm = self.slurm
        states = [str(s).upper() for s in body.get("state") or []]
        for state in states:
            if state == "DRAIN":
                slurm.drain_node(name, body["reason"])
            elif state == "RESUME":
                slurm.resume_node(name)
        node = slurm.nodes[name]
        if "reason" in body and "RESUME" not in states:
            node.reason = body["reason"]
        for key in ("features", "comment", "extra"):
            if key in body:
                setattr(node, key, body[key])
        if "weight" in body:
            node.weight = _plain(body["weight"])

    def _submit(self, body, user) -> tuple[int, bytes, str]:
        job = body.get("job") or {}
        if not (body.get("script") or job.get("script")):
            return _error(500, "Batch job submission failed", "Job script not specified", 2009, "_submit")
        if not job.get("environment"):
            return _error(500, "Batch job submission failed", "Environment variables not specified", 2024, "_submit")
        required = job.get("required_nodes") or []
        node = (required.split(",") if isinstance(required, str) else required or [""])[0]
        cpus = (_plain(job.get("cpus_per_task")) or 1) * max(1, _plain(job.get("tasks")))
        job_id = self.slurm.submit_job(str(job.get("name") or ""), node, cpus, _plain(job.get("memory_per_node")), user_name=user,
                                       partition=str(job.get("partition") or "debug"))
        if self.submit_answers_result_only:  # v0.0.40/41's shape
            return _ok({"result": {"job_id": job_id, "step_id": "batch"}})
        return _ok({"job_id": job_id, "step_id": "batch", "job_submit_user_msg": ""})

    def _job(self, method, job_id) -> tuple[int, bytes, str]:
        if self.rejects_federated_ids and job_id > FEDERATED_IDS:  # Slurm 26.05.5's op_handler_job on a federation member
            return _error(404, "Invalid JobID=%d rejected" % job_id, "Invalid job id specified", 2017, "op_handler_job")
        if method not in ("GET", "DELETE"):
            return NOT_FOUND
        self.slurm.schedule()
        found = self.slurm.jobs.get(job_id)
        if method == "DELETE":
            if found is None:
                return _error(404, "Unable to find job %d" % job_id, "Invalid job id specified", 2017, "_signal_job")
            self.slurm.cancel_job(job_id)
            return _ok({})
        if found is None:
            return _error(500, "Unable to query JobId=%d" % job_id, "Invalid job id specified", 2017, "_handle_job_get")
        return _ok({"jobs": [job_json(found)]})

    # -- what tests do to it: /fake/... ----------------------------------------------------------
    def _fake(self, parts, body) -> tuple[int, bytes, str]:
        admin = {"job": lambda: self.slurm.start_job(body["node"], int(body.get("cpus", 1)), int(body.get("memory", 0))),
                 "end_job": lambda: self.slurm.end_job(body["node"], int(body["job"])),
                 "reconfigure": self.slurm.reconfigure,
                 "delete_node": lambda: self.slurm.delete_node(body["node"]),
                 "drain": lambda: self.slurm.admin_drain(body["node"], body["reason"]),
                 "resume": lambda: self.slurm.admin_resume(body["node"])}
        name = parts[0] if len(parts) == 1 else ""
        if name in admin:
            with self.lock:
                result = admin[name]()
                self.save()
            if name == "job":
                return (200 if result else 409), json.dumps({"job_id": result}).encode(), "application/json"
            return _ok({})
        if name == "state":
            with self.lock:
                return _ok(self.state())
        if name == "held":
            with self._controls:
                return _ok({"held": [{"method": h.method, "path": h.path, "phase": h.phase} for h in self.held]})
        if name == "hold":
            with self._controls:
                self.holds.append([body["method"], re.compile(body["path"]), body.get("phase", "before"), int(body.get("count", 1))])
            return _ok({})
        if name == "fail":
            self.fail(body["method"], body["path"], body["error"], int(body.get("number", 0)), int(body.get("status", 500)),
                      int(body.get("count", 1)))
            return _ok({})
        if name == "inject":  # {"status", "body"}, or {"drop": true}: the connection closes unanswered
            self.inject.append(httpx.RemoteProtocolError if body.get("drop") else (int(body["status"]), body.get("body")))
            return _ok({})
        if name == "set":  # slurmctld up or down, and how this slurmrestd behaves
            with self.lock:
                if "controller_up" in body:
                    self.slurm.controller_up = bool(body["controller_up"])
                for key in ("rejects_federated_ids", "submit_answers_result_only"):
                    if key in body:
                        setattr(self, key, bool(body[key]))
            return _ok({})
        if name == "release":
            self.release(bool(body.get("apply", True)))
            return _ok({})
        if name == "clock":
            self.skew = float(body.get("skew", 0))
            return _ok({"skew": self.skew})
        return _error(404, "no such fake endpoint")

    def fail(self, method: str, path: str, error: str, number: int = 0, status: int = 500, count: int = 1) -> None:
        """Answer the next ``count`` Slurm API requests matching (``path`` a regex) with Slurm's error, unapplied."""
        with self._controls:
            self.failures.append([method, re.compile(path), status, error, number, count])

    def _failure(self, method: str, path: str) -> tuple[int, bytes, str] | None:
        """The error to answer instead of serving the request, if a failure rule matches it."""
        with self._controls:
            for rule in self.failures:
                if rule[0] == method and rule[1].search(path) and rule[5] > 0:
                    rule[5] -= 1
                    return _error(rule[2], rule[3], rule[3], rule[4])
        return None

    def _take_hold(self, method: str, path: str) -> Hold | None:
        with self._controls:
            for rule in self.holds:
                if rule[0] == method and rule[1].search(path) and rule[3] > 0:
                    rule[3] -= 1
                    hold = Hold(method, path, rule[2])
                    self.held.append(hold)
                    return hold
        return None

    def _wait(self, hold: Hold) -> bool:
        hold.released.wait(self.HOLD_LIMIT)
        with self._controls:
            if hold in self.held:
                self.held.remove(hold)
        return hold.apply

    def release(self, apply: bool = True) -> None:
        """Let held requests go (``apply=False``: unanswered, unapplied if held before); drop unused holds and failures."""
        with self._controls:
            self.holds.clear()
            self.failures.clear()
            for hold in self.held:
                hold.apply = apply
                hold.released.set()

    def record(self, entry: dict) -> None:
        if self._audit is not None:
            with self._controls:
                self._audit.write(json.dumps(entry) + "\n")
                self._audit.flush()

    # -- Slurm's state -------------------------------------------------------------------------
    def save(self) -> None:
        """Slurm's state to ``state_file`` (the caller holds ``lock``)."""
        if self.state_file is None:
            return
        nodes = {}
        for name, node in self.slurm.nodes.items():
            saved = {f.name: getattr(node, f.name) for f in dataclasses.fields(node) if f.name not in self._CONFIGURED}
            saved["jobs"] = [[job, *spec] for job, spec in node.jobs.items()]
            nodes[name] = saved
        jobs = [dataclasses.asdict(job) for job in self.slurm.jobs.values()]
        state = {"next_job": self.slurm.next_job_id, "controller_up": self.slurm.controller_up, "nodes": nodes, "jobs": jobs}
        temporary = self.state_file.with_suffix(".tmp")
        temporary.write_text(json.dumps(state))
        os.replace(temporary, self.state_file)

    def load(self) -> None:
        if self.state_file is None or not self.state_file.exists():
            return
        data = json.loads(self.state_file.read_text())
        for name, saved in data["nodes"].items():
            node = self.slurm.nodes.get(name)
            if node is None:
                continue
            for key, value in saved.items():
                if key == "jobs":
                    value = {job: tuple(spec) for job, *spec in value}
                elif isinstance(getattr(node, key, None), tuple):
                    value = tuple(value)
                setattr(node, key, value)
        self.slurm.jobs = {job["job_id"]: Job(**job) for job in data.get("jobs", [])}
        self.slurm.next_job_id = data["next_job"]
        self.slurm.controller_up = data.get("controller_up", True)

    def state(self) -> dict:
        """Every node's GRES, counts, usage, jobs, states and reason; the batch jobs; the rules Slurm saw broken."""
        nodes = {}
        for name, node in self.slurm.nodes.items():
            nodes[name] = {"gres": node.gres, "k8scpu": node.count_cpu, "k8smemory": node.count_mem, "configured": [node.cpus, node.memory_mb],
                           "used": list(node.used), "jobs": {str(job): list(spec) for job, spec in node.jobs.items()},
                           "states": list(node.states), "reason": node.reason, "deleted": node.deleted}
        jobs = {str(job.job_id): {"name": job.name, "state": job.state, "node": job.node} for job in self.slurm.jobs.values()}
        return {"nodes": nodes, "jobs": jobs, "violations": list(self.slurm.violations)}


def _token_exp(token: str):
    try:
        claims = token.split(".")[1]
        return json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4))).get("exp")
    except (IndexError, ValueError):
        return None


def _handler(server: FakeSlurmrestd):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes: with Nagle on, the body waits for the
        # client's delayed ACK of the headers (40 ms a request), which slurmrestd does not add.
        disable_nagle_algorithm = True

        def log_message(self, *args):
            pass

        def _serve(self):
            content = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                status, data, kind = server.respond(self.command, self.path, self.headers, content)
            except Dropped:
                self.close_connection = True
                return
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_DELETE = _serve  # noqa: N815

    return Handler


def nodes_from_specs(specs, stock=()) -> list:
    """FakeNodes from ``NAME:K8SCPU:K8SMEMORY`` strings (default: one node c1:4:8000), and stock nodes
    (no k8scpu/k8smemory) from ``NAME:CPUS:MB[:GRES]`` strings (``c2:8:16000:gpu:2``)."""
    nodes = []
    for spec in specs or ([] if stock else ["c1:4:8000"]):
        name, cpus, memory = spec.split(":")
        nodes.append(FakeNode(name, int(cpus), int(memory)))
    for spec in stock:
        name, cpus, memory, *gres = spec.split(":")
        nodes.append(FakeNode(name, int(cpus), int(memory), other_gres=":".join(gres), gres_shared=False))
    return nodes


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=6820)
    parser.add_argument("--node", action="append", default=[], help="NAME:K8SCPU:K8SMEMORY, a shared node (repeatable)")
    parser.add_argument("--stock-node", action="append", default=[], help="NAME:CPUS:MB[:GRES], a node that shares nothing (repeatable)")
    parser.add_argument("--jwt-key", help="check tokens against this key file")
    parser.add_argument("--state-file", help="keep Slurm's state here across restarts")
    parser.add_argument("--audit-file", help="append every Slurm API request here (JSON lines)")
    parser.add_argument("--foreign-jobs", type=int, default=0, help="other users' jobs in GET /jobs (about 1 kB each)")
    parser.add_argument("--version", action="append", default=[], help="a served data_parser version (repeatable; default v0.0.40-42)")
    parser.add_argument("--user", action="append", default=[], help="a user slurmctld knows (repeatable; default: anyone)")
    parser.add_argument("--admin", action="append", default=[], help="an administrator (repeatable; default root and slurm)")
    parser.add_argument("--first-job-id", type=int, default=1)
    args = parser.parse_args(argv)
    key = pathlib.Path(args.jwt_key).read_bytes() if args.jwt_key else None
    slurm = FakeSlurm(nodes_from_specs(args.node, args.stock_node), first_job_id=args.first_job_id)
    server = FakeSlurmrestd(slurm, args.address, args.port, key, args.foreign_jobs,
                            pathlib.Path(args.state_file) if args.state_file else None,
                            pathlib.Path(args.audit_file) if args.audit_file else None, keep_requests=1000,
                            versions=args.version or VERSIONS, users=args.user or None, admins=args.admin or ADMINS)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.httpd.shutdown).start())
    print("fake slurmrestd listening on %s" % server.url, flush=True)
    try:
        server.httpd.serve_forever(0.05)
    except KeyboardInterrupt:
        pass
    server.httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
