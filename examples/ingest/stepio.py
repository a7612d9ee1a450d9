"""Shared stdin/stderr handling for the ingest example's exec steps.

An exec step reads one JSON object on stdin and writes one on stdout; on a
problem it explains itself on stderr (runloom keeps the tail in the step
record) and exits non-zero.
"""
import json
import sys


def fail(name, message, code=1):
    print(f"{name}: {message}", file=sys.stderr)
    return code


def read_request(name):
    """Returns (request, None), or (None, exit code) after saying why on stderr."""
    try:
        raw = sys.stdin.read()
        request = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as e:
        return None, fail(name, f"stdin is not JSON ({e}); send a JSON object")
    if not isinstance(request, dict):
        return None, fail(name, "stdin must be a JSON object")
    return request, None
