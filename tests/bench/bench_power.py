# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""API calls and time of hybridhpc-power's aws provider at 1,000 nodes, and of its reconciler at 10,000.

Not a test: prints a table and writes .cache/bench/power.json.

* aws: the real provider (providers/aws.py, boto3) against moto's EC2 and SSM,
  served by moto's threaded server on 127.0.0.1 (nothing leaves loopback:
  dummy credentials, no instance metadata lookups, every client's endpoint is
  the local server). Resumes 1,000 nodes, resumes them again (idempotent),
  lists them, suspends them all and suspends again; counts API calls with
  botocore's before-call event. moto launches MinCount instances where EC2
  launches up to MaxCount, so the in-process server is patched to launch
  MaxCount, like EC2 with enough capacity. moto does the work of EC2 in this
  process: the seconds are moto's more than the provider's.
* reconciler: a synthetic ``scontrol --json show nodes`` document (Slurm
  24.11, data_parser v0.0.42: every node with the ~60 fields scontrol
  prints) for 10,000 State=CLOUD nodes in four node sets, in every state the
  reconciler has a rule for, and the instances their providers would list
  (some leaked, some missing, some of nodes in no node set). Times
  ``slurm.parse_nodes(text)`` + ``reconcile.plan(...)``: median of 5 runs,
  then one more under tracemalloc for the peak memory.

* lab (when `make lab` is up): submit to RUNNING on each powered-down
  elastic node of the lab's cloud cluster in turn (sbatch -w, one at a time),
  split into phases from the transition log and slurmctld's log: Slurm's
  power-save loop calls ResumeProgram; the worker starts the container;
  slurmd registers; slurmctld notices the job's nodes are ready.

    python tests/bench/bench_power.py [--nodes 1000] [--reconcile-nodes 10000] [--runs 5] [--lab-trials 4]
"""

from __future__ import annotations

import argparse
import copy
import datetime
import itertools
import json
import logging
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "roles" / "power_save" / "files" / "hybridhpc_power"
REPORT = ROOT / ".cache" / "bench" / "power.json"
sys.path.insert(0, str(PACKAGE / "src"))

TARGET_CALLS_PER_1000 = 10
CLUSTER = "bench"
REGION = "eu-west-1"
TEMPLATE = "hybridhpc-bench"
PARAMETER = "/hybridhpc/bench/munge-key"

# Safe defaults for botocore: nothing but the loopback server may be asked anything.
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": "/nonexistent/aws-config",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-credentials",
    "NO_PROXY": "127.0.0.1",
    "no_proxy": "127.0.0.1",
}
AWS_ENV_REMOVED = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")

# One node as scontrol --json show nodes prints it on Slurm 24.11 (data_parser v0.0.42), a State=CLOUD node.
NODE_TEMPLATE = {
    "architecture": "x86_64",
    "burstbuffer_network_address": "",
    "boards": 1,
    "boot_time": {"set": True, "infinite": False, "number": 0},
    "cluster_name": CLUSTER,
    "cores": 4,
    "specialized_cores": 0,
    "cpu_binding": 0,
    "cpu_load": 0,
    "free_mem": {"set": False, "infinite": False, "number": 0},
    "cpus": 8,
    "effective_cpus": 8,
    "specialized_cpus": "",
    "energy": {
        "average_watts": 0,
        "base_consumed_energy": 0,
        "consumed_energy": 0,
        "current_watts": {"set": True, "infinite": False, "number": 0},
        "previous_consumed_energy": 0,
        "last_collected": 0,
    },
    "external_sensors": {},
    "extra": "",
    "power": {},
    "features": ["cloud", "c6i.2xlarge"],
    "active_features": ["cloud", "c6i.2xlarge"],
    "gpu_spec": "",
    "gres": "",
    "gres_drained": "N/A",
    "gres_used": "",
    "instance_id": "",
    "instance_type": "",
    "last_busy": {"set": True, "infinite": False, "number": 0},
    "mcs_label": "",
    "specialized_memory": 0,
    "name": "",
    "next_state_after_reboot": ["INVALID"],
    "address": "",
    "hostname": "",
    "state": ["IDLE", "CLOUD", "POWERED_DOWN"],
    "operating_system": "",
    "owner": "",
    "partitions": ["cloud"],
    "port": 6818,
    "real_memory": 15000,
    "res_cores_per_gpu": 0,
    "comment": "",
    "reason": "",
    "reason_changed_at": {"set": True, "infinite": False, "number": 0},
    "reason_set_by_user": "",
    "resume_after": {"set": True, "infinite": False, "number": 0},
    "reservation": "",
    "alloc_memory": 0,
    "alloc_cpus": 0,
    "alloc_idle_cpus": 8,
    "tres_used": "",
    "tres_weighted": 0.0,
    "slurmd_start_time": {"set": True, "infinite": False, "number": 0},
    "sockets": 1,
    "threads": 2,
    "temporary_disk": 0,
    "weight": 1,
    "tres": "cpu=8,mem=15000M,billing=8",
    "version": "",
}


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def vendor() -> None:
    """The package imports its hostlist module from _vendor/, copied there by tools/vendor.sh."""
    subprocess.run(
        ["sh", str(PACKAGE / "tools" / "vendor.sh")],
        check=True,
        stdout=subprocess.DEVNULL,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHON": sys.executable},
    )


# -- aws against moto on loopback ------------------------------------------------------------


class CallCounter:
    """API calls by operation name, from botocore's before-call event (once per call; retries are not calls)."""

    def __init__(self, clients):
        self.names: list[str] = []
        for client in clients:
            client.meta.events.register("before-call", self.record)

    def record(self, model, **_kwargs):
        self.names.append(model.name)

    def take(self) -> dict:
        counts: dict[str, int] = {}
        for name in self.names:
            counts[name] = counts.get(name, 0) + 1
        self.names.clear()
        return counts


