#!/usr/bin/env python3
"""chunk: splits the parsed text into chunks of at most max_chars (stage: chunking).

stdin:  {"document_id": "doc-1", "format": "pdf", "fail_chunk": false,
         "max_chars": 240, "parsed": {"pdf": {...parse output...}, "docx": null, ...}}
        (the parsers that were skipped give null, {} or nothing)
stdout: {"document_id", "source_format", "chunk_count", "chunks": [{"id", "text", "chars"}]}

Test switch: fail_chunk=true makes it exit 1 (error class `error`, not retried).
"""
import json
import re
import sys

import stepio


def fail(message):
    print(f"chunk: {message}", file=sys.stderr)
    return 1


def as_bool(value):
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


def split(text, max_chars):
    sentences = [s for s in re.split(r"(?<=[.!?])\s+|\n+", text) if s.strip()]
    chunks, current = [], ""
    for sentence in sentences:
        while len(sentence) > max_chars:  # a sentence longer than a chunk
            if current:
                chunks.append(current)
                current = ""
            chunks.append(sentence[:max_chars])
            sentence = sentence[max_chars:]
        candidate = f"{current} {sentence}".strip()
        if len(candidate) <= max_chars:
            current = candidate
        else:
            chunks.append(current)
            current = sentence
    if current:
        chunks.append(current)
    return chunks


def main():
    request, err = stepio.read_request("chunk")
    if err is not None:
        return err
    if as_bool(request.get("fail_chunk")):
        return fail("failing on purpose because input fail_chunk=true (a test switch); "
                    "run with fail_chunk=false to chunk the document")
    parsed = request.get("parsed") or {}
    if not isinstance(parsed, dict):
        return fail("'parsed' must be an object of parser outputs keyed by format")
    outputs = {f: o for f, o in parsed.items() if isinstance(o, dict) and o.get("text")}
    fmt = request.get("format")
    if fmt in outputs:
        source = outputs[fmt]
    elif len(outputs) == 1:
        fmt, source = next(iter(outputs.items()))
    else:
        return fail(f"expected the output of exactly one parser, got {sorted(outputs) or 'none'}")
    try:
        max_chars = int(request.get("max_chars") or 240)
    except (TypeError, ValueError):
        return fail(f"max_chars must be an integer, got {request.get('max_chars')!r}")
    if max_chars < 16:
        return fail(f"max_chars {max_chars} is too small; use 16 or more")

    document_id = str(request.get("document_id") or source.get("document_id") or "")
    texts = split(source["text"], max_chars)
    json.dump({
        "document_id": document_id,
        "source_format": fmt,
        "chunk_count": len(texts),
        "chunks": [{"id": f"{document_id}#{i}", "text": t, "chars": len(t)}
                   for i, t in enumerate(texts)],
    }, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
