# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Admission latency, throughput, time to READY and RSS of the copilot daemon at 1,000 and 10,000 GenericNodes.

Not a test: runs the real ``hybridhpc-copilot`` daemon as a process against
two stand-ins on loopback, prints a table and writes a JSON report.

* Kubernetes is a real control plane (``--kubernetes real``, the default):
  etcd, kube-apiserver (RBAC, TLS, the GenericNode CRD) and kwok, which runs
  the N Nodes as a kubelet would (Ready, heartbeats), from ``make k8s-bin``
  (tests/k8s_control_plane/plane.py starts them on 127.0.0.1); or the API
  server double (``--kubernetes double``, ``tests/k8s_double``, a process).
  Either holds N GenericNodes, N Nodes and N pods (one per node, Pending).
* slurmrestd is ``tests/fakes/slurmrestd.py`` (a process: slurmrestd's HTTP
  API over an in-memory Slurm with N nodes, checking the copilot's JWTs). No real
  slurmctld or slurmrestd takes part.

The scheduler's side is this script: it appends an admission to a random
GenericNode with one JSON patch, and a watch on GenericNodes tells when the
copilot wrote ``Granted``. Latency is from the patch's answer to that watch
event. Sequential: one admission at a time. Burst: many admissions on distinct
nodes written at once, as fast as a few writer threads can; throughput is
granted admissions per second from the first write to the last grant.

The daemon runs with its shipped intervals (Slurm polled every 5 s, full
resync every 60 s) and its metrics endpoint on, started by the process harness
of the copilot's tests (``copilot_process.CopilotProcess``); its RSS is read
from /proc/PID/status. After the burst, /metrics is scraped a few times (time
and size per scrape) before the peak RSS is read, so the peak includes them.
The CPU seconds each process (the copilot, both stand-ins, this script) spent
in each phase show which of them a phase waited on.

    python tests/bench/bench_copilot.py [--nodes 1000 --nodes 10000] [--sequential 200] [--burst 500]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import os
import pathlib
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import httpx

ROOT = pathlib.Path(__file__).resolve().parents[2]
COPILOT = ROOT / "roles" / "copilot" / "files" / "copilot"
REPORT = ROOT / ".cache" / "bench" / "copilot.json"
for path in (COPILOT / "tests", COPILOT / "src", ROOT / "tests"):
    sys.path.insert(0, str(path))

from copilot_process import (  # noqa: E402 - the harness the copilot's process-level tests use
    DEFAULT_CLUSTER,
    GENERICNODES_PATH,
    LABEL_CLUSTER_NAME,
    CopilotProcess,
    KubeDouble,
    _first_line,
    _stop,
    free_port,
)
from k8s_control_plane.plane import ControlPlane  # noqa: E402 - the tests' control plane harness

GROUP_VERSION = "kai.alibabacloud.com/v1alpha1"
CLUSTER = DEFAULT_CLUSTER
# What every shared node gives Kubernetes to share, and what one admission asks:
# room for far more admissions per node than a run puts there, so none is denied.
NODE_CPUS, NODE_MEMORY_MB = 64, 256000
REQUEST = {"cpu": "250m", "memory": "512Mi"}

# Issue 47's targets (against the real API server).
TARGET_P99_MS = {1000: 50.0, 10000: 100.0}
TARGET_BURST_PER_S = {1000: 500.0, 10000: 300.0}
TARGET_RSS_MB_AT_10000 = 130.0
CRD_FILE = COPILOT / "crd" / "genericnodes.kai.alibabacloud.com.yaml"
SCRAPES = 3


# -- the world ----------------------------------------------------------------------------------


def node_names(count: int) -> list[str]:
    return ["c%05d" % i for i in range(count)]


def world_objects(count: int) -> list[dict]:
    """Per Slurm node: its GenericNode, its Kubernetes Node and one pending pod."""
    objects = []
    for name in node_names(count):
        kube_name = "k8s-" + name
        objects.append(
            {
                "apiVersion": GROUP_VERSION,
                "kind": "GenericNode",
                "metadata": {"name": kube_name, "labels": {LABEL_CLUSTER_NAME: CLUSTER, "kai.alibabacloud.com/cluster-namespace": "slurm"}},
                "spec": {"type": "Slurm", "alias": name, "admissions": []},
            }
        )
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": kube_name, "labels": {"kubernetes.io/hostname": kube_name}},
                "spec": {},
                "status": {"capacity": {"cpu": "64", "memory": "256Gi"}},
            }
        )
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "pod-" + name, "namespace": "default", "labels": {"app": "bench"}},
                "spec": {"containers": [{"name": "main", "image": "registry.example/app:1", "resources": {"requests": dict(REQUEST)}}]},
            }
        )
    return objects