def launch_up_to_max_count():
    """Patch the in-process moto to launch MaxCount instances per RunInstances call, as EC2 does when it has the capacity."""
    from moto.ec2.responses.instances import InstanceResponse

    original = InstanceResponse.run_instances

    def run_instances(self):
        wanted = self._get_param("MaxCount", if_none="1")
        get_param = self._get_param
        self._get_param = lambda name, if_none=None: wanted if name == "MinCount" else get_param(name, if_none)
        return original(self)

    InstanceResponse.run_instances = run_instances


def loopback_only(client) -> None:
    """Fail any request that would leave 127.0.0.1 (a bench must never reach AWS)."""
    from urllib.parse import urlsplit

    def check(request, **_kwargs):
        if urlsplit(request.url).hostname != "127.0.0.1":
            raise RuntimeError("bench: a request to %s would leave loopback" % request.url)

    client.meta.events.register("before-send", check)


def timed(call):
    started = time.perf_counter()
    result = call()
    return result, time.perf_counter() - started


def timed_with_cpu(call):
    """(result, wall seconds, CPU seconds of this thread): the provider and botocore, not moto's server thread."""
    cpu = time.thread_time()
    result, seconds = timed(call)
    return result, seconds, time.thread_time() - cpu


def bench_aws(count: int, workdir: pathlib.Path) -> dict:
    for name, value in AWS_ENV.items():
        os.environ[name] = value
    for name in AWS_ENV_REMOVED:
        os.environ.pop(name, None)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    import boto3
    from hybridhpc_power.providers import aws
    from hybridhpc_power.providers.base import Secrets
    from moto.server import ThreadedMotoServer

    launch_up_to_max_count()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        url = "http://%s:%d" % (host, port)
        ec2 = boto3.session.Session().client("ec2", region_name=REGION, endpoint_url=url)
        loopback_only(ec2)
        image = ec2.describe_images(Owners=["amazon"], MaxResults=5)["Images"][0]["ImageId"]
        ec2.create_launch_template(LaunchTemplateName=TEMPLATE, LaunchTemplateData={"ImageId": image, "InstanceType": "c6i.2xlarge"})
        key_file = workdir / "munge.key"
        key_file.write_bytes(os.urandom(1024))
        options = {
            "region": REGION,
            "endpoint_url": url,
            "launch_template": TEMPLATE,
            "conf_server": "ctl1:6817,ctl2:6817",
            "munge_key_parameter": PARAMETER,
            "state_dir": str(workdir / "state"),
        }
        provider = aws.AwsProvider(CLUSTER, options, Secrets(str(key_file)))
        loopback_only(provider.ec2)
        loopback_only(provider.ssm)
        counter = CallCounter([provider.ec2, provider.ssm])
        nodes = ["cloud-dy-%d" % i for i in range(1, count + 1)]
        out: dict = {"nodes": count, "max_batch": provider.max_batch, "steps": []}

        def step(name, call, check):
            result, seconds, cpu = timed_with_cpu(call)
            calls = counter.take()
            problem = check(result)
            out["steps"].append(
                {"step": name, "seconds": seconds, "client_cpu_seconds": cpu, "calls": sum(calls.values()), "by_operation": calls, "problem": problem}
            )
            log("  aws %-28s %3d calls  %7.2fs (client CPU %.2fs)%s" % (name, sum(calls.values()), seconds, cpu, "  PROBLEM: " + problem if problem else ""))
            return result

        step(
            "resume (first: key published)",
            lambda: provider.resume(nodes),
            lambda r: None if len(r.started) == count and not r.failed else "%d started, %d failed" % (len(r.started), len(r.failed)),
        )
        step("resume again (idempotent)", lambda: provider.resume(nodes), lambda r: None if len(r.started) == count else "%d started" % len(r.started))
        step("instances()", provider.instances, lambda found: None if sorted(found) == sorted(nodes) else "%d listed" % len(found))
        step("suspend", lambda: provider.suspend(nodes), lambda r: None if len(r.stopped) == count and not r.failed else "%d failed" % len(r.failed))
        step("suspend again (idempotent)", lambda: provider.suspend(nodes), lambda r: None if len(r.stopped) == count else "%d stopped" % len(r.stopped))
        step("instances() after suspend", provider.instances, lambda found: None if not found else "%d still listed" % len(found))
        return out
    finally:
        server.stop()


