#!/usr/bin/env bash
# Installs the Debian 12 (bookworm) packages runloom needs to build, run and
# test, and only those that are missing. Safe to run again and again: when
# everything is present it changes nothing and runs no `apt-get update`.
#
# Usage: scripts/bootstrap.sh [--test] [--bench] [--check]
#   --test    also install what only the tests need (GoogleTest, nodejs, npm, pip,
#             clang and its libFuzzer/sanitizer runtimes, PostgreSQL, Redis,
#             chromium)
#   --bench   also install what the benchmarks need (wrk, nodejs, npm, curl,
#             redis-server, postgresql-15; bench/http/run.sh, bench/compare/)
#   --check   install nothing; list what is missing and exit 1 if anything is
#
# Non-interactive: no prompts, works with no stdin. Runs apt-get directly as
# root, through `sudo` otherwise (`sudo -n` when there is no terminal, so it
# fails instead of waiting for a password nobody can type).
set -euo pipefail

readonly BUILD_PACKAGES=(
  build-essential cmake ninja-build pkg-config g++ make  # ninja: the Makefile's generator (Makefile, GENERATOR)
  libabsl-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libspdlog-dev prometheus-cpp-dev
  libssl-dev libsqlite3-dev sqlite3
  libpq-dev libhiredis-dev  # the PostgreSQL store, the Redis transport and stage events
  libboost-dev  # Boost.Beast/Asio (header-only): the HTTP server
  libcurl4-openssl-dev  # outbound HTTP: model providers and the http step (src/net)
  libvalijson-dev  # JSON Schema checks of model replies (header-only)
  python3  # examples/ingest/*.py and other exec steps
  tzdata  # /usr/share/zoneinfo: schedules' time zones (src/schedule, absl::LoadTimeZone)
  file dpkg-dev  # `make package`: cpack's DEB generator runs file and dpkg-shlibdeps (Depends:)
)
# clang (clang-14): `make test-thread-safety` runs clang++ -fsyntax-only
# -Wthread-safety. The ASan and TSan builds use GCC, whose sanitizer runtimes
# (libasan8, libtsan2) come with g++ (libgcc-12-dev).
# libclang-rt-14-dev: clang's libFuzzer and ASan/UBSan runtimes, for
# `make test-fuzz`; clang-14 only recommends it (via libclang-common-14-dev),
# and --no-install-recommends below would skip it.
# postgresql-15, redis-server: the servers the PostgreSQL and Redis tests
# start on loopback (scripts/test-servers.sh).
# chromium: the web UI's browser tests (tests/browser, driven by playwright-core).
# spin: the model check of the run protocol (tests/model/check_model.py).
# faketime: libfaketime, which skews one worker's wall clock in the kill
# campaign (tests/chaos/kill_campaign_test.cc).
# libgtest-dev, libgmock-dev: GoogleTest, which every test binary links.
# adduser: the Debian package's postinst adds the runloom user, and dpkg -i
# (tests/package/deb_test.sh) refuses the package without it.
# python3-pip, python3-setuptools, python3-wheel: clients_python installs the
# Python client offline (`pip install --no-build-isolation`,
# tests/clients/python_test.sh).
readonly TEST_PACKAGES=(libgtest-dev libgmock-dev nodejs npm clang libclang-rt-14-dev postgresql-15 redis-server spin
                        faketime adduser
                        chromium
                        python3-pip python3-setuptools python3-wheel)
# wrk: the load generator of `bench/http/run.sh post`; nodejs runs
# bench/http/sse_fanout.mjs; curl starts the server's workflows.
# npm, redis-server, postgresql-15: bench/compare/ (BullMQ on its own Redis,
# DBOS on its own PostgreSQL, their npm packages pinned).
readonly BENCH_PACKAGES=(wrk nodejs npm curl redis-server postgresql-15)

log() { printf 'bootstrap: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

want_test=0
want_bench=0
check_only=0
for arg in "$@"; do
  case "$arg" in
    --test) want_test=1 ;;
    --bench) want_bench=1 ;;
    --check) check_only=1 ;;
    -h|--help) sed -n '2,16s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) die "unknown argument '$arg'; use --test, --bench, --check or --help" ;;
  esac
done

command -v dpkg-query >/dev/null 2>&1 ||
  die "dpkg-query not found: this script supports Debian 12 (bookworm) only"

packages=("${BUILD_PACKAGES[@]}")
if [[ $want_test == 1 ]]; then
  packages+=("${TEST_PACKAGES[@]}")
fi
if [[ $want_bench == 1 ]]; then
  packages+=("${BENCH_PACKAGES[@]}")
fi

# Installed packages, and the virtual names they provide (e.g. NodeSource's
# nodejs provides and conflicts with npm: installing Debian's npm there would
# remove it). Read once into variables; no pipes into `grep -q` under pipefail.
read_state() {
  installed="$(dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' 2>/dev/null |
    awk '$1 == "ii" { print $2 }')" || true
  provided="$(dpkg-query -W -f='${db:Status-Abbrev}|${Provides}\n' 2>/dev/null |
    awk -F'|' '$1 ~ /^ii/ && $2 != "" { n = split($2, p, ",")
      for (i = 1; i <= n; i++) { sub(/^ +/, "", p[i]); sub(/ .*/, "", p[i]); print p[i] } }')" || true
}
read_state

is_present() {
  local name="${1%%:*}"  # ignore an architecture qualifier
  grep -qxF -- "$name" <<<"$installed" || grep -qxF -- "$name" <<<"$provided"
}

missing=()
for pkg in "${packages[@]}"; do
  if ! is_present "$pkg"; then
    missing+=("$pkg")
  fi
done

if [[ ${#missing[@]} == 0 ]]; then
  log "all ${#packages[@]} packages present; nothing to install"
  exit 0
fi

log "missing: ${missing[*]}"
if [[ $check_only == 1 ]]; then
  exit 1
fi

as_root=()
if [[ $(id -u) != 0 ]]; then
  command -v sudo >/dev/null 2>&1 ||
    die "not root and sudo is not installed; run this script as root"
  if [[ -t 0 ]]; then
    as_root=(sudo)
  else
    as_root=(sudo -n)
  fi
fi

apt_get() {
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive NEEDRESTART_MODE=a \
    apt-get -y -q -o DPkg::Lock::Timeout=600 \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "$@" </dev/null
}

log "apt-get update"
apt_get update
log "apt-get install ${missing[*]}"
apt_get install --no-install-recommends "${missing[@]}"

# Confirm, so a package that apt-get skipped is reported here and not as a
# confusing build error later.
read_state
still=()
for pkg in "${missing[@]}"; do
  is_present "$pkg" || still+=("$pkg")
done
if [[ ${#still[@]} != 0 ]]; then
  die "still missing after apt-get install: ${still[*]}"
fi
log "installed: ${missing[*]}"
