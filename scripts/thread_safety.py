#!/usr/bin/env python3
"""Clang's thread-safety analysis over every translation unit of a build.

Usage: scripts/thread_safety.py BUILD_DIR [JOBS] [--list]

--list prints the units it would check, and checks none.

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
its source files names an annotated lock type (runloom::Mutex and its locks,
CondVar) or a thread-safety annotation (LOCK_WORDS), or includes a header of
src/testing/ that does (test-only headers, with inline code no library unit
may compile) which no unit checked before it compiled: once is enough for a
header's inline code. The analysis warns only in a function that touches
a guarded member, calls an annotated function or takes an annotated lock,
and test code can do none of these without naming them; std::mutex and
absl::Notification carry no annotations. What such a unit uses from a
library header is analysed where the header's own library unit compiles it.
The other test units are left to GCC's -Wall -Wextra -Werror (both builds).
Measured: 41 of the 53 test units, 214 s of the step's 515 s of CPU (259 s
wall at 2 jobs), named no lock; 5 more (45 s of CPU, store_conformance_test's
19 s among them) named only std::mutex, absl::Notification or an SQL `LOCK`.

The public headers' own units (cmake/CheckHeaders.cmake: each header
compiled alone, for `make test-headers`) are not checked again when the
build's dependency log (`ninja -t deps`) shows the header compiled in a
checked unit: its inline code is analysed there, and parsing each
header alone cost 73 s of CPU. Without the log (nothing built yet, or
another generator) they are checked.
"""
import concurrent.futures
import functools
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


# Any of these in a test unit's sources (or the src/testing/ headers they
# include) has it checked: the annotated lock types (runloom::Mutex,
# MutexLock, ReaderMutexLock, CondVar, absl's alike) and the annotations.
# std::mutex, std::lock_guard and absl::Notification carry none.
LOCK_WORDS = re.compile(r"Mutex|CondVar|GUARDED_BY|LOCKS_REQUIRED|LOCKS_EXCLUDED|LOCK_RETURNED|"
                        r"LOCKABLE|ACQUIRE|RELEASE|ASSERT_(EXCLUSIVE|SHARED)_LOCK|"
                        r"THREAD_SAFETY|THREAD_ANNOTATION")
UNITY_INCLUDE = re.compile(r'^#include "([^"]+)"', re.M)
TESTING_INCLUDE = re.compile(r'^#include "(testing/[^"]+\.h)"', re.M)


def unit_sources(entry):
    """A unit's source files: a unity unit's included files, or the unit."""
    path = os.path.join(entry["directory"], entry["file"])
    with open(path, encoding="utf-8") as f:
        text = f.read()
    sources = UNITY_INCLUDE.findall(text) if "/Unity/" in path else []
    return [os.path.join(os.path.dirname(path), s) for s in sources] or [path]


@functools.lru_cache(maxsize=None)
def file_names_a_lock(path):
    """Whether a file names an annotated lock (read once per run)."""
    with open(path, encoding="utf-8") as f:
        return LOCK_WORDS.search(f.read()) is not None


def lock_reasons(entry, source_dir):
    """(whether the unit's own sources name an annotated lock, the
    src/testing/ headers they include that name one)."""
    own, headers = False, set()
    for src in unit_sources(entry):
        with open(src, encoding="utf-8") as f:
            code = f.read()
        own = own or LOCK_WORDS.search(code) is not None
        for header in TESTING_INCLUDE.findall(code):
            path = os.path.normpath(os.path.join(source_dir, "src", header))
            if file_names_a_lock(path):
                headers.add(path)
    return own, headers


def compiled_headers(build):
    """Every file the build's compiled objects depended on (`ninja -t deps`),
    by object: {output path relative to BUILD: set of absolute paths}. Empty
    when there is no dependency log."""
    ninja = shutil.which("ninja") or shutil.which("ninja-build")
    if ninja is None or not os.path.exists(os.path.join(build, ".ninja_deps")):
        return {}
    r = subprocess.run([ninja, "-C", build, "-t", "deps"], capture_output=True, text=True)
    if r.returncode != 0:
        return {}
    deps, current = {}, None
    for line in r.stdout.splitlines():
        if line and not line[0].isspace():
            current = deps.setdefault(line.split(":", 1)[0], set())
        elif line.strip() and current is not None:
            current.add(os.path.normpath(line.strip()))
    return deps


