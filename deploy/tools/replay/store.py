"""Reading the farm's S3 store (Garage) from the host: GET and ListObjectsV2 signed with AWS
Signature Version 4, path-style, standard library only.

Why not a client library: the replay runs with the host's python3 and PyYAML (what
scripts/validate-k8s.sh already needs); two signed GETs are all the checks need.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
TIMEOUT = 120


@dataclass(frozen=True)
class S3:
    """An S3 endpoint and the key to read it with."""
    endpoint: str
    region: str
    key_id: str
    secret: str

    def _signed(self, path: str, query: Dict[str, str]) -> urllib.request.Request:
        host = urllib.parse.urlparse(self.endpoint).netloc
        now = datetime.datetime.now(datetime.timezone.utc)
        stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
        q = "&".join(f"{urllib.parse.quote(k, safe='-_.~')}={urllib.parse.quote(v, safe='-_.~')}"
                     for k, v in sorted(query.items()))
        headers = f"host:{host}\nx-amz-content-sha256:{EMPTY_SHA256}\nx-amz-date:{stamp}\n"
        signed = "host;x-amz-content-sha256;x-amz-date"
        request = "\n".join(["GET", path, q, headers, signed, EMPTY_SHA256])
        scope = f"{day}/{self.region}/s3/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope,
                             hashlib.sha256(request.encode()).hexdigest()])
        key = ("AWS4" + self.secret).encode()
        for part in (day, self.region, "s3", "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        sig = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        auth = (f"AWS4-HMAC-SHA256 Credential={self.key_id}/{scope}, "
                f"SignedHeaders={signed}, Signature={sig}")
        url = f"{self.endpoint}{path}" + (f"?{q}" if q else "")
        return urllib.request.Request(url, headers={
            "x-amz-date": stamp, "x-amz-content-sha256": EMPTY_SHA256, "Authorization": auth})

    def download(self, bucket: str, key: str, dest: Path) -> None:
        """s3://bucket/key into `dest`."""
        path = "/" + bucket + "/" + urllib.parse.quote(key, safe="/-_.~")
        with urllib.request.urlopen(self._signed(path, {}), timeout=TIMEOUT) as r:
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(r.read())

    def list(self, bucket: str, prefix: str) -> List[str]:
        """The keys under `prefix` (every page)."""
        keys: List[str] = []
        token = None
        ns = "{http://s3.amazonaws.com/doc/2006-03-01/}"
        while True:
            query = {"list-type": "2", "prefix": prefix}
            if token:
                query["continuation-token"] = token
            with urllib.request.urlopen(self._signed("/" + bucket, query), timeout=TIMEOUT) as r:
                root = ET.fromstring(r.read())
            keys += [c.findtext(f"{ns}Key") or "" for c in root.findall(f"{ns}Contents")]
            token = root.findtext(f"{ns}NextContinuationToken")
            if root.findtext(f"{ns}IsTruncated") != "true" or not token:
                return keys
