#!/usr/bin/env python3
"""Bring the embedded lab up or down: one systemd container per inventory host.

The inventory (inventories/lab/hosts.yml) is the single source of the lab's
shape: every host becomes a container of the same name and hostname, attached
to the docker networks listed in its `lab_networks` variable (docker picks the
subnets). Hosts with `lab_profile: compute` get what Apptainer and non-root jobs
need (LAB-NOTES). Lab-only: nothing here ships in the collection.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import time

import yaml

LABEL = "hybridhpc.lab"
DEFAULT_NETWORK = "hybridhpc-lab"

COMPUTE_FLAGS = [
    "--cap-add", "SYS_ADMIN",
    "--cap-add", "DAC_READ_SEARCH",
    "--cap-add", "SYS_NICE",
    "--security-opt", "seccomp=unconfined",
    "--device", "/dev/fuse",
    "--device", "/dev/loop-control",
]


def log(msg: str) -> None:
    print(f"lab: {msg}", flush=True)


def docker(*args: str, check: bool = True, capture: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], check=check, text=True, capture_output=capture)


def load_hosts(inventory: str) -> dict[str, dict]:
    """Map host name -> merged vars (group vars under `vars:` then host vars)."""
    with open(inventory, encoding="utf-8") as handle:
        data = yaml.safe_load(handle)
    hosts: dict[str, dict] = {}

    def walk(group: dict, inherited: dict) -> None:
        merged = {**inherited, **(group.get("vars") or {})}
        for name, hvars in (group.get("hosts") or {}).items():
            hosts.setdefault(name, {}).update({**merged, **(hvars or {})})
        for child in (group.get("children") or {}).values():
            walk(child or {}, merged)

    walk(data["all"], {})
    return hosts


def cgroup_flags() -> list[str]:
    # cgroup v2 (unified): systemd in the container needs its subtree writable.
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        return ["--cgroupns=host", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw"]
    return ["--cgroupns=host", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:ro"]


def loop_devices() -> list[str]:
    flags = []
    for dev in sorted(glob.glob("/dev/loop[0-9]*"))[:4]:
        flags += ["--device", dev]
    return flags


def ensure_network(name: str) -> None:
    if docker("network", "inspect", name, check=False).returncode != 0:
        log(f"network {name}")
        docker("network", "create", "--label", LABEL, name)


def container_state(name: str) -> str | None:
    res = docker("inspect", "-f", "{{.State.Status}}", name, check=False)
    return res.stdout.strip() if res.returncode == 0 else None


def up(inventory: str, image: str) -> None:
    hosts = load_hosts(inventory)
    for hvars in hosts.values():
        for net in hvars.get("lab_networks") or [DEFAULT_NETWORK]:
            ensure_network(net)
    for host, hvars in hosts.items():
        state = container_state(host)
        if state == "running":
            continue
        if state is not None:
            docker("rm", "-f", host)
        nets = hvars.get("lab_networks") or [DEFAULT_NETWORK]
        flags = [
            "run", "-d", "--name", host, "--hostname", host,
            "--label", LABEL, "--network", nets[0], "--network-alias", host,
            "--tmpfs", "/run", "--tmpfs", "/run/lock", "--tmpfs", "/tmp:exec,mode=1777",
            *cgroup_flags(),
        ]
        if hvars.get("lab_profile") == "compute":
            flags += COMPUTE_FLAGS + loop_devices()
        log(f"container {host} on {', '.join(nets)}")
        res = docker(*flags, image, check=False)
        if res.returncode != 0:
            sys.exit(
                f"lab: docker could not start {host}: {res.stderr.strip()}\n"
                "lab: this machine's Docker cannot run systemd containers with these flags "
                "(see LAB-NOTES: cgroup mount, capabilities)."
            )
        for net in nets[1:]:
            docker("network", "connect", "--alias", host, net, host)
    wait_running(hosts)


def wait_running(hosts: dict[str, dict], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    pending = set(hosts)
    while pending and time.monotonic() < deadline:
        for host in sorted(pending):
            res = docker("exec", host, "systemctl", "is-system-running", check=False)
            if res.stdout.strip() in ("running", "degraded"):
                pending.discard(host)
        if pending:
            time.sleep(0.5)
    if pending:
        sys.exit(f"lab: systemd did not come up in {', '.join(sorted(pending))} within {timeout:.0f}s")
    log(f"{len(hosts)} containers running systemd")


def down() -> None:
    names = docker("ps", "-aq", "--filter", f"label={LABEL}").stdout.split()
    if names:
        log(f"removing {len(names)} containers")
        docker("rm", "-f", *names)
    nets = docker("network", "ls", "-q", "--filter", f"label={LABEL}").stdout.split()
    if nets:
        log(f"removing {len(nets)} networks")
        docker("network", "rm", *nets)
    # proctrack/task cgroup on a v1 host leave slurm_<node> dirs at the hierarchy root.
    removed = 0
    for path in sorted(glob.glob("/sys/fs/cgroup/*/slurm_*"), key=len, reverse=True):
        for root, dirs, _files in os.walk(path, topdown=False):
            for d in dirs:
                try:
                    os.rmdir(os.path.join(root, d))
                except OSError:
                    pass
        try:
            os.rmdir(path)
            removed += 1
        except OSError:
            pass
    if removed:
        log(f"removed {removed} leftover slurm cgroup directories")


def status() -> None:
    res = docker("ps", "-a", "--filter", f"label={LABEL}", "--format", "{{json .}}")
    for line in res.stdout.splitlines():
        item = json.loads(line)
        print(f"{item['Names']:20} {item['State']:10} {item['Status']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_up = sub.add_parser("up")
    p_up.add_argument("--inventory", default="inventories/lab/hosts.yml")
    p_up.add_argument("--image", required=True)
    sub.add_parser("down")
    sub.add_parser("status")
    args = parser.parse_args()
    if not shutil.which("docker"):
        sys.exit("lab: docker is not installed (make lab installs docker.io when run as root)")
    if args.cmd == "up":
        up(args.inventory, args.image)
    elif args.cmd == "down":
        down()
    else:
        status()


if __name__ == "__main__":
    main()
