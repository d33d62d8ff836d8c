/* The job's supervisor (DESIGN §20): no process of a job outlives boardctl, kill -9 included,
 * nor outlives the job itself, double-forked and setsid() children included.
 *
 * boardctl forks, and the child re-executes boardctl itself (/proc/self/exe) as
 * `boardctl __supervise CTL STATUS EXEC -- COMMAND...`: a fresh single-threaded process (boardctl
 * is multi-threaded; after its fork only async-signal-safe calls are allowed, so the child
 * does nothing but exec). That supervisor:
 *
 * - is a child subreaper (PR_SET_CHILD_SUBREAPER): whatever the command forks, and whatever
 *   those fork and orphan (a double fork, a setsid daemon), is re-parented to it, never to
 *   init, so it can always find and kill the job's whole tree;
 * - forks the command in its own process group, with PR_SET_PDEATHSIG (SIGKILL) towards the
 *   supervisor, and reports an exec failure (errno) on the EXEC pipe, which is close-on-exec:
 *   boardctl reads EOF when the command started, or the errno when it did not;
 * - takes orders on the CTL pipe from boardctl: each byte is a signal for the command's process
 *   group. EOF on CTL means boardctl is gone (it exited, or was killed, -9 included: the pipe
 *   needs no signal to be delivered): the command's group gets SIGKILL and the tree is swept;
 * - when the command has ended, kills what it left behind (SIGKILL to every remaining
 *   descendant, until none is left), then writes the command's wait status on STATUS and exits.
 *   So when boardctl reads that status, nothing of the job runs any more.
 *
 * The supervisor is in a process group of its own: a signal to boardctl's group (a terminal's
 * ^C, kill -9 -PGID) does not reach it; boardctl forwards what it must. */
#include "cli/cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#define SUP_VERB "__supervise"

/* One message on the STATUS or EXEC pipe. */
struct sup_msg {
	int32_t kind;
	int32_t value; /* a wait status, or an errno */
};

enum {
	SUP_EXIT = 1,      /* STATUS: the command's wait status; its tree is gone */
	SUP_FAIL_SELF = 2, /* EXEC: the supervisor itself could not be executed (errno) */
	SUP_FAIL_FORK = 3, /* EXEC: the supervisor could not fork the command (errno) */
	SUP_FAIL_CMD = 4,  /* EXEC: the command could not be executed (errno) */
};

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Writes all of m; errors ignored (the reader is gone). */
static void msg_write(int fd, int32_t kind, int32_t value)
{
	struct sup_msg m = {kind, value};
	ssize_t n;

	do
		n = write(fd, &m, sizeof m);
	while (n < 0 && errno == EINTR);
}

/* ---- boardctl's side ---- */

