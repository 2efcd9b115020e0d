#!/usr/bin/env python3
"""Fault cases on the lifecycle lab, each a site.yml run against the real daemons (issue 44).

For each case: what the run reports, that no job is lost, that the cluster
answers afterwards, and that the next run is changed=0 with the daemons
running what the inventory says.

refusals. inputs only slurmctld, sacctmgr or the node could judge, and
   playbook-level ones, all refused by the first play before any host changes;
hung.     slurmctld of beta stopped (SIGSTOP) when the run starts: the run
   restarts it, its running job survives;
dbd.      slurmdbd stopped when the run starts: the run starts it;
node.     a compute node unreachable: the run stops in the first play naming
   it, nothing changes; with the node back the next run applies the change;
restart.  a change that needs restarts, the run killed after beta's slurmctld
   restarted and before its slurmd did: the next run restarts slurmd only
   and clears the markers;
peering.  the network between the two clusters cut during a run that changes
   beta: both controllers answer afterwards, the next run (peering back) is
   changed=0;
shared.   a change every cluster of the federation shares, which slurmctld
   rejects: both clusters back on their accepted files, both answer, their
   jobs complete;
rollback. a rollback killed half-way: the next run leaves the cluster on
   what the inventory says;
logs.     every slurmctld and slurmd log free of defunct, deprecated and
   "different slurm.conf" lines.

The lab is the lifecycle scenario's: with HYBRIDHPC_LAB_HANDOFF naming a
directory that holds the inventory the lifecycle steps ended with, the cases
start from that (and first check that a run is changed=0 on it); otherwise
from the lifecycle inventory, converged here first.
"""

import argparse
import json
import os
import pathlib
import re
import sys
import tempfile
import time

import yaml

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "lifecycle"))
import steps as lab  # noqa: E402  (the lifecycle steps' lab helpers: docker exec, site.yml runs, waits)

check, dexec, run, wait_for, unit = lab.check, lab.dexec, lab.run, lab.wait_for, lab.unit
StepFailed = lab.StepFailed
ALPHA = ("lc-a-ctl1", "lc-a-ctl2", "lc-a-c1", "lc-a-c2")
BETA = ("lc-b-ctl1", "lc-b-c1")
RESTART_MARKER = "/var/lib/slurm/hybridhpc-pending-restart"
TERMINAL = ("COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT", "PREEMPTED", "OUT_OF_MEMORY")


class Site(lab.Site):
    """lab.Site, with each run's exit code, time and changed counts."""

    def run(self, *args, expect_ok=True):
        """site.yml: (rc, output, seconds, {host: changed})."""
        self.write()
        start = time.monotonic()
        res = run(self.command(*args), timeout=900, cwd=lab.ROOT, env=self.env())
        out = res.stdout + res.stderr
        if expect_ok:
            check(res.returncode == 0, "site.yml %s failed:\n%s" % (" ".join(args), out[-6000:]))
        return res.returncode, out, round(time.monotonic() - start, 1), lab.changed_counts(out)


def nochange(site, why):
    """The next run: rc=0 and changed=0 on every host."""
    _rc, _out, seconds, counts = site.run()
    check(not any(counts.values()), "%s: the next run changed %s" % (why, {h: n for h, n in counts.items() if n}))
    return seconds


def submit(ctl, node, seconds):
    job = dexec(ctl, "sbatch", "--parsable", "-w", node, "-t", "5", "--wrap", "sleep %d" % seconds)
    job = job.split(";")[0]
    wait_for("job %s running" % job, lambda: lab.job_state(ctl, job) == "RUNNING", 90)
    return job


def completed(ctl, job, timeout=180):
    wait_for("job %s ended" % job, lambda: lab.job_state(ctl, job) in TERMINAL, timeout, interval=2)
    state = lab.job_state(ctl, job)
    check(state == "COMPLETED", "job %s ended %s: lost across the fault" % (job, state))


def answers(ctl):
    return lab.controller_answers(ctl) and run(["docker", "exec", ctl, "sinfo", "--local", "-h"], timeout=30).returncode == 0


def base_partitions():
    return yaml.safe_load((lab.BASE / "group_vars" / "all.yml").read_text())["slurm_partitions"]


def has(host, path):
    return run(["docker", "exec", host, "test", "-e", path]).returncode == 0


def container_ip(host):
    return dexec(host, "hostname", "-I").split()[0]


