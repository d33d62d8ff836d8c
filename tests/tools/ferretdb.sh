#!/usr/bin/env bash
# Builds FerretDB 1.24.2 (the MongoDB-wire test server) with the machine's Go toolchain and
# starts/stops it on 127.0.0.1 with its SQLite handler.
#   ferretdb.sh build            -> prints the binary path (builds once, cached)
#   ferretdb.sh start DIR PORT   -> starts it, waits for "Listening on TCP", writes DIR/pid
#   ferretdb.sh stop DIR         -> stops it
# A plain `go install` of v1.24.2 panics at start (its embedded build/version/version.txt is
# missing from the published module). So: a wrapper module that requires FerretDB, vendored,
# with version.txt written into the vendored copy, then built with -mod=vendor.
set -euo pipefail
VERSION=v1.24.2
CACHE=${BOARDD_FERRETDB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/boardd-ferretdb}
. "$(cd "$(dirname "$0")" && pwd)/daemon.sh"
BIN="$CACHE/ferretdb-$VERSION"

build() {
  if [ -x "$BIN" ]; then echo "$BIN"; return 0; fi
  command -v go >/dev/null || { echo "ferretdb.sh: no Go toolchain on PATH" >&2; exit 1; }
  mkdir -p "$CACHE/src"
  (
    cd "$CACHE/src"
    [ -f go.mod ] || go mod init boardd.local/ferretdb-wrapper >/dev/null 2>&1
    printf '//go:build tools\n\npackage tools\n\nimport _ "github.com/FerretDB/FerretDB/cmd/ferretdb"\n' >tools.go
    go get "github.com/FerretDB/FerretDB/cmd/ferretdb@$VERSION" >&2
    go mod tidy >&2
    go mod vendor >&2
    echo "$VERSION" >vendor/github.com/FerretDB/FerretDB/build/version/version.txt
    go build -mod=vendor -o "$BIN.tmp" github.com/FerretDB/FerretDB/cmd/ferretdb >&2
  )
  mv "$BIN.tmp" "$BIN"
  echo "$BIN"
}

start() {
  local dir=$1 port=$2 bin
  bin=$(build)
  mkdir -p "$dir"
  "$bin" --handler=sqlite --sqlite-url="file:$dir/" --state-dir="$dir" \
    --listen-addr="127.0.0.1:$port" --debug-addr=- --telemetry=disable \
    >"$dir/ferretdb.log" 2>&1 &
  echo $! >"$dir/pid"
  daemon_wait ferretdb.sh "$dir" "$dir/ferretdb.log" 'Listening on TCP'
}

case "${1:-}" in
  build) build ;;
  start) start "$2" "$3" ;;
  stop) daemon_stop "$2" ;;
  *) echo "usage: ferretdb.sh build | start DIR PORT | stop DIR" >&2; exit 2 ;;
esac
