#!/usr/bin/env bash
# The Debian package (issue 26): build it with cpack in BUILD_DIR, check what
# it holds, install it on this machine (dpkg -i), check the user, the state
# directory and the units (systemd-analyze verify, where it exists), run the
# demo and `serve` from the installed binary, then remove (dpkg -r: the
# configuration stays) and purge (dpkg -P: the configuration goes, a database
# never does). Three install/purge rounds: a database named *.db is kept, a
# database under another name (a backup) is kept, a directory without one is
# deleted.
#
#   bash tests/package/deb_test.sh BUILD_DIR SOURCE_DIR     (root; ctest -L package)
#
# Exit 0 passed, 1 failed, 77 skipped: not root, no dpkg/cpack, or runloom
# (the package, its user or its directories) already on this machine; the test
# installs and deletes those, so it refuses to touch ones it did not make.
# Whatever happens, it leaves no package, user or directory of its own behind.
set -euo pipefail

BUILD=${1:?usage: deb_test.sh BUILD_DIR SOURCE_DIR}
SRC=${2:?usage: deb_test.sh BUILD_DIR SOURCE_DIR}
BUILD=$(cd "$BUILD" && pwd)
SRC=$(cd "$SRC" && pwd)

STATE=/var/lib/runloom
CONF=/etc/runloom
UNITS=/lib/systemd/system

skip() { echo "deb_test: SKIPPED: $*"; exit 77; }
fail() { echo "deb_test: FAILED: $*" >&2; exit 1; }
step() { echo "== $*"; }

[ "$(id -u)" = 0 ] || skip "needs root (it installs the package with dpkg -i)"
for tool in dpkg dpkg-deb dpkg-query cpack python3 setpriv userdel groupdel; do
  command -v "$tool" >/dev/null || skip "needs $tool"
done
[ -x "$BUILD/runloom" ] || fail "no runloom binary in $BUILD: build the runloom target first"

# Refuse, rather than clobber, a runloom this test did not install.
pkg_status() { dpkg-query -W -f='${db:Status-Status}' runloom 2>/dev/null || true; }
case "$(pkg_status)" in
  "" | not-installed) ;;
  *) skip "the runloom package is on this machine ($(pkg_status)); this test would remove it. Run it where runloom is not installed, or dpkg -P runloom first" ;;
esac
for p in "$STATE" "$CONF"; do
  if [ -e "$p" ] || [ -L "$p" ]; then
    skip "$p exists; this test would delete it. Move it away first (a kept database?)"
  fi
done
if getent passwd runloom >/dev/null || getent group runloom >/dev/null; then
  skip "a user or group 'runloom' exists; this test would delete it (userdel runloom; groupdel runloom)"
fi

TMP=$(mktemp -d /tmp/runloom-deb-test.XXXXXX)
chmod 0755 "$TMP"
SERVE_PID=""
cleanup() {
  local rc=$?
  set +e
  if [ -n "$SERVE_PID" ]; then kill -KILL "$SERVE_PID" 2>/dev/null; wait "$SERVE_PID" 2>/dev/null; fi
  case "$(pkg_status)" in
    "" | not-installed) ;;
    *) echo "deb_test: cleaning up: dpkg -P runloom"; dpkg -P runloom >/dev/null 2>&1 ;;
  esac
  # Everything below was made by this test's package (the checks above
  # refused to start when any of it existed).
  rm -rf "$STATE" "$CONF"
  if getent passwd runloom >/dev/null; then userdel runloom; fi
  if getent group runloom >/dev/null; then groupdel runloom; fi
  rm -rf "$TMP"
  exit "$rc"
}
trap cleanup EXIT