def close_ssh(address):
    for sock in pathlib.Path(os.path.expanduser("~/.cache/hybridhpc/lab-ssh/cp")).glob(address + "-*"):
        run(["ssh", "-o", "ControlPath=%s" % sock, "-O", "exit", "lab"], timeout=10)
        sock.unlink(missing_ok=True)


# ------------------------------------------------------------------ cases

def refused(site, variables, *args, words=()):
    """A run with beta's variables changed: stopped by the first play, naming each of words, nothing changed."""
    before = lab.conf_sums(*BETA)
    saved = dict(site.group_vars.get("cluster_beta", {}))
    site.set_cluster_vars("cluster_beta", variables)
    rc, out, seconds, _counts = site.run(*args, expect_ok=False)
    site.group_vars["cluster_beta"] = saved
    for word in words:
        check(word in out, "the first play did not name %r:\n%s" % (word, out[-4000:]))
    check(rc != 0 and "PLAY [MUNGE" not in out and "Traceback" not in out,
          "the run went past the first play (rc=%d):\n%s" % (rc, out[-3000:]))
    check(lab.conf_sums(*BETA) == before, "a refused run changed slurm.conf")
    said = [line.split('"msg": ', 1)[1].strip("} ") for line in out.splitlines() if line.startswith("fatal:") and '"msg": ' in line]
    return seconds, said[:2]


def case_refusals(site):
    """Inputs that got past the first play before issue 44: each named there, no host changed.

    Cluster inputs are judged before the hosts' own facts (a gres File on its node), so two runs.
    """
    partitions = base_partitions()
    first_s, first = refused(site, {"slurm_partitions": partitions + [dict(partitions[0], Default=False)],
                                    "slurm_qos": [{"name": "gpu", "flags": ["NoSuchFlag"]}]},
                             "-e", "slurmd_serial=lots",
                             words=("slurm_partitions[1]", "debug", "slurmd_serial", "'lots'", "slurm_qos[gpu].flags"))
    gres_s, gres = refused(site, {"slurm_gres": [{"Name": "gpu", "File": "/dev/nvidia0", "NodeName": "lc-b-c1"}]},
                           words=("slurm_gres", "/dev/nvidia0", "lc-b-c1"))
    return {"refused_in_s": [first_s, gres_s], "printed": first + gres}


def case_hung_controller(site):
    """beta's slurmctld SIGSTOPped before the run: the run restarts it; the job on beta survives."""
    job = submit("lc-b-ctl1", "lc-b-c1", 40)
    pid, _since = unit("lc-b-ctl1", "slurmctld")
    dexec("lc-b-ctl1", "kill", "-STOP", str(pid))
    check(not lab.controller_answers("lc-b-ctl1"), "a stopped slurmctld still answers")
    start = time.monotonic()
    rc, out, seconds, _counts = site.run(expect_ok=False)
    answered_s = round(time.monotonic() - start, 1)
    after = unit("lc-b-ctl1", "slurmctld")[0]
    if not answers("lc-b-ctl1"):  # leave the lab usable for the cases after this one
        dexec("lc-b-ctl1", "kill", "-CONT", str(pid), ok=False)
    check(rc == 0, "the run with a hung slurmctld failed:\n%s" % out[-4000:])
    check(after != pid and answers("lc-b-ctl1"), "beta's hung slurmctld was not restarted (pid %s, now %s)" % (pid, after))
    check(re.search(r"lc-b-ctl1.*(did not answer|not answering|hung)", out), "the run did not say the controller was hung")
    completed("lc-b-ctl1", job)
    return {"run_s": seconds, "to_answering_s": answered_s, "next_run_s": nochange(site, "after the hung slurmctld")}


def case_slurmdbd_down(site):
    """slurmdbd stopped before the run: the run starts it, accounting answers, the job is in it."""
    job = submit("lc-a-ctl1", "lc-a-c1", 20)
    dexec("lc-a-ctl1", "systemctl", "stop", "slurmdbd")
    rc, out, seconds, counts = site.run(expect_ok=False)
    check(rc == 0, "the run with slurmdbd down failed:\n%s" % out[-4000:])
    check(dexec("lc-a-ctl1", "systemctl", "is-active", "slurmdbd", ok=False) == "active", "slurmdbd was not started")
    check({h for h, n in counts.items() if n} == {"lc-a-ctl1"}, "changed: %s" % {h: n for h, n in counts.items() if n})
    completed("lc-a-ctl1", job)
    return {"run_s": seconds, "next_run_s": nochange(site, "after slurmdbd was down")}


