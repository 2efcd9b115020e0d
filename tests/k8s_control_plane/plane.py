"""A real Kubernetes control plane on 127.0.0.1: etcd, kube-apiserver, kube-scheduler and kwok.

The binaries are make k8s-bin's (lab/k8s-bin/build.sh; the Makefile pins
their versions). Each run gets a temporary directory of its own (etcd's data,
the certificates, the token file, the kubeconfigs, one log per process) and
free ports picked when it starts; every process listens on 127.0.0.1 only and
talks to nothing else. :meth:`ControlPlane.stop` stops each process (SIGTERM,
then SIGKILL after a bound) and removes the directory.

* etcd: client and peer URLs on loopback, its data in the run's directory.
* kube-apiserver: the secure port only, a CA and serving certificate made for
  the run (no endpoint reconciler: a loopback address cannot be the kubernetes
  Service's endpoint), RBAC, a static token file (an admin in system:masters, the
  scheduler's identity, kwok's), a service-account signing key pair, a service
  cluster IP range; the ServiceAccount admission plugin is off (no controller
  manager creates the default service accounts), as in controller-runtime's
  envtest, and so is TaintNodesByCondition (no node lifecycle controller would
  ever lift the not-ready taint it puts on a new Node). Its own etcd
  compaction every ``etcd_compaction_interval`` ("0": never; tests compact
  etcd themselves with :meth:`ControlPlane.compact_etcd`). ``watch_cache``:
  whether it serves watches from its watch cache (the default) or from etcd;
  the cache keeps serving a watch from a revision etcd has compacted away, so
  only without it does a compaction alone make such a watch 410 Gone.
* kube-scheduler: its own kubeconfig, as the user system:kube-scheduler (the
  ClusterRole the API server's bootstrap policy binds to that user), no leader
  election.
* kwok: it makes the Nodes a test creates Ready and the Pods bound to them
  Running, with the stages kwokctl's default cluster uses (copied by make
  k8s-bin beside the binaries). Its HOME is the run's directory, so no
  ~/.kwok/kwok.yaml of the machine's is read.
"""

from __future__ import annotations

import base64
import datetime
import http.client
import ipaddress
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

BINARIES = ("etcd", "kube-apiserver", "kube-scheduler", "kubectl", "kwok")
# What a ControlPlane runs by default (kubectl is for the tests).
COMPONENTS = ("etcd", "kube-apiserver", "kube-scheduler", "kwok")
KWOK_STAGES = ("node-initialize", "node-heartbeat", "pod-ready", "pod-complete", "pod-delete")
LOOPBACK = "127.0.0.1"
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
LOG_TAIL = 60  # lines of each process's log shown when something fails


class ControlPlaneError(RuntimeError):
    """The control plane did not start, or a process of it died."""


def missing_binaries(bin_dir: Path, components: tuple[str, ...] = BINARIES) -> list[str]:
    """What make k8s-bin should have put in ``bin_dir`` (for ``components``) and did not."""
    missing = [name for name in BINARIES if name in components and not os.access(bin_dir / name, os.X_OK)]
    if "kwok" in components:
        missing += ["kwok-stages/%s.yaml" % s for s in KWOK_STAGES
                    if not (bin_dir / "kwok-stages" / ("%s.yaml" % s)).is_file()]
    return missing


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports free on 127.0.0.1 now (held open together, so none repeats)."""
    sockets = []
    try:
        while len(sockets) < count:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(s)
            s.bind((LOOPBACK, 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


# -- certificates and keys --------------------------------------------------------------


def _write_private(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    path.chmod(0o600)


def make_pki(directory: Path, addresses: tuple[str, ...] = ()) -> dict[str, Path]:
    """A CA, a serving certificate signed by it for 127.0.0.1, localhost and ``addresses``, and a service-account key pair."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    not_before, not_after = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=1)

    def pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "hybridhpc-test-ca")])
    ca_cert = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(not_before).not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                     key_encipherment=False, data_encipherment=False, key_agreement=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    serving_key = ec.generate_private_key(ec.SECP256R1())
    serving_cert = (
        x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca_name).public_key(serving_key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(not_before).not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address(a)) for a in dict.fromkeys((LOOPBACK, *addresses))]
            + [x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    sa_key = ec.generate_private_key(ec.SECP256R1())

    paths = {name: directory / name for name in ("ca.crt", "apiserver.crt", "apiserver.key", "sa.key", "sa.pub")}
    paths["ca.crt"].write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    paths["apiserver.crt"].write_bytes(serving_cert.public_bytes(serialization.Encoding.PEM))
    _write_private(paths["apiserver.key"], pem_key(serving_key))
    _write_private(paths["sa.key"], pem_key(sa_key))
    paths["sa.pub"].write_bytes(sa_key.public_key().public_bytes(serialization.Encoding.PEM,
                                                                 serialization.PublicFormat.SubjectPublicKeyInfo))
    return paths


def kubeconfig_text(server: str, ca_path: Path, user: str, token: str, embed_ca: bool = False) -> str:
    """A kubeconfig (JSON, which is YAML) for ``user`` with a bearer ``token`` (the CA inline with ``embed_ca``)."""
    ca = ({"certificate-authority-data": base64.b64encode(ca_path.read_bytes()).decode()} if embed_ca
          else {"certificate-authority": str(ca_path)})
    return json.dumps({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "hybridhpc-test", "cluster": dict({"server": server}, **ca)}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "hybridhpc-test", "context": {"cluster": "hybridhpc-test", "user": user}}],
        "current-context": "hybridhpc-test",
    }, indent=2) + "\n"


