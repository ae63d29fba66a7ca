"""schemathesis hooks of scripts/api-contract.sh: what /openapi.json cannot state.

A job's outputs must have different destinations, at most one of them a package, and at
most 8 encodes per segment in all (a file output is one, a package one per rung, "auto" 4);
a rung's maxrate is not below its bitrate, nor an output's max_bitrate below its bitrate; a
target's min_crf is not above its max_crf (an output's, a package's, a rung's); a rung with
no bitrate, crf or target needs the package's target. The server answers 422 otherwise. JSON Schema
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
    capped = capped and all(not below(o.get("max_bitrate"), o.get("bitrate")) for o in outputs)
    targets = [o["target"] for o in outputs if isinstance(o.get("target"), dict)]
    targets += [p["target"] for p in packages if isinstance(p.get("target"), dict)]
    targets += [r["target"] for p in packages for r in rungs(p) if isinstance(r.get("target"), dict)]
    ordered = all(not below(t.get("max_crf"), t.get("min_crf")) for t in targets)
    rated = all(rung_rated(r, p) for p in packages for r in rungs(p))
    return (
        len(destinations) == len(set(destinations))
        and len(packages) <= 1
        and encodes <= 8
        and capped
        and ordered
        and rated
    )


def rung_rated(rung, package):
    """Whether a rung says how to rate it: a bitrate, a crf, a target, or the package's
    target (which the schema of a rung cannot see)."""
    own = any(k in rung for k in ("bitrate", "crf", "target"))
    return own or isinstance(package.get("target"), dict)


def rungs(package):
    """A package's explicit rungs (none for the "auto" ladder, which costs 4 encodes)."""
    ladder = package.get("ladder", "auto")
    return [r for r in ladder if isinstance(r, dict)] if isinstance(ladder, list) else []


def below(high, low):
    """Whether a cap is below what it caps (a maxrate below a bitrate, a max_crf below a
    min_crf), both given as numbers."""
    numbers = all(isinstance(v, (int, float)) for v in (high, low))
    return numbers and high < low
