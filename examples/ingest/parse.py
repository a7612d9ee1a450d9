#!/usr/bin/env python3
"""parse FORMAT: extracts text from a document of one format (stage: parsing).

usage:  parse.py {pdf|docx|html|csv|txt}
stdin:  {"document_id": "doc-1", "format": "pdf", "fail_parse_times": 0,
         "metadata": {...save_metadata output...}}
stdout: {"document_id", "format", "parser", "pages", "text", "chars", "attempt"}

Deterministic: the same document_id always gives the same text and page count.
Test switch: while RUNLOOM_ATTEMPT <= fail_parse_times, exits 75 (a transient
failure, error class `unavailable`, which the workflow retries).
"""
import hashlib
import json
import os
import sys

import stepio

FORMATS = ("pdf", "docx", "html", "csv", "txt")
EXIT_TRANSIENT = 75  # EX_TEMPFAIL
WORDS = ("ledger", "invoice", "policy", "quarter", "review", "supplier", "audit",
         "contract", "summary", "revenue", "clause", "schedule", "region", "metric",
         "approval", "forecast")


def fail(fmt, message, code=1):
    print(f"parse {fmt}: {message}", file=sys.stderr)
    return code


def as_int(value, name):
    if value is None or value == "":
        return 0
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    return int(value)


def page_text(document_id, page, fmt):
    digest = hashlib.sha256(f"{document_id}/{page}".encode()).digest()
    sentences = []
    for s in range(3):
        words = [WORDS[b % len(WORDS)] for b in digest[s * 6:(s + 1) * 6]]
        sentences.append(" ".join(words).capitalize() + ".")
    return f"[{fmt} page {page}] " + " ".join(sentences)


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in FORMATS:
        return fail("?", f"usage: parse.py {{{'|'.join(FORMATS)}}}", 2)
    fmt = sys.argv[1]
    request, err = stepio.read_request(f"parse {fmt}")
    if err is not None:
        return err
    document_id = str(request.get("document_id") or "")
    if not document_id:
        return fail(fmt, "document_id is missing from stdin")
    if request.get("format") not in (None, "", fmt):
        return fail(fmt, f"got a document of format {request['format']!r}; "
                         f"only the parse_{request['format']} step should run for it")
    try:
        fail_times = as_int(request.get("fail_parse_times"), "fail_parse_times")
        attempt = as_int(os.environ.get("RUNLOOM_ATTEMPT", "1"), "RUNLOOM_ATTEMPT")
    except ValueError as e:
        return fail(fmt, str(e))
    if attempt <= fail_times:
        return fail(fmt, f"simulated transient outage on attempt {attempt} "
                         f"(fail_parse_times={fail_times}); retry later", EXIT_TRANSIENT)

    pages = 1 + hashlib.sha256(document_id.encode()).digest()[0] % 5
    text = "\n".join(page_text(document_id, p, fmt) for p in range(1, pages + 1))
    json.dump({
        "document_id": document_id,
        "format": fmt,
        "parser": f"{fmt}-parser/1",
        "pages": pages,
        "text": text,
        "chars": len(text),
        "attempt": attempt,
    }, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
