#!/usr/bin/env python3
"""Turns the investigating agent's findings into a remediation proposal (JSON on stdin/stdout)."""
import json
import sys

req = json.load(sys.stdin)
findings = req.get("findings", {})
summary = findings.get("summary") if isinstance(findings.get("summary"), str) else ""
if req.get("scenario") == "unfixable":
    proposal = {"resolvable": False, "action": "", "summary": "no safe remediation found",
                "evidence": summary}
else:
    proposal = {"resolvable": True, "action": "roll back checkout-service to the previous release",
                "summary": "latency began with the 14:02 deploy", "evidence": summary}
json.dump(proposal, sys.stdout)