int cli_proc_start(char *const *argv, char **env, struct cli_proc *p, bool *cmd_failed)
{
	int ctl[2] = {-1, -1}, st[2] = {-1, -1}, ex[2] = {-1, -1}, out[2] = {-1, -1},
	    er[2] = {-1, -1};
	char fds[3][16];
	char **sargv = NULL;
	size_t n = 0, i;
	struct sup_msg m;
	ssize_t got = 0, r;
	int rc = 0;
	pid_t pid;

	*cmd_failed = false;
	*p = (struct cli_proc){.sup = -1, .ctl = -1, .status = -1, .out = -1, .err = -1};
	while (argv[n])
		n++;
	/* All close-on-exec: another slot's supervisor, forked meanwhile, never keeps one open. */
	if (pipe2(ctl, O_CLOEXEC) || pipe2(st, O_CLOEXEC) || pipe2(ex, O_CLOEXEC) ||
	    pipe2(out, O_CLOEXEC) || pipe2(er, O_CLOEXEC)) {
		rc = errno;
		goto fail;
	}
	sargv = calloc(n + 7, sizeof *sargv);
	if (!sargv) {
		rc = ENOMEM;
		goto fail;
	}
	snprintf(fds[0], sizeof fds[0], "%d", ctl[0]);
	snprintf(fds[1], sizeof fds[1], "%d", st[1]);
	snprintf(fds[2], sizeof fds[2], "%d", ex[1]);
	sargv[0] = "boardctl";
	sargv[1] = SUP_VERB;
	sargv[2] = fds[0];
	sargv[3] = fds[1];
	sargv[4] = fds[2];
	sargv[5] = "--";
	for (i = 0; i < n; i++)
		sargv[6 + i] = argv[i];
	pid = fork();
	if (pid < 0) {
		rc = errno;
		goto fail;
	}
	if (pid == 0) {
		/* async-signal-safe calls only until exec: boardctl has threads */
		if (dup2(out[1], STDOUT_FILENO) < 0 || dup2(er[1], STDERR_FILENO) < 0 ||
		    fcntl(ctl[0], F_SETFD, 0) < 0 || fcntl(st[1], F_SETFD, 0) < 0 ||
		    fcntl(ex[1], F_SETFD, 0) < 0) {
			msg_write(ex[1], SUP_FAIL_SELF, errno);
			_exit(CLI_EXIT_ERROR);
		}
		execve("/proc/self/exe", sargv, env);
		msg_write(ex[1], SUP_FAIL_SELF, errno);
		_exit(CLI_EXIT_ERROR);
	}
	p->sup = pid;
	close_fd(&ctl[0]);
	close_fd(&st[1]);
	close_fd(&ex[1]);
	close_fd(&out[1]);
	close_fd(&er[1]);
	/* EOF once the command was executed (the pipe is close-on-exec in it), or its errno. */
	while (got < (ssize_t)sizeof m) {
		r = read(ex[0], (char *)&m + got, sizeof m - (size_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += r;
	}
	close_fd(&ex[0]);
	if (got == (ssize_t)sizeof m) {
		rc = m.value ? m.value : EIO;
		*cmd_failed = m.kind == SUP_FAIL_CMD;
		goto fail;
	}
	p->ctl = ctl[1];
	p->status = st[0];
	fcntl(p->status, F_SETFL, O_NONBLOCK);
	p->out = out[0];
	p->err = er[0];
	free(sargv);
	return 0;
fail:
	if (p->sup > 0) {
		close_fd(&ctl[1]); /* EOF: the supervisor sweeps what there is and exits */
		while (waitpid(p->sup, NULL, 0) < 0 && errno == EINTR)
			;
		p->sup = -1;
	}
	for (i = 0; i < 2; i++) {
		close_fd(&ctl[i]);
		close_fd(&st[i]);
		close_fd(&ex[i]);
		close_fd(&out[i]);
		close_fd(&er[i]);
	}
	free(sargv);
	return rc;
}

void cli_proc_signal(struct cli_proc *p, int sig)
{
	unsigned char b = (unsigned char)sig;
	ssize_t n;

	if (p->ctl < 0)
		return;
	do
		n = write(p->ctl, &b, 1);
	while (n < 0 && errno == EINTR);
}

bool cli_proc_ended(struct cli_proc *p, int *ws)
{
	struct sup_msg m;
	ssize_t n;

	do
		n = read(p->status, &m, sizeof m);
	while (n < 0 && errno == EINTR);
	if (n == (ssize_t)sizeof m && m.kind == SUP_EXIT) {
		*ws = m.value;
		return true;
	}
	if (n < 0 && errno == EAGAIN)
		return false;
	/* EOF without a report: the supervisor itself was killed. Its command got SIGKILL with
	 * it (PR_SET_PDEATHSIG); report that. */
	*ws = SIGKILL; /* a wait status of "killed by SIGKILL" */
	return true;
}

void cli_proc_close(struct cli_proc *p)
{
	close_fd(&p->ctl);
	close_fd(&p->status);
	close_fd(&p->out);
	close_fd(&p->err);
	if (p->sup > 0)
		while (waitpid(p->sup, NULL, 0) < 0 && errno == EINTR)
			;
	p->sup = -1;
}

/* ---- the supervisor ---- */

/* SIGKILL to every child of this process; the number of them seen. Reads
 * /proc/PID/task/PID/children (the supervisor has one thread), else scans /proc. */
static int kill_children(pid_t me)
{
	char path[64], buf[4096];
	int fd, seen = 0;
	ssize_t n;

	snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)me, (int)me);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		char *s, *end;

		n = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (n >= 0 && n < (ssize_t)sizeof buf - 1) {
			buf[n] = '\0';
			for (s = buf;; s = end) {
				long pid = strtol(s, &end, 10);

				if (end == s)
					break;
				if (pid > 0 && kill((pid_t)pid, SIGKILL) == 0)
					seen++;
			}
			return seen;
		}
	}
	{
		DIR *d = opendir("/proc");
		struct dirent *e;

		while (d && (e = readdir(d))) {
			long pid = strtol(e->d_name, NULL, 10), ppid;
			char *rp;
			FILE *f;

			if (pid <= 0)
				continue;
			snprintf(path, sizeof path, "/proc/%ld/stat", pid);
			f = fopen(path, "re");
			if (!f)
				continue;
			n = (ssize_t)fread(buf, 1, sizeof buf - 1, f);
			fclose(f);
			buf[n > 0 ? n : 0] = '\0';
			rp = strrchr(buf, ')'); /* "pid (comm) state ppid ...": comm may hold ')' */
			if (rp && sscanf(rp + 1, " %*c %ld", &ppid) == 1 && ppid == (long)me &&
			    kill((pid_t)pid, SIGKILL) == 0)
				seen++;
		}
		if (d)
			closedir(d);
	}
	return seen;
}

