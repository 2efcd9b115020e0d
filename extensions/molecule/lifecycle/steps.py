#!/usr/bin/env python3
"""Day-2 steps on the lifecycle lab, each applied with site.yml and checked on the real daemons.

Run by verify.yml after molecule's converge and idempotence. Every step edits
the inventory the way an admin would (a copy of inventory/ in a temporary
directory, changed step by step), runs `ansible-playbook playbooks/site.yml`,
and checks slurmctld, slurmd and jobs with `docker exec`:

a. a reconfigure-only change to the second cluster only (beta);
b. a key that needs a restart, on beta only, with a job running across it;
c. an interrupted run (killed after slurm.conf is written, before it is
   applied), then the next run;
g. --check --diff of a changed inventory: the diff shows, nothing changes;
d. a compute node added to alpha while a job runs on another node;
i. munge and slurmd disabled by hand on a compute node: the next run enables
   both again (one reload of systemd, neither daemon restarted), the re-run
   changed=0;
e. that node removed again while a job runs on it: drained, the job ends,
   then the reconfigure drops it;
f. HA: alpha's primary slurmctld stopped, the backup takes over, then gives
   control back;
l. alpha's StateSaveLocation is the share both controllers mounted (role
   shared_filesystems_mounts), and slurmctld starts only with it mounted; a share
   asked for over beta's saved state is refused in the first play;
h. beta renamed gamma: refused in the first play, then, with
   slurm_allow_cluster_rename, done safely with a job running.

Each step's time goes to stdout and, with --report, to a JSON file. With
HYBRIDHPC_LAB_HANDOFF set, a run whose steps all passed leaves the inventory
it ended with in that directory, for the faults scenario to go on from.
"""

import argparse
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]
BASE = pathlib.Path(__file__).resolve().parent / "inventory"
BIN = pathlib.Path(sys.executable).parent
MARKER = "/var/lib/slurm/hybridhpc-pending-reconfigure"


class StepFailed(AssertionError):
    pass


def check(condition, message):
    if not condition:
        raise StepFailed(message)


def run(cmd, timeout=120, **kwargs):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, check=False, **kwargs)


def dexec(host, *cmd, timeout=120, ok=True):
    res = run(["docker", "exec", host, *cmd], timeout=timeout)
    if ok:
        check(res.returncode == 0, "docker exec %s %s: %s%s" % (host, " ".join(cmd), res.stdout, res.stderr))
    return res.stdout.strip()


def wait_for(what, probe, timeout, interval=1.0):
    """probe() until it holds. A probe whose command fails (sacct while slurmdbd is busy, a controller that is
    restarting) counts as "not yet": only the deadline fails the wait, with the last answer or error."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except (StepFailed, subprocess.TimeoutExpired) as exc:
            last = "error: %s" % exc
        else:
            if last:
                return last
        time.sleep(interval)
    raise StepFailed("%s: not within %ss (last: %r)" % (what, timeout, last))


def unit(host, name):
    """(MainPID, ActiveEnterTimestampMonotonic) of a unit: both change when the daemon restarts."""
    out = dexec(host, "systemctl", "show", "-p", "MainPID", "-p", "ActiveEnterTimestampMonotonic", name)
    values = dict(line.split("=", 1) for line in out.splitlines())
    return int(values["MainPID"]), int(values["ActiveEnterTimestampMonotonic"])


def has_marker(host):
    return run(["docker", "exec", host, "test", "-e", MARKER]).returncode == 0


def config_value(host, key):
    for line in dexec(host, "scontrol", "show", "config").splitlines():
        if line.split("=", 1)[0].strip() == key:
            return line.split("=", 1)[1].strip()
    return None


def job_state(ctl, job):
    """The job's state in accounting ("" until slurmdbd has the record, e.g. right after a takeover)."""
    lines = dexec(ctl, "sacct", "-X", "-n", "-P", "-j", job, "-o", "State").splitlines()
    return lines[0].strip() if lines else ""


def changed_counts(output):
    """PLAY RECAP: host -> changed count."""
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\S+)\s+:\s+ok=\d+\s+changed=(\d+)", output, re.M)}