# -- the reconciler at scale ------------------------------------------------------------------

NODESETS = ("cloud-a", "cloud-b", "cloud-c", "cloud-d")


def synthetic_cluster(count: int, now: float):
    """(scontrol JSON text, instances per node set, Pending, Settings, the actions plan() must return per kind)."""
    from hybridhpc_power import names, reconcile
    from hybridhpc_power.providers.base import Instance

    per_set = count // len(NODESETS)
    documents = []
    instances: dict[str, dict] = {nodeset: {} for nodeset in NODESETS}
    membership = {}
    queued = {}
    last_resume = {}
    expected = dict.fromkeys(reconcile.KINDS, 0)
    old, recent = now - 3600, now - 10

    serials = itertools.count(1)

    def machine(node, state="running"):
        serial = next(serials)
        return Instance(node=node, id="i-%017x" % serial, state=state, address="10.0.%d.%d" % divmod(serial % 65536, 256), created=old)

    for set_index, nodeset in enumerate(NODESETS):
        for number in range(1, per_set + 1):
            node = "%s-%d" % (nodeset, number)
            membership[node] = nodeset
            entry = copy.deepcopy(NODE_TEMPLATE)
            entry.update(name=node, address=node, hostname=node)
            slot = (number * 7919 + set_index) % 100  # spread the kinds over every node set
            listing = instances[nodeset]
            if slot < 60:  # idle~, no machine
                entry["state"] = ["IDLE", "CLOUD", "POWERED_DOWN"]
            elif slot < 61:  # idle~ with a machine: leaked
                entry["state"] = ["IDLE", "CLOUD", "POWERED_DOWN"]
                listing[node] = machine(node)
                expected[reconcile.TERMINATE] += 1
            elif slot < 80:  # running a job, machine running
                entry["state"] = ["ALLOCATED", "CLOUD"] if slot % 2 else ["IDLE", "CLOUD"]
                listing[node] = machine(node)
            elif slot < 81:  # up, machine gone
                entry["state"] = ["ALLOCATED", "CLOUD"]
                expected[reconcile.INSTANCE_GONE] += 1
            elif slot < 86:  # powering up, machine pending, resumed a moment ago
                entry["state"] = ["IDLE", "CLOUD", "NOT_RESPONDING", "POWERING_UP"]
                listing[node] = machine(node, "pending")
                last_resume[node] = recent
            elif slot < 87:  # powering up without machine or request for an hour: the request was lost
                entry["state"] = ["IDLE", "CLOUD", "NOT_RESPONDING", "POWERING_UP"]
                last_resume[node] = old
                expected[reconcile.RESUME_AGAIN] += 1
            elif slot < 89:  # powering up, queued: the worker is about to act, left alone
                entry["state"] = ["IDLE", "CLOUD", "NOT_RESPONDING", "POWERING_UP"]
                queued[node] = names.RESUME
            elif slot < 92:  # down~ with our reason, long ago: back to service
                entry["state"] = ["DOWN", "CLOUD", "NOT_RESPONDING", "POWERED_DOWN"]
                entry["reason"] = names.REASON_RESUME_FAILED + "InsufficientInstanceCapacity"
                entry["reason_changed_at"] = {"set": True, "infinite": False, "number": int(old)}
                entry["reason_set_by_user"] = "root"
                expected[reconcile.RETURN_TO_SERVICE] += 1
            elif slot < 94:  # down~ with our reason, a moment ago: not yet
                entry["state"] = ["DOWN", "CLOUD", "NOT_RESPONDING", "POWERED_DOWN"]
                entry["reason"] = names.REASON_INSTANCE_GONE
                entry["reason_changed_at"] = {"set": True, "infinite": False, "number": int(recent)}
            elif slot < 95:  # our DOWN not followed by a power down
                entry["state"] = ["DOWN", "CLOUD", "NOT_RESPONDING"]
                entry["reason"] = names.REASON_INSTANCE_GONE
                entry["reason_changed_at"] = {"set": True, "infinite": False, "number": int(recent)}
                listing[node] = machine(node)
                expected[reconcile.POWER_DOWN] += 1
            elif slot < 96:  # powering down, its suspend request queued: left to the worker
                entry["state"] = ["IDLE", "CLOUD", "POWERING_DOWN"]
                listing[node] = machine(node, "stopping")
                queued[node] = names.SUSPEND
            elif slot < 97:  # powering down, machine still there and no request: the suspend was lost
                entry["state"] = ["IDLE", "CLOUD", "POWERING_DOWN"]
                listing[node] = machine(node)
                expected[reconcile.TERMINATE] += 1
            elif slot < 98:  # Slurm decided to power it down: SuspendProgram on its way
                entry["state"] = ["IDLE", "CLOUD", "POWER_DOWN"]
                listing[node] = machine(node)
            else:  # drained by an admin, machine running: never touched
                entry["state"] = ["IDLE", "DRAIN", "CLOUD"]
                entry["reason"] = "disk check"
                entry["reason_set_by_user"] = "admin"
                listing[node] = machine(node)
            documents.append(entry)
    # Machines of nodes removed from the configuration (the first node set terminates each once).
    for number in range(1, 21):
        node = "retired-%d" % number
        leaked = machine(node)
        for nodeset in NODESETS[:2]:  # two node sets share the account: both list it
            instances[nodeset][node] = leaked
        expected[reconcile.TERMINATE] += 1
    text = json.dumps(
        {
            "nodes": documents,
            "last_update": {"set": True, "infinite": False, "number": int(now)},
            "meta": {"plugin": {"type": "openapi/slurmctld", "name": "Slurm OpenAPI slurmctld", "data_parser": "data_parser/v0.0.42"},
                     "slurm": {"version": {"major": "24", "micro": "5", "minor": "11"}, "release": "24.11.5", "cluster": CLUSTER}},
            "errors": [],
            "warnings": [],
        },
        indent=2,  # scontrol --json pretty-prints
    )
    pending = reconcile.Pending(queued=queued, last_resume=last_resume)
    settings = reconcile.Settings(membership, failed_retry_after=300.0, resume_grace=60.0)
    return text, instances, pending, settings, expected


