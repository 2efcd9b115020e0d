#!/usr/bin/env python3
"""The core scenario's monitoring checks, on the converged lab's real daemons.

    python extensions/molecule/core/monitoring.py --controller HOST --compute HOST [--report FILE]

The controller runs slurmctld, slurmrestd and the site's Prometheus and
Alertmanager; the compute node runs slurmd and the health check. Jobs are
submitted as --user (the cluster enforces associations).

1. Prometheus scrapes every target the role derived from the inventory, and each is up.
2. promtool of the installed Prometheus accepts the rules the role wrote and passes the repository's
   rule unit tests (tests/rules) against the rules with their default settings.
3. The slurm exporter answers with Slurm up and the compute node's state; on Slurm 25.11 and later,
   slurmctld's own /metrics/nodes answers too and Prometheus scrapes it.
4. slurmd stopped on the compute node: SlurmDaemonInactive, then SlurmNodeDown, reach Alertmanager
   (seconds measured from the stop) and its receiver (the inventory's webhook, served here on the
   controller) gets SlurmNodeDown firing; slurmd started again: both leave Alertmanager and the
   receiver gets SlurmNodeDown resolved.
5. A health check of the compute node fails (a marker file): the node is drained with a reason naming
   the check, SlurmNodeDrained fires, a job waits; the marker removed, the check resumes the node and
   the job completes.
Each wait is bounded; a check that fails stops the script with the reason and what Prometheus said.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import subprocess
import sys
import time

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / ".collections"))
from ansible_collections.hybridhpc.slurm.plugins.module_utils import alert_rules  # noqa: E402

# Set by main() from the command line and the cluster's own configuration.
PROM = COMPUTE = USER = ""
SLURMD_TIMEOUT_S = 0
# The scenario's group_vars: monitoring_scrape_interval and monitoring_alerts' durations.
SCRAPE_S, DAEMON_FOR_S, NODE_FOR_S = 5, 10, 10


class Failed(Exception):
    pass


def run(argv, check=True, stdin=None):
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, input=stdin)
    if check and done.returncode != 0:
        raise Failed("%s: rc %d: %s" % (" ".join(argv), done.returncode, (done.stderr or done.stdout).strip()[-500:]))
    return done


def dexec(host, *argv, check=True, stdin=None):
    return run(["docker", "exec", "-i", host, *argv], check=check, stdin=stdin)


def http_json(host, url):
    code = "import json,sys,urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())"
    return json.loads(dexec(host, "python3", "-c", code, url).stdout)


def http_text(host, url):
    code = "import sys,urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())"
    return dexec(host, "python3", "-c", code, url).stdout


def wait(what, probe, timeout, every=1.0):
    """probe() until it returns something true; that value, or Failed after timeout seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = probe()
            if last:
                return last
        except (Failed, ValueError, KeyError) as err:
            last = err
        time.sleep(every)
    raise Failed("%s: not within %ds (last: %s)" % (what, timeout, last))


def targets():
    answer = http_json(PROM, "http://127.0.0.1:9090/api/v1/targets")
    return [(t["labels"]["job"], t["labels"].get("instance"), t["health"], t.get("lastError", ""))
            for t in answer["data"]["activeTargets"]]


def case_targets(report):
    """Every target the role derived is scraped and up."""
    def all_up():
        found = targets()
        return found if found and all(health == "up" for _job, _instance, health, _err in found) else None
    try:
        found = wait("every target up", all_up, 90)
    except Failed:
        raise Failed("targets not all up: %s" % targets()) from None
    jobs = sorted({job for job, *_rest in found})
    expected = {"alertmanager", "node", "prometheus", "slurm_exporter"}
    if not expected <= set(jobs):
        raise Failed("scrape jobs %s lack %s" % (jobs, sorted(expected - set(jobs))))
    report["targets"] = sorted("%s %s" % (job, instance) for job, instance, *_rest in found)
    return jobs


def case_promtool(report):
    """The installed promtool: check rules on what the role wrote, test rules on the default rules."""
    out = dexec(PROM, "promtool", "check", "rules", "/etc/prometheus/rules/slurm-alerts.rules.yml").stdout
    dexec(PROM, "mkdir", "-p", "/tmp/rules-test")
    dexec(PROM, "sh", "-c", "cat > /tmp/rules-test/slurm-alerts.rules.yml",
          stdin=yaml.safe_dump(alert_rules.alert_rules(), sort_keys=False))
    dexec(PROM, "sh", "-c", "cat > /tmp/rules-test/alert_rules.test.yml", stdin=(ROOT / "tests/rules/alert_rules.test.yml").read_text())
    tested = dexec(PROM, "sh", "-c", "cd /tmp/rules-test && promtool test rules alert_rules.test.yml", check=False)
    if tested.returncode != 0:
        raise Failed("promtool test rules: %s" % (tested.stdout + tested.stderr)[-1500:])
    report["promtool"] = dexec(PROM, "promtool", "--version").stdout.splitlines()[0]
    return out.strip().splitlines()[-1]