class Site:
    """The inventory as it stands after the steps so far, and site.yml over it."""

    def __init__(self, workdir, base=BASE):
        """From the scenario's inventory, or from base (an inventory a run of these steps left, with the
        clusters' group_vars it wrote)."""
        self.dir = pathlib.Path(workdir) / "inventory"
        shutil.copytree(base, self.dir)
        self.hosts = yaml.safe_load((self.dir / "hosts.yml").read_text())
        self.group_vars = {path.stem: yaml.safe_load(path.read_text()) or {}
                           for path in (self.dir / "group_vars").glob("cluster_*.yml")}

    def set_cluster_vars(self, group, variables):
        self.group_vars.setdefault(group, {}).update(variables)

    def write(self):
        (self.dir / "hosts.yml").write_text(yaml.safe_dump(self.hosts, sort_keys=False))
        for group, variables in self.group_vars.items():
            (self.dir / "group_vars" / ("%s.yml" % group)).write_text(yaml.safe_dump(variables, sort_keys=False))

    def command(self, *args):
        return [BIN / "ansible-playbook", "-i", self.dir / "hosts.yml", ROOT / "playbooks" / "site.yml", *args]

    @staticmethod
    def env():
        # No callbacks but the default output: ansible-core 2.19+ refuses an
        # empty ANSIBLE_CALLBACKS_ENABLED, so none is inherited or set.
        env = {key: value for key, value in os.environ.items() if key != "ANSIBLE_CALLBACKS_ENABLED"}
        return dict(env, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0", ANSIBLE_FORKS="25",
                    ANSIBLE_PIPELINING="True", ANSIBLE_LOG_PATH="/dev/null")

    def converge(self, *args, expect_ok=True, timeout=900):
        self.write()
        res = run(self.command(*args), timeout=timeout, cwd=ROOT, env=self.env())
        out = res.stdout + res.stderr
        if expect_ok:
            check(res.returncode == 0, "site.yml %s failed:\n%s" % (" ".join(args), out[-8000:]))
        return out

    def converge_killed_when(self, probe, timeout=600):
        """site.yml, SIGKILLed (with its workers) as soon as probe() holds; True when it was killed in time."""
        self.write()
        proc = subprocess.Popen([str(c) for c in self.command()], cwd=ROOT, env=self.env(), start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline and proc.poll() is None:
                if probe():
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=30)
                    return True
                time.sleep(0.2)
            return False
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)


def beta_config(site):
    """beta's own slurm_config (group_vars/cluster_beta.yml): the lab's, to be changed step by step."""
    beta = site.group_vars.setdefault("cluster_beta", {})
    if "slurm_config" not in beta:
        beta["slurm_config"] = dict(yaml.safe_load((BASE / "group_vars" / "all.yml").read_text())["slurm_config"])
    return beta["slurm_config"]


def step_a_reconfigure_second_cluster_only(site):
    alpha_before = unit("lc-a-ctl1", "slurmctld")
    alpha_log = dexec("lc-a-ctl1", "wc", "-l", "/var/log/slurm/slurmctld.log").split()[0]
    check("bf_continue" not in (config_value("lc-b-ctl1", "SchedulerParameters") or ""), "beta already has bf_continue")
    beta_config(site)["SchedulerParameters"] = ["bf_interval=5", "bf_continue"]
    site.converge()
    check("bf_continue" in config_value("lc-b-ctl1", "SchedulerParameters"), "beta's slurmctld does not run bf_continue")
    check("bf_continue" not in (config_value("lc-a-ctl1", "SchedulerParameters") or ""), "alpha got beta's change")
    for host in ("lc-b-ctl1", "lc-b-c1"):
        check(not has_marker(host), "%s keeps a pending marker after the reconfigure" % host)
    check(unit("lc-a-ctl1", "slurmctld") == alpha_before, "alpha's slurmctld restarted")
    alpha_new = dexec("lc-a-ctl1", "sed", "-n", "%d,$p" % (int(alpha_log) + 1), "/var/log/slurm/slurmctld.log")
    check("econfig" not in alpha_new, "alpha's slurmctld was reconfigured: %s" % alpha_new[-500:])
    again = changed_counts(site.converge())
    check(not any(again.values()), "the re-run changed %s" % {h: n for h, n in again.items() if n})


