#!/usr/bin/env bash
# Builds boardd and runs every test: the Check suites (with the Mongo twin's suite against a
# FerretDB 1.24 test server built here), then again under ASan+UBSan, and the store and
# reaper concurrency suites under TSan; in each build the Mongo suite runs a second time on
# mongo-java-server (in memory, atomic: the race tests run there); the mongo suite includes
# parity (the FS and Mongo twins side by side over HTTP). Installs what it needs when missing.
#   ./tests/run.sh            everything
#   ./tests/run.sh --quick    the plain build's suites only
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
quick=0
[ "${1:-}" = "--quick" ] && quick=1

./deploy/deps.sh --test
[ -d /usr/local/go/bin ] && PATH="$PATH:/usr/local/go/bin"
# The pinned test-only Python tools (tests/requirements.txt); tests/tools/vpython runs them.
BOARDD_TEST_VENV=$(./tests/tools/venv.sh)
export BOARDD_TEST_VENV

# --- the MongoDB-wire test servers -------------------------------------------------------
# FerretDB 1.24 on SQLite: real files, restarts; its single-document updates are not atomic
# under concurrency, so the race tests skip there. mongo-java-server (in memory): atomic, so
# the race tests run there; nothing survives it. store/mongo/README.md says what each proves.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
fdb_dir=$(mktemp -d /tmp/boardd-ferretdb.XXXXXX)
mjs_dir=$(mktemp -d /tmp/boardd-mjs.XXXXXX)
cleanup() {
  "$root/tests/tools/ferretdb.sh" stop "$fdb_dir" || true
  "$root/tests/tools/mongo-java-server.sh" stop "$mjs_dir" || true
  rm -rf "$fdb_dir" "$mjs_dir"
}
trap cleanup EXIT
if command -v go >/dev/null; then
  port=$(free_port)
  echo "tests: building and starting FerretDB on 127.0.0.1:$port" >&2
  ./tests/tools/ferretdb.sh start "$fdb_dir" "$port"
  export BOARDD_TEST_MONGO_URI="mongodb://127.0.0.1:$port/boardd_test"
  export BOARDD_TEST_MONGO_IS_FERRETDB=1
elif [ "${CI:-}" = "true" ]; then
  echo "tests: no Go toolchain to build the FerretDB test server; the Mongo suite must run in CI" >&2
  exit 1
else
  echo "tests: no Go toolchain: the Mongo suite will be skipped (CI fails instead)" >&2
fi
mjs_uri=""
if command -v javac >/dev/null && command -v mvn >/dev/null; then
  port=$(free_port)
  echo "tests: starting mongo-java-server on 127.0.0.1:$port" >&2
  ./tests/tools/mongo-java-server.sh start "$mjs_dir" "$port"
  mjs_uri="mongodb://127.0.0.1:$port/boardd_test"
elif [ "${CI:-}" = "true" ]; then
  echo "tests: no JDK/Maven for mongo-java-server; the Mongo races must run in CI" >&2
  exit 1
else
  echo "tests: no JDK/Maven: the Mongo suite's races will not run (CI fails instead)" >&2
fi

export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/tools/tsan.supp"

status=0
run_suite() { # builddir, meson setup args..., -- meson test args...
  local dir=$1; shift
  local setup=() testargs=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do setup+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  testargs=("$@")
  [ -d "$dir" ] || meson setup "$dir" "${setup[@]}" >/dev/null
  if ! ninja -C "$dir" >"$dir/ninja.log" 2>&1; then
    cat "$dir/ninja.log" >&2
    echo "tests: the build in $dir failed" >&2
    exit 1
  fi
  echo "tests: meson test -C $dir ${testargs[*]}" >&2
  meson test -C "$dir" --print-errorlogs "${testargs[@]}" || status=1
}

# The Mongo suite again, on mongo-java-server (its own log: testlog-mjs.json).
mongo_on_mjs() { # builddir
  rm -f "$1/meson-logs/testlog-mjs.json"
  [ -n "$mjs_uri" ] || return 0
  echo "tests: meson test -C $1 --suite mongo (mongo-java-server)" >&2
  BOARDD_TEST_MONGO_URI=$mjs_uri env -u BOARDD_TEST_MONGO_IS_FERRETDB \
    meson test -C "$1" --print-errorlogs --suite mongo --no-suite lin-pending \
    --logbase testlog-mjs || status=1
}

# lin-pending: the linearizability checks (tests/lin) that fail until issue 31's fixes land.
run_suite build-test --buildtype=debugoptimized -- --no-suite lin-pending
mongo_on_mjs build-test
if [ $quick -eq 0 ]; then
  run_suite build-asan --buildtype=debug -Db_sanitize=address,undefined -Db_lundef=false -- \
    --no-suite lin-pending
  mongo_on_mjs build-asan
  run_suite build-tsan --buildtype=debug -Db_sanitize=thread -Db_lundef=false -- \
    --suite store --suite reaper --suite api
  mongo_on_mjs build-tsan
fi
# The fuzz smoke: each libFuzzer target 20 s (tests/fuzz/run.sh; 77 = no clang/libFuzzer).
if [ $quick -eq 0 ]; then
  ./tests/fuzz/run.sh all 20 || { [ $? -eq 77 ] || status=1; }
fi

# One plain closing line over every run above.
dirs=(build-test)
[ $quick -eq 0 ] && dirs+=(build-asan build-tsan)
python3 - "${dirs[@]}" <<'PY'
import json, os, sys
ok = bad = skip = 0
logs = [os.path.join(d, "meson-logs", n) for d in sys.argv[1:]
        for n in ("testlog.json", "testlog-mjs.json")]
for p in logs:
    if not os.path.exists(p):
        continue
    for line in open(p):
        r = json.loads(line).get("result")
        if r in ("OK", "EXPECTEDFAIL"):
            ok += 1
        elif r == "SKIP":
            skip += 1
        else:
            bad += 1
print(f"{ok} passed, {bad} failed, {skip} skipped")
PY
exit $status
