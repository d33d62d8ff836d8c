#!/usr/bin/env bash
# The meson tests of the linearizability check (tests/lin/meson.build; README.md):
#   run.sh sanity                         the checker rejects injected anomalies (go test)
#   run.sh fs|mongo BUILDDIR BOARDD [ARG...]
#       builds the checker into BUILDDIR/lin-MODE and runs it (-mode MODE, the short run:
#       fs 4 s with 5 kills, mongo 8 s with 2 kills of a replica: a restart on Mongo takes
#       longer); the history goes to BUILDDIR/lin-MODE.jsonl and, on a failure,
#       Porcupine's view to BUILDDIR/lin-MODE.html
# The Go toolchain from PATH or /usr/local/go/bin; none: skip (77), fail when CI=true. The
# module (porcupine) is pinned by go.mod and go.sum here.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
what=${1:-}
GO=$(command -v go || true)
[ -n "$GO" ] || GO=/usr/local/go/bin/go
if [ ! -x "$GO" ]; then
  echo "SKIP: no Go toolchain for the linearizability check"
  [ "${CI:-}" = true ] && exit 1
  exit 77
fi
export GOFLAGS=-mod=readonly
case "$what" in
  sanity)
    cd "$here"
    exec "$GO" test -count=1 . ;;
  fs|mongo)
    build=$2 boardd=$3
    shift 3
    (cd "$here" && "$GO" build -o "$build/lin-$what" .)
    rm -f "$build/lin-$what.html"
    short=(-duration 4s -kills 5)
    [ "$what" = mongo ] && short=(-duration 8s -kills 2)
    exec "$build/lin-$what" -mode "$what" -boardd "$boardd" "${short[@]}" \
      -out "$build/lin-$what.jsonl" -viz "$build/lin-$what.html" "$@" ;;
  *)
    echo "usage: run.sh sanity | run.sh fs|mongo BUILDDIR BOARDD [ARG...]" >&2
    exit 2 ;;
esac
