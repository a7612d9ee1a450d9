#!/usr/bin/env bash
# Usage: tests/clients/python_test.sh PYTHON RUNLOOM_BINARY SOURCE_DIR OUT_DIR
# The Python client's test (clients/python/tests/test_client.py, run by
# PYTHON) against a real `runloom serve`, on the package as `pip install`
# puts it in place: a copy of clients/python is installed offline
# (--no-build-isolation --no-index: the installer's own setuptools and wheel
# build it) into OUT_DIR/site, and the test imports it from there. The
# installer is PYTHON if it has pip, setuptools and wheel, else Debian's
# /usr/bin/python3 if that has them (python3-pip python3-setuptools
# python3-wheel; the package is pure Python, so either's install serves
# PYTHON). With neither, the test imports the source tree, and says so.
set -euo pipefail
python="$1" binary="$2" src="$3" out="$4"
rm -rf "$out"
mkdir -p "$out"
can_install() {
  [[ -x "$(command -v "$1")" ]] && "$1" -c 'import setuptools, wheel' 2>/dev/null && "$1" -m pip --version >/dev/null 2>&1
}
installer=""
for p in "$python" /usr/bin/python3; do
  if can_install "$p"; then
    installer="$p"
    break
  fi
done
if [[ -n "$installer" ]]; then
  cp -r "$src/clients/python" "$out/pkg"
  rm -rf "$out/pkg/build" "$out/pkg/src/"*.egg-info
  "$installer" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-build-isolation \
    --no-index --no-deps --target "$out/site" "$out/pkg"
  export PYTHONPATH="$out/site"
  echo "clients_python: testing runloom_client as $installer -m pip installed it ($out/site)"
else
  export PYTHONPATH="$src/clients/python/src"
  echo "clients_python: NOTE: neither $python nor /usr/bin/python3 has pip, setuptools and wheel (Debian:" \
       "apt-get install python3-pip python3-setuptools python3-wheel); testing the source tree, not an installed package"
fi
exec "$python" -X dev "$src/clients/python/tests/test_client.py" "$binary" "$out/work"
