#!/usr/bin/env python3
"""Clang's thread-safety analysis over every translation unit of a build.

Usage: scripts/thread_safety.py BUILD_DIR [JOBS]

Reads BUILD_DIR/compile_commands.json (written by the GCC Release build, so
no second configure or build is needed) and runs each command again as
`clang++ -fsyntax-only -Wthread-safety -Werror`, with RUNLOOM_TESTING defined
so the test-only code is checked too. Every warning clang raises is an error:
the thread-safety ones (ABSL_GUARDED_BY & co., STYLE.md §4) and clang's own
-Wall -Wextra. Prints the diagnostics of each failing translation unit and
exits 1 if any failed. Nothing is written to the build directory.

In a unity build (CMakeLists.txt) the database lists CMake's unity units,
and each unit is checked whole, as GCC compiles it: the analysis is per
function, so a unit finds what its files alone would. Checked file by file,
the library's units parsed Abseil, nlohmann-json and Boost once per file (the
engine's unit: 131 s file by file, 8.4 s whole; the step took 525 s in a
fresh-clone CI run, 224 s after). What that gave up: a library file leaning
on what an earlier file of its unit included is no longer caught here; it
would fail only a build with -DCMAKE_UNITY_BUILD=OFF (the default is on, for
embedders too), and the public headers are still compiled alone (`make
test-headers`).

A test binary's unit (a `<name>_test` target) is checked only when one of
its source files names a lock or a thread-safety annotation (LOCK_WORDS).
The analysis warns only in a function that touches a guarded member, calls
an annotated function or takes a lock, and test code can do none of these
without naming them; what such a unit uses from a header is analysed where
the header's own library unit compiles it. The other test units are left to
GCC's -Wall -Wextra -Werror (both builds). Measured: 41 of the 53 test units,
214 s of the step's 515 s of CPU (259 s wall at 2 jobs), named no lock.
"""
import concurrent.futures
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

EXTRA = ["-fsyntax-only", "-Wthread-safety", "-Werror", "-DRUNLOOM_TESTING=1"]
# GCC-only warning switches that a CMake file sets for one file or target
# (e.g. src/llm/CMakeLists.txt for json_schema.cc); clang does not know them.
GCC_ONLY = {"-Wno-maybe-uninitialized", "-Wno-tsan"}


def clang_command(entry, clang):
    args = entry.get("arguments") or shlex.split(entry["command"])
    out = [clang]
    skip = False
    for i, a in enumerate(args):
        if i == 0:
            continue
        if skip:
            skip = False
            continue
        if a in ("-o", "-MT", "-MF", "-MQ"):  # outputs, and Ninja's depfile
            skip = True
            continue
        # The test binaries' precompiled header (cmake/RunloomHelpers.cmake,
        # runloom_test_pch) is GCC's: clang 14 would load the .gch beside it
        # and refuse it. The units include what they use without it.
        if a == "-include" and i + 1 < len(args) and args[i + 1].endswith("/cmake_pch.hxx"):
            skip = True
            continue
        if a == "-Winvalid-pch":
            continue
        if a in ("-c", "-MD", "-MMD") or a in GCC_ONLY:
            continue
        out.append(a)
    return out + EXTRA


# Any of these in a test unit's sources has it checked (broader than the
# analysis needs: std::mutex and friends are not annotated, but cost little).
LOCK_WORDS = re.compile(r"Mutex|mutex|CondVar|Notification|GUARDED|LOCK|REQUIRES|ACQUIRE|RELEASE|"
                        r"THREAD_SAFETY|lock_guard|unique_lock|scoped_lock")
UNITY_INCLUDE = re.compile(r'^#include "([^"]+)"', re.M)


def names_a_lock(entry):
    """Whether a test unit's source files (a unity unit's included files) name a lock."""
    path = os.path.join(entry["directory"], entry["file"])
    with open(path, encoding="utf-8") as f:
        text = f.read()
    sources = UNITY_INCLUDE.findall(text) if "/Unity/" in path else []
    for src in sources or [path]:
        with open(os.path.join(os.path.dirname(path), src), encoding="utf-8") as f:
            if LOCK_WORDS.search(f.read()):
                return True
    return False


def is_test_unit(entry):
    return re.search(r"_test\.dir/", entry["file"]) is not None


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    build = sys.argv[1]
    jobs = int(sys.argv[2]) if len(sys.argv) > 2 else os.cpu_count() or 1
    clang = shutil.which("clang++") or shutil.which("clang++-14")
    if clang is None:
        sys.exit("thread_safety.py: clang++ not found (Debian: apt-get install clang)")
    with open(os.path.join(build, "compile_commands.json")) as f:
        entries = json.load(f)
    checked, skipped = [], []
    for e in entries:
        (skipped if is_test_unit(e) and not names_a_lock(e) else checked).append(e)
    entries = checked
    start = time.monotonic()

    def check(entry):
        cmd = clang_command(entry, clang)
        r = subprocess.run(cmd, cwd=entry["directory"], capture_output=True, text=True)
        return entry["file"], r.returncode, r.stderr

    failed = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for path, rc, err in pool.map(check, entries):
            if rc != 0:
                failed.append(path)
                sys.stderr.write(err)
    name = os.path.basename(clang)
    secs = time.monotonic() - start
    if failed:
        print(f"thread-safety: {len(failed)} of {len(entries)} translation units failed {name} "
              f"-Wthread-safety -Werror ({secs:.0f} s):")
        for p in failed:
            print(f"  {os.path.relpath(p)}")
        return 1
    print(f"thread-safety: {len(entries)} translation units pass {name} -Wthread-safety -Werror "
          f"({secs:.0f} s); {len(skipped)} test units that name no lock not checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
