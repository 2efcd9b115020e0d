"""A slurmrestd stand-in over HTTP, backed by FakeSlurm: for the copilot's end-to-end tests and demos.

Serves what the copilot uses of the real API (data_parser v0.0.42):
``GET /slurm/v0.0.42/ping``, ``GET .../nodes``, ``GET .../node/{name}``,
``POST .../node/{name}`` (gres, state DRAIN/RESUME, reason), and for the
placeholder strategy ``POST .../job/submit``, ``GET .../job/{id}``,
``DELETE .../job/{id}`` and ``GET .../jobs``, with slurmrestd's JSON shapes
and error envelope; other versions answer 404 as 24.11 does for v0.0.39/43.
With ``jwt_key`` set, tokens are checked like slurmctld checks them (HS256,
``exp``): no token 401, a bad one 511. ``foreign_jobs`` fills ``GET /jobs``
with that many other users' jobs (about 1 kB each, as slurmrestd describes a
job: 30,000 make a 30 MB listing). ``POST /fake/job`` (``{"node", "cpus",
"memory"}``), ``/fake/reconfigure``, ``/fake/delete_node``, ``/fake/drain``
and ``/fake/resume`` (``{"node", "reason"}``) stand in for Slurm users and
admins.

It is the tests' one slurmrestd, in three forms that answer alike (its
semantics live in :meth:`FakeSlurmrestd.respond`): a thread of the test
(``with FakeSlurmrestd(slurm) as rest: rest.url``), no socket at all
(``RestSlurm(transport=rest.transport())``), or a process of its own
(``python fake_slurmrestd.py``; ``copilot_process.FakeSlurmrestdProcess``
runs it for the fault tests). For those it also keeps Slurm's state in a file
across restarts (``state_file``: slurmctld keeps it when slurmrestd restarts),
holds requests before or after Slurm applies them, answers requests with a
Slurm error instead (``/fake/fail``), checks tokens on a skewed clock, and
appends every Slurm API request to an audit file (with its token's expiry,
the answer's status and size).

    python fake_slurmrestd.py --port 6820 --node c1:4:8000 [--jwt-key FILE] [--state-file F] [--audit-file F]
"""

from __future__ import annotations

import argparse
import base64
import collections
import dataclasses
import itertools
import json
import os
import pathlib
import re
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "src"))

from fake_slurm import FakeNode, FakeSlurm  # noqa: E402

from hybridhpc_copilot.slurm import RestSlurm, SlurmRefused, SlurmUnavailable  # noqa: E402

VERSION = "v0.0.42"


def job_json(job) -> dict:
    """slurmrestd's description of one job (the fields the copilot reads, with v0.0.42's shapes)."""
    return {"job_id": job.job_id, "name": job.name, "job_state": [job.state], "nodes": job.node if job.state == "RUNNING" else "",
            "required_nodes": [job.node], "cpus": job.cpus, "state_reason": job.reason or "None",
            "memory_per_node": {"set": True, "infinite": False, "number": job.memory_mb}}


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


def _plain(value) -> int:
    """A number, or slurmrestd's ``{"set", "infinite", "number"}`` struct of one."""
    return int(value.get("number") or 0) if isinstance(value, dict) else int(value or 0)


def node_json(view) -> dict:
    return {"name": view.name, "hostname": view.name, "gres": view.gres, "gres_used": view.gres_used,
            "alloc_cpus": view.alloc_cpus, "alloc_memory": view.alloc_memory_mb, "state": list(view.states),
            "reason": view.reason, "cpus": view.cpus, "real_memory": view.memory_mb}


class Dropped(Exception):
    """The connection closes without an answer (a request held and released with ``apply=False``)."""


@dataclasses.dataclass
class Hold:
    """A held request: ``phase`` "before" Slurm applies it or "after" (applied, the answer held back)."""

    method: str
    path: str
    phase: str
    released: threading.Event = dataclasses.field(default_factory=threading.Event)
    apply: bool = True