def bench_reconcile(count: int, runs: int) -> dict:
    from hybridhpc_power import reconcile, slurm

    now = time.time()
    text, instances, pending, settings, expected = synthetic_cluster(count, now)

    def one_pass():
        nodes = slurm.parse_nodes(text)
        return nodes, reconcile.plan(nodes, instances, pending, now, settings)

    parse_times, plan_times, actions = [], [], []
    for _unused in range(runs):
        nodes, parse_seconds = timed(lambda: slurm.parse_nodes(text))
        actions, plan_seconds = timed(lambda n=nodes: reconcile.plan(n, instances, pending, now, settings))
        parse_times.append(parse_seconds)
        plan_times.append(plan_seconds)
    tracemalloc.start()
    one_pass()
    _unused_current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    got = dict.fromkeys(reconcile.KINDS, 0)
    for action in actions:
        got[action.kind] += len(action.nodes)
    total = [p + q for p, q in zip(parse_times, plan_times)]
    result = {
        "nodes": count,
        "instances": sum(len(listing) for listing in instances.values()),
        "json_mb": len(text) / 1e6,
        "parse_median_s": statistics.median(parse_times),
        "plan_median_s": statistics.median(plan_times),
        "total_median_s": statistics.median(total),
        "runs": runs,
        "peak_mb": peak / 1e6,
        "actions": got,
        "expected_actions": expected,
        "problem": None if got == expected else "plan() returned %s, expected %s" % (got, expected),
    }
    log(
        "  reconcile %d nodes: parse %.3fs + plan %.3fs (median of %d), peak %.1f MB%s"
        % (count, result["parse_median_s"], result["plan_median_s"], runs, result["peak_mb"], "  PROBLEM: " + result["problem"] if result["problem"] else "")
    )
    return result


