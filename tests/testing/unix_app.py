"""A stand-in for an application statekit cannot patch: a separate interpreter (Debian's python3,
standard library only) serving HTTP on the unix socket ``$STATEKIT_SOCKET``. It answers what the
process sees: its time, its host name, its environment, and whether it can reach a TCP address."""

import http.client
import http.server
import json
import os
import smtplib
import socket
import socketserver
import time
from datetime import UTC, datetime
from urllib.parse import parse_qs, urlparse


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        url = urlparse(self.path)
        if url.path == "/now":
            body = {"utc": datetime.now(UTC).isoformat(), "time": time.time()}
        elif url.path == "/host":
            body = {"hostname": socket.gethostname()}
        elif url.path == "/env":
            body = dict(os.environ)
        elif url.path == "/connect":
            host, port = parse_qs(url.query)["to"][0].rsplit(":", 1)
            try:
                socket.create_connection((host, int(port)), timeout=2).close()
                body = {"connected": True}
            except OSError as exc:
                body = {"connected": False, "error": str(exc)}
        elif url.path == "/fetch":
            target = urlparse(parse_qs(url.query)["url"][0])
            try:
                web = http.client.HTTPConnection(target.hostname or "", target.port or 80, timeout=5)
                web.request("GET", target.path or "/")
                body = {"fetched": True, "status": web.getresponse().status}
            except (OSError, http.client.HTTPException) as exc:
                body = {"fetched": False, "error": f"{type(exc).__name__}: {exc}"}
        elif url.path == "/mail":
            query = parse_qs(url.query)
            try:
                with smtplib.SMTP("127.0.0.1", int(query["port"][0]), timeout=5) as smtp:
                    message = f"Subject: {query['subject'][0]}\r\nFrom: app@example.org\r\n\r\nHello.\r\n"
                    smtp.sendmail("app@example.org", query["to"], message)
                body = {"sent": True}
            except (OSError, smtplib.SMTPException) as exc:
                body = {"sent": False, "error": str(exc)}
        else:
            self.send_error(404)
            return
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def address_string(self) -> str:
        return "unix"  # a unix socket's peer has no host to print

    def log_message(self, format: str, *args: object) -> None:
        pass


class Server(socketserver.UnixStreamServer):
    def get_request(self):  # type: ignore[no-untyped-def]
        request, _ = super().get_request()
        return request, ("unix", 0)


if __name__ == "__main__":
    with Server(os.environ["STATEKIT_SOCKET"], Handler) as server:
        server.serve_forever()
