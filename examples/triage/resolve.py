#!/usr/bin/env python3
"""Maps the approved proposal and the apply step's state to the run outcome."""
import json
import sys

req = json.load(sys.stdin)
if req.get("resolvable") is True and req.get("apply_status") == "succeeded":
    outcome = "approved"
elif req.get("resolvable") is False:
    outcome = "unresolved"
else:
    outcome = "failed"
json.dump({"outcome": outcome}, sys.stdout)
