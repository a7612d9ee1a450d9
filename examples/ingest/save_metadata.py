#!/usr/bin/env python3
"""save_metadata: records a document's metadata before parsing (stage: intake).

stdin:  {"document_id": "doc-1", "format": "pdf"}
stdout: {"document_id", "format", "content_type", "source_uri", "checksum",
         "size_bytes", "status": "processing", "correlation_id"}
Exit 1 on a malformed request (not retried).
"""
import hashlib
import json
import os
import re
import sys

import stepio

CONTENT_TYPES = {
    "pdf": "application/pdf",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "html": "text/html",
    "csv": "text/csv",
    "txt": "text/plain",
}


def fail(message):
    print(f"save_metadata: {message}", file=sys.stderr)
    return 1


def main():
    request, err = stepio.read_request("save_metadata")
    if err is not None:
        return err
    document_id = str(request.get("document_id") or "")
    fmt = str(request.get("format") or "")
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,128}", document_id):
        return fail(f"document_id {document_id!r} is invalid; use 1-128 characters "
                    "from A-Z a-z 0-9 . _ -")
    if fmt not in CONTENT_TYPES:
        return fail(f"format {fmt!r} is unknown; use one of {', '.join(CONTENT_TYPES)}")
    digest = hashlib.sha256(f"{document_id}.{fmt}".encode()).hexdigest()
    json.dump({
        "document_id": document_id,
        "format": fmt,
        "content_type": CONTENT_TYPES[fmt],
        "source_uri": f"memory://documents/{document_id}.{fmt}",
        "checksum": f"sha256:{digest}",
        "size_bytes": 1024 + int(digest[:6], 16) % 65536,
        "status": "processing",
        "correlation_id": os.environ.get("RUNLOOM_RUN_ID", ""),
    }, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