def case_unreachable_node(site):
    """lc-a-c2 unreachable from the run (a blackhole route on this machine) while beta has a change.

    The first play needs every host's facts (a node's slurm.conf line is made from them), so the run stops
    there, naming the host, before any host changes; with the node back, the next run applies the change.
    """
    address = container_ip("lc-a-c2")
    before = lab.conf_sums(*(ALPHA + BETA))
    lab.beta_config(site)["SchedulerParameters"] = ["bf_interval=5", "bf_continue", "bf_max_job_test=400"]
    run(["ip", "route", "add", "blackhole", address + "/32"])
    close_ssh(address)
    try:
        rc, out, seconds, _counts = site.run(expect_ok=False)
    finally:
        run(["ip", "route", "del", "blackhole", address + "/32"])
    check(rc != 0 and re.search(r"^lc-a-c2\s+:.*unreachable=1", out, re.M) and "UNREACHABLE" in out,
          "the run did not report lc-a-c2 unreachable:\n%s" % out[-3000:])
    later = out.split("PLAY [MUNGE", 1)[-1] if "PLAY [MUNGE" in out else ""
    check("TASK [" not in later.split("PLAY RECAP", 1)[0], "the run went past the first play with a host unreachable")
    check(lab.conf_sums(*(ALPHA + BETA)) == before, "a host changed although the run stopped in the first play")
    check(answers("lc-a-ctl1") and answers("lc-b-ctl1"), "a controller does not answer")
    _rc, _out, applied_s, counts = site.run()
    check("bf_max_job_test=400" in lab.config_value("lc-b-ctl1", "SchedulerParameters"), "the next run did not apply beta's change")
    printed = [line.strip() for line in out.splitlines() if "UNREACHABLE" in line][:1]
    return {"run_s": seconds, "rc": rc, "printed": printed, "node_back_run_s": applied_s,
            "next_run_s": nochange(site, "after the node came back")}


def case_killed_before_the_nodes_restart(site):
    """A restart change on beta; the run killed once slurmctld restarted and slurmd not yet."""
    job = submit("lc-b-ctl1", "lc-b-c1", 60)
    ctld, slurmd = unit("lc-b-ctl1", "slurmctld"), unit("lc-b-c1", "slurmd")
    current = lab.config_value("lc-b-ctl1", "AuthInfo") or ""
    lab.beta_config(site)["AuthInfo"] = "socket=/run/munge/munge.socket.2" if "socket=" not in current else None
    if lab.beta_config(site)["AuthInfo"] is None:
        del lab.beta_config(site)["AuthInfo"]
    window_start = stamp()
    killed = site.converge_killed_when(lambda: unit("lc-b-ctl1", "slurmctld") != ctld)
    check(killed, "the run ended before beta's slurmctld restarted")
    check(unit("lc-b-c1", "slurmd") == slurmd and has("lc-b-c1", RESTART_MARKER),
          "slurmd restarted before the kill, or no restart is pending on lc-b-c1: nothing was interrupted")
    start = time.monotonic()
    _rc, _out, seconds, counts = site.run()
    # Killed between the two restarts, slurmd ran the old file beside the new slurmctld until this run: the
    # "different slurm.conf" lines of that window are the fault's, not the collection's (case logs).
    MISMATCH_WINDOWS.append((window_start, stamp()))
    check(unit("lc-b-c1", "slurmd") != slurmd, "the next run did not restart slurmd")
    check(not has("lc-b-c1", RESTART_MARKER) and not has("lc-b-ctl1", RESTART_MARKER), "a restart marker stayed")
    check(answers("lc-b-ctl1"), "beta does not answer")
    completed("lc-b-ctl1", job)
    return {"finishing_run_s": seconds, "to_applied_s": round(time.monotonic() - start, 1),
            "next_run_s": nochange(site, "after the finished restart")}


def blackhole(hosts, addresses, add):
    for host in hosts:
        for address in addresses:
            run(["docker", "exec", host, "ip", "route", "add" if add else "del", "blackhole", address + "/32"])


