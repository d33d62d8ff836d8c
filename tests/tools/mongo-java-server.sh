#!/usr/bin/env bash
# mongo-java-server 1.47.0 (de.bwaldvogel) with its in-memory backend: the Mongo twin's ATOMIC
# MongoDB-wire test server (FerretDB 1.24's single-document updates are not atomic under
# concurrency; this backend serialises the writes of each collection). Starts/stops it on a
# 127.0.0.1 port. Needs a JDK (javac) and Maven: deploy/deps.sh --test installs them.
#   mongo-java-server.sh build            -> fetches the jars, compiles the server; prints its dir
#   mongo-java-server.sh start DIR PORT   -> starts it, waits until it listens, writes DIR/pid
#   mongo-java-server.sh start DIR PORT --stock -> the same without the shim's copies (replies
#                                            may show the live document): only for the sanity
#                                            run of tests/tools/mjs_inc.c (tests/tools/README.md)
#   mongo-java-server.sh stop DIR         -> stops it
# The jars come through Maven's own client (mongo-java-server/pom.xml is only a fetch list);
# BoarddMongoServer.java (the server, the `hello` command 1.47.0 lacks, and documents handed out
# as copies made inside the collection's lock, DESIGN §16) is compiled with
# javac directly. Everything is cached under ~/.cache/boardd-mongo-java-server; the classes
# are rebuilt when the Java source changes.
set -euo pipefail
VERSION=1.47.0
here=$(cd "$(dirname "$0")" && pwd)
CACHE=${BOARDD_MJS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/boardd-mongo-java-server}/$VERSION
SRC="$here/mongo-java-server/BoarddMongoServer.java"
. "$here/daemon.sh"

build() {
  command -v javac >/dev/null || { echo "mongo-java-server.sh: no javac (deploy/deps.sh --test)" >&2; exit 1; }
  if [ ! -f "$CACHE/lib/mongo-java-server-memory-backend-$VERSION.jar" ]; then
    command -v mvn >/dev/null || { echo "mongo-java-server.sh: no mvn (deploy/deps.sh --test)" >&2; exit 1; }
    mkdir -p "$CACHE"
    rm -rf "$CACHE/lib.tmp"
    mvn -q -B -Dstyle.color=never -f "$here/mongo-java-server/pom.xml" dependency:copy-dependencies \
      -DoutputDirectory="$CACHE/lib.tmp" >&2
    rm -rf "$CACHE/lib"
    mv "$CACHE/lib.tmp" "$CACHE/lib"
  fi
  local want
  want=$(sha256sum "$SRC" | cut -d' ' -f1)
  if [ "$(cat "$CACHE/classes/.src" 2>/dev/null)" != "$want" ]; then
    rm -rf "$CACHE/classes.tmp"
    mkdir -p "$CACHE/classes.tmp"
    javac --release 17 -Xlint:all -Werror -cp "$CACHE/lib/*" -d "$CACHE/classes.tmp" "$SRC" >&2
    echo "$want" >"$CACHE/classes.tmp/.src"
    rm -rf "$CACHE/classes"
    mv "$CACHE/classes.tmp" "$CACHE/classes"
  fi
  echo "$CACHE"
}

start() {
  local dir=$1 port=$2 stock=${3:-} home
  [ -z "$stock" ] || [ "$stock" = --stock ] || { echo "mongo-java-server.sh: start DIR PORT [--stock]" >&2; exit 2; }
  home=$(build)
  mkdir -p "$dir"
  # A small heap: the suites' databases are small and dropped; the machine is shared.
  java -Xmx512m -XX:+UseSerialGC -cp "$home/classes:$home/lib/*" BoarddMongoServer \
    127.0.0.1 "$port" $stock >"$dir/mongo-java-server.log" 2>&1 &
  echo $! >"$dir/pid"
  daemon_wait mongo-java-server.sh "$dir" "$dir/mongo-java-server.log" '^listening on '
}

case "${1:-}" in
  build) build ;;
  start) start "$2" "$3" "${4:-}" ;;
  stop) daemon_stop "$2" ;;
  *) echo "usage: mongo-java-server.sh build | start DIR PORT [--stock] | stop DIR" >&2; exit 2 ;;
esac
