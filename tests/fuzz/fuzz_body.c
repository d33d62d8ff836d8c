/* Fuzz target C: the flat body parser (api/body.c) against json_loadb, differentially
 * (api_fuzz_body in api/fuzz_body.c). The first byte picks one of the API_ROUTE_FLAT routes,
 * the rest is the body. Oracle: both paths give the same code and detail, and on success every
 * helper a handler calls reads the same out of the body; ASan/UBSan catch the rest. No store,
 * no daemon: tens of thousands of inputs a second. */
#include "api/api_request.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *why;
	bool flat;

	if (!size)
		return 0;
	why = api_fuzz_body(data[0], (const char *)data + 1, size - 1, &flat);
	if (why)
		fuzz_fail(data, size, "flat and tree bodies differ: %s", why);
	return 0;
}
