#!/usr/bin/env python3
"""MUNGE to auth/slurm and back on the running federation, with jobs across each switch.

Run by verify_auth.yml. Each step runs `ansible-playbook playbooks/site.yml`
over the scenario's inventory (slurm_auth_type given with -e, as an admin
would set it in group_vars/all) and checks the real daemons with
`docker exec`:

1. to auth/slurm with a job running on every cluster: both clusters and
   slurmdbd run AuthType=auth/slurm and still accept auth/munge; one slurm.key,
   0600 and owned by slurm, on every Slurm host; munged keeps running; the
   key's bytes are nowhere in the run's output; the jobs COMPLETE.
2. again, now that those jobs ended: auth/munge is no longer accepted and
   munged is stopped and disabled everywhere; a job from the login node (sackd)
   runs on each cluster.
3. back to MUNGE with a job running on every cluster (started under
   auth/slurm): MUNGE again, auth/slurm still accepted, sackd serving the
   compute nodes' socket; the jobs COMPLETE.
4. again: auth/slurm no longer accepted, sackd stopped on compute nodes (the
   login node's stays: the cloud cluster runs configless).
5. again: changed=0 on every host.

Each step's time goes to stdout.
"""

import argparse
import json
import os
import pathlib
import re
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "lifecycle"))
# The lifecycle steps' lab helpers: checks, docker exec, waits, scontrol show config, PLAY RECAP counts.
from steps import StepFailed, changed_counts, check, config_value, dexec, run, wait_for  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[3]
BIN = pathlib.Path(sys.executable).parent


def unit_state(host, name):
    out = dexec(host, "systemctl", "show", "-p", "ActiveState", "-p", "UnitFileState", name, ok=False)
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