/* Kills every remaining descendant: each child gets SIGKILL, its own children are then
 * re-parented here (subreaper) and get theirs, until no child is left. */
static void sweep(pid_t me)
{
	for (;;) {
		pid_t w;

		while ((w = waitpid(-1, NULL, WNOHANG)) > 0)
			;
		if (w < 0 && errno == ECHILD)
			return;
		kill_children(me);
		poll(NULL, 0, 10);
	}
}

int cli_supervise_main(int argc, char **argv)
{
	int ctl, st, ex, sfd, jws = 0;
	sigset_t all, chld, none;
	pid_t me = getpid(), pid, w;
	bool done = false;
	char *end;

	if (argc < 6 || strcmp(argv[5], "--") != 0) {
		fputs("boardctl: " SUP_VERB " is boardctl's own job supervisor, not a verb\n", stderr);
		return CLI_EXIT_ERROR;
	}
	ctl = (int)strtol(argv[2], &end, 10);
	st = (int)strtol(argv[3], &end, 10);
	ex = (int)strtol(argv[4], &end, 10);
	fcntl(ctl, F_SETFD, FD_CLOEXEC);
	fcntl(st, F_SETFD, FD_CLOEXEC);
	fcntl(ex, F_SETFD, FD_CLOEXEC);
	setpgid(0, 0);
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	signal(SIGCHLD, SIG_DFL); /* an inherited SIG_IGN would reap the command's status away */
	/* Signals: only the command gets them (boardctl forwards over CTL). */
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	pid = fork();
	if (pid < 0) {
		msg_write(ex, SUP_FAIL_FORK, errno);
		return CLI_EXIT_ERROR;
	}
	if (pid == 0) {
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != me)
			_exit(CLI_EXIT_ERROR); /* the supervisor died already: do not run unsupervised */
		signal(SIGPIPE, SIG_DFL);  /* boardctl ignores it; the command should not */
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execvp(argv[6], argv + 6);
		msg_write(ex, SUP_FAIL_CMD, errno);
		_exit(errno == ENOENT ? CLI_EXIT_NOT_FOUND : CLI_EXIT_CANNOT_EXEC);
	}
	setpgid(pid, pid); /* both sides set it: no window where a group signal misses */
	close(ex);
	while (!done) {
		struct pollfd p[2] = {{.fd = ctl, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
		int ws;

		if (poll(p, 2, sfd < 0 ? 50 : -1) < 0 && errno != EINTR)
			poll(NULL, 0, 50);
		if (p[0].revents) {
			unsigned char b[64];
			ssize_t n = read(ctl, b, sizeof b), i;

			for (i = 0; i < n; i++)
				kill(-pid, b[i]); /* the command is not reaped yet: its group is its own */
			if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
				/* boardctl is gone: nothing may run unsupervised */
				kill(-pid, SIGKILL);
				close(ctl);
				ctl = -1;
			}
		}
		if (sfd >= 0 && p[1].revents) {
			struct signalfd_siginfo si;

			while (read(sfd, &si, sizeof si) > 0)
				;
		}
		while ((w = waitpid(-1, &ws, WNOHANG)) > 0)
			if (w == pid) {
				jws = ws;
				done = true;
			}
	}
	sweep(me);
	msg_write(st, SUP_EXIT, jws);
	return 0;
}