def case_peering_cut(site):
    """The network between alpha and beta cut while a run changes beta."""
    alpha_ips = [container_ip(h) for h in ALPHA]
    beta_ips = [container_ip(h) for h in BETA]
    job = submit("lc-b-ctl1", "lc-b-c1", 30)
    lab.beta_config(site)["SchedulerParameters"] = ["bf_interval=5", "bf_continue", "bf_max_job_test=500"]
    blackhole(BETA, alpha_ips, True)
    blackhole(ALPHA, beta_ips, True)
    try:
        rc, out, seconds, _counts = site.run(expect_ok=False)
        during = {"lc-a-ctl1": answers("lc-a-ctl1"), "lc-b-ctl1": answers("lc-b-ctl1")}
    finally:
        blackhole(BETA, alpha_ips, False)
        blackhole(ALPHA, beta_ips, False)
    check(all(during.values()), "a controller stopped answering while the peering was cut: %s" % during)
    check("Traceback" not in out, "a Python traceback:\n%s" % out[-3000:])
    completed("lc-b-ctl1", job)
    wait_for("both controllers answer", lambda: answers("lc-a-ctl1") and answers("lc-b-ctl1"), 60)
    printed = [line.strip() for line in out.splitlines() if line.startswith(("fatal:", "FAILED", "failed:"))][:3]
    next_s = nochange(site, "after the peering came back") if rc == 0 else site.run()[2]
    check("bf_max_job_test=500" in lab.config_value("lc-b-ctl1", "SchedulerParameters"), "beta does not run the change")
    return {"run_s": seconds, "rc": rc, "printed": printed, "next_run_s": next_s,
            "then_s": nochange(site, "after the peering came back") if rc != 0 else None}


def case_shared_setting_rejected(site):
    """A partition setting both clusters share (group all), which slurmctld rejects: both roll back."""
    jobs = {"lc-a-ctl1": submit("lc-a-ctl1", "lc-a-c1", 30), "lc-b-ctl1": submit("lc-b-ctl1", "lc-b-c1", 30)}
    before = lab.conf_sums(*(ALPHA + BETA))
    all_yml = site.dir / "group_vars" / "all.yml"
    good = all_yml.read_text()
    shared = yaml.safe_load(good)
    shared["slurm_partitions"] = [dict(shared["slurm_partitions"][0], TRESBillingWeights="CPU=1.0,NoSuchTres=2")]
    beta_own = site.group_vars.get("cluster_beta", {}).pop("slurm_partitions", None)
    all_yml.write_text(yaml.safe_dump(shared, sort_keys=False))
    try:
        start = time.monotonic()
        rc, out, seconds, _counts = site.run(expect_ok=False)
        recovered = round(time.monotonic() - start, 1)
    finally:
        all_yml.write_text(good)
        if beta_own is not None:
            site.group_vars["cluster_beta"]["slurm_partitions"] = beta_own
    check(rc != 0 and out.count("failed to parse tres weights") >= 2 and out.count("are back on every host") >= 2,
          "both clusters should stop with slurmctld's words and their rollback:\n%s" % out[-4000:])
    check(lab.conf_sums(*(ALPHA + BETA)) == before, "an accepted slurm.conf is not back on every host")
    check(answers("lc-a-ctl1") and answers("lc-b-ctl1"), "a controller does not answer after the rollback")
    for ctl, job in jobs.items():
        completed(ctl, job)
    printed = sorted({m.group(0) for m in re.finditer(r"Cluster \w+: Slurm refused the new configuration: [^|]*", out)})
    return {"rejected_run_to_rolled_back_s": recovered, "printed": printed,
            "next_run_s": nochange(site, "after the shared rollback")}


def case_rollback_killed(site):
    """A change beta rejects; the run killed as soon as the rollback put the first file back."""
    job = submit("lc-b-ctl1", "lc-b-c1", 30)
    before = lab.conf_sums("lc-b-ctl1")
    partitions = site.group_vars.get("cluster_beta", {}).get("slurm_partitions") or base_partitions()
    site.set_cluster_vars("cluster_beta", {"slurm_partitions": [dict(partitions[0], TRESBillingWeights="CPU=1.0,NoSuchTres=2")]})
    state = {"changed": False}

    def rolling_back():
        now = lab.conf_sums("lc-b-ctl1")
        if now != before:
            state["changed"] = True
        return state["changed"] and now == before

    killed = site.converge_killed_when(rolling_back)
    site.group_vars["cluster_beta"].pop("slurm_partitions")
    check(killed, "the run ended before its rollback began")
    start = time.monotonic()
    site.run()
    check(answers("lc-b-ctl1"), "beta does not answer after the killed rollback")
    check("NoSuchTres" not in dexec("lc-b-ctl1", "scontrol", "show", "partition", "debug"), "slurmctld runs the rejected line")
    for host in BETA:
        check(not has(host, "/var/lib/slurm/hybridhpc-pending-reconfigure"), "a marker stayed on %s" % host)
    completed("lc-b-ctl1", job)
    return {"finishing_run_s": round(time.monotonic() - start, 1), "next_run_s": nochange(site, "after the killed rollback")}