# -- the processes ------------------------------------------------------------------------------


class RealKube:
    """etcd, kube-apiserver and kwok from make k8s-bin, with the GenericNode CRD, and what the bench uses of
    KubeDouble: ``kubeconfig`` (the admin's), ``url``, ``token``, ``verify``, ``request``, ``create``, ``pids``."""

    def __init__(self, workdir: pathlib.Path, bin_dir: str):
        self.workdir, self.bin_dir = workdir, bin_dir
        self.plane: ControlPlane | None = None
        self._http: httpx.Client | None = None

    def start(self) -> RealKube:
        import yaml

        self.plane = ControlPlane(self.bin_dir, components=("etcd", "kube-apiserver", "kwok"), ready_timeout=120).start()
        self.kubeconfig = str(self.plane.write_kubeconfig(self.workdir / "kubeconfig"))
        self.url, self.token, self.verify = self.plane.server, self.plane.admin_token, str(self.plane.ca_path)
        self._http = httpx.Client(base_url=self.url, headers={"Authorization": "Bearer " + self.token}, verify=self.verify,
                                  timeout=60)
        self.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", yaml.safe_load(CRD_FILE.read_text()))
        deadline = time.monotonic() + 60
        # The CRD served, and the namespace the pods go to made by the API server's own bootstrap.
        while not (self._ok(GENERICNODES_PATH + "?limit=1") and self._ok("/api/v1/namespaces/default")):
            if time.monotonic() > deadline:
                raise RuntimeError("the GenericNode CRD or namespace default not served within 60 s")
            time.sleep(0.2)
        return self

    def _ok(self, path: str) -> bool:
        return self._http.get(path).status_code == 200

    def request(self, method: str, path: str, body=None, content_type: str = "application/json"):
        response = self._http.request(method, path, content=None if body is None else json.dumps(body),
                                      headers={"Content-Type": content_type})
        if response.status_code >= 400:
            raise RuntimeError("%s %s: %s %s" % (method, path, response.status_code, response.text[:300]))
        return response.json()

    def create(self, obj: dict) -> dict:
        kind = obj["kind"]
        if kind == "GenericNode":
            path = GENERICNODES_PATH
        elif kind == "Pod":
            path = "/api/v1/namespaces/%s/pods" % obj["metadata"].get("namespace", "default")
        else:
            path = "/api/v1/%ss" % kind.lower()
        return self.request("POST", path, obj)

    def pids(self) -> dict[str, int]:
        return {process.name: process.popen.pid for process in self.plane.processes}

    def stop(self) -> None:
        if self._http is not None:
            self._http.close()
        if self.plane is not None:
            self.plane.stop()


def start_kubernetes(workdir: pathlib.Path, count: int, writers: int, real: str | None = None):
    """The real control plane (``real``: make k8s-bin's directory) or the API server double as a process, filled
    over HTTP (as kubectl would) by a few writer threads."""
    if real:
        kube = RealKube(workdir, real).start()
    else:
        # A real API server keeps minutes of watch history (etcd): a window this wide
        # lets the copilot's watches resume after its first sync instead of re-listing.
        kube = KubeDouble(workdir, in_process=False, window=20 * count + 10000).start()
        kube.verify = False
        kube.pids = lambda: {"kubernetes_double": kube.process.pid}
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=writers) as pool:
            list(pool.map(kube.create, world_objects(count)))
    except BaseException:
        kube.stop()
        raise
    return kube


def start_fake_slurmrestd(workdir: pathlib.Path, count: int, jwt_key: pathlib.Path) -> tuple[subprocess.Popen, str]:
    """tests/fakes/slurmrestd.py itself, not the harness's slurmrestd: that one saves Slurm's whole state to a file
    after every change, tens of milliseconds at 10,000 nodes that would be measured as the copilot's."""
    nodes = [arg for name in node_names(count) for arg in ("--node", "%s:%d:%d" % (name, NODE_CPUS, NODE_MEMORY_MB))]
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}  # the fake imports nothing of the copilot
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "fakes" / "slurmrestd.py"), "--port", "0", "--jwt-key", str(jwt_key), *nodes],
        stdout=subprocess.PIPE,
        stderr=open(workdir / "fake_slurmrestd.log", "wb"),
        text=True,
        env=env,
    )
    return process, _first_line(process, "fake_slurmrestd", 60).rsplit(" ", 1)[-1]


