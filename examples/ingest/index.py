#!/usr/bin/env python3
"""index: assigns each chunk a stable vector id and reports the count (stage: indexing).

stdin:  {"document_id": "doc-1", "chunks": [{"id", "text", "chars"}, ...]}
stdout: {"document_id", "index", "indexed_count", "vector_ids"}
"""
import hashlib
import json
import sys

import stepio

INDEX = "runloom-demo"


def fail(message):
    print(f"index: {message}", file=sys.stderr)
    return 1


def main():
    request, err = stepio.read_request("index")
    if err is not None:
        return err
    chunks = request.get("chunks")
    if not isinstance(chunks, list) or not chunks:
        return fail("'chunks' must be a non-empty list (the chunk step's output.chunks)")
    vector_ids = []
    for i, chunk in enumerate(chunks):
        if not isinstance(chunk, dict) or not isinstance(chunk.get("text"), str):
            return fail(f"chunks[{i}] has no text; each chunk is {{\"id\", \"text\"}}")
        digest = hashlib.sha256(chunk["text"].encode()).hexdigest()[:12]
        vector_ids.append(f"{chunk.get('id', i)}:{digest}")
    json.dump({
        "document_id": str(request.get("document_id") or ""),
        "index": INDEX,
        "indexed_count": len(vector_ids),
        "vector_ids": vector_ids,
    }, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