def output_of(entry):
    args = entry.get("arguments") or shlex.split(entry["command"])
    return args[args.index("-o") + 1] if "-o" in args else None


HEADER_UNIT = re.compile(r"/checkheaders/[^/]+\.cc$")
HEADER_INCLUDE = re.compile(r'^#include "(runloom/[^"]+\.h)"', re.M)


def header_of(entry, source_dir):
    """The public header a checkheaders unit compiles alone, as a path."""
    with open(os.path.join(entry["directory"], entry["file"]), encoding="utf-8") as f:
        m = HEADER_INCLUDE.search(f.read())
    return os.path.normpath(os.path.join(source_dir, "include", m.group(1))) if m else None


def source_dir_of(build):
    """The source tree BUILD was configured from (its CMakeCache.txt), else
    the one this script is in."""
    try:
        with open(os.path.join(build, "CMakeCache.txt"), encoding="utf-8") as f:
            for line in f:
                if line.startswith("CMAKE_HOME_DIRECTORY:INTERNAL="):
                    return os.path.normpath(line.split("=", 1)[1].strip())
    except OSError:
        pass
    return os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def is_test_unit(entry):
    return re.search(r"_test\.dir/", entry["file"]) is not None


def select_units(build, entries):
    """The units to check, the test units left out, and how many public
    headers' own units are left out (compiled in a checked unit)."""
    source_dir = source_dir_of(build)
    checked, skipped, headers, pending = [], [], [], []
    for e in entries:
        if HEADER_UNIT.search(e["file"]):
            headers.append(e)
        elif not is_test_unit(e):
            checked.append(e)
        else:
            own, lock_headers = lock_reasons(e, source_dir)
            if own:
                checked.append(e)
            elif lock_headers:
                pending.append((e, lock_headers))
            else:
                skipped.append(e)
    # What the checked units compiled (by the dependency log; without it,
    # nothing is known and every unit below is checked).
    deps = compiled_headers(build)
    seen = set()
    for e in checked:
        seen |= deps.get(output_of(e), set())
    # A test unit that names no lock but includes a test-only header that
    # does is checked while the header is in no checked unit: once is enough
    # for the header's inline code.
    for e, lock_headers in pending:
        if lock_headers <= seen:
            skipped.append(e)
        else:
            checked.append(e)
            seen |= deps.get(output_of(e), set()) or lock_headers
    # A public header's own unit likewise, when a checked unit compiled it.
    headers_seen = 0
    for e in headers:
        if header_of(e, source_dir) in seen:
            headers_seen += 1
        else:
            checked.append(e)
    return checked, skipped, headers_seen


def main():
    args = [a for a in sys.argv[1:] if a != "--list"]
    list_only = len(args) < len(sys.argv) - 1
    if not args:
        sys.exit(__doc__)
    build = args[0]
    jobs = int(args[1]) if len(args) > 1 else os.cpu_count() or 1
    with open(os.path.join(build, "compile_commands.json")) as f:
        entries = json.load(f)
    checked, skipped, headers_seen = select_units(build, entries)
    if list_only:
        for e in checked:
            print(os.path.relpath(e["file"]))
        print(f"{len(checked)} units to check; not checked: {len(skipped)} test units, "
              f"{headers_seen} public headers' own units")
        return 0
    clang = shutil.which("clang++") or shutil.which("clang++-14")
    if clang is None:
        sys.exit("thread_safety.py: clang++ not found (Debian: apt-get install clang)")
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
          f"({secs:.0f} s); not checked: {len(skipped)} test units that name no annotated lock, "
          f"{headers_seen} public headers' own units (compiled in a checked unit)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
