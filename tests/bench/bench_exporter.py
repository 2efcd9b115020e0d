# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Scrape time and memory of the slurm exporter for a 1,000-node cluster.

Not a test: prints a table and writes .cache/bench/exporter.json.

The real exporter (python -m hybridhpc_exporter, the collection's slurmrestd
client vendored in) runs as its own process against a slurmrestd stand-in on
127.0.0.1 that serves a generated data_parser v0.0.42 answer: N nodes (each
with the ~60 fields Slurm 24.11 prints, from the recorded document in the
exporter's tests) and N jobs, pending, running and completed. A scrape is a GET
/metrics over HTTP, timed end to end (slurmrestd's answer decoded, the
families built, the text written); the median of --runs is reported, and the
exporter's peak resident memory (VmHWM) after them.

No peer runs beside it: no packaged Slurm exporter installs here (Debian has
none; rivosinc's and vpenso's are Go programs reading the CLI, not slurmrestd).

    python tests/bench/bench_exporter.py [--nodes 1000] [--runs 5]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import pathlib
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "roles" / "monitoring" / "files" / "hybridhpc_exporter"
REPORT = ROOT / ".cache" / "bench" / "exporter.json"
TARGET_SCRAPE_S = 1.0
TARGET_RSS_MB = 60.0


def documents(count):
    template = json.loads((PACKAGE / "tests" / "data" / "nodes_v0.0.42.json").read_text())
    kinds = template["nodes"]
    nodes = []
    for i in range(count):
        node = copy.deepcopy(kinds[i % len(kinds)])
        node.update(name="cn-%d" % i, partitions=["batch"] if i % 4 else ["batch", "gpu"])
        nodes.append(node)
    now = int(time.time())
    states = (["PENDING"], ["RUNNING"], ["COMPLETED"], ["RUNNING", "COMPLETING"])
    jobs = [{"job_id": i, "job_state": states[i % 4], "partition": "batch" if i % 3 else "gpu",
             "submit_time": {"set": True, "infinite": False, "number": now - i}} for i in range(count)]
    pings = {"pings": [{"hostname": "ctl1", "pinged": "UP", "responding": True, "mode": "primary"}]}
    return {"ping": json.dumps(pings).encode(), "nodes": json.dumps(dict(template, nodes=nodes), indent=2).encode(),
            "jobs": json.dumps({"jobs": jobs}, indent=2).encode()}


def serve(answers):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = answers.get(self.path.rstrip("/").rsplit("/", 1)[-1])
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def vendor(dest):
    subprocess.run(["sh", str(ROOT / "roles/copilot/files/copilot/tools/vendor.sh"), "--from", str(ROOT), "--to", str(dest)],
                   check=True, stdout=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable})


def vm_hwm_mb(pid):
    for line in pathlib.Path("/proc/%d/status" % pid).read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", default=str(REPORT))
    args = parser.parse_args()
    vendor(PACKAGE / "src" / "hybridhpc_exporter" / "_vendor")
    answers = documents(args.nodes)
    rest = serve(answers)
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="bench-exporter-") as work:
        token = pathlib.Path(work) / "token"
        sys.path.insert(0, str(PACKAGE / "src"))
        from hybridhpc_exporter._vendor import jwt
        token.write_text(jwt.sign_hs256_token(b"k" * 32, "slurm-exporter", 3600) + "\n")
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(PACKAGE / "src"), "PYTHONDONTWRITEBYTECODE": "1"}
        exporter = subprocess.Popen([sys.executable, "-m", "hybridhpc_exporter", "--url", "http://127.0.0.1:%d" % rest.server_port,
                                     "--token-file", str(token), "--listen", "127.0.0.1:%d" % port, "--slurm-names"], env=env,
                                    stderr=subprocess.PIPE, text=True)
        try:
            url = "http://127.0.0.1:%d/metrics" % port
            deadline = time.monotonic() + 30
            while True:
                try:
                    urllib.request.urlopen(url, timeout=30).read()
                    break
                except OSError:
                    if time.monotonic() > deadline or exporter.poll() is not None:
                        raise
                    time.sleep(0.2)
            seconds, size = [], 0
            for _unused in range(args.runs):
                started = time.perf_counter()
                body = urllib.request.urlopen(url, timeout=30).read()
                seconds.append(time.perf_counter() - started)
                size = len(body)
            if b"hybridhpc_slurm_up 1.0" not in body:
                raise SystemExit("the exporter did not read the stand-in: %s" % body[:300])
            rss = vm_hwm_mb(exporter.pid)
        finally:
            exporter.terminate()
            exporter.wait(timeout=10)
            rest.shutdown()
    median = statistics.median(seconds)
    samples = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    verdicts = ["scrape of %d nodes and %d jobs: median %.3f s of %d (target <= %.1f s): %s"
                % (args.nodes, args.nodes, median, args.runs, TARGET_SCRAPE_S, "met" if median <= TARGET_SCRAPE_S else "MISSED"),
                "exporter peak resident memory: %.1f MB (target <= %.0f MB): %s"
                % (rss, TARGET_RSS_MB, "met" if rss <= TARGET_RSS_MB else "MISSED")]
    print("slurmrestd answers: nodes %.1f MB, jobs %.1f MB; exposition %d samples, %.1f kB"
          % (len(answers["nodes"]) / 1e6, len(answers["jobs"]) / 1e6, samples, size / 1e3))
    print("scrapes (s): " + ", ".join("%.3f" % s for s in seconds))
    for line in verdicts:
        print(line)
    report = pathlib.Path(args.json)
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(json.dumps({"python": sys.version.split()[0], "cpus": os.cpu_count(), "nodes": args.nodes, "scrapes_s": seconds,
                                  "median_s": median, "peak_rss_mb": rss, "samples": samples, "verdicts": verdicts}, indent=2))
    print("report: %s" % report)
    return 1 if any("MISSED" in line for line in verdicts) else 0


if __name__ == "__main__":
    sys.exit(main())