def copilot_for(workdir: pathlib.Path, count: int, kube: KubeDouble, slurm_url: str, jwt_key: pathlib.Path) -> CopilotProcess:
    """The daemon with its shipped defaults for the intervals (the harness's are short, for fault tests)."""
    nodes = dict.fromkeys(node_names(count), (NODE_CPUS, NODE_MEMORY_MB))
    return CopilotProcess(
        workdir,
        kube.kubeconfig,
        slurm_url,
        jwt_key,
        nodes,
        CLUSTER,
        settings={"slurmrestd": {"timeout": 10}, "resync_interval": 60, "slurm_poll_interval": 5, "watch_timeout": 300,
                  "metrics": {"port": free_port()}},
    )


def wait_ready(copilot: CopilotProcess, timeout: float) -> float:
    """Seconds from now until the daemon logs "ready" (it sends READY=1 to systemd at the same point).

    Reads only what the log gained since the last look: the harness's wait_ready
    parses the whole log each time, which at 10,000 nodes would take CPU from
    the daemon being measured.
    """
    started = time.monotonic()
    deadline = started + timeout
    offset = 0
    while True:
        with open(copilot.log_file, "rb") as handle:
            handle.seek(offset)
            data = handle.read()
        complete = data[: data.rfind(b"\n") + 1]
        offset += len(complete)
        if b'"msg": "ready"' in complete:
            return time.monotonic() - started
        if copilot.process.poll() is not None:
            raise RuntimeError("the copilot exited with %s; see %s" % (copilot.process.returncode, copilot.log_file))
        if time.monotonic() > deadline:
            raise RuntimeError("the copilot was not ready within %ds; see %s" % (timeout, copilot.log_file))
        time.sleep(0.02)