def step_b_restart_key_on_beta_with_a_job(site):
    job = dexec("lc-b-ctl1", "sbatch", "--parsable", "-w", "lc-b-c1", "-t", "5", "--wrap", "sleep 25")
    wait_for("job %s running" % job, lambda: job_state("lc-b-ctl1", job) == "RUNNING", 60)
    alpha = unit("lc-a-ctl1", "slurmctld")
    ctld, slurmd = unit("lc-b-ctl1", "slurmctld"), unit("lc-b-c1", "slurmd")
    # AuthInfo is one of the keys reconfigure cannot apply: the munge socket, spelled out.
    beta_config(site)["AuthInfo"] = "socket=/run/munge/munge.socket.2"
    site.converge()
    ctld2, slurmd2 = unit("lc-b-ctl1", "slurmctld"), unit("lc-b-c1", "slurmd")
    check(ctld2 != ctld and slurmd2 != slurmd, "beta's daemons did not restart: %s %s" % ((ctld, ctld2), (slurmd, slurmd2)))
    check(ctld2[1] < slurmd2[1], "slurmd restarted before slurmctld")
    check(unit("lc-a-ctl1", "slurmctld") == alpha, "alpha's slurmctld restarted for beta's change")
    check(config_value("lc-b-ctl1", "AuthInfo") == "socket=/run/munge/munge.socket.2", "beta does not run the new AuthInfo")
    wait_for("job %s completed" % job, lambda: job_state("lc-b-ctl1", job) in ("COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL"), 120)
    check(job_state("lc-b-ctl1", job) == "COMPLETED", "the job across the restart ended %s" % job_state("lc-b-ctl1", job))


def step_c_interrupted_run_is_applied_by_the_next(site):
    check(not has_marker("lc-b-ctl1"), "a marker is left from before")
    beta_config(site)["SchedulerParameters"] = ["bf_interval=5", "bf_continue", "bf_max_job_test=300"]
    killed = site.converge_killed_when(lambda: has_marker("lc-b-ctl1"))
    check(killed, "the run ended before the marker appeared")
    check("bf_max_job_test=300" in dexec("lc-b-ctl1", "cat", "/etc/slurm/slurm.conf"), "the killed run did not write slurm.conf")
    check("bf_max_job_test=300" not in config_value("lc-b-ctl1", "SchedulerParameters"), "applied before the kill: no interruption")
    site.converge()
    check("bf_max_job_test=300" in config_value("lc-b-ctl1", "SchedulerParameters"), "the next run did not apply the change")
    check(not has_marker("lc-b-ctl1"), "the marker stayed")
    # (changed=0 after an applied change is step a's and d's re-run.)


def step_g_check_diff_changes_nothing(site):
    before = dexec("lc-b-ctl1", "sha256sum", "/etc/slurm/slurm.conf")
    running = config_value("lc-b-ctl1", "SchedulerParameters")
    saved = list(beta_config(site)["SchedulerParameters"])
    beta_config(site)["SchedulerParameters"] = saved + ["bf_yield_interval=1500000"]
    out = site.converge("--check", "--diff")
    check(re.search(r"^\+SchedulerParameters=.*bf_yield_interval=1500000", out, re.M), "no slurm.conf diff shown:\n%s" % out[-4000:])
    check(re.search(r"^-SchedulerParameters=%s$" % re.escape(",".join(saved)), out, re.M), "the old line is not in the diff")
    check(dexec("lc-b-ctl1", "sha256sum", "/etc/slurm/slurm.conf") == before, "--check changed slurm.conf")
    check(config_value("lc-b-ctl1", "SchedulerParameters") == running, "--check changed the running config")
    for host in ("lc-b-ctl1", "lc-b-c1"):
        check(not has_marker(host), "--check left a marker on %s" % host)
    beta_config(site)["SchedulerParameters"] = saved


