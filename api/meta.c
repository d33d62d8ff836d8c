/* Routes that need no token: health, readiness, the OpenAPI document (metrics: metrics.c). */
#include "api/api_answer.h"
#include "api/api_daemon.h"
#include "api/api_handlers.h"
#include "api/api_req.h"
#include "api/api_request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum core_rc api_h_healthz(struct api_req *r)
{
	return api_reply(r, 200, json_pack("{s:s}", "status", "ok"));
}

enum core_rc api_h_readyz(struct api_req *r)
{
	enum core_rc rc = store_ping(r->api->st);

	if (rc != CORE_OK)
		return api_fail(r, rc, "store %s is not ready: it refuses writes or cannot be reached",
				store_name(r->api->st));
	return api_reply(r, 200, json_pack("{s:s, s:s}", "status", "ready", "store",
					   store_name(r->api->st)));
}

enum core_rc api_h_openapi_json(struct api_req *r)
{
	r->raw_body = api_openapi_json;
	r->raw_len = api_openapi_json_len;
	r->raw_type = "application/json";
	r->status = 200;
	return CORE_OK;
}

enum core_rc api_h_openapi_yaml(struct api_req *r)
{
	r->raw_body = api_openapi_yaml;
	r->raw_len = api_openapi_yaml_len;
	r->raw_type = "application/yaml";
	r->status = 200;
	return CORE_OK;
}