TARGET_RECONCILE_S = 0.5
TARGET_PROGRAM_S = 2.0


def bench_program(count: int, runs: int) -> dict:
    """ResumeProgram as slurmctld runs it (a new interpreter per call) for `count` nodes: it only queues them."""
    with tempfile.TemporaryDirectory(prefix="bench-power-program-") as workdir:
        base = pathlib.Path(workdir)
        nodes = "cloud-dy-[1-%d]" % count
        (base / "queue").mkdir()
        config = base / "power.json"
        config.write_text(json.dumps({"cluster": CLUSTER, "queue_dir": str(base / "queue"), "log_file": str(base / "power.log"),
                                      "nodesets": [{"name": "dy", "nodes": nodes, "provider": "aws"}]}))
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(PACKAGE / "src")}
        argv = [sys.executable, "-m", "hybridhpc_power", "--config", str(config), "resume", nodes]
        seconds, problem = [], None
        for _unused in range(runs):
            done, elapsed = timed(lambda: subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False))
            if done.returncode != 0:
                problem = "resume exited %d: %s" % (done.returncode, done.stderr.strip()[-300:])
                break
            seconds.append(elapsed)
    median = statistics.median(seconds) if seconds else None
    if median is None:
        log("  resume program, %d nodes: %s" % (count, problem))
    else:
        log("  resume program, %d nodes: %.3fs (median of %d)" % (count, median, len(seconds)))
    return {"nodes": count, "runs": len(seconds), "median_s": median, "problem": problem}


# -- output ---------------------------------------------------------------------------------------


LAB_CONTROLLER = "cloud-ctl1"
LAB_NODES = ["cloud-dy-%d" % i for i in range(1, 5)]
TARGET_SUBMIT_TO_RUNNING = 20.0


def lab_exec(*argv: str, check: bool = True) -> str:
    res = subprocess.run(["docker", "exec", LAB_CONTROLLER, *argv], text=True, capture_output=True, check=False)
    if check and res.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(argv), res.stderr.strip()))
    return res.stdout


def lab_is_up() -> bool:
    res = subprocess.run(["docker", "inspect", "-f", "{{.State.Running}}", LAB_CONTROLLER], text=True, capture_output=True, check=False)
    return res.returncode == 0 and res.stdout.strip() == "true"


def log_time(line: str) -> float:
    """Epoch seconds of a transition-log line (2026-11-24T04:02:28Z ...) or a slurmctld line ([2026-11-24T04:02:30.255] ...)."""
    stamp = line.split()[0].strip("[]")
    if stamp.endswith("Z"):
        return datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc).timestamp()
    # slurmctld logs in the container's local time (UTC in the lab image).
    return datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=datetime.timezone.utc).timestamp()