def step_d_add_a_compute_node(site):
    job = dexec("lc-a-ctl1", "sbatch", "--parsable", "-w", "lc-a-c1", "-t", "5", "--wrap", "sleep 60")
    wait_for("job %s running" % job, lambda: job_state("lc-a-ctl1", job) == "RUNNING", 60)
    children = site.hosts["all"]["children"]
    spare = children["lab_spare"]["hosts"].pop("lc-a-c3")
    children["cluster_alpha"]["hosts"]["lc-a-c3"] = spare
    children["slurmd"]["hosts"]["lc-a-c3"] = None
    site.converge()
    wait_for("lc-a-c3 idle", lambda: dexec("lc-a-ctl1", "sinfo", "-h", "-N", "-n", "lc-a-c3", "-o", "%T") == "idle", 90)
    out = dexec("lc-a-ctl1", "srun", "-w", "lc-a-c3", "-t", "1", "hostname", timeout=120)
    check(out == "lc-a-c3", "a job on the new node printed %r" % out)
    # Still running, or ended on its own (a converge can outlast it): never killed by the addition.
    check(job_state("lc-a-ctl1", job) in ("RUNNING", "COMPLETED"), "the job on lc-a-c1 did not survive the addition: %s" % job_state("lc-a-ctl1", job))
    wait_for("job %s completed" % job, lambda: job_state("lc-a-ctl1", job) != "RUNNING", 120)
    check(job_state("lc-a-ctl1", job) == "COMPLETED", "the job ended %s" % job_state("lc-a-ctl1", job))
    again = changed_counts(site.converge())
    check(not any(again.values()), "the re-run changed %s" % {h: n for h, n in again.items() if n})


def reloads_since(host, since):
    """How often systemd on host reloaded its units since the epoch second since (PID 1's journal)."""
    out = dexec(host, "journalctl", "-q", "_PID=1", "--since=@%d" % since, "-o", "cat")
    return sum(1 for line in out.splitlines() if line.startswith("Reload requested from client"))


def enabled(host, *names):
    res = run(["docker", "exec", host, "systemctl", "is-enabled", *names])
    return res.stdout.split()


def step_i_disabled_daemons_are_enabled_again(site):
    host = "lc-a-c1"
    running = {name: unit(host, name) for name in ("munge", "slurmd")}
    dexec(host, "systemctl", "disable", "--quiet", "munge", "slurmd")
    check(enabled(host, "munge", "slurmd") == ["disabled", "disabled"], "the disable did not take")
    # After the disable's own reload, in a later second of the journal.
    time.sleep(1.1)
    since = int(dexec(host, "date", "+%s"))
    counts = changed_counts(site.converge())
    check(enabled(host, "munge", "slurmd") == ["enabled", "enabled"], "site.yml left %s" % enabled(host, "munge", "slurmd"))
    check({h for h, n in counts.items() if n} == {host}, "the run changed %s" % {h: n for h, n in counts.items() if n})
    # munge's step enabled both in one systemctl enable; neither daemon restarted for it.
    check(reloads_since(host, since) == 1, "systemd reloaded %d times for the two enables" % reloads_since(host, since))
    check({name: unit(host, name) for name in running} == running, "a daemon restarted to be enabled")
    again = changed_counts(site.converge())
    check(not any(again.values()), "the re-run changed %s" % {h: n for h, n in again.items() if n})


def step_e_remove_a_compute_node(site):
    job = dexec("lc-a-ctl1", "sbatch", "--parsable", "-w", "lc-a-c3", "-t", "5", "--wrap", "sleep 30")
    wait_for("job %s running" % job, lambda: job_state("lc-a-ctl1", job) == "RUNNING", 60)
    children = site.hosts["all"]["children"]
    children["lab_spare"]["hosts"]["lc-a-c3"] = children["cluster_alpha"]["hosts"].pop("lc-a-c3")
    del children["slurmd"]["hosts"]["lc-a-c3"]
    out = site.converge()
    check("Drain the leaving nodes" in out, "the node was not drained before the reconfigure")
    check(job_state("lc-a-ctl1", job) == "COMPLETED", "the job on the removed node ended %s" % job_state("lc-a-ctl1", job))
    check("lc-a-c3" not in dexec("lc-a-ctl1", "cat", "/etc/slurm/slurm.conf"), "lc-a-c3 is still in slurm.conf")
    check("lc-a-c3" not in dexec("lc-a-ctl1", "sinfo", "-h", "-N", "-o", "%N").split(), "slurmctld still has lc-a-c3")
    check(not has_marker("lc-a-ctl1"), "a marker is left on alpha's controller")
    # The removed host is out of the inventory: its admin stops it.
    dexec("lc-a-c3", "systemctl", "stop", "slurmd")


def controller_in_charge(host):
    out = dexec(host, "scontrol", "ping", ok=False)  # exits non-zero while a controller is down
    return {m.group(2): m.group(3) for m in re.finditer(r"Slurmctld\((\w+)\) at (\S+) is (\w+)", out)}


