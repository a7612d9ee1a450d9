#!/usr/bin/env python3
"""status: resolves the document's terminal status from upstream step states.

Runs whatever happened upstream (trigger all_done). The document is completed
only when chunk and index both succeeded; any failed step makes it failed.

stdin:  {"document_id": "doc-1",
         "steps": {"<step id>": {"status": "succeeded|failed|skipped", "error": "..."}, ...}}
        (list the steps in pipeline order; chunk and index are required)
stdout: {"document_id", "outcome": "completed|failed", "document_status",
         "failed_steps": [...], "error": "<first failed step: its error>" | null}
"""
import json
import sys

import stepio

REQUIRED = ("chunk", "index")


def fail(message):
    print(f"status: {message}", file=sys.stderr)
    return 1


def main():
    request, err = stepio.read_request("status")
    if err is not None:
        return err
    steps = request.get("steps")
    if not isinstance(steps, dict) or any(s not in steps for s in REQUIRED):
        return fail(f"'steps' must be an object with at least {', '.join(REQUIRED)}")

    failed_steps, error = [], None
    for step_id, state in steps.items():
        if not isinstance(state, dict):
            return fail(f"steps.{step_id} must be an object {{\"status\", \"error\"}}")
        if state.get("status") == "failed":
            failed_steps.append(step_id)
            if error is None:
                error = f"{step_id}: {state.get('error') or 'failed (no message)'}"
    ok = not failed_steps and all(steps[s].get("status") == "succeeded" for s in REQUIRED)
    if not ok and error is None:
        error = "; ".join(f"{s} {steps[s].get('status') or 'did not run'}" for s in REQUIRED)
    outcome = "completed" if ok else "failed"
    json.dump({
        "document_id": str(request.get("document_id") or ""),
        "outcome": outcome,
        "document_status": outcome,
        "failed_steps": failed_steps,
        "error": error,
    }, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
