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
import socket
import subprocess
import sys
import time

import yaml

LABEL = "hybridhpc.lab"
DEFAULT_NETWORK = "hybridhpc-lab"

# SSH, the way Ansible reaches production hosts: one key pair made here, root's
# authorized key put into each container, and an ssh_config naming every lab
# host by its inventory name (HostName = its address on its first network).
# Container names are global to the docker engine, so this is one directory per
# user, not per checkout: inventories point ansible_ssh_common_args at
# ~/.cache/hybridhpc/lab-ssh/config wherever molecule or AWX copies them.
SSH_DIR = os.path.expanduser("~/.cache/hybridhpc/lab-ssh")

# The peering point between the clusters' networks (like a VPC peering
# connection): it forwards between the networks, and every other container
# routes the peer networks through it. Cutting it cuts the peering.
ROUTER_FLAGS = ["--sysctl", "net.ipv4.ip_forward=1", "--cap-add", "NET_ADMIN"]

DOCKER_SOCKET = "/var/run/docker.sock"

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


def docker(*args: str, check: bool = True, capture: bool = True, input_text: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], check=check, text=True, capture_output=capture, input=input_text)


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


def cgroup_flags(image_cgroup_v1: bool = True) -> list[str]:
    # cgroup v2 (unified): systemd in the container needs its subtree writable.
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        return ["--cgroupns=host", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw"]
    # A cgroup v1 (hybrid) host and an image whose systemd refuses v1
    # (systemd 256+, Debian sid): its /sys/fs/cgroup is the host's unified
    # (v2) hierarchy, where docker puts the container too. No controller is
    # enabled there (the v1 hierarchies hold them all), so nothing is limited.
    if not image_cgroup_v1 and os.path.isdir("/sys/fs/cgroup/unified"):
        return ["--cgroupns=host", "-v", "/sys/fs/cgroup/unified:/sys/fs/cgroup:rw"]
    return ["--cgroupns=host", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:ro"]


def image_supports_cgroup_v1(image: str) -> bool:
    """Whether the image's systemd boots on cgroup v1 (label hybridhpc.lab.cgroup-v1, set by lab/build-image.sh)."""
    res = docker("image", "inspect", "-f", '{{ index .Config.Labels "hybridhpc.lab.cgroup-v1" }}', image, check=False)
    return res.stdout.strip() != "no"


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


# The lab's directory: the users a site's directory service (SSSD, LDAP)
# would give every host, each with one uid and gid everywhere. The inventories'
# slurm_users name them, and the first play refuses a user that does not
# resolve where its jobs run.
LAB_USERS = (("alice", 20001), ("bob", 20002), ("carol", 20003))


def add_lab_users(host: str) -> None:
    script = "; ".join(f"getent passwd {name} >/dev/null || useradd -m -u {uid} -U -s /bin/bash {name}"
                       for name, uid in LAB_USERS)
    docker("exec", host, "sh", "-c", script)


# A lab with a directory host (lab_profile: directory) gets those users from
# Debian's slapd there instead (lab/ldap/setup.sh), and the collection's sssd
# role points the Slurm hosts at it. What its clients need from the Ansible
# controller (the CA, SSSD's bind password) is copied here; the inventory
# reads them from this directory.
LDAP_DIR = os.path.expanduser("~/.cache/hybridhpc/lab-ldap")
LDAP_SETUP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ldap", "setup.sh")


def setup_directory(host: str) -> None:
    docker("cp", LDAP_SETUP, f"{host}:/root/lab-ldap-setup.sh")
    res = docker("exec", host, "sh", "/root/lab-ldap-setup.sh", *(f"{name}:{uid}" for name, uid in LAB_USERS),
                 check=False)
    if res.returncode != 0:
        sys.exit(f"lab: the directory on {host} could not be set up: {(res.stderr or res.stdout).strip()}")
    os.makedirs(LDAP_DIR, mode=0o700, exist_ok=True)
    os.chmod(LDAP_DIR, 0o700)
    for name, mode in (("ca.pem", 0o644), ("bind.pw", 0o600)):
        content = docker("exec", host, "cat", f"/root/lab-ldap/{name}").stdout
        path = os.path.join(LDAP_DIR, name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(content)
        os.chmod(path, mode)
    log(f"{host}: slapd with the lab's users {', '.join(name for name, _ in LAB_USERS)} (CA in {LDAP_DIR})")


def name_directory_hosts(hosts: dict[str, dict]) -> None:
    """Docker's DNS names a container only on its own networks: hosts elsewhere (the other cluster, through the
    peering) get the directory's name in /etc/hosts, as a site's DNS would give it."""
    for directory in (h for h, v in hosts.items() if v.get("lab_profile") == "directory"):
        nets = hosts[directory].get("lab_networks") or [DEFAULT_NETWORK]
        address = container_ip(directory, nets[0])
        for host, hvars in hosts.items():
            if host == directory or set(hvars.get("lab_networks") or [DEFAULT_NETWORK]) & set(nets):
                continue
            docker("exec", host, "sh", "-c",
                   f"grep -q ' {directory}$' /etc/hosts || echo '{address} {directory}' >> /etc/hosts")


def up(inventory: str, image: str) -> None:
    hosts = load_hosts(inventory)
    cgroup_v1 = image_supports_cgroup_v1(image)
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
            *cgroup_flags(cgroup_v1),
        ]
        # Named volumes ("name:/path"), e.g. the StateSaveLocation an HA pair of controllers shares.
        for volume in hvars.get("lab_volumes") or []:
            flags += ["-v", volume]
        # Capabilities a host's role needs in the lab, e.g. SYS_ADMIN to mount a
        # shared filesystem (role shared_filesystems) on a controller.
        for cap in hvars.get("lab_cap_add") or []:
            flags += ["--cap-add", cap]
        if hvars.get("lab_profile") == "compute":
            flags += COMPUTE_FLAGS + loop_devices()
        # The docker provider of elastic nodes (inventories/lab/group_vars/
        # cluster_cloud.yml) starts their containers from this host: root on
        # this machine for whoever holds the socket, so lab only.
        if hvars.get("lab_docker_socket"):
            flags += ["-v", f"{DOCKER_SOCKET}:{DOCKER_SOCKET}"]
        if hvars.get("lab_profile") == "router":
            flags += ROUTER_FLAGS
        elif any(h.get("lab_profile") == "router" for h in hosts.values()):
            flags += ["--cap-add", "NET_ADMIN"]
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
    directories = [h for h, v in hosts.items() if v.get("lab_profile") == "directory"]
    for host in directories:
        setup_directory(host)
    for host, hvars in hosts.items():
        if not directories and hvars.get("lab_profile") != "router":
            add_lab_users(host)
    route_through_routers(hosts)
    name_directory_hosts(hosts)
    ssh_setup(hosts)


def network_subnet(name: str) -> str:
    return docker("network", "inspect", "-f", "{{(index .IPAM.Config 0).Subnet}}", name).stdout.strip()


def container_ip(host: str, network: str) -> str:
    fmt = "{{(index .NetworkSettings.Networks \"%s\").IPAddress}}" % network
    return docker("inspect", "-f", fmt, host).stdout.strip()


def route_through_routers(hosts: dict[str, dict]) -> None:
    """Give every host a route to each peer network through the router on its own network."""
    routers = [h for h, v in hosts.items() if v.get("lab_profile") == "router"]
    for router in routers:
        router_nets = hosts[router].get("lab_networks") or [DEFAULT_NETWORK]
        for host, hvars in hosts.items():
            if host == router:
                continue
            own = (hvars.get("lab_networks") or [DEFAULT_NETWORK])[0]
            if own not in router_nets:
                continue
            via = container_ip(router, own)
            for peer in router_nets:
                if peer == own:
                    continue
                subnet = network_subnet(peer)
                docker("exec", host, "ip", "route", "replace", subnet, "via", via)
        log(f"{router} routes between {', '.join(router_nets)}")


def peering(router: str, network: str, connect: bool) -> None:
    """Cut (disconnect) or restore (connect) the router's leg on one network."""
    if connect:
        docker("network", "connect", network, router)
    else:
        docker("network", "disconnect", network, router)


def ssh_key() -> str:
    """The lab's key pair (made once); returns the public key."""
    key = os.path.join(SSH_DIR, "id_ed25519")
    os.makedirs(os.path.join(SSH_DIR, "hosts.d"), mode=0o700, exist_ok=True)
    os.makedirs(os.path.join(SSH_DIR, "cp"), mode=0o700, exist_ok=True)
    if not os.path.exists(key):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "hybridhpc-lab", "-f", key], check=True)
    with open(key + ".pub", encoding="utf-8") as handle:
        return handle.read()