VERSION=$(sed -n 's/^project(runloom VERSION \([0-9][0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")
[ -n "$VERSION" ] || fail "no project(runloom VERSION x.y.z) in $SRC/CMakeLists.txt"
ARCH=$(dpkg --print-architecture)
DEB="$BUILD/runloom_${VERSION}_${ARCH}.deb"

step "cpack in $BUILD"
rm -f "$DEB"
(cd "$BUILD" && cpack -G DEB) >"$TMP/cpack.log" 2>&1 || { cat "$TMP/cpack.log"; fail "cpack failed"; }
[ -f "$DEB" ] || { cat "$TMP/cpack.log"; fail "cpack made no $DEB"; }
echo "$(basename "$DEB"): $(stat -c %s "$DEB") bytes"

step "contents (dpkg-deb -c, -f)"
dpkg-deb -c "$DEB" | awk '{print $NF}' | sed 's|^\./|/|' >"$TMP/files"
for f in /usr/bin/runloom "$UNITS/runloom-serve.service" "$UNITS/runloom-worker@.service" \
         "$CONF/config.yaml" /usr/share/doc/runloom/copyright /usr/share/doc/runloom/README.md \
         /usr/share/doc/runloom/docs/operations.md /usr/share/doc/runloom/docs/openapi.yaml \
         /usr/share/runloom/examples/blog.yaml /usr/share/runloom/examples/ingest.yaml \
         /usr/share/runloom/examples/ingest/parse.py; do
  grep -qxF "$f" "$TMP/files" || fail "the package lacks $f"
done
# The runtime component only: no headers, static libraries or CMake package
# files (the dev component), and no secrets file.
if grep -E '^/usr/include/|\.a$|/cmake/|/runloom\.env$' "$TMP/files"; then
  fail "the package holds the files above (dev component or secrets)"
fi
[ "$(dpkg-deb -f "$DEB" Package)" = runloom ] || fail "Package is not runloom"
[ "$(dpkg-deb -f "$DEB" Version)" = "$VERSION" ] || fail "Version is not $VERSION"
depends=$(dpkg-deb -f "$DEB" Depends)
echo "Depends: $depends"
for d in adduser libc6 libsqlite3-0; do
  [[ ", $depends," == *", $d"[\ ,]* ]] || fail "Depends lacks $d (dpkg-shlibdeps?)"
done
dpkg-deb -e "$DEB" "$TMP/control"
[ "$(cat "$TMP/control/conffiles")" = "$CONF/config.yaml" ] || fail "conffiles is not $CONF/config.yaml"

step "dpkg -i"
dpkg -i "$DEB" >"$TMP/install.log" 2>&1 || { cat "$TMP/install.log"; fail "dpkg -i failed"; }
[ "$(pkg_status)" = installed ] || fail "after dpkg -i the package is '$(pkg_status)'"

step "the user, the state directory, the secrets file"
IFS=: read -r _ _ uid _ _ home shell < <(getent passwd runloom) || fail "no user runloom"
[ "$home" = "$STATE" ] || fail "runloom's home is $home, not $STATE"
[ "$shell" = /usr/sbin/nologin ] || fail "runloom's shell is $shell"
[ "$uid" -lt 1000 ] || fail "runloom is not a system user (uid $uid)"
[ "$(stat -c '%U:%G %a' "$STATE")" = "runloom:runloom 750" ] \
  || fail "$STATE is $(stat -c '%U:%G %a' "$STATE"), not runloom:runloom 750"
[ "$(stat -c '%U:%G %a' "$CONF/runloom.env")" = "root:runloom 640" ] \
  || fail "$CONF/runloom.env is $(stat -c '%U:%G %a' "$CONF/runloom.env"), not root:runloom 640"
[ -L /etc/systemd/system/multi-user.target.wants/runloom-serve.service ] \
  || fail "runloom-serve.service is not enabled"

# Where systemd runs, postinst has started runloom-serve (on 127.0.0.1:8080):
# it must be running; then it is stopped, so the rest of the test owns the
# database. (In a container without systemd nothing was started.)
if [ -d /run/systemd/system ]; then
  step "runloom-serve.service started by postinst"
  sleep 2
  if ! systemctl is-active --quiet runloom-serve.service; then
    systemctl status --no-pager runloom-serve.service || true
    fail "runloom-serve.service is not active after dpkg -i"
  fi
  systemctl stop runloom-serve.service
  echo "runloom-serve.service was active; stopped"
fi

step "systemd-analyze verify"
if command -v systemd-analyze >/dev/null; then
  # A template is verified through an instance of it.
  ln -s "$UNITS/runloom-worker@.service" "$TMP/runloom-worker@1.service"
  if ! systemd-analyze verify "$UNITS/runloom-serve.service" "$TMP/runloom-worker@1.service" \
       >"$TMP/verify.log" 2>&1; then
    cat "$TMP/verify.log"; fail "systemd-analyze verify refused the units"
  fi
  # verify exits 0 on some findings; any line naming our units is one.
  if grep -E 'runloom' "$TMP/verify.log"; then fail "systemd-analyze verify: the lines above"; fi
  echo "units verified"
else
  echo "systemd-analyze is not installed: unit verification skipped"
fi

step "the installed binary: --version, the demo"
# First line the version; then the commit and each backend's schema version.
version_text=$(/usr/bin/runloom --version)
[ "$(head -n 1 <<<"$version_text")" = "runloom $VERSION" ] \
  || fail "runloom --version says '$version_text', not 'runloom $VERSION' first"
grep -qE '^commit [0-9a-f]{12}(-dirty)?$|^commit unknown$' <<<"$version_text" \
  || fail "runloom --version names no commit: '$version_text'"
grep -qE '^schema: sqlite [0-9]+, postgresql [0-9]+$' <<<"$version_text" \
  || fail "runloom --version names no schema versions: '$version_text'"
# As root on a scratch database, with the shipped configuration file.
(cd "$TMP" && /usr/bin/runloom run /usr/share/runloom/examples/blog.yaml --db "$TMP/demo.db" \
   --config "$CONF/config.yaml" --auto-approve --json >"$TMP/demo.json" 2>"$TMP/demo.log") \
  || { cat "$TMP/demo.log"; fail "the demo failed"; }
status=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["status"])' "$TMP/demo.json")
[ "$status" = completed ] || fail "the demo's run is $status"
echo "demo: completed"
# As the service user: the database the purge must keep.
as_runloom() { setpriv --reuid=runloom --regid=runloom --init-groups -- "$@"; }
(cd "$STATE" && as_runloom /usr/bin/runloom run /usr/share/runloom/examples/blog.yaml \
   --db "$STATE/runloom.db" --auto-approve --json >"$TMP/demo2.json" 2>"$TMP/demo2.log") \
  || { cat "$TMP/demo2.log"; fail "the demo as user runloom failed"; }