def case_exporter(report, major):
    text = http_text(PROM, "http://127.0.0.1:9341/metrics")
    if "hybridhpc_slurm_up 1.0" not in text:
        raise Failed("the exporter says Slurm is not up:\n" + "\n".join(line for line in text.splitlines() if "up" in line)[:800])
    if 'hybridhpc_slurm_node_state_info{node="%s"' % COMPUTE not in text:
        raise Failed("the exporter has no state for %s" % COMPUTE)
    own = tuple(int(x) for x in major.split(".")[:2]) >= (25, 11)
    if own:
        nodes = http_text(PROM, "http://127.0.0.1:6817/metrics/nodes")
        if "slurm_nodes " not in nodes:
            raise Failed("slurmctld's /metrics/nodes has no slurm_nodes:\n" + nodes[:800])
        if "slurm_nodes " in text:
            raise Failed("the exporter serves Slurm's own names on %s, where slurmctld serves them" % major)
        report["slurmctld_metrics"] = [line for line in nodes.splitlines() if line.startswith("slurm_nodes ")]
    elif "slurm_nodes 1.0" not in text:
        raise Failed("the exporter on %s serves no slurm_nodes 1" % major)
    report["exporter_samples"] = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    return "Slurm %s, %s" % (major, "slurmctld serves its own metrics" if own else "the exporter serves Slurm's names")


# The receiver of the scenario's Alertmanager route (group_vars: a webhook on
# 127.0.0.1:9099): each POST body appended, one JSON document per line.
WEBHOOK_LOG = "/tmp/hybridhpc-webhook.jsonl"
WEBHOOK_SERVER = '''
import http.server
class Hook(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with open("%s", "ab") as log:
            log.write(body.replace(b"\\n", b" ") + b"\\n")
        self.send_response(200)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", 9099), Hook).serve_forever()
''' % WEBHOOK_LOG


def start_webhook():
    dexec(PROM, "rm", "-f", WEBHOOK_LOG)
    run(["docker", "exec", "-d", PROM, "python3", "-c", WEBHOOK_SERVER])


def stop_webhook():
    dexec(PROM, "pkill", "-f", "open..%s" % WEBHOOK_LOG, check=False)


def webhook_notifications(alertname, status):
    """The receiver's notifications of that status that carry the alert."""
    lines = dexec(PROM, "sh", "-c", "cat %s 2>/dev/null || true" % WEBHOOK_LOG).stdout.splitlines()
    found = []
    for line in lines:
        note = json.loads(line)
        if note.get("status") == status and any(a["labels"].get("alertname") == alertname and a["status"] == status
                                                 for a in note.get("alerts", [])):
            found.append(note)
    return found


def active_alerts():
    return [(a["labels"]["alertname"], a["labels"].get("node") or a["labels"].get("instance"), a["status"]["state"])
            for a in http_json(PROM, "http://127.0.0.1:9093/api/v2/alerts")]


def case_node_down(report):
    """slurmd stopped: the alerts reach Alertmanager; started: they leave it."""
    if active_alerts():
        raise Failed("alerts active before the case: %s" % active_alerts())
    dexec(COMPUTE, "systemctl", "stop", "slurmd")
    stopped = time.monotonic()
    seen = {}
    try:
        def both():
            for name, _who, state in active_alerts():
                if state == "active" and name not in seen:
                    seen[name] = round(time.monotonic() - stopped, 1)
            return {"SlurmDaemonInactive", "SlurmNodeDown"} <= set(seen)
        # SlurmNodeDown needs slurmctld to notice first: SlurmdTimeout, then its next ping of the node.
        wait("SlurmDaemonInactive and SlurmNodeDown in Alertmanager", both, SLURMD_TIMEOUT_S * 2 + NODE_FOR_S + 4 * SCRAPE_S + 60)
        # The route's group_wait is 1 s: the receiver has it a few seconds after Alertmanager.
        wait("SlurmNodeDown firing at the receiver", lambda: webhook_notifications("SlurmNodeDown", "firing"), 30)
        seen["receiver_firing"] = round(time.monotonic() - stopped, 1)
    finally:
        dexec(COMPUTE, "systemctl", "start", "slurmd")
    started = time.monotonic()
    wait("the alerts resolved", lambda: not [a for a in active_alerts() if a[0] in ("SlurmDaemonInactive", "SlurmNodeDown")],
         180, every=2)
    report["resolved_after_s"] = round(time.monotonic() - started, 1)
    # A resolved notification leaves at the group's next group_interval (5 s).
    wait("SlurmNodeDown resolved at the receiver", lambda: webhook_notifications("SlurmNodeDown", "resolved"), 30)
    report["receiver_resolved_after_s"] = round(time.monotonic() - started, 1)
    report["alert_latency_s"] = seen
    limit = DAEMON_FOR_S + 2 * SCRAPE_S + 5
    if seen["SlurmDaemonInactive"] > limit:
        raise Failed("SlurmDaemonInactive took %.1f s, more than its for plus a scrape (%d s)" % (seen["SlurmDaemonInactive"], limit))
    return "alerts after the stop: %s s; resolved %.1f s after the start (at the receiver %.1f s)" % (
        seen, report["resolved_after_s"], report["receiver_resolved_after_s"])


