#!/bin/bash
# Scale figures of the FS store (bench/scale.c) with a release build, on a quiet machine.
#   bench/scale.sh                 # 10k, 30k, 100k cards, 10 000 expired claims
#   bench/scale.sh -s 10000,30000  # any scale option passes through (see scale -h)
# Environment: BUILD (build-bench), BENCH_TMP (parent of the temp dirs, default /tmp: a real
# disk), QUIET_LOAD (1.5), QUIET_WAIT seconds (300).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
BUILD=${BUILD:-$top/build-bench}

if [ ! -f "$BUILD/build.ninja" ]; then
	meson setup "$BUILD" "$top" --buildtype=release >/dev/null
fi
ninja -C "$BUILD" server/boardd bench/scale >/dev/null

source "$here/quiet.sh"
quiet_wait "${QUIET_LOAD:-1.5}" "${QUIET_WAIT:-300}"
echo "host: $(nproc) cores, $(uname -r); temp dirs on" \
	"$(df -T "${BENCH_TMP:-/tmp}" | awk 'NR==2{print $2}'); load $(cut -d' ' -f1-3 /proc/loadavg)"
"$BUILD/bench/scale" -b "$BUILD/server/boardd" -D "${BENCH_TMP:-/tmp}" "$@"
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