status=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["status"])' "$TMP/demo2.json")
[ "$status" = completed ] || fail "the demo's run as user runloom is $status"
[ "$(stat -c %U "$STATE/runloom.db")" = runloom ] || fail "$STATE/runloom.db is not runloom's"
echo "demo as user runloom into $STATE/runloom.db: completed"

step "serve as the unit runs it: /healthz, then SIGTERM"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# exec: the signal goes to runloom itself, as systemd sends it.
(cd "$STATE" && export RUNLOOM_DB="$STATE/runloom.db" RUNLOOM_CONFIG="$CONF/config.yaml" &&
   exec setpriv --reuid=runloom --regid=runloom --init-groups -- \
     /usr/bin/runloom serve --listen "127.0.0.1:$port") \
  >"$TMP/serve.log" 2>&1 &
SERVE_PID=$!
healthy=""
for _ in $(seq 1 100); do
  if python3 -c 'import sys,urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1)' \
       "http://127.0.0.1:$port/healthz" 2>/dev/null; then
    healthy=yes; break
  fi
  kill -0 "$SERVE_PID" 2>/dev/null || break
  sleep 0.1
done
[ -n "$healthy" ] || { cat "$TMP/serve.log"; fail "serve did not answer /healthz"; }
kill -TERM "$SERVE_PID"
serve_rc=0
wait "$SERVE_PID" || serve_rc=$?
SERVE_PID=""
[ "$serve_rc" = 0 ] || { cat "$TMP/serve.log"; fail "serve exited $serve_rc after SIGTERM, not 0"; }
echo "serve answered /healthz on 127.0.0.1:$port and exited 0 on SIGTERM"