class FakeSlurmrestd:
    HOLD_LIMIT = 60.0  # a held request nobody releases goes on after this, so no thread waits forever
    # Every FakeNode field but slurm.conf's (name, configured counts, other GRES) is Slurm's state.
    _CONFIGURED = ("name", "cpus", "memory_mb", "other_gres")

    def __init__(self, slurm: FakeSlurm, address="127.0.0.1", port=0, jwt_key: bytes | None = None, foreign_jobs: int = 0,
                 state_file: pathlib.Path | None = None, audit_file: pathlib.Path | None = None, keep_requests: int | None = None,
                 listen: bool = True):
        self.slurm, self.jwt_key, self.state_file = slurm, jwt_key, state_file
        self.foreign_jobs = foreign_jobs_json(foreign_jobs) if foreign_jobs else b""
        self.requests: collections.deque = collections.deque(maxlen=keep_requests)  # (method, path, body)
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

    def rest_slurm(self, **options) -> RestSlurm:
        """The copilot's own Slurm client (``RestSlurm``) talking to this slurmrestd through :meth:`transport`."""
        slurm = RestSlurm("http://fake-slurmrestd", transport=self.transport(), user="slurm", **options)
        slurm.client.token = "unchecked"  # a token is checked only with a jwt_key
        return slurm

    def transport(self) -> httpx.MockTransport:
        """This slurmrestd without a socket, for an httpx client in the test's own thread."""
        def handle(request: httpx.Request) -> httpx.Response:
            try:
                status, data = self.respond(request.method, request.url.raw_path.decode("ascii"), request.headers, request.content)
            except Dropped:
                raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request) from None
            return httpx.Response(status, content=data, headers={"Content-Type": "application/json"})

        return httpx.MockTransport(handle)

    # -- the API ------------------------------------------------------------------------------
    def respond(self, method: str, path: str, headers, content: bytes) -> tuple[int, bytes]:
        """The answer (status, JSON body) to one request; raises :class:`Dropped` for a connection closed unanswered."""
        body = json.loads(content) if content else {}
        self.requests.append((method, path, body))
        parts = path.split("?", 1)[0].strip("/").split("/")
        if parts[:1] == ["fake"]:
            return self._fake(parts[1:], body)
        if parts[:1] != ["slurm"]:
            return _error(404, "Unable to find requested URL")
        token = headers.get("X-SLURM-USER-TOKEN") or ""
        record = {"t": time.time(), "method": method, "path": path, "now": self.now(), "exp": _token_exp(token),
                  "token": token[-12:], "status": None, "bytes": 0} if self._audit is not None else {}  # the benchmark audits nothing
        try:
            answer = self._failure(method, path)
            if answer is None:
                answer = self._held(method, path, lambda: self._slurm_api(method, parts, body, headers))
            record.update(status=answer[0], bytes=len(answer[1]))
            return answer
        finally:
            if record:
                self.record(record)

    def _held(self, method, path, serve):
        hold = self._take_hold(method, path)
        if hold is not None and hold.phase == "before" and not self._wait(hold):
            raise Dropped()
        answer = serve()
        if method == "POST":
            with self.lock:
                self.save()
        if hold is not None and hold.phase == "after" and not self._wait(hold):
            raise Dropped()
        return answer

    def _slurm_api(self, method, parts, body, headers) -> tuple[int, bytes]:
        if len(parts) < 3 or parts[1] != VERSION:
            return _error(404, "Unable to find requested URL")
        denied = self.check_token(headers)
        if denied == 401:
            return _error(401, "Authentication failure")
        if denied == 511 and parts[2] != "ping":
            return _error(511, "Authentication failure", 1007)
        with self.lock:
            try:
                return self._slurm(method, parts[2:], body, denied)
            except SlurmRefused as err:
                return _error(500, str(err), 2018 if "node name" in str(err) else 2072)
            except SlurmUnavailable as err:  # a fault the model was told to raise: slurmctld did not answer
                return _error(500, "Unable to contact slurm controller (%s)" % err, 1001)

    def _slurm(self, method, parts, body, denied) -> tuple[int, bytes]:
        slurm = self.slurm
        if parts == ["ping"] and method == "GET":
            state = "DOWN" if denied else "UP"
            return _ok({"pings": [{"hostname": "fake-ctl", "pinged": state, "responding": not denied, "mode": "primary", "latency": 1}]})
        if parts == ["nodes"] and method == "GET":
            return _ok({"nodes": [node_json(v) for v in slurm.node_states().values()]})
        if parts[:1] in (["job"], ["jobs"]):
            answer = self._jobs(method, parts, body)
            if answer is not None:
                return answer
        if len(parts) == 2 and parts[0] == "node":
            name = parts[1]
            if name not in slurm.nodes or slurm.nodes[name].deleted:
                return _error(500, "Invalid node name specified", 2018)
            if method == "GET":
                return _ok({"nodes": [node_json(slurm.node_states([name])[name])]})
            if "gres" in body:
                slurm.set_node_gres(name, body["gres"])
            states = [s.upper() for s in body.get("state") or []]
            if "DRAIN" in states:
                slurm.drain_node(name, body.get("reason") or "")
            if "RESUME" in states:
                slurm.resume_node(name)
            return _ok({})
        return _error(404, "Unable to find requested URL")

    def _jobs(self, method, parts, body) -> tuple[int, bytes] | None:
        """The placeholder strategy's job calls (None: ``parts`` names none of them)."""
        slurm = self.slurm
        if parts == ["jobs"] and method == "GET":
            slurm.schedule()
            ours = json.dumps([job_json(j) for j in slurm.jobs.values()])[1:-1].encode()
            listed = b",".join(part for part in (ours, self.foreign_jobs) if part)
            return 200, b'{"jobs": [' + listed + b'], "errors": [], "warnings": []}'
        if parts == ["job", "submit"] and method == "POST":
            job = body.get("job") or {}
            cpus = _plain(job.get("cpus_per_task")) * max(1, _plain(job.get("tasks")))
            job_id = slurm.submit_placeholder(str(job.get("name") or ""), (job.get("required_nodes") or [""])[0], cpus,
                                              _plain(job.get("memory_per_node")))
            return _ok({"job_id": job_id})
        if len(parts) == 2 and parts[0] == "job" and parts[1].isdigit() and method in ("GET", "DELETE"):
            slurm.schedule()
            found = slurm.jobs.get(int(parts[1]))
            if found is None:
                return _error(500, "Invalid job id specified", 2017)
            if method == "DELETE":
                slurm.cancel_job(found.job_id)
                return _ok({})
            return _ok({"jobs": [job_json(found)]})
        return None

    def check_token(self, headers) -> int | None:
        """None when the token is good, else the HTTP status slurmrestd would answer (on this server's clock)."""
        if self.jwt_key is None:
            return None
        token = headers.get("X-SLURM-USER-TOKEN")
        if not token:
            return 401
        from hybridhpc_copilot._vendor import jwt

        try:
            jwt.decode_hs256_token(token, self.jwt_key, now=self.now())
        except ValueError:
            return 511
        return None

    def now(self) -> float:
        return time.time() + self.skew

    # -- what tests do to it: /fake/... ----------------------------------------------------------
    def _fake(self, parts, body) -> tuple[int, bytes]:
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
                return (200 if result else 409), json.dumps({"job_id": result}).encode()
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

    def _failure(self, method: str, path: str) -> tuple[int, bytes] | None:
        """The error to answer instead of serving the request, if a failure rule matches it."""
        with self._controls:
            for rule in self.failures:
                if rule[0] == method and rule[1].search(path) and rule[5] > 0:
                    rule[5] -= 1
                    return _error(rule[2], rule[3], rule[4])
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
        next_job = max([job for node in self.slurm.nodes.values() for job in node.jobs] + [0]) + 1
        temporary = self.state_file.with_suffix(".tmp")
        temporary.write_text(json.dumps({"next_job": next_job, "nodes": nodes}))
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
        self.slurm._ids = itertools.count(data["next_job"])

    def state(self) -> dict:
        """Every node's GRES, counts, usage, jobs, states and reason; the placeholder jobs; the rules Slurm saw broken."""
        nodes = {}
        for name, node in self.slurm.nodes.items():
            nodes[name] = {"gres": node.gres, "k8scpu": node.count_cpu, "k8smemory": node.count_mem, "configured": [node.cpus, node.memory_mb],
                           "used": list(node.used), "jobs": {str(job): list(spec) for job, spec in node.jobs.items()},
                           "states": list(node.states), "reason": node.reason, "deleted": node.deleted}
        jobs = {str(job.job_id): {"name": job.name, "state": job.state, "node": job.node} for job in self.slurm.jobs.values()}
        return {"nodes": nodes, "jobs": jobs, "violations": list(self.slurm.violations)}


