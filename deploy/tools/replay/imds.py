"""An AWS IMDSv2 stand-in on the host that every replay worker polls for spot notices
(TESSERA_SPOT_NOTICE=aws, TESSERA_SPOT_METADATA_URL): a notice is given to one worker at a
time, told apart by the address its polls come from (its container's).

Why by address: compose workers are copies of one service with one environment, so the URL
cannot differ per worker; a spot machine's metadata service speaks only to that machine.
Protocol as tests/src/imds.rs speaks it: `PUT /latest/api/token` (TTL header required) gives
a token every GET must carry (401 without); `spot/instance-action` answers 404 until a notice,
then `{"action": "terminate", "time": RFC 3339}` until the driver forgets it: once the noticed
worker is seen draining (its /readyz answers 503), or gone. Why not until the machine goes, as
AWS does: docker gives a freed address to the next container, which would drain on a notice
not meant for it; why not once: a poll whose answer is lost (a timeout on a busy host) would
lose the notice (both seen in the replay).
The rebalance recommendation stays 404.
"""

from __future__ import annotations

import datetime
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, Set

TOKEN = "replay-imds-token"


class Imds:
    """The running service: `notice(ip, seconds)` raises a notice for one worker."""

    def __init__(self, port: int):
        self.lock = threading.Lock()
        self.notices: Dict[str, datetime.datetime] = {}
        self.polled: Set[str] = set()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet: a poll a second per worker
                pass

            def _send(self, code: int, body: str = "") -> None:
                data = body.encode()
                self.send_response(code)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_PUT(self):
                if self.path != "/latest/api/token" or \
                        not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                    return self._send(400)
                self._send(200, TOKEN)

            def do_GET(self):
                if self.headers.get("X-aws-ec2-metadata-token") != TOKEN:
                    return self._send(401)
                ip = self.client_address[0]
                if self.path == "/latest/meta-data/spot/instance-action":
                    with owner.lock:
                        owner.polled.add(ip)
                        at = owner.notices.get(ip)
                    if at is None:
                        return self._send(404)
                    return self._send(200, json.dumps(
                        {"action": "terminate", "time": at.strftime("%Y-%m-%dT%H:%M:%SZ")}))
                self._send(404)

        self.server = ThreadingHTTPServer(("0.0.0.0", port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def notice(self, ip: str, seconds: float) -> None:
        """The machine at `ip` goes away in `seconds`."""
        at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds)
        with self.lock:
            self.notices[ip] = at

    def forget(self, ip: str) -> None:
        """`ip` is free again (a new container may get it)."""
        with self.lock:
            self.notices.pop(ip, None)
            self.polled.discard(ip)

    def has_polled(self, ip: str) -> bool:
        """Whether the worker at `ip` has asked for a notice yet (its watcher runs)."""
        with self.lock:
            return ip in self.polled

    def close(self) -> None:
        """Stops serving."""
        self.server.shutdown()
