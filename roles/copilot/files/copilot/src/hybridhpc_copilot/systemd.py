"""systemd ``Type=notify`` without libsystemd: READY=1, WATCHDOG=1, STOPPING=1, STATUS=...

A datagram to the socket named in ``$NOTIFY_SOCKET`` (``@`` = abstract
namespace). Outside systemd (no variable) every call is a no-op.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping


class Notifier:
    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        environ = os.environ if environ is None else environ
        self.address = environ.get("NOTIFY_SOCKET") or None
        usec = environ.get("WATCHDOG_USEC")
        pid = environ.get("WATCHDOG_PID")
        self.watchdog_seconds: float | None = None
        if usec and usec.isdigit() and int(usec) > 0 and (not pid or pid == str(os.getpid())):
            self.watchdog_seconds = int(usec) / 1e6

    def notify(self, *states: str) -> bool:
        """Send ``states`` (``"READY=1"``, ...); False when not under systemd or the send failed."""
        if not self.address:
            return False
        address = "\0" + self.address[1:] if self.address.startswith("@") else self.address
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.connect(address)
                sock.sendall("\n".join(states).encode("utf-8"))
        except OSError:
            return False
        return True

    def ready(self, status: str = "") -> bool:
        return self.notify("READY=1", *(["STATUS=" + status] if status else []))

    def watchdog(self) -> bool:
        return self.notify("WATCHDOG=1")

    def status(self, text: str) -> bool:
        return self.notify("STATUS=" + text.replace("\n", " "))

    def stopping(self) -> bool:
        return self.notify("STOPPING=1")