class Lab:
    def __init__(self, inventory):
        self.inventory = inventory
        res = run([BIN / "ansible-inventory", "-i", inventory, "--list"], timeout=120)
        check(res.returncode == 0, "ansible-inventory: %s" % res.stderr)
        data = json.loads(res.stdout)

        def group(name):
            return list((data.get(name) or {}).get("hosts") or [])

        self.controllers = group("slurmctld")
        self.computes = group("slurmd")
        self.logins = [h for h in group("login") if h not in self.controllers + self.computes]
        self.dbd = group("slurmdbd")
        hostvars = data.get("_meta", {}).get("hostvars", {})
        # The first controller of each cluster, and one always-on compute node of each (elastic ones may be off).
        self.clusters = {}
        for ctl in self.controllers:
            self.clusters.setdefault(hostvars[ctl]["slurm_cluster_name"], {"ctl": ctl})
        for node in self.computes:
            entry = self.clusters[hostvars[node]["slurm_cluster_name"]]
            entry.setdefault("node", node)
        self.slurm_hosts = sorted(set(self.controllers + self.computes + self.logins + self.dbd))

    def converge(self, *extra, timeout=1200):
        env = {k: v for k, v in os.environ.items() if k != "ANSIBLE_CALLBACKS_ENABLED"}
        env.update(ANSIBLE_LOG_PATH="/dev/null", ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
        res = run([BIN / "ansible-playbook", "-i", self.inventory, ROOT / "playbooks" / "site.yml", *extra],
                  timeout=timeout, cwd=ROOT, env=env)
        out = res.stdout + res.stderr
        check(res.returncode == 0, "site.yml %s failed:\n%s" % (" ".join(extra), out[-8000:]))
        return out

    def jobs_across(self):
        """One job on each cluster's always-on node, running before the switch and ending after it."""
        jobs = {}
        for name, entry in self.clusters.items():
            jobs[name] = dexec(entry["ctl"], "sbatch", "--parsable", "-w", entry["node"], "-t", "10",
                               "-o", "/dev/null", "--wrap", "sleep 150")
        for name, job in jobs.items():
            ctl = self.clusters[name]["ctl"]
            wait_for("job %s running on %s" % (job, name), lambda c=ctl, j=job: job_state(c, j) == "RUNNING", 90)
        return jobs

    def still_running(self, jobs):
        """The jobs really ran across the switch: still running once site.yml restarted every daemon."""
        for name, job in jobs.items():
            state = job_state(self.clusters[name]["ctl"], job)
            check(state == "RUNNING", "job %s on %s ended (%s) before the switch was done: it ran across nothing"
                  % (job, name, state))

    def wait_completed(self, jobs):
        for name, job in jobs.items():
            ctl = self.clusters[name]["ctl"]
            state = wait_for("job %s on %s ended" % (job, name),
                             lambda c=ctl, j=job: job_state(c, j) not in ("", "PENDING", "RUNNING", "COMPLETING")
                             and job_state(c, j), 300, interval=5)
            check(state == "COMPLETED", "job %s on %s, running across the switch, ended %s" % (job, name, state))

    def auth(self, host):
        return config_value(host, "AuthType"), config_value(host, "AuthAltTypes") or ""

    def dbd_auth(self):
        conf = dexec(self.dbd[0], "cat", "/etc/slurm/slurmdbd.conf")
        return (re.search(r"^AuthType=(\S+)", conf, re.M).group(1),
                (re.search(r"^AuthAltTypes=(\S+)", conf, re.M) or re.match("()", "")).group(1))

    def each_cluster_answers_a_job(self, host):
        for name, entry in self.clusters.items():
            out = dexec(host, "sbatch", "-M", name, "--wait", "-w", entry["node"], "-o", "/dev/null", "--wrap", "true",
                        timeout=300)
            check("Submitted batch job" in out, "%s: no job ran on %s: %s" % (host, name, out))


def job_state(ctl, job):
    res = run(["docker", "exec", ctl, "sacct", "-X", "-n", "-P", "-j", job, "-o", "State"], timeout=60)
    lines = res.stdout.split()
    return lines[0].strip() if res.returncode == 0 and lines else ""


def step_to_auth_slurm(lab):
    jobs = lab.jobs_across()
    out = lab.converge("-e", "slurm_auth_type=slurm")
    lab.still_running(jobs)
    for ctl in (e["ctl"] for e in lab.clusters.values()):
        auth, alt = lab.auth(ctl)
        check(auth == "auth/slurm" and "auth/munge" in alt, "%s runs %s, accepting %s" % (ctl, auth, alt))
    dbd = lab.dbd_auth()
    check(dbd[0] == "auth/slurm" and "auth/munge" in dbd[1], "slurmdbd.conf has %s, accepting %s" % dbd)
    sums = {}
    for host in lab.slurm_hosts:
        stat = dexec(host, "stat", "-c", "%a %U %G", "/etc/slurm/slurm.key")
        check(stat == "600 slurm slurm", "%s: slurm.key is %s, not 600 slurm slurm" % (host, stat))
        sums[host] = dexec(host, "sha256sum", "/etc/slurm/slurm.key").split()[0]
        check(unit_state(host, "munge").get("ActiveState") == "active", "%s: munged stopped while jobs need it" % host)
    check(len(set(sums.values())) == 1, "slurm.key differs between hosts: %s" % sums)
    key = dexec(lab.controllers[0], "base64", "-w0", "/etc/slurm/slurm.key")
    check(key and key not in out and key[:40] not in out, "the slurm.key's bytes are in the run's output")
    lab.wait_completed(jobs)


def step_auth_slurm_alone(lab):
    lab.converge("-e", "slurm_auth_type=slurm")
    for ctl in (e["ctl"] for e in lab.clusters.values()):
        auth, alt = lab.auth(ctl)
        check(auth == "auth/slurm" and "auth/munge" not in alt, "%s still accepts MUNGE: %s" % (ctl, alt))
    check("auth/munge" not in lab.dbd_auth()[1], "slurmdbd still accepts MUNGE")
    for host in lab.slurm_hosts:
        state = unit_state(host, "munge")
        check(state.get("ActiveState") != "active" and state.get("UnitFileState") == "disabled",
              "%s: munge is %s once nothing needs it" % (host, state))
    for host in lab.logins:
        lab.each_cluster_answers_a_job(host)


def step_back_to_munge(lab):
    jobs = lab.jobs_across()
    lab.converge()
    lab.still_running(jobs)
    for ctl in (e["ctl"] for e in lab.clusters.values()):
        auth, alt = lab.auth(ctl)
        check(auth == "auth/munge" and "auth/slurm" in alt, "%s runs %s, accepting %s" % (ctl, auth, alt))
    for host in lab.slurm_hosts:
        check(unit_state(host, "munge").get("ActiveState") == "active", "%s: munged is not running again" % host)
    for entry in lab.clusters.values():
        check(unit_state(entry["node"], "sackd").get("ActiveState") == "active",
              "%s: no sackd for the jobs that started under auth/slurm" % entry["node"])
    lab.wait_completed(jobs)


def step_munge_alone(lab):
    lab.converge()
    for ctl in (e["ctl"] for e in lab.clusters.values()):
        auth, alt = lab.auth(ctl)
        check(auth == "auth/munge" and "auth/slurm" not in alt, "%s still accepts auth/slurm: %s" % (ctl, alt))
    for node in lab.computes:
        state = unit_state(node, "sackd")
        check(state.get("ActiveState") != "active", "%s: sackd still runs once MUNGE alone is left" % node)
    for host in lab.logins:
        lab.each_cluster_answers_a_job(host)


def step_changed_nothing(lab):
    again = changed_counts(lab.converge())
    check(again and not any(again.values()), "the re-run changed %s" % {h: n for h, n in again.items() if n})


STEPS = [
    ("1", "to auth/slurm, a job on each cluster across it", step_to_auth_slurm),
    ("2", "auth/slurm alone once those jobs ended", step_auth_slurm_alone),
    ("3", "back to MUNGE, a job on each cluster across it", step_back_to_munge),
    ("4", "MUNGE alone once those jobs ended", step_munge_alone),
    ("5", "the re-run changes nothing", step_changed_nothing),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inventory", required=True)
    parser.add_argument("--only", help="comma-separated step numbers")
    args = parser.parse_args()
    lab = Lab(args.inventory)
    wanted = set(args.only.split(",")) if args.only else None
    for number, title, func in STEPS:
        if wanted and number not in wanted:
            continue
        start = time.monotonic()
        try:
            func(lab)
        except StepFailed as exc:
            print("step %s (%s) FAILED after %.0fs: %s" % (number, title, time.monotonic() - start, exc), flush=True)
            return 1
        print("step %s (%s): passed in %.1fs" % (number, title, time.monotonic() - start), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
