"""Frame-exactness of an output against its source, as tests/src/docker_farm/exact.rs checks
it: exactly the source's video frames, each at its source frame's time (within 1 ms), none
twice, and the source's audio duration (within 50 ms). ffprobe reads both files.

Why again in Python: the replay's checks run in its own process, on files it downloads.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import List, Optional

PTS_TOLERANCE_S = 0.001
# A package's rendition is compared on times relative to its first frame, as
# tests/tests/farm_package.rs compares them (its fragments may start at the encoder's delay).
RELATIVE_TOLERANCE_S = 0.002
AUDIO_TOLERANCE_S = 0.05
FFPROBE_TIMEOUT = 300


def _ffprobe(path: Path, args: List[str]) -> dict:
    out = subprocess.run(["ffprobe", "-v", "error", "-of", "json", *args, str(path)],
                         capture_output=True, text=True, timeout=FFPROBE_TIMEOUT)
    if out.returncode != 0:
        raise RuntimeError(f"ffprobe {path}: {out.stderr.strip()}")
    return json.loads(out.stdout)


def video_pts(path: Path) -> List[float]:
    """The first video stream's packet times, in order of time."""
    v = _ffprobe(path, ["-select_streams", "v:0", "-show_entries", "packet=pts_time"])
    return sorted(float(p["pts_time"]) for p in v.get("packets", []) if "pts_time" in p)


def audio_seconds(path: Path) -> Optional[float]:
    """The first audio stream's duration: its container's, else its last packet's end."""
    v = _ffprobe(path, ["-select_streams", "a:0", "-show_entries", "stream=duration"])
    streams = v.get("streams") or []
    if streams and streams[0].get("duration") not in (None, "N/A"):
        return float(streams[0]["duration"])
    p = _ffprobe(path, ["-select_streams", "a:0", "-show_entries",
                        "packet=pts_time,duration_time"]).get("packets") or []
    if not p:
        return None
    return max(float(x["pts_time"]) + float(x.get("duration_time", 0)) for x in p) - \
        min(float(x["pts_time"]) for x in p)


def same_frames(src: List[float], out: List[float],
                tolerance: float = PTS_TOLERANCE_S) -> Optional[str]:
    """None when `out` has exactly the frames of `src` (both sorted), else the difference."""
    if len(src) != len(out):
        return f"{len(out)} frames, the source has {len(src)}"
    for i, (s, o) in enumerate(zip(src, out)):
        if abs(s - o) > tolerance:
            return f"frame {i + 1} at {o} s, the source's at {s} s"
    for a, b in zip(out, out[1:]):
        if a == b:
            return f"a timestamp appears twice ({a} s)"
    return None


def relative(times: List[float]) -> List[float]:
    """Times from the first one."""
    return [t - times[0] for t in times] if times else []


def check(src: Path, out: Path, audio: bool = True, rel: bool = False) -> Optional[str]:
    """None when `out` is frame-exact against `src` (`rel`: on times relative to the first
    frame), else what differs."""
    if rel:
        diff = same_frames(relative(video_pts(src)), relative(video_pts(out)),
                           RELATIVE_TOLERANCE_S)
    else:
        diff = same_frames(video_pts(src), video_pts(out))
    if diff or not audio:
        return diff
    a_src, a_out = audio_seconds(src), audio_seconds(out)
    if a_src is None or a_out is None or abs(a_src - a_out) >= AUDIO_TOLERANCE_S:
        return f"audio lasts {a_out} s, the source's {a_src} s"
    return None
