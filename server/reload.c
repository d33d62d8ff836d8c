/* SIGHUP: the hooks that re-read configuration without a restart (server_reload). */
#include "server/server.h"

#include <stdio.h>

void server_reload(const struct server_reload_hook *hooks, size_t n)
{
	char err[512];
	size_t i;

	for (i = 0; i < n; i++) {
		if (!hooks[i].reload)
			continue;
		err[0] = '\0';
		if (hooks[i].reload(hooks[i].ctx, err, sizeof err))
			fprintf(stderr, "boardd: SIGHUP: %s re-read\n", hooks[i].what);
		else
			fprintf(stderr, "boardd: SIGHUP: %s kept as it was: %s\n", hooks[i].what,
				err);
	}
}
