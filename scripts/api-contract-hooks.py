"""schemathesis hooks of scripts/api-contract.sh: what /openapi.json cannot state.

A job's outputs must have different destinations, at most one of them a package, and at
most 8 encodes per segment in all (a file output is one, a package one per rung, "auto" 4);
a rung's maxrate is not below its bitrate. The server answers 422 otherwise. JSON Schema
cannot compare two values of a body, so generated jobs that break these rules are dropped
instead of sent.
"""

import schemathesis


@schemathesis.hook
def filter_body(context, body):
    outputs = body.get("outputs") if isinstance(body, dict) else None
    if not isinstance(outputs, list):
        return True
    outputs = [o for o in outputs if isinstance(o, dict)]
    destinations = [repr(o.get("destination")) for o in outputs]
    packages = [o["package"] for o in outputs if isinstance(o.get("package"), dict)]
    encodes = len(outputs) - len(packages) + sum(len(rungs(p)) or 4 for p in packages)
    capped = all(not below(r.get("maxrate"), r.get("bitrate")) for p in packages for r in rungs(p))
    return (
        len(destinations) == len(set(destinations))
        and len(packages) <= 1
        and encodes <= 8
        and capped
    )


def rungs(package):
    """A package's explicit rungs (none for the "auto" ladder, which costs 4 encodes)."""
    ladder = package.get("ladder", "auto")
    return [r for r in ladder if isinstance(r, dict)] if isinstance(ladder, list) else []


def below(maxrate, bitrate):
    """Whether a rung's maxrate is below its bitrate (both given as numbers)."""
    numbers = all(isinstance(v, (int, float)) for v in (maxrate, bitrate))
    return numbers and maxrate < bitrate
