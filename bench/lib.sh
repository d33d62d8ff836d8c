# Sourced by the bench scripts (run.sh, mongo.sh, drain.sh, cpu_ab.sh): processes, ports and tokens on 127.0.0.1.

bench_result() { # file key: the value of key=VALUE in the file's RESULT line (drivers print one)
	sed -n 's/^RESULT.*[[:space:]]'"$2"'=\([^[:space:]]*\).*/\1/p' "$1"
}

stop_pid() { # pid: SIGTERM, wait up to 10 s, then SIGKILL
	local pid=$1 i
	[ -n "$pid" ] || return 0
	kill -TERM "$pid" 2>/dev/null || return 0
	for i in $(seq 100); do
		kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

# A port with no socket at all on it (listening or not): ss when present, else a connect probe.
port_free() {
	if command -v ss >/dev/null; then
		! ss -Htan | awk '{print $4}' | grep -q ":$1\$"
	else
		! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
	fi
}

pick_port() { # two free consecutive ports below the ephemeral range (bounded tries)
	local p i
	for i in $(seq 50); do
		p=$((20000 + RANDOM % 12000))
		if port_free "$p" && port_free "$((p + 1))"; then
			echo "$p"
			return 0
		fi
	done
	echo "bench: no free port" >&2
	return 1
}

wait_port() { # port seconds: until something accepts connections there
	local i
	for i in $(seq $(($2 * 20))); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}

# boardd_log_port LOG: the port a boardd started with --listen ADDR:0 printed in LOG
# ("... (port N)"), waiting up to 10 s; fails when it never did.
boardd_log_port() {
	local port
	for _ in $(seq 200); do
		port=$(grep -o '(port [0-9]*)' "$1" 2>/dev/null | head -1 | tr -dc 0-9) || true
		[ -n "$port" ] && { echo "$port"; return 0; }
		sleep 0.05
	done
	return 1
}

# bench_tokens BOARDD DIR: a worker and a bot token in DIR/tokens.json, and DIR/plain with
# the lines loadgen -T reads ("worker TOKEN", "bot TOKEN").
bench_tokens() {
	local boardd=$1 dir=$2
	"$boardd" token add --tokens "$dir/tokens.json" --name bench-worker --role worker \
		>"$dir/worker.tok" 2>/dev/null
	"$boardd" token add --tokens "$dir/tokens.json" --name bench-bot --role bot \
		>"$dir/bot.tok" 2>/dev/null
	printf 'worker %s\nbot %s\n' "$(tail -1 "$dir/worker.tok")" "$(tail -1 "$dir/bot.tok")" \
		>"$dir/plain"
}