def _ok(body: dict) -> tuple[int, bytes]:
    return 200, json.dumps({"errors": [], "warnings": [], **body}).encode()


def _error(code: int, text: str, number: int = 0) -> tuple[int, bytes]:
    """slurmrestd's error envelope."""
    error = {"description": text, "error_number": number, "error": text, "source": "fake"}
    return code, json.dumps({"errors": [error], "warnings": [], "meta": {}}).encode()


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
                status, data = server.respond(self.command, self.path, self.headers, content)
            except Dropped:
                self.close_connection = True
                return
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_DELETE = _serve  # noqa: N815

    return Handler


def rest_slurm_of(slurm: FakeSlurm, **options) -> RestSlurm:
    """The copilot's Slurm client talking to ``slurm`` through this fake (no socket): how in-process tests give the copilot Slurm."""
    return FakeSlurmrestd(slurm, listen=False).rest_slurm(**options)


def nodes_from_specs(specs) -> list:
    """FakeNodes from ``NAME:K8SCPU:K8SMEMORY`` strings (default: one node c1:4:8000)."""
    nodes = []
    for spec in specs or ["c1:4:8000"]:
        name, cpus, memory = spec.split(":")
        nodes.append(FakeNode(name, int(cpus), int(memory)))
    return nodes


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=6820)
    parser.add_argument("--node", action="append", default=[], help="NAME:K8SCPU:K8SMEMORY (repeatable)")
    parser.add_argument("--jwt-key", help="check tokens against this key file")
    parser.add_argument("--state-file", help="keep Slurm's state here across restarts")
    parser.add_argument("--audit-file", help="append every Slurm API request here (JSON lines)")
    parser.add_argument("--foreign-jobs", type=int, default=0, help="other users' jobs in GET /jobs (about 1 kB each)")
    args = parser.parse_args(argv)
    key = pathlib.Path(args.jwt_key).read_bytes() if args.jwt_key else None
    server = FakeSlurmrestd(FakeSlurm(nodes_from_specs(args.node)), args.address, args.port, key, args.foreign_jobs,
                            pathlib.Path(args.state_file) if args.state_file else None,
                            pathlib.Path(args.audit_file) if args.audit_file else None, keep_requests=1000)
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