def step_f_ha_failover_and_back(site):
    pair = wait_for("both controllers up", lambda: controller_in_charge("lc-a-c1") == {"lc-a-ctl1": "UP", "lc-a-ctl2": "UP"}, 60)
    check(pair, "the HA pair is not up before the failover")
    job = dexec("lc-a-ctl1", "sbatch", "--parsable", "-w", "lc-a-c2", "-t", "5", "--wrap", "sleep 40")
    wait_for("job %s running" % job, lambda: job_state("lc-a-ctl1", job) == "RUNNING", 60)
    stopped = time.monotonic()
    dexec("lc-a-ctl1", "systemctl", "stop", "slurmctld")
    # SlurmctldTimeout is 15 s; allow the backup's own polling and its state recovery on top.
    took_over = wait_for("backup answering", lambda: controller_in_charge("lc-a-c1").get("lc-a-ctl2") == "UP"
                         and run(["docker", "exec", "lc-a-c1", "squeue", "-h"]).returncode == 0, 90)
    failover_s = time.monotonic() - stopped
    new_job = dexec("lc-a-c1", "sbatch", "--parsable", "-t", "2", "--wrap", "hostname")
    wait_for("job %s completed under the backup" % new_job,
             lambda: dexec("lc-a-c1", "squeue", "-h", "-j", new_job, ok=False) == "", 90)
    wait_for("job %s completed" % job, lambda: dexec("lc-a-c1", "squeue", "-h", "-j", job, ok=False) == "", 120)
    returned = time.monotonic()
    dexec("lc-a-ctl1", "systemctl", "start", "slurmctld")
    # The backup hands control back (REQUEST_CONTROL), which takes it up to about 30 s.
    wait_for("the primary back in control", lambda: controller_in_charge("lc-a-c1") == {"lc-a-ctl1": "UP", "lc-a-ctl2": "UP"}, 120)
    handback_s = time.monotonic() - returned
    wait_for("accounting has both jobs", lambda: job_state("lc-a-ctl1", job) == "COMPLETED" and job_state("lc-a-ctl1", new_job) == "COMPLETED", 90)
    check(took_over, "no takeover")
    return {"failover_seconds": round(failover_s, 1), "handback_seconds": round(handback_s, 1)}


STATE_DIR = "/var/lib/slurm/slurmctld"


def is_mount_point(host, path):
    return run(["docker", "exec", host, "mountpoint", "-q", path]).returncode == 0


def step_l_state_on_a_share(site):
    """alpha's StateSaveLocation is the share role shared_filesystems mounted on both controllers, and slurmctld
    requires it; a share asked for over beta's saved state is refused before any host changes."""
    for host in ("lc-a-ctl1", "lc-a-ctl2"):
        check(is_mount_point(host, STATE_DIR), "%s: StateSaveLocation is not mounted" % host)
        check(STATE_DIR in dexec(host, "systemctl", "show", "-p", "RequiresMountsFor", "slurmctld"),
              "%s: slurmctld does not require its StateSaveLocation mount" % host)
    # One share: what the primary saved, the backup sees.
    check(dexec("lc-a-ctl2", "stat", "-c", "%U", STATE_DIR + "/job_state") == "slurm",
          "the backup does not see the primary's job_state")
    # The backup's slurmctld never starts on the bare directory: with the share unmounted under the stopped
    # daemon, its start mounts the share first.
    dexec("lc-a-ctl2", "systemctl", "stop", "slurmctld")
    dexec("lc-a-ctl2", "umount", STATE_DIR)
    check(not is_mount_point("lc-a-ctl2", STATE_DIR), "the share is still mounted on lc-a-ctl2")
    dexec("lc-a-ctl2", "systemctl", "start", "slurmctld")
    check(is_mount_point("lc-a-ctl2", STATE_DIR), "slurmctld started on lc-a-ctl2 without its StateSaveLocation mounted")
    wait_for("both controllers up", lambda: controller_in_charge("lc-a-c1") == {"lc-a-ctl1": "UP", "lc-a-ctl2": "UP"}, 90)
    # beta's single controller keeps its state in a local directory: mounting a share over it would hide it.
    beta_ctl = site.hosts["all"]["children"]["cluster_beta"]["hosts"]
    beta_ctl["lc-b-ctl1"] = {"shared_filesystems_mounts": [{"path": STATE_DIR, "src": "/srv/lab-shared/none", "fstype": "none",
                                                     "opts": ["bind"], "purpose": "state"}]}
    out = site.converge(expect_ok=False)
    beta_ctl["lc-b-ctl1"] = None
    check("would start cold" in out and "PLAY [Shared filesystems" not in out and "PLAY [MUNGE" not in out,
          "a share over beta's saved state was not refused in the first play:\n%s" % out[-3000:])
    check(not is_mount_point("lc-b-ctl1", STATE_DIR), "a share was mounted over beta's saved state")
    check(controller_answers("lc-b-ctl1"), "beta's slurmctld stopped answering")


