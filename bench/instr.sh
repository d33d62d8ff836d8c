#!/bin/bash
# Instructions per request of boardd and of bench/ceiling -m (libmicrohttpd, no application),
# counted by valgrind's callgrind over a fixed number of claim cycles (bench/loadgen, 32
# workers, a unix socket). A count of instructions does not move with the machine's minute as
# CPU time does (bench/README.md, "boardd's own share"): two builds compared this way differ
# by what their code does, not by what else ran. It is not time: a cache miss counts one
# instruction, and a `rep stos` (memset) one per byte it stores.
#
#   bench/instr.sh                                  # boardd and ceiling-mhd
#   TARGETS="OLD/build-bench/server/boardd build-bench/server/boardd" bench/instr.sh
#   TOP=25 bench/instr.sh                           # and each target's 25 costliest functions
#
# Environment: TARGETS ("boardd ceiling-mhd"; a path is a boardd binary); CYCLES counted (1000,
# 7 requests each; divided by the requests served, stragglers included) after WARM cycles
# (300), zeroed between; TOP functions listed (0); BUILD
# (build-bench, release); BENCH_TMP as run.sh. Needs valgrind (Debian's package).
# Columns, per request: all user-space instructions of the server process (every thread), the
# target's own code, malloc and free (glibc), memset (libmicrohttpd clears a connection's
# memory pool between requests: bytes more than instructions), the rest of libc,
# libmicrohttpd, everything else.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
source "$here/lib.sh"
TARGETS=${TARGETS:-boardd ceiling-mhd}
CYCLES=${CYCLES:-1000}
WARM=${WARM:-300}
TOP=${TOP:-0}
BUILD=${BUILD:-$top/build-bench}
command -v valgrind >/dev/null && command -v callgrind_annotate >/dev/null ||
	{ echo "instr.sh: no valgrind (apt-get install valgrind)" >&2; exit 2; }
if [ ! -f "$BUILD/build.ninja" ]; then
	meson setup "$BUILD" "$top" --buildtype=release >/dev/null
fi
ninja -C "$BUILD" server/boardd bench/loadgen bench/ceiling >/dev/null
loadgen=$BUILD/bench/loadgen

tmp=$(mktemp -d "${BENCH_TMP:-${TMPDIR:-/tmp}}/boardd-instr.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
bench_tokens "$BUILD/server/boardd" "$tmp"

# One target under callgrind: warm up, zero the counters, count CYCLES, dump. Prints the dump.
# Called as $(count ...): a subshell, whose EXIT trap stops its server however it ends.
count() {
	local t=$1 d=$tmp/$2 bin
	srv= # not local: the trap runs after the function has returned
	trap '[ -z "$srv" ] || stop_pid "$srv"' EXIT
	trap 'exit 130' INT TERM
	mkdir -p "$d"
	local vg=(valgrind --tool=callgrind --callgrind-out-file="$d/cg.%p" --dump-instr=no
		--separate-threads=no)
	case $t in
	ceiling-mhd) "${vg[@]}" "$BUILD/bench/ceiling" -l "unix:$d/s" -D "$d" -m 2>"$d/log" & ;;
	*)
		bin=$t
		[ "$t" = boardd ] && bin=$BUILD/server/boardd
		[ -x "$bin" ] || { echo "instr.sh: $t: not an executable" >&2; return 2; }
		"${vg[@]}" "$bin" --store "fs:$d/data" --tokens "$tmp/tokens.json" \
			--listen "unix:$d/s" 2>"$d/log" & ;;
	esac
	srv=$!
	for _ in $(seq 600); do [ -S "$d/s" ] && break; sleep 0.1; done
	[ -S "$d/s" ] || { echo "instr.sh: $t did not start" >&2; cat "$d/log" >&2; return 2; }
	"$loadgen" -U "$d/s" -T "$tmp/plain" -P w -d 600 -W 0 -n "$WARM" >/dev/null
	callgrind_control -z "$srv" >/dev/null 2>&1
	"$loadgen" -U "$d/s" -T "$tmp/plain" -P w -d 600 -W 0 -n "$CYCLES" >"$d/out"
	callgrind_control -d "$srv" >/dev/null 2>&1
	stop_pid "$srv"
	srv=
	[ "$(bench_result "$d/out" errors)" = 0 ] ||
		{ echo "instr.sh: $t: loadgen errors" >&2; cat "$d/out" >&2; return 2; }
	ls "$d"/cg.*.1
}

echo "== instructions per request (callgrind): $TARGETS; $CYCLES cycles after $WARM, unix socket =="
printf '%-36s %9s %9s %9s %9s %9s %9s %9s\n' target all own malloc memset libc mhd other
for t in $TARGETS; do
	name=$(basename "$t")
	[ "$t" = "$name" ] || name=$t
	f=$(count "$t" "$(echo "$t" | tr '/' '_')")
	# The requests the counted window served: loadgen's "all ops" row. CYCLES * 7 left out
	# the cycles the 32 workers had begun when the last one ended (up to ~3 % more, and not
	# as many in each run: the ceiling's own figure moved by 1.7 k between two runs).
	req=$(awk '$1 == "all" && $2 == "ops" { print $3 }' "$(dirname "$f")/out")
	[ "${req:-0}" -gt 0 ] || { echo "instr.sh: $t: no request count" >&2; exit 2; }
	self=$(basename "$([ "$t" = ceiling-mhd ] && echo ceiling || echo "$t")")
	# Self costs by function: drop the two frames every thread starts in (their inclusive
	# cost is the whole thread).
	callgrind_annotate --threshold=100 --inclusive=no "$f" 2>/dev/null |
		awk -v req="$req" -v self="$self" -v name="$name" -v top="$TOP" '
		/^ *[0-9,]+ \(/ {
			n = $1; gsub(",", "", n)
			if ($0 ~ /:clone |:start_thread / || $0 ~ /PROGRAM TOTALS/) next
			obj = ""
			if (match($0, /\[[^]]*\]$/)) obj = substr($0, RSTART + 1, RLENGTH - 2)
			sub(".*/", "", obj)
			loc = $0; sub(/^ *[0-9,]+ \( *[0-9.]+%\) +/, "", loc); sub(/ \[.*$/, "", loc)
			fn = loc; sub("^.*:", "", fn)
			k = "other"
			if (obj == self) k = "own"
			else if (fn ~ /memset/) k = "memset"
			else if (fn ~ /^(_int_malloc|_int_free|malloc|free|calloc|realloc|cfree|tcache_|unlink_chunk|malloc_consolidate|_int_realloc|__libc_(malloc|free|calloc|realloc))/) k = "malloc"
			else if (obj ~ /^libc\.so/ || (obj == "" && loc ~ /^\.\//)) k = "libc"
			else if (obj ~ /^libmicrohttpd/) k = "mhd"
			sum[k] += n; all += n
			if (top > 0 && shown < top) { rows[++shown] = sprintf("    %9.0f  %s [%s]", n / req, fn, obj) }
		}
		END {
			printf "%-36s %9.0f %9.0f %9.0f %9.0f %9.0f %9.0f %9.0f\n", name, all / req,
			       sum["own"] / req, sum["malloc"] / req, sum["memset"] / req, sum["libc"] / req,
			       sum["mhd"] / req, sum["other"] / req
			for (i = 1; i <= shown; i++) print rows[i]
		}'
done
echo "(per request of the claim cycle; callgrind counts instructions executed in user space, not time)"
