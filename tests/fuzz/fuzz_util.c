/* Helpers shared by the fuzz targets: failing loudly and temporary directories. */
#include "tests/fuzz/fuzz.h"

#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void fuzz_die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("fuzz harness: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(2);
}

void fuzz_fail(const uint8_t *in, size_t len, const char *fmt, ...)
{
	va_list ap;
	size_t i;

	va_start(ap, fmt);
	fputs("FUZZ FINDING: ", stderr);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\ninput: \"", stderr);
	for (i = 0; i < len && i < 4096; i++) {
		if (in[i] >= 0x20 && in[i] < 0x7f && in[i] != '"' && in[i] != '\\')
			fputc(in[i], stderr);
		else
			fprintf(stderr, "\\x%02x", in[i]);
	}
	fputs(len > 4096 ? "...\"\n" : "\"\n", stderr);
	abort();
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	return remove(path);
}

void fuzz_rmtree(const char *dir)
{
	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void fuzz_tmpdir(char *buf, size_t len, const char *what)
{
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");

	snprintf(buf, len, "%s/boardd-fuzz-%s.XXXXXX", base ? base : "/tmp", what);
	if (!mkdtemp(buf))
		fuzz_die("mkdtemp %s", buf);
}
