#!/usr/bin/env bash
# Issue 26, acceptance 1: runloom installed into a temporary prefix
# (`cmake --install BUILD --prefix P --component dev`), the out-of-tree
# example examples/embed/ configured against it with
# find_package(runloom COMPONENTS engine) and built, its link line and
# binary checked for libpq, hiredis, libcurl and Boost, then run: killed
# mid-step (SIGKILL) and resumed by a second process, through its approval
# gate to `completed`. Also: every component loads, an unknown one is
# refused, and the pkg-config file links the same program.
#
#   bash tests/install/install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/runloom-install.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "install_test: $*" >&2; exit 1; }

prefix=$work/prefix
echo "== cmake --install $build --prefix $prefix --component dev"
cmake --install "$build" --prefix "$prefix" --component dev > "$work/install.log"
for f in include/runloom/engine.h include/runloom/step.h include/runloom/events.h \
         include/runloom/config.h include/runloom/http_server.h include/runloom/version.h \
         lib/cmake/runloom/runloomConfig.cmake lib/cmake/runloom/runloomConfigVersion.cmake \
         lib/cmake/runloom/runloom-engine-targets.cmake lib/librunloom_engine.a lib/librunloom_store_sqlite.a \
         lib/pkgconfig/runloom.pc; do
  [ -e "$prefix/$f" ] || fail "missing from the install: $f"
done
if find "$prefix/include" -name '*.h' -print0 | xargs -0 grep -lE '#include "(core|engine|store|llm|steps|api|cli)/' ; then
  fail "an installed header includes a private src/ header (above)"
fi

echo "== every component loads; an unknown component is refused"
mkdir -p "$work/all"
cat > "$work/all/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(all_components LANGUAGES CXX)
find_package(runloom 0.1 CONFIG REQUIRED COMPONENTS engine redis postgres providers http)
foreach(t engine_sqlite backends providers api redis_transport)
  if(NOT TARGET runloom::${t})
    message(FATAL_ERROR "no target runloom::${t}")
  endif()
endforeach()
find_package(runloom CONFIG QUIET COMPONENTS engine)  # a second find is harmless
CMAKE
cmake -S "$work/all" -B "$work/all/b" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" > "$work/all.log" 2>&1 ||
  { cat "$work/all.log"; fail "find_package with every component failed"; }
mkdir -p "$work/bad"
cat > "$work/bad/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(bad LANGUAGES CXX)
find_package(runloom CONFIG REQUIRED COMPONENTS kafka)
CMAKE
if cmake -S "$work/bad" -B "$work/bad/b" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" > "$work/bad.log" 2>&1; then
  fail "find_package(runloom COMPONENTS kafka) was accepted"
fi
grep -q "runloom has no component 'kafka'" "$work/bad.log" || { cat "$work/bad.log"; fail "no clear message for an unknown component"; }

echo "== examples/embed against the installed package (COMPONENTS engine)"
cmake -S "$src/examples/embed" -B "$work/embed" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" > "$work/embed-configure.log" 2>&1 ||
  { cat "$work/embed-configure.log"; fail "configuring examples/embed failed"; }
cmake --build "$work/embed" > "$work/embed-build.log" 2>&1 ||
  { tail -50 "$work/embed-build.log"; fail "building examples/embed failed"; }
link=$(ninja -C "$work/embed" -t commands runloom-embed | tail -n 1)
echo "link line: $link" | cut -c1-400
if grep -qiE 'libpq|hiredis|curl|boost' <<<"$link"; then
  fail "the embedded engine's link line names libpq, hiredis, libcurl or Boost: $link"
fi
if ldd "$work/embed/runloom-embed" | grep -iE 'libpq|hiredis|curl|boost'; then
  fail "runloom-embed loads libpq, hiredis, libcurl or Boost (above)"
fi

echo "== the example, killed mid-step, resumed by a second process"
db=$work/embed.db
RUNLOOM_EMBED_STEP_DELAY_MS=600000 "$work/embed/runloom-embed" "$db" "$src/examples/embed/pipeline.yaml" \
  > "$work/first.out" 2> "$work/first.err" &
first=$!
pids+=("$first")
for _ in $(seq 1 300); do
  grep -q "word_count: started" "$work/first.err" && break
  kill -0 "$first" 2>/dev/null || { cat "$work/first.err"; fail "the first process ended early"; }
  sleep 0.1
done
grep -q "word_count: started" "$work/first.err" || fail "word_count never started"
kill -9 "$first"
wait "$first" 2>/dev/null || true
run_id=$(sed -n 's/^run //p' "$work/first.out")
[ -n "$run_id" ] || fail "the first process printed no run id"
grep -q "^status" "$work/first.out" && fail "the first process finished before the kill"
timeout 120 "$work/embed/runloom-embed" "$db" "$src/examples/embed/pipeline.yaml" "$run_id" \
  > "$work/second.out" 2> "$work/second.err" || { cat "$work/second.out" "$work/second.err"; fail "the resume failed"; }
cat "$work/second.out"
grep -q "word_count: started" "$work/second.err" || fail "the resumed run did not run word_count again"
grep -q '^gate review: {"summary":.*"words":6}' "$work/second.out" || fail "no approval gate with 6 words"
grep -qx "status completed" "$work/second.out" || fail "the resumed run did not complete"

echo "== pkg-config --static runloom links the same program"
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
[ "$(pkg-config --modversion runloom)" = "$(sed -n 's/^#define RUNLOOM_VERSION "\(.*\)"/\1/p' "$prefix/include/runloom/version.h")" ] ||
  fail "pkg-config's version differs from runloom/version.h"
# shellcheck disable=SC2046
g++ -std=c++20 -O1 -o "$work/embed-pc" "$src/examples/embed/main.cc" $(pkg-config --cflags --libs --static runloom) \
  > "$work/pc-build.log" 2>&1 || { tail -40 "$work/pc-build.log"; fail "linking with pkg-config failed"; }
if ldd "$work/embed-pc" | grep -iE 'libpq|hiredis|curl|boost'; then
  fail "the pkg-config build loads libpq, hiredis, libcurl or Boost (above)"
fi
timeout 120 "$work/embed-pc" "$work/pc.db" "$src/examples/embed/pipeline.yaml" > "$work/pc.out" 2>&1 ||
  { cat "$work/pc.out"; fail "the pkg-config build's run failed"; }
grep -qx "status completed" "$work/pc.out" || { cat "$work/pc.out"; fail "the pkg-config build's run did not complete"; }
echo "install_test: ok"