# -- processes --------------------------------------------------------------------------


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the test process dies, even killed (Linux's PR_SET_PDEATHSIG)."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: stop() is then the only way they end


@dataclass
class Process:
    """One daemon of the control plane, its output in ``log``."""

    name: str
    argv: list[str]
    log: Path
    env: dict[str, str] | None = None
    popen: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.popen = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                          env=self.env, start_new_session=True, preexec_fn=_die_with_parent)

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, timeout: float) -> int | None:
        """SIGTERM, then SIGKILL if it is still there after ``timeout`` seconds; its exit status."""
        if self.popen is None:
            return None
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout)
        return self.popen.returncode

    def tail(self, lines: int = LOG_TAIL) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError as err:
            return "(no log: %s)" % err
        return "\n".join(text[-lines:])


class ControlPlane:
    """etcd, kube-apiserver, kube-scheduler and kwok, started by :meth:`start` and stopped by :meth:`stop`.

    ``server``, ``ca_path`` and ``admin_token`` are what a client needs;
    :meth:`write_kubeconfig` writes them as a kubeconfig.
    """

    def __init__(self, bin_dir: Path | str, *, etcd_compaction_interval: str = "0", watch_cache: bool = True,
                 ready_timeout: float = 60.0, stop_timeout: float = 15.0, apiserver_args: tuple[str, ...] = (),
                 address: str = LOOPBACK, apiserver_port: int | None = None, components: tuple[str, ...] = COMPONENTS):
        """``address``: where kube-apiserver listens and what it advertises (127.0.0.1; a lab container's own
        address when the lab's hosts talk to it, see serve()); etcd, the scheduler and kwok stay on loopback.
        ``components``: etcd and kube-apiserver always, kube-scheduler and kwok when named."""
        self.bin_dir = Path(bin_dir)
        self.address = address
        self.fixed_apiserver_port = apiserver_port
        self.components = tuple(components)
        self.etcd_compaction_interval = etcd_compaction_interval
        self.watch_cache = watch_cache
        self.ready_timeout = ready_timeout
        self.stop_timeout = stop_timeout
        self.apiserver_args = tuple(apiserver_args)
        self.work_dir: Path | None = None
        self.processes: list[Process] = []
        self.admin_token = secrets.token_hex(24)
        self._scheduler_token = secrets.token_hex(24)
        self._kwok_token = secrets.token_hex(24)

    # -- what clients need -----------------------------------------------------
    @property
    def server(self) -> str:
        return "https://%s:%d" % (self.address, self.apiserver_port)

    @property
    def ca_path(self) -> Path:
        return self._pki["ca.crt"]

    @property
    def etcd_url(self) -> str:
        return "http://%s:%d" % (LOOPBACK, self.etcd_port)

    def write_kubeconfig(self, path: Path | str, user: str = "admin", token: str | None = None,
                         embed_ca: bool = False) -> Path:
        """A kubeconfig for the admin (system:masters), or for ``user`` with ``token``, at ``path``."""
        path = Path(path)
        path.write_text(kubeconfig_text(self.server, self.ca_path, user, token or self.admin_token, embed_ca))
        path.chmod(0o600)
        return path

    # -- lifecycle -------------------------------------------------------------
    def start(self) -> ControlPlane:
        missing = missing_binaries(self.bin_dir, self.components)
        if missing:
            raise ControlPlaneError("%s lacks %s: run `make k8s-bin` first" % (self.bin_dir, ", ".join(missing)))
        self.work_dir = Path(tempfile.mkdtemp(prefix="hybridhpc-k8s-"))
        try:
            self._start()
        except BaseException as err:
            logs = self.log_tails()
            self.stop()
            if isinstance(err, ControlPlaneError):
                raise ControlPlaneError("%s\n%s" % (err, logs)) from None
            raise
        return self

    def _start(self) -> None:
        assert self.work_dir is not None
        w = self.work_dir
        (self.etcd_port, self.etcd_peer_port, self.apiserver_port, self.scheduler_port,
         self.kwok_port) = free_ports(5)
        if self.fixed_apiserver_port:
            self.apiserver_port = self.fixed_apiserver_port
        self._pki = make_pki(w, (self.address,))
        tokens = w / "tokens.csv"
        # token,user,uid,"group,..."; the scheduler is the user the bootstrap policy binds system:kube-scheduler to.
        tokens.write_text('%s,admin,admin,"system:masters"\n%s,system:kube-scheduler,system:kube-scheduler\n'
                          '%s,system:kwok,system:kwok,"system:masters"\n' % (self.admin_token, self._scheduler_token, self._kwok_token))
        tokens.chmod(0o600)

        self._spawn("etcd", [
            "--name=etcd0",
            "--data-dir=%s" % (w / "etcd"),
            "--listen-client-urls=%s" % self.etcd_url,
            "--advertise-client-urls=%s" % self.etcd_url,
            "--listen-peer-urls=http://%s:%d" % (LOOPBACK, self.etcd_peer_port),
            "--initial-advertise-peer-urls=http://%s:%d" % (LOOPBACK, self.etcd_peer_port),
            "--initial-cluster=etcd0=http://%s:%d" % (LOOPBACK, self.etcd_peer_port),
            "--unsafe-no-fsync=true",
            "--log-outputs=stderr",
        ])
        self._wait("etcd", self._etcd_healthy)

        self._spawn("kube-apiserver", [
            "--advertise-address=%s" % self.address,
            "--bind-address=%s" % self.address,
            # A loopback address cannot be the kubernetes Service's endpoint (validation refuses it): none is kept.
            "--endpoint-reconciler-type=none",
            "--secure-port=%d" % self.apiserver_port,
            "--etcd-servers=%s" % self.etcd_url,
            "--etcd-compaction-interval=%s" % self.etcd_compaction_interval,
            "--cert-dir=%s" % (w / "apiserver-certs"),
            "--tls-cert-file=%s" % self._pki["apiserver.crt"],
            "--tls-private-key-file=%s" % self._pki["apiserver.key"],
            # No client certificates are made, but with a client CA the server publishes
            # kube-system/extension-apiserver-authentication, which the scheduler reads.
            "--client-ca-file=%s" % self._pki["ca.crt"],
            "--authorization-mode=RBAC",
            "--token-auth-file=%s" % tokens,
            "--service-account-issuer=%s" % self.server,
            "--service-account-key-file=%s" % self._pki["sa.pub"],
            "--service-account-signing-key-file=%s" % self._pki["sa.key"],
            "--service-cluster-ip-range=%s" % SERVICE_CLUSTER_IP_RANGE,
            # Without a controller manager nothing creates the default service accounts (ServiceAccount would
            # refuse every pod) or lifts the not-ready taint a new Node gets (TaintNodesByCondition).
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
            "--watch-cache=%s" % ("true" if self.watch_cache else "false"),
            "--allow-privileged=true",
            "--profiling=false",
            *self.apiserver_args,
        ])
        self._wait("kube-apiserver", lambda: self._https_ok(self.apiserver_port, "/readyz", self.admin_token, verify=True))
        if "kube-scheduler" in self.components:
            self._start_scheduler()
        if "kwok" in self.components:
            self._start_kwok()

    def _start_scheduler(self) -> None:
        assert self.work_dir is not None
        w = self.work_dir

        scheduler_kubeconfig = self.write_kubeconfig(w / "kube-scheduler.kubeconfig", "system:kube-scheduler", self._scheduler_token)
        self._spawn("kube-scheduler", [
            "--kubeconfig=%s" % scheduler_kubeconfig,
            "--authentication-kubeconfig=%s" % scheduler_kubeconfig,
            "--authorization-kubeconfig=%s" % scheduler_kubeconfig,
            "--bind-address=%s" % LOOPBACK,
            "--secure-port=%d" % self.scheduler_port,
            "--cert-dir=%s" % (w / "scheduler-certs"),
            "--leader-elect=false",
            "--profiling=false",
        ])
        # /readyz (its informers synced: it can read what it needs) is on the scheduler's always-allowed paths;
        # its serving certificate is self-signed for the run.
        self._wait("kube-scheduler", lambda: self._https_ok(self.scheduler_port, "/readyz", None, verify=False))

    def _start_kwok(self) -> None:
        assert self.work_dir is not None
        w = self.work_dir

        kwok_kubeconfig = self.write_kubeconfig(w / "kwok.kubeconfig", "system:kwok", self._kwok_token)
        kwok_config = w / "kwok.yaml"
        kwok_config.write_text("\n---\n".join((self.bin_dir / "kwok-stages" / ("%s.yaml" % s)).read_text() for s in KWOK_STAGES))
        (w / "kwok-home").mkdir()
        self._spawn("kwok", [
            "--kubeconfig=%s" % kwok_kubeconfig,
            "--config=%s" % kwok_config,
            "--manage-all-nodes=true",
            "--server-address=%s:%d" % (LOOPBACK, self.kwok_port),
            "--node-ip=%s" % LOOPBACK,
        ], env={"HOME": str(w / "kwok-home"), "PATH": "/usr/bin:/bin"})
        self._wait("kwok", lambda: self._http_ok(self.kwok_port, "/healthz"))

    def stop(self) -> None:
        """Every process stopped (SIGTERM, SIGKILL after ``stop_timeout``), newest first; the run's directory removed."""
        for process in reversed(self.processes):
            process.stop(self.stop_timeout)
        self.processes = []
        if self.work_dir is not None:
            shutil.rmtree(self.work_dir, ignore_errors=True)
            self.work_dir = None

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def check_alive(self) -> None:
        """Fail if a process of the control plane has exited (:meth:`log_tails` tells why)."""
        dead = [p for p in self.processes if not p.alive()]
        if dead:
            raise ControlPlaneError("%s exited (status %s)" % (
                ", ".join(p.name for p in dead), ", ".join(str(p.popen.returncode) for p in dead if p.popen)))

    def log_tails(self, lines: int = LOG_TAIL) -> str:
        return "\n".join("---- %s (%s), last %d lines:\n%s" % (p.name, p.log, lines, p.tail(lines)) for p in self.processes)

    # -- etcd ------------------------------------------------------------------
    def etcd_call(self, method: str, body: dict[str, object]) -> dict[str, object]:
        """One call of etcd's v3 API through its JSON gateway on loopback (``/v3/kv/range`` and so on)."""
        conn = http.client.HTTPConnection(LOOPBACK, self.etcd_port, timeout=10)
        try:
            conn.request("POST", "/v3/" + method, json.dumps(body), {"Content-Type": "application/json"})
            response = conn.getresponse()
            data = response.read()
            if response.status != 200:
                raise ControlPlaneError("etcd %s: HTTP %s: %s" % (method, response.status, data[:300]))
            answer: dict[str, object] = json.loads(data)
            return answer
        finally:
            conn.close()

    def etcd_revision(self) -> int:
        """etcd's current revision (every write to the API server's objects moves it on)."""
        header = self.etcd_call("kv/range", {"key": base64.b64encode(b"/registry/").decode(), "limit": 1, "keys_only": True})["header"]
        return int(header["revision"])  # type: ignore[index]

    def etcd_compacted(self, revision: int) -> bool:
        """Whether etcd's history at ``revision`` has been compacted away (by :meth:`compact_etcd` or the API server)."""
        try:
            self.etcd_call("kv/range", {"key": base64.b64encode(b"/registry/").decode(), "limit": 1, "keys_only": True,
                                        "revision": revision})
        except ControlPlaneError as err:
            if "compacted" in str(err):
                return True
            raise
        return False

    def compact_etcd(self, revision: int | None = None) -> int:
        """Compact etcd's history up to ``revision`` (default: the current one), physically; the revision."""
        revision = self.etcd_revision() if revision is None else revision
        self.etcd_call("kv/compaction", {"revision": revision, "physical": True})
        return revision

    # -- plumbing --------------------------------------------------------------
    def _spawn(self, name: str, args: list[str], env: dict[str, str] | None = None) -> None:
        assert self.work_dir is not None
        process = Process(name, [str(self.bin_dir / name), *args], self.work_dir / ("%s.log" % name), env)
        self.processes.append(process)
        process.start()

    def _wait(self, name: str, ready: Callable[[], bool]) -> None:
        """Until ``ready()`` is true, at most ``ready_timeout`` seconds; fail at once if a process exits."""
        deadline = time.monotonic() + self.ready_timeout
        last = None
        while True:
            self.check_alive()
            try:
                if ready():
                    return
            except (OSError, ssl.SSLError, http.client.HTTPException, ValueError) as err:
                last = err
            if time.monotonic() > deadline:
                raise ControlPlaneError("%s was not ready within %.0f s (last error: %s)" % (name, self.ready_timeout, last))
            time.sleep(0.2)

    def _etcd_healthy(self) -> bool:
        conn = http.client.HTTPConnection(LOOPBACK, self.etcd_port, timeout=2)
        try:
            conn.request("GET", "/health")
            response = conn.getresponse()
            return response.status == 200 and json.loads(response.read()).get("health") == "true"
        finally:
            conn.close()

    def _https_ok(self, port: int, path: str, token: str | None, verify: bool) -> bool:
        if verify:
            context = ssl.create_default_context(cafile=str(self.ca_path))
        else:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        host = self.address if port == self.apiserver_port else LOOPBACK
        conn = http.client.HTTPSConnection(host, port, timeout=2, context=context)
        try:
            conn.request("GET", path, headers={"Authorization": "Bearer %s" % token} if token else {})
            response = conn.getresponse()
            return response.status == 200 and response.read().strip() == b"ok"
        finally:
            conn.close()

    def _http_ok(self, port: int, path: str) -> bool:
        conn = http.client.HTTPConnection(LOOPBACK, port, timeout=2)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            response.read()
            return response.status == 200
        finally:
            conn.close()


