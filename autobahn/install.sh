#!/usr/bin/env bash
# Installs the Autobahn testsuite's `wstest` (a Python 2.7 program) into autobahn/.venv.
#
#   bash autobahn/install.sh          # idempotent: a no-op when wstest already runs
#
# Uses pyenv's Python 2.7.18 (override with PY2=/path/to/python2.7). Python 2's own pip
# is too old to build a virtualenv, so a py2-compatible virtualenv is installed into
# autobahn/.pydeps and run from there. Everything lands under autobahn/ (gitignored).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv"
pydeps="$here/.pydeps"

if [[ -x "$venv/bin/wstest" ]] && "$venv/bin/wstest" --help >/dev/null 2>&1; then
    echo "autobahn/install.sh: wstest already installed at $venv/bin/wstest"
    exit 0
fi

find_py2() {
    if [[ -n "${PY2:-}" ]]; then echo "$PY2"; return; fi
    local prefix=""
    if command -v pyenv >/dev/null 2>&1; then
        prefix="$(PYENV_VERSION=2.7.18 pyenv prefix 2.7.18 2>/dev/null || true)"
    fi
    if [[ -z "$prefix" ]]; then prefix="${PYENV_ROOT:-$HOME/.pyenv}/versions/2.7.18"; fi
    echo "$prefix/bin/python"
}
py2="$(find_py2)"
if [[ ! -x "$py2" ]]; then
    echo "autobahn/install.sh: no Python 2.7 interpreter at $py2 (set PY2=...)" >&2
    exit 1
fi
echo "autobahn/install.sh: using $py2 ($("$py2" --version 2>&1))"

pip_flags=(--no-cache-dir --disable-pip-version-check --no-input)

if [[ ! -d "$pydeps/virtualenv" ]]; then
    rm -rf "$pydeps"
    "$py2" -m pip install "${pip_flags[@]}" --target "$pydeps" virtualenv==20.15.1
fi

rm -rf "$venv"
PYTHONPATH="$pydeps" "$py2" -m virtualenv --no-periodic-update "$venv"
"$venv/bin/pip" install "${pip_flags[@]}" -r "$here/requirements-py2.txt"

"$venv/bin/wstest" --help >/dev/null
echo "autobahn/install.sh: wstest ready at $venv/bin/wstest"