def lab_trial(node: str) -> dict:
    """Submit a job for one powered-down node; time it to RUNNING and split the time into phases."""
    start = time.time()
    job = lab_exec("sbatch", "--parsable", "-w", node, "--wrap", "true").strip()
    running = None
    while time.time() - start < 120:
        state = lab_exec("squeue", "-h", "-j", job, "-o", "%T", check=False).strip()
        done = not state and lab_exec("sacct", "-X", "-n", "-P", "-j", job, "-o", "State", check=False).startswith("COMPLETED")
        if state in ("RUNNING", "COMPLETING") or done:
            running = time.time()
            break
        time.sleep(0.2)
    power_log = lab_exec("grep", "node=%s action=resume" % node, "/var/log/slurm/hybridhpc-power.log", check=False).splitlines()
    ctld_log = lab_exec("grep", "Node %s now responding" % node, "/var/log/slurm/slurmctld.log", check=False).splitlines()
    requested = [log_time(line) for line in power_log if "result=requested" in line and log_time(line) >= int(start)]
    started = [log_time(line) for line in power_log if "result=started" in line and log_time(line) >= int(start)]
    responding = [log_time(line) for line in ctld_log if log_time(line) >= start - 1]
    return {
        "node": node,
        "job": job,
        "submit_to_running_s": round(running - start, 2) if running else None,
        "resume_requested_s": round(requested[0] - start, 1) if requested else None,
        "container_started_s": round(started[0] - start, 1) if started else None,
        "slurmd_registered_s": round(responding[0] - start, 2) if responding else None,
    }


def bench_lab(trials: int) -> dict | None:
    if trials <= 0 or not lab_is_up():
        return None
    idle = [line.split()[0] for line in lab_exec("sinfo", "-h", "-N", "-n", ",".join(LAB_NODES), "-o", "%N %T").splitlines()
            if line.split()[1:] == ["idle~"]]
    results = [lab_trial(node) for node in idle[:trials]]
    times = [r["submit_to_running_s"] for r in results if r["submit_to_running_s"] is not None]
    return {
        "trials": results,
        "median_s": statistics.median(times) if times else None,
        "max_s": max(times) if times else None,
        "skipped": "no elastic node was idle~ (powered down)" if not idle else None,
    }


def table(aws_result: dict | None, reconcile_result: dict) -> str:
    lines = []
    if aws_result:
        header = "aws provider, %d nodes (moto on 127.0.0.1, max_batch %d)" % (aws_result["nodes"], aws_result["max_batch"])
        lines += [header, "-" * len(header), "%-32s %6s %9s %11s  %s" % ("step", "calls", "seconds", "client CPU", "by operation")]
        for step in aws_result["steps"]:
            operations = ", ".join("%s %d" % item for item in sorted(step["by_operation"].items()))
            problem = "  PROBLEM: " + step["problem"] if step["problem"] else ""
            lines.append("%-32s %6d %9.2f %11.2f  %s%s" % (step["step"], step["calls"], step["seconds"], step["client_cpu_seconds"], operations, problem))
        lines.append("(seconds include moto doing EC2's work in this process; client CPU is the provider and botocore alone)")
        lines.append("")
    r = reconcile_result
    header = "reconciler, %d nodes, %d instances (scontrol JSON %.1f MB)" % (r["nodes"], r["instances"], r["json_mb"])
    lines += [header, "-" * len(header)]
    lines.append("%-32s %9.3f s" % ("slurm.parse_nodes (median)", r["parse_median_s"]))
    lines.append("%-32s %9.3f s" % ("reconcile.plan (median)", r["plan_median_s"]))
    lines.append("%-32s %9.3f s" % ("both (median of %d)" % r["runs"], r["total_median_s"]))
    lines.append("%-32s %9.1f MB  (tracemalloc, one parse + plan; the JSON text itself not counted)" % ("peak memory", r["peak_mb"]))
    lines.append("%-32s %s" % ("actions", ", ".join("%s %d" % item for item in r["actions"].items())))
    return "\n".join(lines)


def lab_table(lab_result: dict | None) -> str:
    if not lab_result:
        return "lab: not up (make lab), or --lab-trials 0: submit-to-RUNNING not measured"
    header = "lab: submit to RUNNING on a powered-down node (seconds after sbatch)"
    lines = [header, "-" * len(header), "%-12s %14s %14s %16s %10s" % ("node", "resume called", "container up", "slurmd registered", "RUNNING")]
    for r in lab_result["trials"]:
        row = (r["node"], r["resume_requested_s"], r["container_started_s"], r["slurmd_registered_s"], r["submit_to_running_s"])
        lines.append("%-12s %14s %14s %16s %10s" % row)
    summary = (lab_result["median_s"] or 0, lab_result["max_s"] or 0, TARGET_SUBMIT_TO_RUNNING)
    lines.append("median %.1f s, max %.1f s (target <= %.0f s)" % summary)
    return "\n".join(lines)


