# Sourced by the bench scripts (drain.sh, run.sh): a private PostgreSQL cluster with Debian's
# binaries, in a directory of the caller's temp dir, with PostgreSQL's durable defaults (fsync
# and synchronous_commit on; nothing is tuned), reachable through ONE transport: a unix socket
# in that directory (listen_addresses empty, so the port only names the socket file), or TCP on
# 127.0.0.1 at a free port (unix_socket_directories empty: no socket file at all, so every
# client, psql included, goes through TCP).
#
#   pg_cluster_start DIR MAX_CONNECTIONS [unix|tcp]
#                                          initdb DIR/pg, start (unix: the default; socket in
#                                          DIR/pgsock); sets PG_DATA, PG_HOST (libpq's host:
#                                          the socket directory or 127.0.0.1), PG_SOCKDIR (the
#                                          socket directory; empty with tcp), PG_PORT,
#                                          PG_TRANSPORT, PG_CONNINFO, PG_PID (the postmaster)
#                                          and PG_VERSION; exits on failure
#   pg_cluster_stop [DATA]                 fast shutdown (of the cluster in DATA, a PG_DATA
#                                          saved by a caller that runs two; default: the last
#                                          one started); safe to call twice or before start
#   pg CMD ...                             CMD as the postgres user when we are root
#                                          (PostgreSQL refuses to run as root)
#   pg_setting NAME                        the running cluster's setting NAME
# PGBIN: the binaries (default: the newest /usr/lib/postgresql/*/bin). The caller stops the
# cluster on exit (its trap calls pg_cluster_stop before removing DIR).

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" # pick_port
PGBIN=${PGBIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
PG_DATA=""
PG_PID=""

pg() {
	if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

pg_cluster_start() {
	local dir=$1 maxconn=$2 listen
	PG_TRANSPORT=${3:-unix}
	if [ -z "$PGBIN" ] || [ ! -x "$PGBIN/initdb" ]; then
		echo "pg.sh: no PostgreSQL binaries (Debian: apt-get install postgresql)" >&2
		exit 2
	fi
	PG_DATA=$dir/pg
	case $PG_TRANSPORT in
	unix)
		PG_SOCKDIR=$dir/pgsock
		PG_HOST=$PG_SOCKDIR
		PG_PORT=$((20000 + RANDOM % 20000))
		listen="-c listen_addresses='' -k $PG_SOCKDIR"
		mkdir -p "$PG_SOCKDIR" ;;
	tcp)
		PG_SOCKDIR=
		PG_HOST=127.0.0.1
		PG_PORT=$(pick_port) || exit 1
		listen="-c listen_addresses=127.0.0.1 -k ''" ;;
	*)
		echo "pg.sh: transport is unix or tcp, not '$PG_TRANSPORT'" >&2
		exit 2 ;;
	esac
	mkdir -p "$PG_DATA"
	if [ "$(id -u)" -eq 0 ]; then
		chmod 711 "$dir" # the postgres user only traverses the caller's dir
		chown postgres "$PG_DATA" ${PG_SOCKDIR:+"$PG_SOCKDIR"}
	fi
	# -N: initdb skips its own final sync of the new files (a second on a busy disk); the
	# cluster it makes still runs with fsync on, which is what the benchmarks measure.
	# -A trust covers both transports (initdb's pg_hba.conf has local and 127.0.0.1 lines).
	pg "$PGBIN/initdb" -N -D "$PG_DATA" -A trust -U postgres >/dev/null
	if ! pg "$PGBIN/pg_ctl" -D "$PG_DATA" -l "$PG_DATA/server.log" -w \
		-o "$listen -p $PG_PORT -c max_connections=$maxconn" \
		start >/dev/null; then
		echo "pg.sh: PostgreSQL did not start:" >&2
		tail "$PG_DATA/server.log" >&2
		exit 1
	fi
	PG_PID=$(head -1 "$PG_DATA/postmaster.pid")
	PG_CONNINFO="host=$PG_HOST port=$PG_PORT user=postgres dbname=postgres"
	PG_VERSION=$("$PGBIN/postgres" --version | awk '{print $3}')
}

pg_setting() {
	pg "$PGBIN/psql" -h "$PG_HOST" -p "$PG_PORT" -U postgres -Atc "show $1"
}

pg_cluster_stop() { # [DATA]: that cluster (a caller running two), else the last started
	local data=${1:-$PG_DATA}
	if [ -n "$data" ] && [ -f "$data/postmaster.pid" ]; then
		pg "$PGBIN/pg_ctl" -D "$data" -m fast -w stop >/dev/null 2>&1 || true
	fi
}
