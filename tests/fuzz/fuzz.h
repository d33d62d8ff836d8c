/* Shared by the fuzz targets (fuzz_*.c), the libFuzzer entry points they define, and the
 * replay program (replay.c) that runs them without libFuzzer. */
#ifndef BOARDD_TESTS_FUZZ_H
#define BOARDD_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/* libFuzzer's entry points, defined by each target. */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken harness (not a finding): message on stderr, exit 2. */
void fuzz_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* A finding: message and the input (escaped) on stderr, then abort() so that libFuzzer saves
 * the input as a crash. */
void fuzz_fail(const uint8_t *in, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), noreturn));
/* A new directory under /dev/shm (or $TMPDIR, /tmp) named after `what`, into buf. */
void fuzz_tmpdir(char *buf, size_t len, const char *what);
/* rm -rf dir. */
void fuzz_rmtree(const char *dir);

#endif