def step_h_rename_with_opt_in(site):
    job = dexec("lc-b-ctl1", "sbatch", "--parsable", "-w", "lc-b-c1", "-t", "5", "--wrap", "sleep 20")
    wait_for("job %s running" % job, lambda: job_state("lc-b-ctl1", job) == "RUNNING", 60)
    site.set_cluster_vars("cluster_beta", {"slurm_cluster_name": "gamma"})
    refused = site.converge(expect_ok=False)
    check("slurm_allow_cluster_rename" in refused and "PLAY [MUNGE" not in refused, "the rename was not refused up front")
    site.set_cluster_vars("cluster_beta", {"slurm_allow_cluster_rename": True})
    site.converge()
    check(config_value("lc-b-ctl1", "ClusterName") == "gamma", "slurmctld does not run as gamma")
    # The job ran to its end under the old name, before the rename (its history stays there).
    check(dexec("lc-b-ctl1", "sacct", "-M", "beta", "-X", "-n", "-P", "-j", job, "-o", "State") == "COMPLETED",
          "the job running at the rename did not complete under beta")
    clusters = dexec("lc-a-ctl1", "sacctmgr", "-n", "-P", "show", "cluster", "format=Cluster").split()
    check("gamma" in clusters and "beta" in clusters, "slurmdbd should list gamma and keep beta's history: %s" % clusters)
    wait_for("lc-b-c1 idle under gamma", lambda: dexec("lc-b-ctl1", "sinfo", "-h", "-N", "-n", "lc-b-c1", "-o", "%T") == "idle", 90)
    check(dexec("lc-b-ctl1", "srun", "-w", "lc-b-c1", "-t", "1", "hostname", timeout=120) == "lc-b-c1", "no job runs on gamma")
    again = changed_counts(site.converge())
    check(not any(again.values()), "the re-run changed %s" % {h: n for h, n in again.items() if n})


def conf_sums(*hosts):
    return {host: dexec(host, "sha256sum", "/etc/slurm/slurm.conf").split()[0] for host in hosts}


def controller_answers(host):
    return run(["docker", "exec", host, "scontrol", "ping"]).stdout.count("is UP") > 0


def step_j_a_file_slurm_refuses_is_never_installed(site):
    before = conf_sums("lc-b-ctl1", "lc-b-c1")
    beta_config(site)["HybridhpcNoSuchOption"] = "1"
    out = site.converge(expect_ok=False)
    check("Slurm refuses the new file, nothing was replaced" in out and "unrecognized key: HybridhpcNoSuchOption" in out,
          "the run did not stop with Slurm's parser's words:\n%s" % out[-3000:])
    check(conf_sums("lc-b-ctl1", "lc-b-c1") == before, "a slurm.conf Slurm's parser refuses was installed")
    check(controller_answers("lc-b-ctl1"), "beta's slurmctld stopped answering")
    del beta_config(site)["HybridhpcNoSuchOption"]


