#!/usr/bin/env python3
"""Turns the specialists' findings into a remediation proposal (JSON on stdin/stdout)."""
import json
import sys

req = json.load(sys.stdin)
findings = req.get("findings", {})
answered = sorted(k for k, v in findings.items() if isinstance(v, str) and v and v != "failed")
if req.get("scenario") == "unfixable":
    proposal = {"resolvable": False, "action": "", "summary": "no safe remediation found",
                "evidence": answered}
else:
    proposal = {"resolvable": True, "action": "roll back checkout-service to the previous release",
                "summary": "latency began with the 14:02 deploy", "evidence": answered}
json.dump(proposal, sys.stdout)
