#!/usr/bin/env bash
# Builds boardd and boardctl (build/cli/boardctl) and runs boardd on the FS store in ./data
# (127.0.0.1:8080 unless told otherwise).
# Extra arguments go to boardd, e.g. ./deploy/run.sh --listen 127.0.0.1:9090
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/deps.sh
[ -d build ] || meson setup build --buildtype=release >/dev/null
ninja -C build server/boardd cli/boardctl >/dev/null
exec ./build/server/boardd --store fs:./data "$@"
