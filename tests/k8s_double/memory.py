"""The double without a socket: each request served by its own HTTP handler over in-memory streams.

For tests that drive a client in their own thread many times over (a property
test builds thousands of servers and sends hundreds of thousands of
requests): no port, no server thread, no scheduling between the two. A
request goes through the same code as over TCP from the request line on (the
handler's authentication, faults, routes, verbs and watch streams write the
answer's bytes, read back here) but the parsing of the request's headers,
which http.server does with an email parser (the slowest part of a request).
One difference, said where it matters: a watch ends once it has sent every event the log holds (as one
whose timeout fell right then would), so its reader gets what happened and
goes on instead of waiting in its own thread for more.

    server = ApiServer(listen=False)
    pool = pool_manager(server)        # for urllib3 clients (the kubernetes package's, the copilot's KubeClient)
    client = httpx.Client(transport=transport(server), base_url=server.url)
"""

from __future__ import annotations

import io
from urllib.parse import urlsplit

from .server import ApiServer


class _Headers(dict):
    """A request's headers as the handler reads them (``get``, any case), without an email parser per request."""

    def get(self, key, default=None):
        return super().get(key.lower(), default)


def _handler_class(server: ApiServer):
    """The server's request handler, fed from memory (made once per server)."""
    cached = getattr(server, "_memory_handler", None)
    if cached is not None:
        return cached

    class InMemoryHandler(server.handler):
        ends_when_caught_up = True

        def __init__(self, method: str, target: str, headers: _Headers, body: bytes):  # not super().__init__: it reads a socket
            self.rfile, self.wfile = io.BytesIO(body), io.BytesIO()
            self.client_address, self.server, self.request = ("127.0.0.1", 0), None, None
            self.command, self.path, self.request_version, self.headers = method, target, "HTTP/1.1", headers
            self.close_connection = True
            self.requestline = "%s %s HTTP/1.1" % (method, target)
            getattr(self, "do_" + method)()

    server._memory_handler = InMemoryHandler
    return InMemoryHandler


def _dechunked(data: bytes) -> bytes:
    body, at = [], 0
    while True:
        end = data.index(b"\r\n", at)
        size = int(data[at:end], 16)
        if size == 0:
            return b"".join(body)
        body.append(data[end + 2:end + 2 + size])
        at = end + 2 + size + 2


def _parsed(raw: bytes) -> tuple[int, str, list[tuple[str, str]], bytes]:
    head, _blank, body = raw.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    _version, status, reason = status_line.split(" ", 2)
    headers = [(key, value.strip()) for key, _colon, value in (line.partition(":") for line in lines)]
    if any(key.lower() == "transfer-encoding" and value == "chunked" for key, value in headers):
        body = _dechunked(body)
    return int(status), reason, headers, body


def respond(server: ApiServer, method: str, url: str, headers: dict | None = None,
            body: bytes | str | None = None) -> tuple[int, str, list[tuple[str, str]], bytes]:
    """One request; the answer as (status, reason, headers, body), de-chunked, from the bytes the handler wrote."""
    parts = urlsplit(url)
    target = (parts.path or "/") + ("?" + parts.query if parts.query else "")
    data = body.encode("utf-8") if isinstance(body, str) else (body or b"")
    received = _Headers((key.lower(), value) for key, value in (headers or {}).items())
    received["content-length"] = str(len(data))
    handler = _handler_class(server)(method, target, received, data)
    return _parsed(handler.wfile.getvalue())


class MemoryPoolManager:
    """What a urllib3 client calls on its ``PoolManager`` (``request``), answered by the double in memory."""

    def __init__(self, server: ApiServer):
        self.server = server

    def request(self, method: str, url: str, body=None, fields=None, headers=None, preload_content: bool = True,
                **_connection):
        """The query is in ``url``; ``fields`` (a form body: the kubernetes package sends an empty one with a GET)
        is refused, as the API server takes JSON."""
        import urllib3

        if fields:
            raise ValueError("a form body for %s %s: the API server takes JSON" % (method, url))
        status, reason, answer_headers, data = respond(self.server, method, url, headers, body)
        # The body is de-chunked already: drop the header that would make urllib3 de-chunk it again.
        kept = [(k, v) for k, v in answer_headers if k.lower() != "transfer-encoding"]
        return urllib3.HTTPResponse(body=io.BytesIO(data), headers=urllib3.HTTPHeaderDict(kept), status=status,
                                    reason=reason, preload_content=preload_content, decode_content=False,
                                    request_method=method, request_url=url)


def pool_manager(server: ApiServer) -> MemoryPoolManager:
    return MemoryPoolManager(server)


def transport(server: ApiServer):
    """An httpx transport to the double in memory."""
    import httpx

    def handle(request: httpx.Request) -> httpx.Response:
        status, _reason, headers, data = respond(server, request.method, str(request.url), dict(request.headers),
                                                 request.content)
        kept = [(k, v) for k, v in headers if k.lower() not in ("transfer-encoding", "content-length")]
        return httpx.Response(status, headers=kept, content=data)

    return httpx.MockTransport(handle)
