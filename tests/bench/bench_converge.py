# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Converge benchmark: how long site.yml takes, cold and as a no-op, and how it grows.

Each case brings up its own lab containers (lab/labctl.py, image cached), runs
playbooks/site.yml cold and then as a no-op, and removes the containers:
  cold:  the first run on fresh containers (packages downloaded and installed);
  no-op: the runs after it (--noop-runs, 5 by default), each of which must
         report changed=0 on every host (else the case fails: a fast run that
         changes things proves nothing). The median run is reported, every
         run's seconds beside it: on a 2-core machine shared with the lab's
         containers one run of the same tree can take 40% longer than the next.

Cases (--cases picks some):
  federated5-ssh     the 5-host federated lab of `make lab` (inventories/lab), over SSH (the lab default);
  federated5-docker  the same over the docker connection;
  single3            one cluster, 1 controller (slurmctld + slurmdbd) + 2 compute nodes;
  galaxy3            the same shape converged by the public role galaxyproject.slurm
                     (tests/bench/galaxy: its README's play, no slurmdbd), the issue's
                     comparison, measured with single3 (labs up together, no-op runs
                     in turn); only with --galaxy-role (or BENCH_GALAXY_ROLE) naming an
                     installed copy of the role: Galaxy is not reachable from the lab;
  scale3/9/17        1 controller + 3, 9 and 17 compute nodes: seconds per added node,
                     cold and no-op (least-squares slope over the three sizes). The three
                     labs are up together: after the cold runs, the no-op runs go round
                     the sizes (no-op 1 of each, then 2, ...), and the no-op per added node
                     is the median of those rounds' slopes: each round's runs see the
                     machine at the same speed (measure_series). Cold likewise: --cold-runs
                     rounds (3 by default), each on fresh containers, and the median of
                     their slopes.
  imaged3/9/17       the same, every host started from lab/image/compute: a compute node whose
                     image has its packages (installed by an image builder, with the ids the
                     packages chose), as many sites provision nodes. A cold run then costs a
                     node no apt at all; the case fails when a compute node still installed a
                     package. Measured together, like scale3/9/17.

With the scale series it also measures apt alone (apt_floor): lab/image/compute/install-packages.sh,
the node's packages installed as a cold converge installs them, in a fresh lab container, twice; the
lowest container CPU over this machine's cores is the least wall time apt adds per node when nodes
install side by side, whatever the collection does. The verdict on the cold seconds per added node
with apt says whether that floor leaves the target within reach.

Each run also tells where the machine's CPU went: the Ansible controller's
(ansible-playbook, its workers and ssh clients) and the lab hosts' (the
containers' cgroups: the modules that ran there), and, for the no-op run, the
tasks that took the most controller CPU (tests/bench/callbacks/converge_task_cpu.py).
Both share the machine's cores, so a no-op's wall time follows their sum.

Before each run it times a fixed pure-Python loop (reference_cpu_s): this
machine's speed at that moment, which moved by 45% within half an hour on this
VM, and every figure with it.

Results: .cache/bench/converge.json and a table on stdout, with each of issue
11's targets the run measured and whether its figure is within it (the run's
exit status does not depend on them: one run can take 40% longer than the
next). Lab-only; talks only
to the lab's containers (and, inside them, to the Debian archive for packages).
"""

from __future__ import annotations

import argparse
import configparser
import hashlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent / "callbacks"))
from converge_task_cpu import hosts_cpu_seconds  # noqa: E402  (the callback's reader: one parser of cgroup CPU files)

ROOT = Path(__file__).resolve().parents[2]
LABCTL = ROOT / "lab" / "labctl.py"
OUT = ROOT / ".cache" / "bench" / "converge.json"
WORK = ROOT / ".cache" / "bench" / "converge-inventories"
LOGS = ROOT / ".cache" / "bench" / "converge-logs"
CALLBACKS = ROOT / "tests" / "bench" / "callbacks"
RECAP = re.compile(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)
ALL_CASES = ["federated5-ssh", "federated5-docker", "single3", "galaxy3", "scale3", "scale9", "scale17",
             "imaged3", "imaged9", "imaged17", "federated5-ssh-mitogen", "single3-mitogen", "galaxy3-mitogen"]
# A case named <case>-mitogen is <case> run under Mitogen's mitogen_linear strategy (the optional accelerator a
# user may enable), the second column beside the stock runs.
MITOGEN = "-mitogen"
GALAXY_DIR = ROOT / "tests" / "bench" / "galaxy"
COMPUTE_IMAGE_DIR = ROOT / "lab" / "image" / "compute"
# What the compute image runs to install a node's packages, as a cold converge does with apt; apt_floor runs it
# in a fresh lab container.
INSTALL_SCRIPT = "install-packages.sh"
APT_FLOOR_HOST = "bench-aptfloor-c1"
# The task that installs a host's packages (roles/slurm_common/tasks/packages.yml).
INSTALL_TASK = "Install this host's Slurm packages in one transaction"


def log(msg: str) -> None:
    print(f"bench: {msg}", flush=True)


def run(cmd: list, env: dict | None = None, timeout: float = 3600) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], cwd=ROOT, env=env, text=True, capture_output=True,
                          check=False, timeout=timeout)


def lab_image() -> str:
    tag_file = ROOT / ".lab-image"
    tag = tag_file.read_text().strip() if tag_file.exists() else ""
    if not tag or run(["docker", "image", "inspect", tag]).returncode != 0:
        sys.exit("bench: no lab image; run `make image` first")
    return tag


def compute_image(base: str) -> str:
    """lab/image/compute built on the lab image ``base`` (once: named after both and the directory's files)."""
    digest = hashlib.sha256(b"".join((COMPUTE_IMAGE_DIR / name).read_bytes()
                                     for name in ("Dockerfile", INSTALL_SCRIPT))).hexdigest()[:12]
    tag = "hybridhpc/slurm-lab-compute:" + base.rsplit(":", 1)[-1] + "-" + digest
    if run(["docker", "image", "inspect", tag]).returncode != 0:
        log(f"building {tag} (the lab image plus a compute node's packages, about two minutes)")
        res = run(["docker", "build", "-q", "--build-arg", f"BASE={base}", "-t", tag, COMPUTE_IMAGE_DIR], timeout=1800)
        if res.returncode != 0:
            raise RuntimeError(f"docker build of {tag} failed:\n{res.stderr[-3000:]}")
    return tag


def inventory_hosts(inventory: Path) -> list[str]:
    """Every host a YAML inventory names (the lab's containers are named after them)."""
    names: set[str] = set()

    def walk(group: dict) -> None:
        names.update((group.get("hosts") or {}).keys())
        for child in (group.get("children") or {}).values():
            walk(child or {})
    for group in (yaml.safe_load(inventory.read_text()) or {}).values():
        walk(group or {})
    return sorted(names)


def hosts_in_task(output: str, title: str) -> set[str]:
    """The hosts that ran (ok or changed) the task whose title contains ``title``, in a run's output."""
    hosts, inside = set(), False
    for line in output.splitlines():
        if line.startswith("TASK ["):
            inside = title in line
        elif inside:
            match = re.match(r"^(?:ok|changed): \[([^\]]+)\]", line)
            if match:
                hosts.add(match.group(1))
    return hosts


def lab_inventory(name: str, children: dict, cluster_vars: dict) -> Path:
    """A fresh inventory directory WORK/name: the lab's connection variables and network, the groups given, and
    group_vars/all.yml holding cluster_vars."""
    lab = yaml.safe_load((ROOT / "inventories" / "lab" / "hosts.yml").read_text())
    connection = {k: v for k, v in lab["all"]["vars"].items() if k.startswith("ansible_")}
    inventory = {"all": {"vars": {**connection, "lab_networks": [f"hybridhpc-bench-{name}"]}, "children": children}}
    directory = WORK / name
    if directory.exists():
        shutil.rmtree(directory)
    (directory / "group_vars").mkdir(parents=True)
    (directory / "hosts.yml").write_text(yaml.safe_dump(inventory, sort_keys=False))
    (directory / "group_vars" / "all.yml").write_text(yaml.safe_dump(cluster_vars, sort_keys=False))
    return directory / "hosts.yml"


def one_cluster_inventory(name: str, computes: int) -> Path:
    """A one-cluster lab inventory (with the lab's group_vars/all.yml) for `computes` nodes."""
    ctl = f"bench-{name}-ctl1"
    nodes = {f"bench-{name}-c{i}": {"lab_profile": "compute"} for i in range(1, computes + 1)}
    lab_vars = yaml.safe_load((ROOT / "inventories" / "lab" / "group_vars" / "all.yml").read_text()) or {}
    return lab_inventory(name, {"slurmctld": {"hosts": {ctl: None}}, "slurmdbd": {"hosts": {ctl: None}},
                                "slurmd": {"hosts": nodes}},
                         {**lab_vars, "slurm_cluster_name": "bench"})


def galaxy_inventory(name: str = "galaxy3") -> Path:
    """single3's shape for galaxyproject.slurm: its groups and variables, the lab's connection, a fresh MUNGE key."""
    nodes = {f"bench-{name}-c{i}": {"lab_profile": "compute"} for i in (1, 2)}
    key = WORK / f"{name}-munge.key"
    key.parent.mkdir(parents=True, exist_ok=True)
    key.unlink(missing_ok=True)
    key.touch(mode=0o600)
    key.write_bytes(os.urandom(1024))
    # The lab's slurm.conf settings that apply to a cluster without accounting (inventories/lab/group_vars).
    return lab_inventory(name, {"slurmservers": {"hosts": {f"bench-{name}-ctl1": None}},
                                "slurmexechosts": {"hosts": nodes}}, {
        "slurm_munge_key": str(key),
        "slurm_nodes": [{"name": f"bench-{name}-c[1-2]", "CPUs": os.cpu_count() or 1, "State": "UNKNOWN"}],
        "slurm_partitions": [{"name": "debug", "Default": True, "MaxTime": "1:00:00",
                              "Nodes": f"bench-{name}-c[1-2]", "State": "UP"}],
        "slurm_config": {"SlurmctldHost": f"bench-{name}-ctl1", "ClusterName": name.replace("-", ""),
                         "SlurmctldDebug": "info", "SlurmdDebug": "info", "SchedulerParameters": "bf_interval=5", "SlurmctldTimeout": 30,
                         "SlurmdTimeout": 60},
    })


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def container_cpu_files(names: list[str]) -> list[Path]:
    """The cgroup files holding the named containers' CPU use: v1 cpuacct.usage, or v2 cpu.stat."""
    res = run(["docker", "inspect", "-f", "{{.Id}}", *names])
    files = []
    for cid in res.stdout.split():
        v1 = Path(f"/sys/fs/cgroup/cpuacct/docker/{cid}/cpuacct.usage")
        v2 = Path(f"/sys/fs/cgroup/system.slice/docker-{cid}.scope/cpu.stat")
        files.extend(path for path in (v1, v2) if path.exists())
    return files


def callbacks_env(env: dict) -> dict:
    """env with the benchmark's task CPU callback enabled beside its ansible.cfg's own callbacks."""
    config = configparser.ConfigParser(interpolation=None)
    config.read(env.get("ANSIBLE_CONFIG") or ROOT / "ansible.cfg")
    enabled = [c.strip() for c in config.get("defaults", "callbacks_enabled", fallback="").split(",") if c.strip()]
    return dict(env, ANSIBLE_CALLBACK_PLUGINS=str(CALLBACKS),
                ANSIBLE_CALLBACKS_ENABLED=",".join(enabled + ["converge_task_cpu"]))


def top_tasks(rows: list[dict], count: int = 8) -> list[dict]:
    """The tasks that took the most controller CPU, with how many hosts ran, skipped or changed them."""
    ranked = sorted(rows, key=lambda row: -row["cpu_s"])[:count]
    return [{"task": row["task"], "cpu_s": round(row["cpu_s"], 2), "hosts": row["hosts"]} for row in ranked]


def reference_cpu_seconds(loops: int = 2_000_000) -> float:
    """The CPU seconds a fixed pure-Python loop takes now: how fast this machine runs at the moment.

    On this VM a loop like it (3 million steps, the system python3) took 0.22 s
    and 0.32 s half an hour apart, and the converge figures move with the
    machine; each run records it, so that two runs of the bench can be told
    apart from two trees."""
    start = time.process_time()
    total = 0
    for number in range(loops):
        total += number
    return round(time.process_time() - start, 3)


def converge(inventory: Path, env: dict, log_name: str, hosts: list[str] | None = None,
             playbook: str = "playbooks/site.yml") -> dict:
    """Run site.yml: seconds, controller and lab hosts' CPU seconds, changed per host, output, task CPU.

    The output and the per-task CPU are kept in LOGS.
    """
    LOGS.mkdir(parents=True, exist_ok=True)
    task_cpu = LOGS / (log_name.rsplit(".", 1)[0] + "-task-cpu.json")
    task_cpu.unlink(missing_ok=True)
    # One docker inspect per run: the callback and the whole-run figure read the same files.
    cpu_files = [str(f) for f in container_cpu_files(hosts)] if hosts else []
    env = dict(callbacks_env(env), HYBRIDHPC_BENCH_TASK_CPU=str(task_cpu),
               HYBRIDHPC_BENCH_HOST_CPU_FILES=os.pathsep.join(cpu_files))
    reference = reference_cpu_seconds()
    hosts_cpu = hosts_cpu_seconds(cpu_files)
    cpu = children_cpu()
    start = time.monotonic()
    command = shutil.which("ansible-playbook", path=env.get("PATH")) or str(ROOT / ".venv" / "bin" / "ansible-playbook")
    res = run([command, "-i", inventory, playbook], env=env)
    elapsed = time.monotonic() - start
    # ansible-playbook, its workers and ssh: the Ansible controller's share of
    # the machine (the containers' own CPU is not in it).
    cpu = children_cpu() - cpu
    hosts_cpu = hosts_cpu_seconds(cpu_files) - hosts_cpu
    LOGS.mkdir(parents=True, exist_ok=True)
    (LOGS / log_name).write_text(res.stdout + res.stderr)
    if res.returncode != 0:
        tail = "\n".join(res.stdout.splitlines()[-40:])
        raise RuntimeError(f"{playbook} failed on {inventory}:\n{tail}\n{res.stderr[-2000:]}")
    changed = {m.group(1): int(m.group(2)) for m in RECAP.finditer(res.stdout)}
    rows = json.loads(task_cpu.read_text()) if task_cpu.exists() else []
    return {"seconds": elapsed, "controller_cpu_s": cpu, "hosts_cpu_s": hosts_cpu, "changed": changed,
            "reference_cpu_s": reference,
            "output": res.stdout, "tasks": rows}


def lower_median(values: list, key=None):
    """The median of values (the lower middle one of an even count), by key when given."""
    ordered = sorted(values, key=key)
    return ordered[(len(ordered) - 1) // 2]


def median_run(runs: list[dict]) -> dict:
    """The run whose wall time is the median."""
    return lower_median(runs, key=lambda r: r["seconds"])


def mitogen_env() -> dict:
    """What a user sets to run a playbook under Mitogen (its strategy plugins' directory and mitogen_linear)."""
    import ansible_mitogen

    # Mitogen opens its own SSH connections and does not read the lab's ssh config (-F in ansible_ssh_common_args),
    # whose known-hosts file is the one that knows each fresh container's new host key; the lab's containers are
    # made anew for each cold run, so host keys are not checked for them.
    return {"ANSIBLE_STRATEGY_PLUGINS": str(Path(ansible_mitogen.__file__).parent / "plugins" / "strategy"),
            "ANSIBLE_STRATEGY": "mitogen_linear", "ANSIBLE_HOST_KEY_CHECKING": "False"}


def case_env(image: str, connection: str) -> dict:
    # HYBRIDHPC_LAB_IMAGE: the lab's elastic nodes start from the node image named after it.
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0", HYBRIDHPC_LAB_IMAGE=image)
    env.pop("HYBRIDHPC_LAB_CONNECTION", None)
    env.pop("ANSIBLE_TRANSPORT", None)
    if connection == "docker":
        # As `HYBRIDHPC_LAB_CONNECTION=docker make lab` does: labctl makes no SSH key, Ansible uses docker exec.
        env["HYBRIDHPC_LAB_CONNECTION"] = "docker"
        env["ANSIBLE_TRANSPORT"] = "community.docker.docker"
    return env


def forget_facts(hosts: list[str]) -> None:
    """These hosts' entries of the fact cache (jsonfile: one file per host), so a cold run gathers everything;
    other labs of the same series keep theirs."""
    for host in hosts:
        (ROOT / ".cache" / "facts" / host).unlink(missing_ok=True)


def cold_run(case: dict, number: int = 1) -> dict:
    hosts = inventory_hosts(case["inventory"])
    forget_facts(hosts)
    name = "cold" if number == 1 else f"cold{number}"
    cold = converge(case["inventory"], case["env"], f"{case['case']}-{name}.log", hosts, case["playbook"])
    log(f"{case['case']}: {name} {cold['seconds']:.1f} s")
    installed = sorted(h for h in hosts_in_task(cold["output"], INSTALL_TASK) if "-ctl" not in h)
    if case["case"].startswith("imaged") and installed:
        raise RuntimeError(f"{case['case']}: compute nodes {installed} installed packages their image should have had;"
                           f" add what roles/slurm_common installs on a compute node to {COMPUTE_IMAGE_DIR}/Dockerfile")
    return cold


def noop_run(case: dict, number: int, hosts: list[str]) -> dict:
    result = converge(case["inventory"], case["env"], f"{case['case']}-noop{number}.log", hosts, case["playbook"])
    log(f"{case['case']}: no-op {number} {result['seconds']:.1f} s, changed {sum(result['changed'].values())}")
    drift = {h: c for h, c in result["changed"].items() if c}
    if drift:
        raise RuntimeError(f"{case['case']}: no-op run {number} changed {drift}; a no-op must report changed=0\n"
                           + "\n".join(result["output"].splitlines()[-60:]))
    return result


def summary(case: dict, colds: list[dict], runs: list[dict]) -> dict:
    cold, noop = median_run(colds), median_run(runs)
    return {"case": case["case"], "connection": case["connection"], "slurm_hosts": len(noop["changed"]),
            "cold_s": round(cold["seconds"], 1), "noop_s": round(noop["seconds"], 1),
            "cold_runs_s": [round(r["seconds"], 2) for r in colds],
            "noop_runs_s": [round(r["seconds"], 2) for r in runs],
            # The machine's speed before each run, the cold ones first (reference_cpu_seconds).
            "reference_cpu_s": [r["reference_cpu_s"] for r in [*colds, *runs]],
            "cold_controller_cpu_s": round(cold["controller_cpu_s"], 1),
            "cold_hosts_cpu_s": round(cold["hosts_cpu_s"], 1),
            "noop_controller_cpu_s": round(noop["controller_cpu_s"], 1),
            "noop_hosts_cpu_s": round(noop["hosts_cpu_s"], 1),
            "noop_tasks": len(noop["tasks"]),
            "noop_top_tasks": top_tasks(noop["tasks"]),
            "cold_changed": sum(cold["changed"].values())}


def lab_down(cases: list[dict], report: bool = False) -> None:
    """Remove the cases' labs (with report, say which labctl could not remove)."""
    for case in cases:
        down = run([sys.executable, LABCTL, "down", "--inventory", case["inventory"]], timeout=600)
        if report and down.returncode != 0:
            log(f"labctl down failed for {case['case']}: {down.stderr[-500:]}")


def lab_up(cases: list[dict]) -> None:
    for case in cases:
        up = run([sys.executable, LABCTL, "up", "--inventory", case["inventory"], "--image", case["image"]],
                 timeout=900)
        if up.returncode != 0:
            raise RuntimeError(f"labctl up failed for {case['case']}: {up.stderr[-2000:]}")


def measure_series(cases: list[dict], noop_runs: int = 5, cold_runs: int = 1) -> list[dict]:
    """Cold and no-op runs of cases whose labs are all up at once (each its own containers and network).

    Each case's cold run goes on its fresh containers, one case after the other; with cold_runs above 1 the labs
    are then made anew (fresh containers) and the cold runs go round again, cold_runs rounds in all. Then, on the
    last round's labs, the no-op runs go round the cases: no-op 1 of each case, then no-op 2 of each, ... A
    series of sizes (3, 9 and 17 nodes) then measures each size's run k within a minute or two of the others'
    run k, at the same machine speed; one case after another, minutes apart, the machine's speed moved (by up
    to 45% on this VM) between sizes and the seconds per added node with it.
    """
    lab_down(cases)
    try:
        colds: list[list[dict]] = [[] for _case in cases]
        for number in range(1, cold_runs + 1):
            if number > 1:
                lab_down(cases)
            lab_up(cases)
            for index, case in enumerate(cases):
                colds[index].append(cold_run(case, number))
        # The hosts site.yml ran on are the lab's containers (same names).
        hosts = [sorted(case_colds[0]["changed"]) for case_colds in colds]
        runs: list[list[dict]] = [[] for _case in cases]
        for number in range(1, noop_runs + 1):
            for index, case in enumerate(cases):
                runs[index].append(noop_run(case, number, hosts[index]))
        return [summary(case, case_colds, case_runs) for case, case_colds, case_runs in zip(cases, colds, runs)]
    finally:
        lab_down(cases, report=True)


def floor_summary(cpu_runs: list[float], wall_runs: list[float], cpus: int) -> dict:
    """apt_floor's figures: each run's container CPU and wall seconds, the lowest CPU, and that CPU over the
    machine's cores: the least wall time apt alone adds per node when nodes install side by side (they cannot use
    more cores than there are), whatever the collection does around it."""
    low = min(cpu_runs)
    return {"cpu_s_runs": [round(c, 2) for c in cpu_runs], "wall_s_runs": [round(w, 2) for w in wall_runs],
            "cpu_s": round(low, 2), "cpus": cpus, "per_node_s": round(low / cpus, 3)}


def apt_floor(image: str, runs: int = 2) -> dict:
    """What apt alone costs a compute node on this machine: lab/image/compute/install-packages.sh (the node's
    packages: its index refreshed with Apptainer's sid suite, one transaction with service starts held back) in a
    fresh lab container, ``runs`` times one after another, each in a new container; the container's CPU for it
    (its cgroup: apt, dpkg, the maintainer scripts and systemd's reloads they ask for). floor_summary."""
    lab = [{"case": "aptfloor", "image": image, "inventory": lab_inventory(
        "aptfloor", {"slurmd": {"hosts": {APT_FLOOR_HOST: {"lab_profile": "compute"}}}}, {})}]
    script = "/usr/local/sbin/hybridhpc-image-install-packages"
    cpu_runs, wall_runs = [], []
    try:
        for _number in range(runs):
            lab_down(lab)
            lab_up(lab)
            copied = run(["docker", "cp", str(COMPUTE_IMAGE_DIR / INSTALL_SCRIPT), f"{APT_FLOOR_HOST}:{script}"])
            if copied.returncode != 0:
                raise RuntimeError(f"docker cp of {INSTALL_SCRIPT} failed: {copied.stderr[-500:]}")
            files = [str(f) for f in container_cpu_files([APT_FLOOR_HOST])]
            before, start = hosts_cpu_seconds(files), time.monotonic()
            res = run(["docker", "exec", APT_FLOOR_HOST, script], timeout=1800)
            wall_runs.append(time.monotonic() - start)
            cpu_runs.append(hosts_cpu_seconds(files) - before)
            if res.returncode != 0:
                raise RuntimeError(f"{INSTALL_SCRIPT} failed in {APT_FLOOR_HOST}:\n{res.stderr[-2000:]}")
    finally:
        lab_down(lab, report=True)
    floor = floor_summary(cpu_runs, wall_runs, os.cpu_count() or 1)
    log(f"apt alone, per node: {floor['cpu_s']} s of CPU (runs {floor['cpu_s_runs']}), "
        f"{floor['per_node_s']} s on {floor['cpus']} cores")
    return floor


def series(case: str) -> str:
    """The series a case belongs to: the sizes of one kind (scale3/9/17, imaged3/9/17) share one, single3 and its
    comparator galaxy3 another; the federated cases stand alone. A case under Mitogen is in its stock case's series
    under Mitogen (single3-mitogen with galaxy3-mitogen)."""
    if case.endswith(MITOGEN):
        return series(case[:-len(MITOGEN)]) + MITOGEN
    if case in ("single3", "galaxy3"):
        # The comparison: the same shape, measured in the same run.
        return "3-host"
    kind = case.rstrip("0123456789")
    return kind if kind in ("scale", "imaged") else case


def slope(points: list[tuple[int, float]]) -> float | None:
    """Least-squares seconds per added node, to the millisecond (a target of 0.2 s is not met by 0.204 s)."""
    if len(points) < 2:
        return None
    n = len(points)
    mx = sum(x for x, _y in points) / n
    my = sum(y for _x, y in points) / n
    den = sum((x - mx) ** 2 for x, _y in points)
    return round(sum((x - mx) * (y - my) for x, y in points) / den, 3) if den else None


def per_added_node(cases: list[dict]) -> dict | None:
    """Seconds per added compute node over a series' sizes (None with fewer than two sizes).

    noop_s is the median of the no-op rounds' slopes: round k's slope is over each size's no-op k, runs taken
    at the same machine speed (measure_series); noop_s_of_medians is the slope over each size's median run,
    which may come from different rounds. cold_s is the same over the cold rounds (cold_s_rounds: each round's
    sizes on fresh containers, one after another; cold_s_of_medians beside it); the CPU figures are over each
    size's median run.
    """
    sizes = [(r["slurm_hosts"] - 1, r) for r in cases]
    if len(sizes) < 2:
        return None
    per_node = {name: slope([(n, r[name]) for n, r in sizes])
                for name in ("cold_controller_cpu_s", "cold_hosts_cpu_s",
                             "noop_controller_cpu_s", "noop_hosts_cpu_s")}
    for kind in ("cold", "noop"):
        # A case measured once has its one run as its runs.
        runs = [(n, r.get(kind + "_runs_s") or [r[kind + "_s"]]) for n, r in sizes]
        rounds = min(len(seconds) for _n, seconds in runs)
        per_round = [slope([(n, seconds[k]) for n, seconds in runs]) for k in range(rounds)]
        per_node[kind + "_s_rounds"] = per_round
        per_node[kind + "_s"] = lower_median(per_round) if per_round else None
        per_node[kind + "_s_of_medians"] = slope([(n, r[kind + "_s"]) for n, r in sizes])
    return per_node


# Issue 11's targets on this 2-core machine (image cached): (what, the case or per-node figures that measure it,
# their field, at most seconds).
TARGETS = [
    ("federated lab cold", "federated5-ssh", "cold_s", 60.0),
    ("federated lab no-op", "federated5-ssh", "noop_s", 10.0),
    ("per added node no-op", "per_added_compute_node", "noop_s", 0.25),
    ("per added node from a compute image, cold", "per_added_imaged_compute_node", "cold_s", 1.2),
    ("per added node from a compute image, no-op", "per_added_imaged_compute_node", "noop_s", 0.25),
]
# Targets relative to a figure measured in the same run: (target, case or key, field, the reference's case or key,
# its field, the factor).
RELATIVE_TARGETS = [
    ("3-host cluster no-op, half of galaxyproject.slurm's", "single3", "noop_s", "galaxy3", "noop_s", 0.5),
    ("3-host cluster cold, a fifth of galaxyproject.slurm's", "single3", "cold_s", "galaxy3", "cold_s", 0.2),
    ("per added node cold, 1.3x apt's own floor", "per_added_compute_node", "cold_s", "apt_floor", "per_node_s", 1.3),
]


def verdicts(report: dict) -> list[dict]:
    """Each target this report measured, with its figure and whether the figure is within it; a relative target
    (RELATIVE_TARGETS) only when its reference was measured in the same run."""
    # Case names and the report's per-node keys do not overlap: one lookup finds either.
    measured = dict(report, **{r["case"]: r for r in report.get("cases", [])})
    found = []
    for what, where, field, limit in TARGETS:
        value = (measured.get(where) or {}).get(field)
        if value is not None:
            found.append({"target": what, "seconds": value, "at_most": limit, "met": value <= limit})
    for what, where, field, reference, reference_field, factor in RELATIVE_TARGETS:
        value = (measured.get(where) or {}).get(field)
        base = (measured.get(reference) or {}).get(reference_field)
        if value is not None and base is not None:
            limit = round(base * factor, 3)
            found.append({"target": what, "seconds": value, "at_most": limit, "met": value <= limit})
    return found


def table(report: dict) -> str:
    lines = [f"{'case':20} {'conn':7} {'hosts':>5} {'cold s':>8} {'no-op s':>8} {'no-op ctl cpu s':>16}"
             f" {'no-op hosts cpu s':>18}  no-op runs s"]
    for r in report["cases"]:
        lines.append(f"{r['case']:20} {r['connection']:7} {r['slurm_hosts']:>5} {r['cold_s']:>8} {r['noop_s']:>8}"
                     f" {r['noop_controller_cpu_s']:>16} {r['noop_hosts_cpu_s']:>18}  "
                     + " ".join(str(x) for x in r.get("noop_runs_s", [r["noop_s"]]))
                     + ("  (reference loop cpu s: %s)" % " ".join(str(x) for x in r["reference_cpu_s"])
                        if r.get("reference_cpu_s") else ""))
    for key, what in (("per_added_compute_node", "per added compute node"),
                      ("per_added_imaged_compute_node", "per added compute node started from a compute image")):
        per = report.get(key)
        if per:
            lines.append(f"{what}: cold {per['cold_s']} s (median of the rounds: "
                         + " ".join(str(x) for x in per.get("cold_s_rounds", []))
                         + f"; over each size's median run {per.get('cold_s_of_medians')} s),"
                         f" no-op {per['noop_s']} s (median of the rounds: "
                         + " ".join(str(x) for x in per.get("noop_s_rounds", []))
                         + f"; over each size's median run {per.get('noop_s_of_medians')} s)"
                         f" (CPU: cold controller {per['cold_controller_cpu_s']} s, hosts {per['cold_hosts_cpu_s']} s;"
                         f" no-op controller {per['noop_controller_cpu_s']} s, hosts {per['noop_hosts_cpu_s']} s)")
    floor = report.get("apt_floor")
    if floor:
        lines.append(f"apt alone on a fresh compute node (install-packages.sh): {floor['cpu_s']} s of CPU (runs "
                     + " ".join(str(x) for x in floor["cpu_s_runs"]) + "; wall "
                     + " ".join(str(x) for x in floor["wall_s_runs"])
                     + f" s), so at least {floor['per_node_s']} s per added node on {floor['cpus']} cores")
    for v in report.get("targets", []):
        line = f"target {v['target']}: {v['seconds']} s, at most {v['at_most']} s: {'met' if v['met'] else 'NOT met'}"
        lines.append(line)
    for r in report["cases"]:
        lines.append(f"{r['case']} no-op, {r['noop_tasks']} tasks; the most controller CPU:")
        for task in r["noop_top_tasks"][:5]:
            counts = ", ".join(f"{n} {status}" for status, n in sorted(task["hosts"].items()))
            lines.append(f"  {task['cpu_s']:6.2f} s  {task['task'][:90]}  ({counts})")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default=",".join(ALL_CASES), help="comma-separated subset of: " + ", ".join(ALL_CASES))
    parser.add_argument("--noop-runs", type=int, default=5, help="no-op runs per case; the median is reported")
    parser.add_argument("--cold-runs", type=int, default=3,
                        help="cold runs per size of a series (scale, imaged), each round on fresh containers; the"
                             " cold seconds per added node is the median of the rounds' slopes")
    parser.add_argument("--galaxy-role", default=os.environ.get("BENCH_GALAXY_ROLE", ""),
                        help="an installed copy of the role galaxyproject.slurm (its directory), for the galaxy3 case"
                             " (default: $BENCH_GALAXY_ROLE; without one, galaxy3 is left out)")
    args = parser.parse_args()
    cases = [c for c in args.cases.split(",") if c]
    if args.noop_runs < 1 or args.cold_runs < 1:
        sys.exit("bench: --noop-runs and --cold-runs must be 1 or more")
    unknown = sorted(set(cases) - set(ALL_CASES))
    if unknown:
        sys.exit(f"bench: unknown cases {unknown}; known: {ALL_CASES}")
    galaxy_role = Path(args.galaxy_role).resolve() if args.galaxy_role else None
    galaxy_cases = [c for c in ("galaxy3", "galaxy3" + MITOGEN) if c in cases]
    if galaxy_cases and not (galaxy_role and (galaxy_role / "tasks" / "main.yml").exists()):
        # Galaxy is not reachable from the lab machine: the comparator runs where a copy was installed
        # (ansible-galaxy role install galaxyproject.slurm) and named.
        log("galaxy3: left out: no galaxyproject.slurm role given (--galaxy-role or BENCH_GALAXY_ROLE"
            + (f"; {galaxy_role} has no tasks/main.yml" if galaxy_role else "") + ")")
        cases = [c for c in cases if c not in galaxy_cases]
    image = lab_image()
    report = {"machine": {"cpus": os.cpu_count()}, "image": image, "cases": []}
    planned: dict[str, list[dict]] = {}
    for case in cases:
        case_image, playbook, env_extra = image, "playbooks/site.yml", {}
        base = case[:-len(MITOGEN)] if case.endswith(MITOGEN) else case
        if base.startswith("federated5"):
            inventory, connection = ROOT / "inventories" / "lab" / "hosts.yml", base.split("-")[1]
        elif base == "single3":
            inventory, connection = one_cluster_inventory(case, 2), "ssh"
        elif base == "galaxy3":
            inventory, connection, playbook = galaxy_inventory(case), "ssh", str(GALAXY_DIR / "site.yml")
            env_extra = {"ANSIBLE_CONFIG": str(GALAXY_DIR / "ansible.cfg"), "BENCH_GALAXY_ROLE": str(galaxy_role)}
            report["galaxy_role"] = str(galaxy_role)
        else:
            size = int(case.lstrip("scaleimgd"))
            inventory, connection = one_cluster_inventory(case, size), "ssh"
            if case.startswith("imaged"):
                case_image = compute_image(image)
                report["compute_image"] = case_image
        if case != base:
            env_extra = dict(env_extra, **mitogen_env())
        log(f"{case}: {connection}, inventory {inventory.relative_to(ROOT)}")
        planned.setdefault(series(case), []).append({"case": case, "inventory": inventory, "connection": connection,
                                                     "image": case_image, "playbook": playbook,
                                                     "env": dict(case_env(case_image, connection), **env_extra)})
    for name, members in planned.items():
        # Rounds of cold runs for the series of sizes: a cold slope from one run per size moved by 0.2 s per node
        # between two benches of one day.
        report["cases"].extend(measure_series(members, args.noop_runs,
                                              args.cold_runs if name in ("scale", "imaged") else 1))
    if any(series(case) == "scale" for case in cases):
        # After the series, on a machine without other labs: what apt alone costs a node, the floor of the cold
        # seconds per added node with apt.
        report["apt_floor"] = apt_floor(image)
    for prefix, key in (("scale", "per_added_compute_node"), ("imaged", "per_added_imaged_compute_node")):
        per_node = per_added_node([r for r in report["cases"] if series(r["case"]) == prefix])
        if per_node:
            report[key] = per_node
    report["targets"] = verdicts(report)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, indent=2) + "\n")
    print(table(report))
    log(f"report in {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
