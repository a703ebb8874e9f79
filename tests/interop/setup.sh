#!/usr/bin/env bash
# Installs the interop peers, idempotently (a second run only checks):
#   tests/interop/.venv         Python venv with `websockets` (requirements.txt)
#   tests/interop/node_modules  Node `ws` and `playwright-core` (package-lock.json)
# Both are gitignored. The browser test also needs Debian's chromium (/usr/bin/chromium),
# which .ci/run installs with apt; this script does not touch the system.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

venv="$here/.venv"
stamp_py="$venv/.rapidws-requirements"
if [[ -x "$venv/bin/python" ]] && cmp -s requirements.txt "$stamp_py"; then
    echo "interop/setup.sh: Python peers up to date ($("$venv/bin/python" -c 'import websockets; print("websockets", websockets.__version__)'))"
else
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --disable-pip-version-check --no-input -q -r requirements.txt
    cp requirements.txt "$stamp_py"
    echo "interop/setup.sh: installed $("$venv/bin/python" -c 'import websockets; print("websockets", websockets.__version__)') into $venv"
fi

stamp_js="$here/node_modules/.rapidws-package-lock.json"
if [[ -d node_modules ]] && cmp -s package-lock.json "$stamp_js"; then
    echo "interop/setup.sh: Node peers up to date"
else
    npm ci --no-audit --no-fund --loglevel=error
    cp package-lock.json "$stamp_js"
    echo "interop/setup.sh: installed Node peers into $here/node_modules"
fi
