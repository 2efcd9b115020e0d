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

    python fake_slurmrestd.py --port 6820 --node c1:4:8000 [--jwt-key FILE]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "src"))

from fake_slurm import FakeNode, FakeSlurm  # noqa: E402

from hybridhpc_copilot.slurm import SlurmRefused  # noqa: E402

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
            "reason": view.reason, "cpus": 8, "real_memory": 16000}


class FakeSlurmrestd:
    def __init__(self, slurm: FakeSlurm, address="127.0.0.1", port=0, jwt_key: bytes | None = None, foreign_jobs: int = 0):
        self.slurm, self.jwt_key = slurm, jwt_key
        self.foreign_jobs = foreign_jobs_json(foreign_jobs) if foreign_jobs else b""
        self.requests: list = []
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer((address, port), _handler(self))
        self.httpd.daemon_threads = True

    @property
    def url(self) -> str:
        return "http://%s:%d" % self.httpd.server_address[:2]

    def start(self):
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def check_token(self, headers) -> int | None:
        """None when the token is good, else the HTTP status slurmrestd would answer."""
        if self.jwt_key is None:
            return None
        token = headers.get("X-SLURM-USER-TOKEN")
        if not token:
            return 401
        from hybridhpc_copilot._vendor import jwt

        try:
            jwt.decode_hs256_token(token, self.jwt_key)
        except ValueError:
            return 511
        return None


def _handler(server: FakeSlurmrestd):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes: with Nagle on, the body waits for the
        # client's delayed ACK of the headers (40 ms a request), which slurmrestd does not add.
        disable_nagle_algorithm = True

        def log_message(self, *args):
            pass

        def _send(self, code, body):
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.sent_bytes = len(data)
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, code, text, number=0):
            self._send(code, {"errors": [{"description": text, "error_number": number, "error": text, "source": "fake"}],
                              "warnings": [], "meta": {}})

        def _body(self):
            length = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(length) or b"{}") if length else {}

        def _route(self, method):
            body = self._body() if method == "POST" else {}
            server.requests.append((method, self.path, body))
            parts = self.path.split("?", 1)[0].strip("/").split("/")
            if parts[:1] == ["fake"]:
                return self._fake(parts[1:], body)
            if len(parts) < 3 or parts[0] != "slurm" or parts[1] != VERSION:
                return self._error(404, "Unable to find requested URL")
            denied = server.check_token(self.headers)
            if denied == 401:
                return self._error(401, "Authentication failure")
            if denied == 511 and parts[2] != "ping":
                return self._error(511, "Authentication failure", 1007)
            with server.lock:
                try:
                    return self._slurm(method, parts[2:], body, denied)
                except SlurmRefused as err:
                    return self._error(500, str(err), 2018 if "node name" in str(err) else 2072)

        def _jobs(self, method, parts, body) -> bool:
            """The placeholder strategy's job calls; whether ``parts`` named one (and it was answered)."""
            slurm = server.slurm
            if parts == ["jobs"] and method == "GET":
                slurm.schedule()
                ours = json.dumps([job_json(j) for j in slurm.jobs.values()])[1:-1].encode()
                listed = b",".join(part for part in (ours, server.foreign_jobs) if part)
                return self._answer(200, b'{"jobs": [' + listed + b'], "errors": [], "warnings": []}')
            if parts == ["job", "submit"] and method == "POST":
                job = body.get("job") or {}
                cpus = _plain(job.get("cpus_per_task")) * max(1, _plain(job.get("tasks")))
                job_id = slurm.submit_placeholder(str(job.get("name") or ""), (job.get("required_nodes") or [""])[0], cpus,
                                                  _plain(job.get("memory_per_node")))
                return self._answer(200, {"job_id": job_id, "errors": [], "warnings": []})
            if len(parts) == 2 and parts[0] == "job" and parts[1].isdigit() and method in ("GET", "DELETE"):
                slurm.schedule()
                found = slurm.jobs.get(int(parts[1]))
                if found is None:
                    return self._answer(None, error=(500, "Invalid job id specified", 2017))
                if method == "DELETE":
                    slurm.cancel_job(found.job_id)
                    return self._answer(200, {"errors": [], "warnings": []})
                return self._answer(200, {"jobs": [job_json(found)], "errors": [], "warnings": []})
            return False

        def _answer(self, code, body=None, error=None) -> bool:
            if error is not None:
                self._error(*error)
            else:
                self._send(code, body)
            return True

        def _slurm(self, method, parts, body, denied):
            slurm = server.slurm
            if parts == ["ping"] and method == "GET":
                state = "DOWN" if denied else "UP"
                return self._send(200, {"pings": [{"hostname": "fake-ctl", "pinged": state, "responding": not denied,
                                                   "mode": "primary", "latency": 1}], "errors": [], "warnings": []})
            if parts == ["nodes"] and method == "GET":
                return self._send(200, {"nodes": [node_json(v) for v in slurm.node_states().values()], "errors": []})
            if parts[:1] in (["job"], ["jobs"]) and self._jobs(method, parts, body):
                return None
            if len(parts) == 2 and parts[0] == "node":
                name = parts[1]
                if name not in slurm.nodes or slurm.nodes[name].deleted:
                    return self._error(500, "Invalid node name specified", 2018)
                if method == "GET":
                    return self._send(200, {"nodes": [node_json(slurm.node_states([name])[name])], "errors": []})
                if "gres" in body:
                    slurm.set_node_gres(name, body["gres"])
                states = [s.upper() for s in body.get("state") or []]
                if "DRAIN" in states:
                    slurm.drain_node(name, body.get("reason") or "")
                if "RESUME" in states:
                    slurm.resume_node(name)
                return self._send(200, {"errors": [], "warnings": []})
            return self._error(404, "Unable to find requested URL")

        def _fake(self, parts, body):
            with server.lock:
                if parts == ["job"]:
                    job = server.slurm.start_job(body["node"], int(body.get("cpus", 1)), int(body.get("memory", 0)))
                    return self._send(200 if job else 409, {"job_id": job})
                if parts == ["reconfigure"]:
                    server.slurm.reconfigure()
                    return self._send(200, {})
                admin = {"delete_node": lambda: server.slurm.delete_node(body["node"]),
                         "drain": lambda: server.slurm.admin_drain(body["node"], body["reason"]),
                         "resume": lambda: server.slurm.admin_resume(body["node"])}
                if parts[:1] and parts[0] in admin:
                    admin[parts[0]]()
                    return self._send(200, {})
            return self._error(404, "no such fake endpoint")

        def do_GET(self):  # noqa: N802
            self._route("GET")

        def do_POST(self):  # noqa: N802
            self._route("POST")

        def do_DELETE(self):  # noqa: N802
            self._route("DELETE")

    return Handler


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
    args = parser.parse_args(argv)
    key = pathlib.Path(args.jwt_key).read_bytes() if args.jwt_key else None
    server = FakeSlurmrestd(FakeSlurm(nodes_from_specs(args.node)), args.address, args.port, key)
    print("fake slurmrestd listening on %s" % server.url, flush=True)
    try:
        server.httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
