/* Runs a fuzz target without libFuzzer: every file named on the command line, or found in a
 * directory named there (sorted, README* and dot files skipped), goes once through
 * LLVMFuzzerTestOneInput. The meson tests of suite `fuzz` replay the seed corpus and the
 * checked-in crash reproducers (tests/fuzz/regressions/) this way on every build, so a fixed
 * crash stays fixed. A finding aborts, as under libFuzzer. */
#include "tests/fuzz/fuzz.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static size_t replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long n;

	if (!f || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)
		fuzz_die("cannot read %s", path);
	buf = malloc((size_t)n + 1);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n)
		fuzz_die("cannot read %s", path);
	fclose(f);
	fprintf(stderr, "replay: %s (%ld bytes)\n", path, n);
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	free(buf);
	return 1;
}

static int skip(const struct dirent *de)
{
	return de->d_name[0] != '.' && strncmp(de->d_name, "README", 6) != 0;
}

static size_t replay_path(const char *path)
{
	struct dirent **list = NULL;
	struct stat sb;
	size_t done = 0;
	int n, i;

	if (stat(path, &sb) != 0)
		fuzz_die("%s does not exist", path);
	if (!S_ISDIR(sb.st_mode))
		return replay_file(path);
	n = scandir(path, &list, skip, alphasort);
	if (n < 0)
		fuzz_die("cannot list %s", path);
	for (i = 0; i < n; i++) {
		char sub[4096];

		snprintf(sub, sizeof sub, "%s/%s", path, list[i]->d_name);
		if (stat(sub, &sb) == 0 && S_ISREG(sb.st_mode))
			done += replay_file(sub);
		free(list[i]);
	}
	free(list);
	return done;
}

int main(int argc, char **argv)
{
	size_t done = 0;
	int i;

	if (argc < 2)
		fuzz_die("usage: %s FILE|DIR...", argv[0]);
	LLVMFuzzerInitialize(&argc, &argv);
	for (i = 1; i < argc; i++)
		done += replay_path(argv[i]);
	printf("replay: %zu input(s), no finding\n", done);
	return 0;
}
