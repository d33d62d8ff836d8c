# Sourced by the bench scripts: wait until the machine is quiet enough to measure.
# quiet_wait LOAD SECONDS: polls the 1-minute load average every 10 s until it is below LOAD
# or SECONDS have passed; never fails, says what it saw.
quiet_wait() {
	local limit=$1 budget=$2 waited=0 load
	while :; do
		load=$(cut -d' ' -f1 /proc/loadavg)
		if awk -v l="$load" -v m="$limit" 'BEGIN { exit !(l < m) }'; then
			echo "load $load < $limit after ${waited} s of waiting: measuring"
			return 0
		fi
		if [ "$waited" -ge "$budget" ]; then
			echo "load $load still >= $limit after ${waited} s: measuring anyway (figures" \
				"below are from a busy machine)"
			return 0
		fi
		sleep 10
		waited=$((waited + 10))
	done
}
