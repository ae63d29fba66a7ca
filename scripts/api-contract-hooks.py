"""schemathesis hooks of scripts/api-contract.sh: what /openapi.json cannot state.

A job's outputs must have different destinations (the server answers 422 otherwise). JSON
Schema cannot say that of a property of a list's items, so generated jobs that repeat a
destination are dropped instead of sent.
"""

import schemathesis


@schemathesis.hook
def filter_body(context, body):
    outputs = body.get("outputs") if isinstance(body, dict) else None
    if not isinstance(outputs, list):
        return True
    destinations = [repr(o.get("destination")) for o in outputs if isinstance(o, dict)]
    return len(destinations) == len(set(destinations))
