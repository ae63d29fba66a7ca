"""The replay's batch: inputs made with ffmpeg, submitted through the dispatcher's API as a
client would (a presigned upload, then POST /v1/jobs), followed until they end, and their
outputs (files and HLS packages) checked frame-exact against their sources.

Why the API and not `tessera submit`: a package output is only in the API's job body.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

from . import exact
from .store import S3

MEDIA_BUCKET = "tessera-media"
HTTP_TIMEOUT = 30
FFMPEG_TIMEOUT = 900


@dataclass
class Item:
    """One job of the batch: its source, what it asks for, and what became of it."""
    name: str
    source: Path
    package: bool = False
    long: bool = False
    id: str = ""
    state: str = ""
    segments: int = 0

    def outputs(self) -> List[dict]:
        """The job body's `outputs`: an HLS package or an MP4 file under replay/."""
        if self.package:
            return [{"package": {"format": "hls", "ladder": [{"height": 240, "crf": 30}]},
                     "destination": f"s3://{MEDIA_BUCKET}/replay/{self.name}/"}]
        return [{"destination": f"s3://{MEDIA_BUCKET}/replay/{self.name}.mp4",
                 "preset": "ultrafast"}]


def make_input(path: Path, seconds: int, size: str) -> Path:
    """A test pattern with a tone: `seconds` long, `size` (WxH), 25 fps, a keyframe every
    2 s, AAC audio."""
    if not path.exists():
        subprocess.run(
            ["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", f"testsrc2=size={size}:rate=25",
             "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000", "-t", str(seconds),
             "-c:v", "libx264", "-preset", "ultrafast", "-crf", "32", "-g", "50",
             "-pix_fmt", "yuv420p",
             "-c:a", "aac", "-b:a", "96k", "-shortest", str(path)],
            check=True, timeout=FFMPEG_TIMEOUT)
    return path


class Api:
    """The dispatcher's HTTP API with a bearer token."""

    def __init__(self, base: str, token: str):
        self.base, self.token = base, token

    def call(self, method: str, path: str, body: Optional[dict] = None) -> dict:
        """One API call; its JSON answer, or RuntimeError naming the status."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=HTTP_TIMEOUT) as r:
                return json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"{method} {path}: HTTP {e.code} {e.read()[:500]!r}") from e

    def submit(self, item: Item) -> None:
        """Uploads the source through a presigned URL, then starts the job."""
        size = item.source.stat().st_size
        up = self.call("POST", "/v1/uploads", {"filename": item.source.name, "size": size})
        put = urllib.request.Request(up["url"], data=item.source.read_bytes(), method="PUT",
                                     headers={"Content-Length": str(size)})
        with urllib.request.urlopen(put, timeout=600):
            pass
        job = self.call("POST", "/v1/jobs", {"input": up["input"], "outputs": item.outputs()})
        item.id = job["id"]

    def status(self, item: Item) -> Optional[dict]:
        """The job's view; None while the API does not answer (a restart)."""
        try:
            return self.call("GET", f"/v1/jobs/{item.id}")
        except (OSError, RuntimeError, ValueError):
            return None


def wait_all(api: Api, items: List[Item], limit: float, on_poll=None) -> None:
    """Follows the jobs until each ended (done, failed, cancelled) or `limit` passes;
    `on_poll(item, view)` sees every answer."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        for it in items:
            if it.state in ("done", "failed", "cancelled"):
                continue
            v = api.status(it)
            if v is not None:
                it.state, it.segments = v.get("state", "?"), v.get("segments_total", 0)
                if on_poll:
                    on_poll(it, v)
        if all(it.state in ("done", "failed", "cancelled") for it in items):
            return
        time.sleep(2)


def check_item(s3: S3, item: Item, work: Path) -> Optional[str]:
    """None when the job's output is frame-exact against its source, else what differs."""
    if not item.package:
        out = work / "out" / f"{item.name}.mp4"
        s3.download(MEDIA_BUCKET, f"replay/{item.name}.mp4", out)
        return exact.check(item.source, out)
    prefix = f"replay/{item.name}/"
    keys = s3.list(MEDIA_BUCKET, prefix)
    if not any(k.endswith("master.m3u8") for k in keys):
        return f"no master.m3u8 under {prefix}"
    diffs = []
    for rendition, audio in (("v0", False), ("a0", True)):
        parts = sorted(k for k in keys if k.startswith(prefix + rendition + "/") and
                       (k.endswith(".m4s") or k.endswith("init.mp4")))
        inits = [k for k in parts if k.endswith("init.mp4")]
        if len(inits) != 1:
            return f"{rendition}: {len(inits)} init.mp4"
        joined = work / "out" / f"{item.name}-{rendition}.mp4"
        chunks = []
        for k in inits + [k for k in parts if k.endswith(".m4s")]:
            local = work / "out" / k
            s3.download(MEDIA_BUCKET, k, local)
            chunks.append(local.read_bytes())
        joined.write_bytes(b"".join(chunks))
        if audio:
            a_src, a_out = exact.audio_seconds(item.source), exact.audio_seconds(joined)
            if a_src is None or a_out is None or abs(a_src - a_out) >= exact.AUDIO_TOLERANCE_S:
                diffs.append(f"a0: audio lasts {a_out} s, the source's {a_src} s")
        else:
            d = exact.check(item.source, joined, audio=False, rel=True)
            if d:
                diffs.append(f"v0: {d}")
    return "; ".join(diffs) or None


def summary(items: List[Item]) -> Dict[str, int]:
    """Jobs by state."""
    out: Dict[str, int] = {}
    for it in items:
        out[it.state or "?"] = out.get(it.state or "?", 0) + 1
    return out