def serve(argv: list[str] | None = None) -> int:
    """Run a control plane in the foreground until SIGTERM (a lab container's systemd unit runs it).

    The colocation scenario runs etcd and kube-apiserver this way in its
    controller container, kube-apiserver on the container's own address, so
    that the copilot there and Ansible on the lab's host reach it; the admin's
    kubeconfig (the CA inline) goes to ``--kubeconfig``.
    """
    import argparse

    parser = argparse.ArgumentParser(description=serve.__doc__.splitlines()[0])
    parser.add_argument("--bin", required=True, help="make k8s-bin's binaries")
    parser.add_argument("--address", default=LOOPBACK)
    parser.add_argument("--port", type=int, default=6443)
    parser.add_argument("--kubeconfig", required=True, help="where the admin's kubeconfig goes (0600)")
    parser.add_argument("--components", default="etcd,kube-apiserver")
    args = parser.parse_args(argv)
    plane = ControlPlane(args.bin, address=args.address, apiserver_port=args.port,
                         components=tuple(args.components.split(",")), ready_timeout=120.0)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    plane.start()
    try:
        plane.write_kubeconfig(args.kubeconfig, embed_ca=True)
        print("control plane at %s (%s)" % (plane.server, ", ".join(p.name for p in plane.processes)), flush=True)
        while not stopping:
            plane.check_alive()
            time.sleep(1)
    finally:
        plane.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(serve())
