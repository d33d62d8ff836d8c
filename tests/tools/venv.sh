#!/usr/bin/env bash
# Makes (once) the Python virtualenv of the test-only tools pinned in tests/requirements.txt
# and prints its path. Re-installs when requirements.txt changes. The tools in it check us
# from outside (schemathesis, the MCP SDK, Playwright, standardwebhooks, kubernetes-validate);
# none is needed to build or run boardd.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
VENV=${BOARDD_TEST_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/boardd-venv}
req="$here/requirements.txt"
want=$(sha256sum "$req" | cut -d' ' -f1)
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV" >&2
fi
if [ "$(cat "$VENV/.boardd-req" 2>/dev/null)" != "$want" ]; then
  echo "venv: installing the pinned test tools into $VENV" >&2
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$req" >&2
  echo "$want" >"$VENV/.boardd-req"
fi
echo "$VENV"
