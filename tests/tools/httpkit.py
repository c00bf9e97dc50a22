"""A real HTTP server on 127.0.0.1 for the web tool tests."""

from __future__ import annotations

import contextlib
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["QuietHandler", "serving"]


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that logs nothing, with :meth:`send_body`."""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def send_body(self, body: bytes, kind: str = "text/plain", status: int = 200) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def redirect(self, location: str) -> None:
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()


@contextlib.contextmanager
def serving(
    handler: type[BaseHTTPRequestHandler], *, tls: ssl.SSLContext | None = None
) -> Iterator[str]:
    """``http://127.0.0.1:<port>`` served by ``handler`` until the block ends (``https://``
    with ``tls``)."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    if tls is not None:
        httpd.socket = tls.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
