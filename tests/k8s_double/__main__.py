"""Run the double standalone: ``python -m k8s_double --port 8443 --kubeconfig-out PATH``."""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import sys
import threading

from .server import ApiServer


def _documents(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    if path.endswith(".json"):
        data = json.loads(text)
        return data if isinstance(data, list) else [data]
    import yaml

    return [doc for doc in yaml.safe_load_all(text) if doc]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="k8s_double", description="A Kubernetes API server double (plain HTTP).")
    parser.add_argument("--address", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8443, help="port (0: any free port; default 8443)")
    parser.add_argument("--kubeconfig-out", help="write a kubeconfig pointing at the server to this file")
    parser.add_argument("--token", default=None, help="bearer token clients must send (default: a random one; '' for none)")
    parser.add_argument("--load", action="append", default=[], help="YAML/JSON file of objects to create at start (repeatable)")
    parser.add_argument("--window", type=int, default=1000, help="watch events kept per resource (older: 410 Gone)")
    args = parser.parse_args(argv)
    token = secrets.token_hex(16) if args.token is None else (args.token or None)
    server = ApiServer(args.address, args.port, token=token, window=args.window)
    for path in args.load:
        server.load(_documents(path))
    if args.kubeconfig_out:
        fd = os.open(args.kubeconfig_out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(server.kubeconfig())
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    server.start()
    print("k8s-double listening on %s" % server.url, flush=True)
    stop.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
