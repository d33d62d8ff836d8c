/* The operator UI's files, compiled in at build time by ui/gen_c.py (api/ui.c serves them). */
#ifndef BOARDD_API_UI_ASSETS_H
#define BOARDD_API_UI_ASSETS_H

#include <stdbool.h>
#include <stddef.h>

struct api_ui_asset {
	const char *name;          /* "index.html", "app.<sha256[:12]>.js", ... */
	const char *type;          /* Content-Type */
	const unsigned char *data; /* static */
	size_t len;
	bool immutable;            /* fingerprinted: cacheable for a year */
};

extern const struct api_ui_asset api_ui_assets[];
extern const size_t api_ui_assets_n;

#endif