# The database as it is now, every file of it, to compare after the purge.
(cd "$STATE" && sha256sum runloom.db*) >"$TMP/db.sha256"

step "dpkg -r: the binary goes, the configuration stays"
dpkg -r runloom >"$TMP/remove.log" 2>&1 || { cat "$TMP/remove.log"; fail "dpkg -r failed"; }
[ "$(pkg_status)" = config-files ] || fail "after dpkg -r the package is '$(pkg_status)'"
[ ! -e /usr/bin/runloom ] || fail "/usr/bin/runloom is still there"
[ ! -e "$UNITS/runloom-serve.service" ] || fail "the serve unit is still there"
{ [ -f "$CONF/config.yaml" ] && [ -f "$CONF/runloom.env" ]; } || fail "dpkg -r removed $CONF's files"
[ -f "$STATE/runloom.db" ] || fail "dpkg -r removed the database"

step "dpkg -P with a database: /etc/runloom goes, the database stays byte for byte"
dpkg -P runloom >"$TMP/purge.log" 2>&1 || { cat "$TMP/purge.log"; fail "dpkg -P failed"; }
cat "$TMP/purge.log"
[ "$(pkg_status)" = not-installed ] || [ -z "$(pkg_status)" ] || fail "after dpkg -P the package is '$(pkg_status)'"
[ ! -e "$CONF" ] || fail "$CONF is still there after the purge"
(cd "$STATE" && sha256sum --quiet -c "$TMP/db.sha256") || fail "the database changed in the purge"
grep -q "runloom: kept $STATE" "$TMP/purge.log" || fail "the purge did not say it kept $STATE"
# Nothing of the units' left: links, masks, deb-systemd-helper's state.
if find /etc/systemd/system /var/lib/systemd \( -name '*runloom*' -o -lname '*runloom*' \) \
     2>/dev/null | grep .; then
  fail "the purge left the unit files and links above"
fi
echo "kept: $(cd "$STATE" && ls)"

step "again, the database renamed (a backup) and a worker instance enabled: still kept"
dpkg -i "$DEB" >"$TMP/install2.log" 2>&1 || { cat "$TMP/install2.log"; fail "dpkg -i (second) failed"; }
[ "$(stat -c '%U:%G %a' "$STATE")" = "runloom:runloom 750" ] || fail "reinstall changed $STATE"
mv "$STATE/runloom.db" "$STATE/before-upgrade.bak"
mkdir -p /etc/systemd/system/multi-user.target.wants
ln -s "$UNITS/runloom-worker@.service" /etc/systemd/system/multi-user.target.wants/runloom-worker@1.service
dpkg -P runloom >"$TMP/purge2.log" 2>&1 || { cat "$TMP/purge2.log"; fail "dpkg -P (second) failed"; }
grep -q "runloom: kept $STATE" "$TMP/purge2.log" || fail "the purge deleted a database named *.bak"
[ -f "$STATE/before-upgrade.bak" ] || fail "the backup is gone"
[ ! -L /etc/systemd/system/multi-user.target.wants/runloom-worker@1.service ] \
  || fail "the purge left the worker instance's link"

step "again, no database in $STATE: the purge deletes it"
rm -f "$STATE/before-upgrade.bak"
dpkg -i "$DEB" >"$TMP/install3.log" 2>&1 || { cat "$TMP/install3.log"; fail "dpkg -i (third) failed"; }
echo "not a database" >"$STATE/notes.txt"
dpkg -P runloom >"$TMP/purge3.log" 2>&1 || { cat "$TMP/purge3.log"; fail "dpkg -P (third) failed"; }
[ ! -e "$STATE" ] || fail "the purge kept $STATE, which held no database"
if grep -q "runloom: kept" "$TMP/purge3.log"; then fail "the purge said it kept a database"; fi

echo "deb_test: PASSED ($(basename "$DEB"))"