def node_record(node):
    out = dexec(PROM, "scontrol", "show", "node", "-o", node).stdout
    state = out.split("State=", 1)[1].split()[0] if "State=" in out else "?"
    reason = out.split(" Reason=", 1)[1].strip() if " Reason=" in out else ""
    return state, reason


def job_state(job):
    out = dexec(PROM, "scontrol", "show", "job", "-o", job).stdout
    return out.split("JobState=", 1)[1].split()[0], (out.split(" Reason=", 1)[1].split()[0] if " Reason=" in out else "")


def case_health(report):
    """A failing health check drains the node with its reason, a job waits, the fix returns the node and the job runs."""
    state, reason = node_record(COMPUTE)
    if "DRAIN" in state:
        raise Failed("%s drained before the case: %s %s" % (COMPUTE, state, reason))
    dexec(COMPUTE, "touch", "/etc/hybridhpc-broken")
    broken = time.monotonic()
    try:
        drained = wait("the health check drains %s" % COMPUTE,
                       lambda: (lambda s_r: s_r if "DRAIN" in s_r[0] else None)(node_record(COMPUTE)), 60)
        report["drained_after_s"] = round(time.monotonic() - broken, 1)
        if not drained[1].startswith("healthcheck: marker: exit 1: marker present"):
            raise Failed("drain reason %r does not name the check" % drained[1])
        wait("SlurmNodeDrained in Alertmanager", lambda: [a for a in active_alerts() if a[0] == "SlurmNodeDrained" and a[2] == "active"], 90)
        report["drain_alert_after_s"] = round(time.monotonic() - broken, 1)
        job = dexec(PROM, "su", "-s", "/bin/sh", USER, "-c", "cd /tmp && sbatch --parsable -o /dev/null --wrap 'hostname'").stdout.strip()
        time.sleep(3)
        state = job_state(job)
        if state[0] != "PENDING":
            raise Failed("job %s on a drained node is %s, not PENDING" % (job, state))
    finally:
        dexec(COMPUTE, "rm", "-f", "/etc/hybridhpc-broken")
    fixed = time.monotonic()
    wait("the health check returns %s" % COMPUTE, lambda: "DRAIN" not in node_record(COMPUTE)[0], 60)
    report["resumed_after_s"] = round(time.monotonic() - fixed, 1)
    wait("job %s completes on the returned node" % job, lambda: job_state(job)[0] == "COMPLETED", 60)
    return "drained %.1f s after the break (%s), alert at %.1f s, job waited (%s), resumed %.1f s after the fix, job COMPLETED" % (
        report["drained_after_s"], drained[1][:60], report["drain_alert_after_s"], state[1], report["resumed_after_s"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--controller", required=True, help="the host of slurmctld, slurmrestd and Prometheus")
    parser.add_argument("--compute", required=True, help="a compute node with the health check")
    parser.add_argument("--user", required=True, help="a user with an association, who submits the job")
    parser.add_argument("--report", help="write what was measured here (JSON)")
    args = parser.parse_args()
    global PROM, COMPUTE, USER, SLURMD_TIMEOUT_S
    PROM, COMPUTE, USER = args.controller, args.compute, args.user
    config = dexec(PROM, "scontrol", "show", "config").stdout
    SLURMD_TIMEOUT_S = int(re.search(r"^SlurmdTimeout\s*=\s*(\d+)", config, re.M).group(1))
    report = {"slurmd_timeout_s": SLURMD_TIMEOUT_S}
    major = dexec(PROM, "sh", "-c", "dpkg-query -W -f '${Version}' slurmctld").stdout.strip()
    major = ".".join(major.split(".")[:2])
    cases = [("targets", lambda: case_targets(report)), ("promtool", lambda: case_promtool(report)),
             ("exporter", lambda: case_exporter(report, major)), ("node down", lambda: case_node_down(report)),
             ("health", lambda: case_health(report))]
    failed = 0
    start_webhook()
    for name, case in cases:
        started = time.monotonic()
        try:
            said = case()
            print("%-10s ok   %5.1fs  %s" % (name, time.monotonic() - started, said), flush=True)
        except Failed as err:
            failed += 1
            print("%-10s FAIL %5.1fs  %s" % (name, time.monotonic() - started, err), flush=True)
    stop_webhook()
    if args.report:
        pathlib.Path(args.report).write_text(json.dumps(report, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