def start_profiler(pid: int, output: pathlib.Path) -> subprocess.Popen:
    """py-spy sampling the daemon's threads while they hold the GIL (its CPU, not its waits) into collapsed stacks."""
    spy = shutil.which("py-spy") or str(pathlib.Path(sys.executable).parent / "py-spy")
    if not os.path.exists(spy):
        raise RuntimeError("--profile needs py-spy (pip install py-spy)")
    return subprocess.Popen(
        [spy, "record", "--pid", str(pid), "--rate", "200", "--gil", "--format", "raw", "--output", str(output)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of a live process, from /proc."""
    with open("/proc/%d/stat" % pid, encoding="ascii") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory_of(pid: int) -> dict:
    """VmHWM (peak) and VmRSS in MB, and CPU seconds, of a live process, from /proc."""
    out = {}
    with open("/proc/%d/status" % pid, encoding="ascii") as handle:
        for line in handle:
            key, _sep, value = line.partition(":")
            if key in ("VmHWM", "VmRSS"):
                out[key] = int(value.split()[0]) / 1024.0
    out["cpu_seconds"] = cpu_seconds(pid)
    return out


class CpuShares:
    """CPU seconds each process spent per phase, the wall-clock seconds of the phase, the copilot's VmRSS and VmHWM at its end."""

    def __init__(self, pids: dict[str, int]):
        self.pids = pids
        self.phases: dict[str, dict] = {}
        self._start = self._now()

    def _now(self) -> tuple[float, dict[str, float]]:
        return time.monotonic(), {name: cpu_seconds(pid) for name, pid in self.pids.items()}

    def phase(self, name: str) -> None:
        """The phase that ended now (the next starts now), and the copilot's memory at its end."""
        (wall0, cpu0), (wall1, cpu1) = self._start, self._now()
        self.phases[name] = dict({who: round(cpu1[who] - cpu0[who], 2) for who in cpu1}, wall_s=round(wall1 - wall0, 2))
        self.phases[name]["copilot_memory_mb"] = {k: v for k, v in memory_of(self.pids["copilot"]).items() if k != "cpu_seconds"}
        self._start = (wall1, cpu1)


def scrape_metrics(port: int, count: int) -> dict:
    """``count`` scrapes of /metrics: seconds each took, and the size of the last."""
    seconds, size = [], 0
    with httpx.Client(timeout=60) as client:
        for _unused in range(count):
            started = time.monotonic()
            answer = client.get("http://127.0.0.1:%d/metrics" % port)
            seconds.append(time.monotonic() - started)
            answer.raise_for_status()
            size = len(answer.content)
    return {"scrapes": count, "seconds_min": min(seconds), "seconds_max": max(seconds), "bytes": size}


# -- the scheduler's side ---------------------------------------------------------------------


class GrantWatch:
    """A GenericNode watch that notes when each admission it is told about first shows Reserved and Granted (or Denied)."""

    def __init__(self, url: str, token: str, resource_version: str, verify=True):
        self.url, self.token, self.resource_version, self.verify = url, token, resource_version, verify
        self.tracked: dict[str, dict] = {}
        self.lock = threading.Lock()
        self.settled = threading.Condition(self.lock)
        self.stopped = False
        self.thread = threading.Thread(target=self._run, name="grant-watch", daemon=True)
        self.thread.start()

    def track(self, uid: str) -> None:
        with self.lock:
            self.tracked.setdefault(uid, {})

    def _run(self) -> None:
        headers = {"Authorization": "Bearer " + self.token}
        with httpx.Client(base_url=self.url, headers=headers, timeout=httpx.Timeout(10, read=None), verify=self.verify) as client:
            while not self.stopped:
                params = {
                    "watch": "1",
                    "resourceVersion": self.resource_version,
                    "allowWatchBookmarks": "true",
                    "timeoutSeconds": "600",
                    "labelSelector": "%s=%s" % (LABEL_CLUSTER_NAME, CLUSTER),
                }
                try:
                    with client.stream("GET", GENERICNODES_PATH, params=params) as response:
                        for line in response.iter_lines():
                            if self.stopped:
                                return
                            if line:
                                self._event(json.loads(line), time.monotonic())
                except httpx.HTTPError:
                    # The API server may end a watch at any time (a real one does, after a while):
                    # watch again from the last resourceVersion seen, as client-go's reflector does.
                    if self.stopped:
                        return
                    time.sleep(0.1)

    def _event(self, event: dict, seen: float) -> None:
        obj = event.get("object") or {}
        self.resource_version = (obj.get("metadata") or {}).get("resourceVersion") or self.resource_version
        ledger = (obj.get("status") or {}).get("admissions") or {}
        with self.lock:
            for uid, entry in ledger.items():
                times = self.tracked.get(uid)
                if times is not None and entry.get("state") not in times:
                    times[entry.get("state")] = seen
                    if entry.get("state") in ("Granted", "Denied"):
                        self.settled.notify_all()

    def wait(self, uids, deadline: float) -> None:
        """Until every uid is Granted or Denied, or the deadline (monotonic) passes."""
        with self.lock:
            while any(not ({"Granted", "Denied"} & set(self.tracked[u])) for u in uids):
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self.settled.wait(min(left, 1.0))

    def times(self, uid: str) -> dict:
        with self.lock:
            return dict(self.tracked.get(uid) or {})

    def stop(self) -> None:
        self.stopped = True


class Scheduler:
    """Appends admissions to GenericNodes the way a scheduler plugin would: one JSON patch each."""

    def __init__(self, kube: KubeDouble):
        self.kube = kube
        self.serial = 0
        self.lock = threading.Lock()

    def current_resource_version(self) -> str:
        # An empty list (a selector nothing matches) carries the server's current resourceVersion.
        return self.kube.request("GET", GENERICNODES_PATH + "?labelSelector=bench-matches-nothing%3D1")["metadata"]["resourceVersion"]

    def new_uid(self) -> str:
        with self.lock:
            self.serial += 1
            return "bench-%06d" % self.serial

    def admit(self, slurm_node: str, uid: str) -> tuple[float, float]:
        """Append the admission; (monotonic time the write was sent, the time its answer came)."""
        patch = [
            {
                "op": "add",
                "path": "/spec/admissions/-",
                "value": {"uid": uid, "pod": {"namespace": "default", "name": "pod-" + slurm_node}, "request": dict(REQUEST)},
            }
        ]
        sent = time.monotonic()
        self.kube.request("PATCH", "%s/k8s-%s" % (GENERICNODES_PATH, slurm_node), patch, "application/json-patch+json")
        return sent, time.monotonic()


# -- figures ------------------------------------------------------------------------------------


def percentile(values: list[float], fraction: float) -> float | None:
    """Nearest-rank percentile (no interpolation: p99 of 200 samples is the 198th smallest)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered), max(1, math.ceil(fraction * len(ordered)))) - 1]


def latency_summary(samples: list[dict]) -> dict:
    granted = [s["granted_ms"] for s in samples if s.get("granted_ms") is not None]
    reserved = [s["reserved_ms"] for s in samples if s.get("reserved_ms") is not None]
    return {
        "admissions": len(samples),
        "granted": len(granted),
        "denied": sum(1 for s in samples if s.get("denied")),
        "timed_out": sum(1 for s in samples if s.get("granted_ms") is None and not s.get("denied")),
        "granted_p50_ms": percentile(granted, 0.50),
        "granted_p99_ms": percentile(granted, 0.99),
        "granted_max_ms": max(granted) if granted else None,
        "granted_mean_ms": statistics.fmean(granted) if granted else None,
        "reserved_p50_ms": percentile(reserved, 0.50),
        "reserved_p99_ms": percentile(reserved, 0.99),
        "write_p50_ms": percentile([s["write_ms"] for s in samples], 0.50),
    }


def sample(watch: GrantWatch, uid: str, node: str, sent: float, answered: float) -> dict:
    times = watch.times(uid)

    def since(state):
        return None if state not in times else max(0.0, times[state] - answered) * 1000

    return {
        "uid": uid,
        "node": node,
        "write_ms": (answered - sent) * 1000,
        "reserved_ms": since("Reserved"),
        "granted_ms": since("Granted"),
        "denied": "Denied" in times,
    }


# -- one run --------------------------------------------------------------------------------------


def run_sequential(scheduler: Scheduler, watch: GrantWatch, nodes: list[str], count: int, rng: random.Random, timeout: float, budget: float) -> list[dict]:
    samples = []
    phase_end = time.monotonic() + budget
    for _unused in range(count):
        if time.monotonic() > phase_end:
            break
        node, uid = rng.choice(nodes), scheduler.new_uid()
        watch.track(uid)
        sent, answered = scheduler.admit(node, uid)
        watch.wait([uid], answered + timeout)
        samples.append(sample(watch, uid, node, sent, answered))
    return samples


def run_burst(
    scheduler: Scheduler, watch: GrantWatch, nodes: list[str], count: int, rng: random.Random, writers: int, timeout: float
) -> tuple[list[dict], dict]:
    targets = rng.sample(nodes, min(count, len(nodes)))
    uids = [scheduler.new_uid() for _unused in targets]
    for uid in uids:
        watch.track(uid)
    with concurrent.futures.ThreadPoolExecutor(max_workers=writers) as pool:
        writes = list(pool.map(scheduler.admit, targets, uids))
    first_sent = min(sent for sent, _answered in writes)
    last_answer = max(answered for _sent, answered in writes)
    watch.wait(uids, last_answer + timeout)
    samples = [sample(watch, uid, node, sent, answered) for uid, node, (sent, answered) in zip(uids, targets, writes)]
    grants = [watch.times(uid).get("Granted") for uid in uids]
    done = [g for g in grants if g is not None]
    span = (max(done) - first_sent) if done else None
    figures = {
        "writers": writers,
        "writes_s": last_answer - first_sent,
        "span_s": span,
        "admissions_per_s": (len(done) / span) if span else None,
    }
    return samples, figures


def settle(scheduler: Scheduler, watch: GrantWatch, nodes: list[str], rng: random.Random, timeout: float) -> float:
    """Warm-up admissions until one is granted twice in a row under a second (the daemon replayed its start)."""
    started = time.monotonic()
    quick = 0
    while quick < 2 and time.monotonic() - started < timeout:
        node, uid = rng.choice(nodes), scheduler.new_uid()
        watch.track(uid)
        _sent, answered = scheduler.admit(node, uid)
        watch.wait([uid], answered + timeout)
        granted = watch.times(uid).get("Granted")
        quick = quick + 1 if granted is not None and granted - answered < 1.0 else 0
    return time.monotonic() - started


def run_one(count: int, args, workdir: pathlib.Path) -> dict:
    rng = random.Random(count)
    nodes = node_names(count)
    jwt_key = workdir / "jwt_hs256.key"
    jwt_key.write_bytes(os.urandom(32))
    kube = fake = copilot = None
    result: dict = {"generic_nodes": count, "kubernetes_nodes": count, "pods": count, "slurm_nodes": count, "load_average_before": os.getloadavg()}
    try:
        started = time.monotonic()
        kube = start_kubernetes(workdir, count, args.writers, args.k8s_bin if args.kubernetes == "real" else None)
        fake, slurm_url = start_fake_slurmrestd(workdir, count, jwt_key)
        result["doubles_start_s"] = time.monotonic() - started
        log("  %d nodes: stand-ins up and filled in %.1fs; starting the copilot" % (count, result["doubles_start_s"]))

        copilot = copilot_for(workdir, count, kube, slurm_url, jwt_key)
        copilot.start(wait_ready=False)
        result["ready_first_start_s"] = wait_ready(copilot, args.ready_timeout)
        result["memory_at_ready"] = memory_of(copilot.process.pid)
        log("  %d nodes: READY after %.1fs (first start: every GenericNode gets its finalizer and ledger)" % (count, result["ready_first_start_s"]))

        profiler = start_profiler(copilot.process.pid, workdir.parent / ("copilot-%d.stacks" % count)) if args.profile else None
        scheduler = Scheduler(kube)
        watch = GrantWatch(kube.url, kube.token, scheduler.current_resource_version(), kube.verify)
        cpu = CpuShares(dict({"copilot": copilot.process.pid, "fake_slurmrestd": fake.pid, "bench": os.getpid()}, **kube.pids()))
        try:
            result["settle_s"] = settle(scheduler, watch, nodes, rng, args.timeout)
            cpu.phase("settle")
            sequential = run_sequential(scheduler, watch, nodes, args.sequential, rng, args.timeout, args.phase_budget)
            cpu.phase("sequential")
            result["sequential"] = latency_summary(sequential)
            log(
                "  %d nodes: sequential p50 %s p99 %s max %s ms"
                % (count, ms(result["sequential"]["granted_p50_ms"]), ms(result["sequential"]["granted_p99_ms"]), ms(result["sequential"]["granted_max_ms"]))
            )
            burst, figures = run_burst(scheduler, watch, nodes, args.burst, rng, args.writers, args.timeout)
            cpu.phase("burst")
            result["burst"] = dict(latency_summary(burst), **figures)
            log("  %d nodes: burst of %d: %s admissions/s" % (count, len(burst), num(figures["admissions_per_s"])))
        finally:
            watch.stop()
            if profiler is not None:
                profiler.send_signal(signal.SIGINT)
                profiler.wait(30)
        result["metrics_scrape"] = scrape_metrics(copilot.config["metrics"]["port"], SCRAPES)
        cpu.phase("scrapes")
        result["cpu_seconds_by_phase"] = cpu.phases
        log("  %d nodes: /metrics %.1f MB in %.2f s" % (count, result["metrics_scrape"]["bytes"] / 2**20, result["metrics_scrape"]["seconds_min"]))
        result["memory_after_run"] = memory_of(copilot.process.pid)
        # Kubernetes' own processes beside the copilot's (peak and current memory, CPU over the whole run).
        result["kubernetes_processes"] = {name: memory_of(pid) for name, pid in kube.pids().items()}
        copilot.terminate(30)

        # A restart finds every ledger written: the usual way the daemon comes up.
        copilot.start(wait_ready=False)
        result["ready_restart_s"] = wait_ready(copilot, args.ready_timeout)
        result["memory_restart_at_ready"] = memory_of(copilot.process.pid)
        log("  %d nodes: restart READY after %.1fs" % (count, result["ready_restart_s"]))
        result["load_average_after"] = os.getloadavg()
    finally:
        if copilot is not None:
            copilot.kill()
        _stop(fake)
        if kube is not None:
            kube.stop()
    return result


# -- output -----------------------------------------------------------------------------------------


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def ms(value) -> str:
    return "-" if value is None else "%.1f" % value


def num(value) -> str:
    return "-" if value is None else "%.1f" % value


def table(results: list[dict]) -> str:
    kube_processes = [who for who in KUBE_PROCESSES if any(who in r.get("kubernetes_processes", {}) for r in results)]
    rows = [
        ("sequential admissions (granted/asked)", lambda r: "%d/%d" % (r["sequential"]["granted"], r["sequential"]["admissions"])),
        ("  latency p50 ms", lambda r: ms(r["sequential"]["granted_p50_ms"])),
        ("  latency p99 ms", lambda r: ms(r["sequential"]["granted_p99_ms"])),
        ("  latency max ms", lambda r: ms(r["sequential"]["granted_max_ms"])),
        ("  to Reserved p50 ms", lambda r: ms(r["sequential"]["reserved_p50_ms"])),
        ("burst admissions (granted/asked)", lambda r: "%d/%d" % (r["burst"]["granted"], r["burst"]["admissions"])),
        ("  throughput admissions/s", lambda r: num(r["burst"]["admissions_per_s"])),
        ("  latency p50 ms", lambda r: ms(r["burst"]["granted_p50_ms"])),
        ("  latency p99 ms", lambda r: ms(r["burst"]["granted_p99_ms"])),
        ("  latency max ms", lambda r: ms(r["burst"]["granted_max_ms"])),
        ("READY, first start s", lambda r: num(r["ready_first_start_s"])),
        ("READY, restart s", lambda r: num(r.get("ready_restart_s"))),
        ("/metrics scrape s (fastest of %d)" % SCRAPES, lambda r: "%.2f" % r["metrics_scrape"]["seconds_min"]),
        ("/metrics size MB", lambda r: "%.2f" % (r["metrics_scrape"]["bytes"] / 2**20)),
        ("RSS peak (VmHWM) after the run MB", lambda r: num(r["memory_after_run"]["VmHWM"])),
        ("RSS now (VmRSS) after the run MB", lambda r: num(r["memory_after_run"]["VmRSS"])),
        ("copilot CPU s (whole run)", lambda r: num(r["memory_after_run"]["cpu_seconds"])),
        ("burst CPU s: copilot", lambda r: num(r["cpu_seconds_by_phase"]["burst"]["copilot"])),
        *[("  %s" % who, lambda r, who=who: num(r["cpu_seconds_by_phase"]["burst"].get(who))) for who in kube_processes],
        ("  fake slurmrestd", lambda r: num(r["cpu_seconds_by_phase"]["burst"]["fake_slurmrestd"])),
        ("  bench (scheduler, watch)", lambda r: num(r["cpu_seconds_by_phase"]["burst"]["bench"])),
        ("  wall-clock s", lambda r: num(r["cpu_seconds_by_phase"]["burst"]["wall_s"])),
        *[("%s VmHWM MB / CPU s (whole run)" % who,
           lambda r, who=who: "-" if who not in r.get("kubernetes_processes", {}) else "%.0f / %.1f" % (
               r["kubernetes_processes"][who]["VmHWM"], r["kubernetes_processes"][who]["cpu_seconds"]))
          for who in kube_processes],
        ("machine load (1 min) before/after", lambda r: "%.1f/%.1f" % (r["load_average_before"][0], r["load_average_after"][0])),
    ]
    header = "%-40s" % "GenericNodes" + "".join("%14d" % r["generic_nodes"] for r in results)
    lines = [header, "-" * len(header)]
    for label, cell in rows:
        lines.append("%-40s" % label + "".join("%14s" % cell(r) for r in results))
    return "\n".join(lines)


def verdicts(results: list[dict]) -> list[str]:
    def verdict(met: bool) -> str:
        return "met" if met else "MISSED"

    out = []
    for r in results:
        count = r["generic_nodes"]
        if count in TARGET_P99_MS:
            p99 = r["sequential"]["granted_p99_ms"]
            met = p99 is not None and p99 <= TARGET_P99_MS[count]
            out.append("p99 <= %d ms at %d nodes: %s (%s ms)" % (TARGET_P99_MS[count], count, verdict(met), ms(p99)))
        if count in TARGET_BURST_PER_S:
            rate = r["burst"]["admissions_per_s"]
            met = rate is not None and rate >= TARGET_BURST_PER_S[count]
            out.append("burst >= %d admissions/s at %d nodes: %s (%s/s)" % (TARGET_BURST_PER_S[count], count, verdict(met), num(rate)))
        if count == 10000:
            rss = r["memory_after_run"]["VmHWM"]
            out.append("VmHWM <= %d MB at 10000 nodes: %s (%.1f MB)" % (TARGET_RSS_MB_AT_10000, verdict(rss <= TARGET_RSS_MB_AT_10000), rss))
    return out


KUBE_PROCESSES = ("etcd", "kube-apiserver", "kwok", "kubernetes_double")

SETUP = (
    "Real: the hybridhpc-copilot daemon (its own process: python -m hybridhpc_copilot), its kubernetes client, "
    "its slurmrestd client and JWT signing, all over HTTP on loopback; Kubernetes is %s. Stand-ins: "
    "slurmrestd is tests/fakes/slurmrestd.py (slurmrestd's HTTP API over an "
    "in-memory Slurm; no slurmctld; its node JSON has 10 fields where slurmrestd's has about 60, so reading "
    "every node costs the daemon less than against a real slurmrestd). The scheduler is this script (one JSON patch per admission); latency runs "
    "from the patch's answer to a GenericNode watch event showing Granted. All processes share this machine's "
    "%d CPUs."
)
KUBERNETES = {
    "real": "a real control plane: etcd, kube-apiserver with RBAC, TLS and the GenericNode CRD, and kwok running the "
            "Nodes as kubelets would (make k8s-bin, on 127.0.0.1); the copilot and the scheduler speak as its admin",
    "double": "the API server double (tests/k8s_double, a Python process)",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--nodes", type=int, action="append", help="GenericNodes (repeatable; default 1000 and 10000)")
    parser.add_argument("--sequential", type=int, default=200, help="admissions one at a time (default 200)")
    parser.add_argument("--burst", type=int, default=500, help="admissions written at once on distinct nodes (default 500)")
    parser.add_argument("--writers", type=int, default=8, help="threads writing the burst and filling the double (default 8)")
    parser.add_argument("--timeout", type=float, default=30, help="seconds one admission may take (default 30)")
    parser.add_argument("--phase-budget", type=float, default=120, help="seconds the sequential run may take (default 120)")
    parser.add_argument("--ready-timeout", type=float, default=300, help="seconds to wait for READY=1 (default 300)")
    parser.add_argument("--json", default=str(REPORT), help="where to write the report (default %(default)s)")
    parser.add_argument("--copilot-src", help="run the daemon from this source tree (to compare a change)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs of the three processes)")
    parser.add_argument("--kubernetes", choices=("real", "double"), default="real",
                        help="the real control plane from make k8s-bin (default) or the API server double")
    parser.add_argument("--k8s-bin", default=os.environ.get("HYBRIDHPC_K8S_BIN"),
                        help="make k8s-bin's directory (default: $HYBRIDHPC_K8S_BIN)")
    parser.add_argument("--profile", action="store_true", help="sample the daemon with py-spy from READY to the end of the burst (stacks kept with --keep)")
    args = parser.parse_args()
    if args.kubernetes == "real" and not args.k8s_bin:
        parser.error("--kubernetes real needs make k8s-bin's directory: --k8s-bin or HYBRIDHPC_K8S_BIN (make bench sets it)")
    setup = SETUP % (KUBERNETES[args.kubernetes], os.cpu_count() or 0)
    subprocess.run(
        ["sh", str(COPILOT / "tools" / "vendor.sh")],
        check=True,
        stdout=subprocess.DEVNULL,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHON": sys.executable},
    )

    if args.copilot_src:
        os.environ["HYBRIDHPC_COPILOT_SRC"] = str(pathlib.Path(args.copilot_src).resolve())  # read by CopilotProcess
    results = []
    workroot = pathlib.Path(tempfile.mkdtemp(prefix="bench-copilot-"))
    log(setup)
    for count in args.nodes or [1000, 10000]:
        workdir = workroot / str(count)
        workdir.mkdir()
        results.append(run_one(count, args, workdir))
    print()
    print(table(results))
    print()
    for line in verdicts(results):
        print(line)
    print()
    print(setup)
    report = pathlib.Path(args.json)
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(
        json.dumps(
            {
                "setup": setup,
                "kubernetes": args.kubernetes,
                "copilot_src": os.environ.get("HYBRIDHPC_COPILOT_SRC") or str(COPILOT / "src"),
                "python": sys.version.split()[0],
                "cpus": os.cpu_count(),
                "targets": {
                    "p99_ms": TARGET_P99_MS,
                    "burst_admissions_per_s": TARGET_BURST_PER_S,
                    "rss_mb_at_10000": TARGET_RSS_MB_AT_10000,
                },
                "verdicts": verdicts(results),
                "results": results,
            },
            indent=2,
        )
    )
    print("report: %s" % report)
    if args.keep:
        print("logs: %s" % workroot)
    else:
        subprocess.run(["rm", "-rf", str(workroot)], check=False)
    # Like the other benches: a missed target is this run's exit status (make bench reports every bench first).
    return 1 if any("MISSED" in line for line in verdicts(results)) else 0


if __name__ == "__main__":
    sys.exit(main())
