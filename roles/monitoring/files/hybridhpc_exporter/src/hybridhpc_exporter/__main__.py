# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""hybridhpc-slurm-exporter: wiring only (flags, the slurmrestd client, the HTTP server).

    python3 -m hybridhpc_exporter --url http://ctl:6820 --token-file /etc/hybridhpc-exporter/token \
        --listen 0.0.0.0:9341 [--slurm-names] [--user NAME]

The token file holds one slurmrestd JWT (the monitoring role writes it, 0400,
and renews it before it expires); it is read again whenever slurmrestd refuses
the current token, so a renewed token needs no restart.
"""

from __future__ import annotations

import argparse
import logging
import signal
import subprocess
import sys
import threading
from wsgiref.simple_server import WSGIRequestHandler

from prometheus_client import CollectorRegistry, exposition

from . import collector
from ._vendor import jwt, slurmrestd


def read_token(path: str) -> str:
    with open(path, encoding="ascii") as handle:
        return handle.read().strip()


def token_expiry(path: str) -> float | None:
    try:
        claims = jwt.decode_token_unverified(read_token(path))
    except (OSError, ValueError, jwt.JWTError):
        return None
    exp = claims.get("exp")
    return float(exp) if isinstance(exp, (int, float)) else None


def show_federation(scontrol: str, timeout: float) -> str | None:
    """``scontrol show federation``, or None when it failed (logged: the families are then left out)."""
    done = subprocess.run([scontrol, "show", "federation"], capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        logging.warning("scontrol show federation: rc %d: %s", done.returncode, done.stderr.strip()[-200:])
        return None
    return done.stdout


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass  # one line per scrape would fill the journal


# The client's versions, and Slurm 22.05's openapi/v0.0.38 (the model reads its nodes, jobs and pings): newest first.
VERSIONS = (*slurmrestd.DEFAULT_VERSIONS, "v0.0.38")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="hybridhpc-slurm-exporter", description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--url", required=True, help="slurmrestd's base URL, e.g. http://ctl1:6820")
    parser.add_argument("--unix-socket", help="reach slurmrestd over this socket instead")
    parser.add_argument("--token-file", required=True, help="file holding the slurmrestd JWT")
    parser.add_argument("--user", help="the token's user (default: its sun claim)")
    parser.add_argument("--listen", default="0.0.0.0:9341", help="address:port to serve /metrics on (default %(default)s)")
    parser.add_argument("--slurm-names", action="store_true",
                        help="also serve the metrics Slurm 25.11+ serves itself (for 22.05 and 24.11)")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per slurmrestd request (default %(default)s)")
    parser.add_argument("--federation", action="store_true", help="also serve the federation's members (scontrol show federation)")
    parser.add_argument("--scontrol", default="/usr/bin/scontrol", help="scontrol for --federation (default %(default)s)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    address, _sep, port = args.listen.rpartition(":")
    client = slurmrestd.SlurmrestdClient(url=args.url, unix_socket=args.unix_socket, user=args.user,
                                         token_provider=lambda: read_token(args.token_file), timeout=args.timeout,
                                         retries=1, versions=VERSIONS)
    registry = CollectorRegistry(auto_describe=False)
    federation = (lambda: show_federation(args.scontrol, args.timeout)) if args.federation else None
    registry.register(collector.SlurmCollector(client, args.slurm_names, lambda: token_expiry(args.token_file), federation=federation))
    app = exposition.make_wsgi_app(registry)
    server = exposition.make_server(address or "0.0.0.0", int(port), app, exposition.ThreadingWSGIServer,
                                    handler_class=QuietHandler)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    logging.info("serving /metrics on %s for slurmrestd %s", args.listen, args.unix_socket or args.url)
    stop.wait()
    server.shutdown()
    client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