def step_k_a_configuration_slurmctld_rejects_is_rolled_back(site):
    # Slurm's client parser takes an unknown TRES in TRESBillingWeights; slurmctld's reconfigure dies on it
    # (fatal: failed to parse tres weights) and keeps its old files: only the check after the reconfigure sees it.
    job = dexec("lc-b-ctl1", "sbatch", "--parsable", "-w", "lc-b-c1", "-t", "5", "--wrap", "sleep 30")
    wait_for("job %s running" % job, lambda: job_state("lc-b-ctl1", job) == "RUNNING", 60)
    before = conf_sums("lc-b-ctl1", "lc-b-c1")
    alpha = unit("lc-a-ctl1", "slurmctld")
    partitions = yaml.safe_load((BASE / "group_vars" / "all.yml").read_text())["slurm_partitions"]
    site.set_cluster_vars("cluster_beta", {"slurm_partitions": [dict(partitions[0], TRESBillingWeights="CPU=1.0,NoSuchTres=2")]})
    start = time.monotonic()
    out = site.converge(expect_ok=False)
    recovery = round(time.monotonic() - start, 1)
    check("failed to parse tres weights" in out and "are back on every host" in out,
          "the run did not stop with slurmctld's words and the rollback:\n%s" % out[-3000:])
    check(conf_sums("lc-b-ctl1", "lc-b-c1") == before, "the last accepted slurm.conf is not back on every beta host")
    check(controller_answers("lc-b-ctl1"), "beta's slurmctld does not answer after the rollback")
    check(not has_marker("lc-b-ctl1") and not has_marker("lc-b-c1"), "the rejected change left a pending marker")
    check(unit("lc-a-ctl1", "slurmctld") == alpha, "alpha's slurmctld restarted for beta's rejected change")
    wait_for("job %s completed" % job, lambda: job_state("lc-b-ctl1", job) in ("COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL"), 120)
    check(job_state("lc-b-ctl1", job) == "COMPLETED", "the job across the rollback ended %s" % job_state("lc-b-ctl1", job))
    site.set_cluster_vars("cluster_beta", {"slurm_partitions": partitions})
    again = changed_counts(site.converge())
    check(not any(again.values()), "the run after the rollback changed %s" % {h: n for h, n in again.items() if n})
    return {"rejected_run_to_rolled_back_s": recovery}


STEPS = [
    ("a", "reconfigure-only change to beta", step_a_reconfigure_second_cluster_only),
    ("b", "restart key on beta, job across it", step_b_restart_key_on_beta_with_a_job),
    ("c", "interrupted run, then the next", step_c_interrupted_run_is_applied_by_the_next),
    ("j", "a slurm.conf Slurm's parser refuses is never installed", step_j_a_file_slurm_refuses_is_never_installed),
    ("k", "a configuration slurmctld rejects is rolled back, its job kept", step_k_a_configuration_slurmctld_rejects_is_rolled_back),
    ("g", "--check --diff changes nothing", step_g_check_diff_changes_nothing),
    ("d", "add a compute node to alpha", step_d_add_a_compute_node),
    ("i", "munge and slurmd disabled by hand are enabled again", step_i_disabled_daemons_are_enabled_again),
    ("e", "remove a compute node with a job on it", step_e_remove_a_compute_node),
    ("f", "HA failover and back", step_f_ha_failover_and_back),
    ("l", "StateSaveLocation on a share slurmctld requires; one over saved state refused", step_l_state_on_a_share),
    ("h", "rename beta to gamma (refused, then allowed)", step_h_rename_with_opt_in),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", help="write the step times here (JSON)")
    parser.add_argument("--only", help="comma-separated step letters")
    args = parser.parse_args()
    wanted = set(args.only.split(",")) if args.only else None
    results = []
    with tempfile.TemporaryDirectory(prefix="hybridhpc-lifecycle-") as workdir:
        site = Site(workdir)
        for letter, title, func in STEPS:
            if wanted and letter not in wanted:
                continue
            start = time.monotonic()
            try:
                extra = func(site) or {}
            except StepFailed as exc:
                print("step %s (%s) FAILED after %.0fs: %s" % (letter, title, time.monotonic() - start, exc), flush=True)
                results.append({"step": letter, "title": title, "passed": False, "seconds": round(time.monotonic() - start, 1)})
                break
            seconds = round(time.monotonic() - start, 1)
            print("step %s (%s): passed in %.1fs %s" % (letter, title, seconds, json.dumps(extra) if extra else ""), flush=True)
            results.append(dict({"step": letter, "title": title, "passed": True, "seconds": seconds}, **extra))
        passed = results and all(r["passed"] for r in results) and len(results) == len(
            [s for s in STEPS if not wanted or s[0] in wanted])
        handoff = os.environ.get("HYBRIDHPC_LAB_HANDOFF")
        if passed and handoff:
            # The faults scenario goes on on this lab, from the inventory as the steps left it.
            shutil.rmtree(handoff, ignore_errors=True)
            shutil.copytree(site.dir, pathlib.Path(handoff) / "inventory")
    if args.report:
        pathlib.Path(args.report).write_text(json.dumps(results, indent=2) + "\n")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