def write_ssh_config() -> None:
    path = os.path.join(SSH_DIR, "config")
    text = (
        "# Written by lab/labctl.py: the lab's hosts by inventory name.\n"
        f"Include {SSH_DIR}/hosts.d/*.conf\n"
        "Host *\n"
        "  User root\n"
        f"  IdentityFile {SSH_DIR}/id_ed25519\n"
        "  IdentitiesOnly yes\n"
        # Lab containers are recreated with new host keys on every `up`.
        "  StrictHostKeyChecking no\n"
        "  UserKnownHostsFile /dev/null\n"
        "  LogLevel ERROR\n"
    )
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def close_ssh_masters(addresses: set[str] | None = None) -> None:
    """Stop persistent SSH connections (all, or those to these addresses): a
    recreated container may get the address of a removed one."""
    cp_dir = os.path.join(SSH_DIR, "cp")
    for sock in glob.glob(os.path.join(cp_dir, "*")):
        # Inventories name sockets "<address>-<user>" (ansible_control_path).
        if addresses is not None and not any(os.path.basename(sock).startswith(a + "-") for a in addresses):
            continue
        subprocess.run(["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "lab"],
                       capture_output=True, check=False, timeout=10)
        if os.path.exists(sock):
            os.unlink(sock)


def ssh_setup(hosts: dict[str, dict]) -> None:
    if not shutil.which("ssh-keygen"):
        if os.environ.get("HYBRIDHPC_LAB_CONNECTION") == "docker":
            return
        sys.exit("lab: ssh-keygen missing: apt-get install openssh-client (or HYBRIDHPC_LAB_CONNECTION=docker)")
    pub = ssh_key()
    write_ssh_config()
    for host, hvars in hosts.items():
        net = (hvars.get("lab_networks") or [DEFAULT_NETWORK])[0]
        address = container_ip(host, net)
        forget_ssh_hosts([host])
        close_ssh_masters({address})
        docker("exec", "-i", host, "sh", "-c",
               "install -d -m 0700 /root/.ssh && cat > /root/.ssh/authorized_keys && chmod 0600 /root/.ssh/authorized_keys",
               input_text=pub)
        with open(os.path.join(SSH_DIR, "hosts.d", f"{host}.conf"), "w", encoding="utf-8") as handle:
            handle.write(f"Host {host}\n  HostName {address}\n")
        wait_port(host, address, 22)
    log(f"ssh: {len(hosts)} hosts in {SSH_DIR}/config")


def wait_port(host: str, address: str, port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((address, port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                sys.exit(f"lab: sshd in {host} ({address}:{port}) does not answer")
            time.sleep(0.3)


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
        # A container whose systemd could not get its inotify instances exits
        # with 255 before it logs anything (lab/ensure-docker.sh raises the limit).
        states = docker("inspect", "-f", "{{.Name}} {{.State.Status}}", *sorted(pending), check=False)
        exited = [name.lstrip("/") for name, _, status in (line.partition(" ") for line in states.stdout.splitlines())
                  if status == "exited"]
        hint = ""
        if exited:
            with open("/proc/sys/fs/inotify/max_user_instances", encoding="utf-8") as handle:
                limit = handle.read().strip()
            hint = (f"; {', '.join(exited)} exited before booting: with many lab containers up, systemd runs out of"
                    f" inotify instances (fs.inotify.max_user_instances is {limit}; `make docker` raises it to 512)")
        sys.exit(f"lab: systemd did not come up in {', '.join(sorted(pending))} within {timeout:.0f}s{hint}")
    log(f"{len(hosts)} containers running systemd")


def down(inventory: str | None = None) -> None:
    """Remove the lab: everything labelled, or only one inventory's hosts and networks."""
    if inventory:
        hosts = load_hosts(inventory)
        names = [h for h in hosts if container_state(h) is not None]
        nets = {n for v in hosts.values() for n in (v.get("lab_networks") or [DEFAULT_NETWORK])}
        # Elastic nodes a provider started on this inventory's networks (not inventory hosts).
        elastic = sorted({
            name for net in nets
            for name in docker("ps", "-a", "--filter", f"label={LABEL}", "--filter", f"network={net}",
                               "--format", "{{.Names}}", check=False).stdout.split()
        } - set(names))
        names += elastic
        if names:
            log(f"removing {len(names)} containers")
            docker("rm", "-f", *names)
        forget_ssh_hosts(list(hosts))
        for net in sorted(nets):
            if docker("network", "inspect", net, check=False).returncode == 0:
                docker("network", "rm", net, check=False)
        volumes = {v.split(":", 1)[0] for h in hosts.values() for v in (h.get("lab_volumes") or [])}
        for volume in sorted(volumes):
            docker("volume", "rm", "-f", volume, check=False)
        remove_slurm_cgroups(["/sys/fs/cgroup/*/slurm_%s" % h for h in list(hosts) + elastic])
        return
    names = docker("ps", "-aq", "--filter", f"label={LABEL}").stdout.split()
    if names:
        log(f"removing {len(names)} containers")
        docker("rm", "-f", *names)
    forget_ssh_hosts([os.path.basename(p)[:-5] for p in glob.glob(os.path.join(SSH_DIR, "hosts.d", "*.conf"))])
    nets = docker("network", "ls", "-q", "--filter", f"label={LABEL}").stdout.split()
    if nets:
        log(f"removing {len(nets)} networks")
        docker("network", "rm", *nets)
    remove_slurm_cgroups(["/sys/fs/cgroup/*/slurm_*"])


def forget_ssh_hosts(hosts: list[str]) -> None:
    addresses = set()
    for host in hosts:
        path = os.path.join(SSH_DIR, "hosts.d", f"{host}.conf")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                addresses |= {line.split()[1] for line in handle if line.strip().startswith("HostName")}
            os.unlink(path)
    if addresses:
        close_ssh_masters(addresses)


def remove_slurm_cgroups(patterns: list[str]) -> None:
    """proctrack/task cgroup on a v1 host leave slurm_<node> dirs at the hierarchy root."""
    removed = 0
    paths = {p for pattern in patterns for p in glob.glob(pattern)}
    for path in sorted(paths, key=len, reverse=True):
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
    p_peer = sub.add_parser("peering", help="cut or restore the router's leg on a network (fault tests)")
    p_peer.add_argument("action", choices=["cut", "restore"])
    p_peer.add_argument("--router", default="peer-rtr")
    p_peer.add_argument("--network", required=True)
    p_peer.add_argument("--inventory", default="inventories/lab/hosts.yml")
    p_down = sub.add_parser("down")
    p_down.add_argument("--inventory", help="only this inventory's hosts and networks (default: the whole lab)")
    sub.add_parser("status")
    args = parser.parse_args()
    if not shutil.which("docker"):
        sys.exit("lab: docker is not installed (make lab installs docker.io when run as root)")
    if args.cmd == "up":
        up(args.inventory, args.image)
    elif args.cmd == "peering":
        peering(args.router, args.network, args.action == "restore")
        if args.action == "restore":
            route_through_routers(load_hosts(args.inventory))
    elif args.cmd == "down":
        down(args.inventory)
    else:
        status()


if __name__ == "__main__":
    main()
