/* process_* metrics, as Prometheus' client libraries serve them, read from /proc. */
#include "metrics/metrics.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* /proc/stat's btime: boot time in seconds since the epoch; 0 when unreadable. */
static long long boot_time(void)
{
	char line[256];
	long long bt = 0;
	FILE *f = fopen("/proc/stat", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "btime %lld", &bt) == 1)
			break;
	fclose(f);
	return bt;
}

static void stat_collect(struct metrics_sink *s)
{
	char buf[1024], *p;
	unsigned long long utime, stime, start, vsize;
	long long rss;
	long tick = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	long long bt = boot_time();
	size_t n;
	FILE *f = fopen("/proc/self/stat", "re");

	if (!f)
		return;
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* The command name is in parentheses and may hold spaces: fields follow the last ')'. */
	p = strrchr(buf, ')');
	if (!p || tick <= 0)
		return;
	/* state(3) ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime(14)
	 * stime cutime cstime priority nice threads itrealvalue starttime(22) vsize rss(24) */
	if (sscanf(p + 2,
		   "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d "
		   "%llu %llu %lld",
		   &utime, &stime, &start, &vsize, &rss) != 5)
		return;
	metrics_sink_value(s, METRICS_PROC_CPU, NULL, (double)(utime + stime) / (double)tick);
	metrics_sink_value(s, METRICS_PROC_VSZ, NULL, (double)vsize);
	metrics_sink_value(s, METRICS_PROC_RSS, NULL, (double)rss * (double)page);
	if (bt > 0)
		metrics_sink_value(s, METRICS_PROC_START, NULL,
				   (double)bt + (double)start / (double)tick);
}

static void fds_collect(struct metrics_sink *s)
{
	struct rlimit rl;
	struct dirent *e;
	DIR *d = opendir("/proc/self/fd");
	long n = 0;

	if (d) {
		while ((e = readdir(d)))
			if (e->d_name[0] != '.')
				n++;
		closedir(d);
		metrics_sink_value(s, METRICS_PROC_FDS, NULL, (double)(n - 1)); /* not opendir's */
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		metrics_sink_value(s, METRICS_PROC_MAX_FDS, NULL, (double)rl.rlim_cur);
}

void metrics_process_collect(struct metrics_sink *s)
{
	stat_collect(s);
	fds_collect(s);
}
