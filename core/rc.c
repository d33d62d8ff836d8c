/* The one error enum's codes. */
#include "core/core.h"

static const char *const rc_codes[] = {
#define CORE_RC_CODE(name, code) [name] = code,
	CORE_RC_LIST(CORE_RC_CODE)
#undef CORE_RC_CODE
};

const char *core_rc_code(enum core_rc rc)
{
	if ((int)rc < 0 || rc >= CORE_RC_COUNT_)
		return "internal";
	return rc_codes[rc];
}

bool core_rc_is_transition_rejected(enum core_rc rc)
{
	return rc == CORE_ERR_TRANSITION_REJECTED || rc == CORE_ERR_TERMINAL_STATE_EXIT;
}