LOG_LINES = re.compile(r"defunct|deprecated|different slurm\.conf", re.I)
MISMATCH_WINDOWS = []
STARTED = []


def stamp():
    """Now, as Slurm's log lines begin ("[2026-12-02T11:48:19.013]"): the lab's containers share this clock."""
    return time.strftime("[%Y-%m-%dT%H:%M:%S", time.localtime())


def collection_caused(line):
    if not LOG_LINES.search(line) or line[:20] < STARTED[0]:
        return False
    return not ("different slurm.conf" in line and any(a <= line[:20] <= b for a, b in MISMATCH_WINDOWS))


def case_logs(_site):
    """No defunct, deprecated or "different slurm.conf" line in any slurmctld or slurmd log since the cases began."""
    found = {}
    for host in ALPHA + BETA:
        for log in ("/var/log/slurm/slurmctld.log", "/var/log/slurm/slurmd.log"):
            if not has(host, log):
                continue
            lines = [line for line in dexec(host, "cat", log).splitlines() if collection_caused(line)]
            if lines:
                found["%s:%s" % (host, log)] = lines[:3]
    check(not found, "log lines the collection caused: %s" % json.dumps(found, indent=1))
    return {}


CASES = [
    ("refusals", "inputs Slurm or the node would refuse, all in the first play", case_refusals),
    ("hung", "slurmctld hung (SIGSTOP) when the run starts", case_hung_controller),
    ("dbd", "slurmdbd down when the run starts", case_slurmdbd_down),
    ("node", "a compute node unreachable", case_unreachable_node),
    ("restart", "killed after slurmctld restarted, before slurmd did", case_killed_before_the_nodes_restart),
    ("peering", "the peering cut during a run", case_peering_cut),
    ("shared", "a federation-wide setting slurmctld rejects", case_shared_setting_rejected),
    ("rollback", "a rollback killed half-way", case_rollback_killed),
    ("logs", "logs free of defunct, deprecated and different-slurm.conf lines", case_logs),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", help="write each case's result here (JSON)")
    parser.add_argument("--only", help="comma-separated case names")
    args = parser.parse_args()
    wanted = set(args.only.split(",")) if args.only else None
    handoff = os.environ.get("HYBRIDHPC_LAB_HANDOFF")
    base = pathlib.Path(handoff) / "inventory" if handoff and (pathlib.Path(handoff) / "inventory").is_dir() else lab.BASE
    results = []
    with tempfile.TemporaryDirectory(prefix="hybridhpc-faults-") as workdir:
        site = Site(workdir, base)
        STARTED.append(stamp())
        start = time.monotonic()
        try:
            # Handed over, the lab's last run (lifecycle's step h) was a changed=0 re-run already.
            if base == lab.BASE:
                if not wanted:
                    site.run()
                nochange(site, "the converged lab")
        except StepFailed as exc:
            print("start FAILED: %s" % exc, flush=True)
            return 1
        print("start: %s in %.1fs" % ("handed over" if base != lab.BASE else "lab converged and changed=0",
                                     time.monotonic() - start), flush=True)
        for name, title, func in CASES:
            if wanted and name not in wanted:
                continue
            start = time.monotonic()
            try:
                extra = func(site) or {}
            except StepFailed as exc:
                print("case %s (%s) FAILED after %.0fs: %s" % (name, title, time.monotonic() - start, exc), flush=True)
                results.append({"case": name, "title": title, "passed": False})
                break
            seconds = round(time.monotonic() - start, 1)
            print("case %s (%s): passed in %.1fs %s" % (name, title, seconds, json.dumps(extra)), flush=True)
            results.append(dict({"case": name, "title": title, "passed": True, "seconds": seconds}, **extra))
    if args.report:
        pathlib.Path(args.report).write_text(json.dumps(results, indent=2) + "\n")
    expected = [c for c in CASES if not wanted or c[0] in wanted]
    return 0 if len(results) == len(expected) and all(r["passed"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