def verdicts(aws_result: dict | None, reconcile_result: dict, program_result: dict) -> list[str]:
    out = []
    total = reconcile_result["total_median_s"]
    out.append("reconciler, %d nodes: parse + plan %.3f s (target <= %.1f s): %s"
               % (reconcile_result["nodes"], total, TARGET_RECONCILE_S, "met" if total <= TARGET_RECONCILE_S else "MISSED"))
    if program_result["median_s"] is not None:
        median = program_result["median_s"]
        out.append("resume program, %d nodes: %.3f s (target <= %.1f s): %s"
                   % (program_result["nodes"], median, TARGET_PROGRAM_S, "met" if median <= TARGET_PROGRAM_S else "MISSED"))
    if program_result["problem"]:
        out.append("resume program: " + program_result["problem"])
    if aws_result:
        per_1000 = 1000.0 / aws_result["nodes"]
        for name in ("resume (first: key published)", "suspend"):
            step = next(s for s in aws_result["steps"] if s["step"] == name)
            calls = step["calls"] * per_1000
            verdict = "met" if calls <= TARGET_CALLS_PER_1000 else "MISSED"
            out.append("%s: %.0f API calls per 1,000 nodes (target <= %d): %s" % (name, calls, TARGET_CALLS_PER_1000, verdict))
        out += ["aws %s: %s" % (s["step"], s["problem"]) for s in aws_result["steps"] if s["problem"]]
    if reconcile_result["problem"]:
        out.append("reconciler: " + reconcile_result["problem"])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--nodes", type=int, default=1000, help="nodes the aws provider resumes and suspends (default 1000)")
    parser.add_argument("--reconcile-nodes", type=int, default=10000, help="nodes in the reconciler's model (default 10000)")
    parser.add_argument("--runs", type=int, default=5, help="reconciler passes; the median is reported (default 5)")
    parser.add_argument("--skip-aws", action="store_true", help="only the reconciler (no boto3 or moto needed)")
    parser.add_argument("--lab-trials", type=int, default=4, help="powered-down lab nodes to time, when the lab is up (default 4)")
    parser.add_argument("--json", default=str(REPORT), help="where to write the report (default %(default)s)")
    args = parser.parse_args()
    vendor()

    aws_result = None
    if not args.skip_aws:
        with tempfile.TemporaryDirectory(prefix="bench-power-") as workdir:
            aws_result = bench_aws(args.nodes, pathlib.Path(workdir))
    reconcile_result = bench_reconcile(args.reconcile_nodes, args.runs)
    program_result = bench_program(args.reconcile_nodes, args.runs)
    lab_result = bench_lab(args.lab_trials)

    print()
    print(table(aws_result, reconcile_result))
    print()
    print(lab_table(lab_result))
    print()
    results = verdicts(aws_result, reconcile_result, program_result)
    if lab_result and lab_result["median_s"] is not None:
        verdict = "met" if lab_result["median_s"] <= TARGET_SUBMIT_TO_RUNNING else "MISSED (median)"
        figures = (lab_result["median_s"], lab_result["max_s"], TARGET_SUBMIT_TO_RUNNING, verdict)
        results.append("lab submit to RUNNING: median %.1f s, max %.1f s (target <= %.0f s; slurmctld starts a CONFIGURING job "
                       "at its periodic check, every 30 s, after the node registered): %s" % figures)
    for line in results:
        print(line)
    report = pathlib.Path(args.json)
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(
        json.dumps(
            {
                "python": sys.version.split()[0],
                "cpus": os.cpu_count(),
                "targets": {"aws_calls_per_1000_nodes": TARGET_CALLS_PER_1000, "reconcile_s": TARGET_RECONCILE_S,
                            "resume_program_s": TARGET_PROGRAM_S},
                "verdicts": results,
                "aws": aws_result,
                "reconcile": reconcile_result,
                "resume_program": program_result,
                "lab": lab_result,
            },
            indent=2,
        )
    )
    print("report: %s" % report)
    failed = (aws_result and any(s["problem"] for s in aws_result["steps"])) or reconcile_result["problem"]
    return 1 if failed or any("MISSED" in line for line in results) else 0


if __name__ == "__main__":
    sys.exit(main())
