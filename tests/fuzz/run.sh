#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan + coverage) in build-fuzz and runs
# one, or each, for SECONDS with its seed corpus (tests/fuzz/corpus/TARGET, read only: new
# inputs go to build-fuzz/fuzz-corpus/TARGET, crashes to build-fuzz/fuzz-crashes/TARGET).
#   tests/fuzz/run.sh api 600
#   tests/fuzz/run.sh journal 600
#   tests/fuzz/run.sh body 600
#   tests/fuzz/run.sh all 20        # each target 20 s: the smoke tests/run.sh runs
# Exit status 0 when no target found anything; a finding prints the saved input, which
# becomes a regression: copy it into tests/fuzz/regressions/TARGET/ (see README.md).
# Exits 77 without clang or libFuzzer.
set -euo pipefail
cd "$(dirname "$0")/../.."
target=${1:?usage: tests/fuzz/run.sh api|journal|body|all SECONDS}
secs=${2:-60}
dir=build-fuzz

if ! command -v clang >/dev/null; then
  echo "fuzz: clang is not installed" >&2
  exit 77
fi
if [ ! -d "$dir" ]; then
  CC=clang meson setup "$dir" --buildtype=debugoptimized -Db_sanitize=address,undefined \
    -Db_lundef=false -Dc_args=-fsanitize=fuzzer-no-link -Dmongo=disabled >/dev/null
fi
# Read the whole list first: `grep -q` on the pipe would end it early, and pipefail would
# take ninja's SIGPIPE for "no such target".
if ! ninja -C "$dir" -t targets all | grep -c "^tests/fuzz/fuzz_api:" >/dev/null; then
  echo "fuzz: clang cannot link libFuzzer here (-fsanitize=fuzzer)" >&2
  exit 77
fi
if ! ninja -C "$dir" tests/fuzz/fuzz_api tests/fuzz/fuzz_journal tests/fuzz/fuzz_body >"$dir/ninja-fuzz.log" 2>&1; then
  cat "$dir/ninja-fuzz.log" >&2
  echo "fuzz: the fuzz targets did not build" >&2
  exit 1
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

status=0
run_one() { # target max_len
  local t=$1 max_len=$2 work="$dir/fuzz-corpus/$1" crashes="$dir/fuzz-crashes/$1" dict=()
  mkdir -p "$work" "$crashes"
  [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
  echo "fuzz: $t for ${secs}s" >&2
  if ! "$dir/tests/fuzz/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=4096 \
      -max_len="$max_len" -print_final_stats=1 -artifact_prefix="$crashes/" "${dict[@]}" \
      "$work" "tests/fuzz/corpus/$t" 2>"$dir/fuzz-$t.log"; then
    status=1
    echo "fuzz: $t FOUND SOMETHING; the input is saved under $crashes/:" >&2
    grep -E "FUZZ FINDING|ERROR: |SUMMARY|Test unit written" "$dir/fuzz-$t.log" >&2 || true
    return
  fi
  echo "fuzz: $t: no finding;" \
    "$(grep -E '^stat::number_of_executed_units' "$dir/fuzz-$t.log" | awk '{print $2}') inputs," \
    "$(grep -E '^stat::average_exec_per_sec' "$dir/fuzz-$t.log" | awk '{print $2}')/s," \
    "corpus $(find "$work" -type f | wc -l) generated + $(find "tests/fuzz/corpus/$t" -type f | wc -l) seeds" >&2
}

case $target in
  api) run_one api 4096 ;;
  journal) run_one journal 16384 ;;
  body) run_one body 1024 ;;
  all) run_one api 4096; run_one journal 16384; run_one body 1024 ;;
  *) echo "fuzz: unknown target $target (api, journal, body, all)" >&2; exit 2 ;;
esac
exit $status
