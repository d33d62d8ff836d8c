/* Regression (found while writing fuzz target B; fixed in store/fs by fa975d0): a data
 * directory holding journal.1 and a far later generation, e.g. an operator's copy named
 * journal.20261202, made store_fs_open spin instead of refusing: fs_journal_recover
 * (store/fs/fs_replay.c) checked, for each generation it replayed, every number up to the
 * highest generation with a stat() -- 10^11 stats here -- and boardd, which blocks SIGTERM
 * before it opens the store, neither started nor stopped.
 *
 * Expected: open or refuse (a generation is missing) within the deadline. The open runs in a
 * child, and the test fails when the child is still busy after the deadline. */
#include "store/store_twins.h"
#include "tests/fuzz/fuzz.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEADLINE_S 5

int main(void)
{
	struct store_fs_options o = {0};
	struct store *st = NULL;
	char dir[256], path[512], err[512] = "";
	time_t t0;
	pid_t pid;
	int fd, wst = 0;

	fuzz_tmpdir(dir, sizeof dir, "gap");
	o.dir = dir;
	if (store_fs_open(&o, &st, err, sizeof err) != CORE_OK) /* journal.1: the default board */
		fuzz_die("fresh store: %s", err);
	store_close(st);
	snprintf(path, sizeof path, "%s/journal.99999999999", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		fuzz_die("create %s", path);
	close(fd);

	pid = fork();
	if (pid < 0)
		fuzz_die("fork");
	if (pid == 0) {
		enum core_rc rc = store_fs_open(&o, &st, err, sizeof err);

		printf("store_fs_open: %s%s%s\n", core_rc_code(rc), err[0] ? ": " : "", err);
		if (st)
			store_close(st);
		_exit(0);
	}
	t0 = time(NULL);
	while (waitpid(pid, &wst, WNOHANG) == 0) {
		if (time(NULL) - t0 > DEADLINE_S) {
			kill(pid, SIGKILL);
			waitpid(pid, &wst, 0);
			fuzz_rmtree(dir);
			printf("FAIL: store_fs_open still busy after %d s with journal.1 and "
			       "journal.99999999999 in the directory\n", DEADLINE_S);
			return 1;
		}
		usleep(20000);
	}
	fuzz_rmtree(dir);
	if (!WIFEXITED(wst) || WEXITSTATUS(wst) != 0) {
		printf("FAIL: the opening child died (status %d)\n", wst);
		return 1;
	}
	printf("ok: store_fs_open returned within %d s\n", DEADLINE_S);
	return 0;
}
