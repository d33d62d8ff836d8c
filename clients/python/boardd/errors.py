"""boardd's problem+json answers as Python exceptions (DESIGN §8, §17, §18, §20): one class per
problem code, each carrying the answer's status, code, detail (and title, type, the whole body,
Retry-After when given). `error_for(status, body, headers)` picks the class; a code this client
does not know yet becomes a plain BoarddError with that code, so a newer server never breaks it.

Local conditions that are not server answers: TransportError (no answer at all: connection
refused, reset, timeout), UnexpectedAnswer (a success answer that is not what the route
answers: a proxy's HTML page, say; the worker treats it as no answer) and ClaimLost (a
worker's write refused locally because the claim it was made under is already known to be
lost; the server would refuse it with claim_conflict).
"""

__all__ = []  # filled below with every class


class BoarddError(Exception):
    """A problem+json answer (or, for a non-problem error answer, its status and text)."""
    code = None  # the problem code a subclass stands for

    def __init__(self, status=0, code=None, detail='', title='', type='', body=None,
                 retry_after=None, method=None, path=None):
        self.status = status
        self.code = code if code is not None else type_code(self.__class__)
        self.detail = detail or ''
        self.title = title or ''
        self.type = type or ''
        self.body = body
        self.retry_after = retry_after
        self.method = method
        self.path = path
        where = '%s %s: ' % (method, path) if method else ''
        super().__init__('%s%s %s: %s' % (where, status, self.code, self.detail))


def type_code(cls):
    return getattr(cls, 'code', None)


class TransportError(BoarddError):
    """No HTTP answer: the server could not be reached, the connection broke, or it timed out."""
    code = 'transport'


class UnexpectedAnswer(BoarddError):
    """A 2xx answer whose body is not what the route answers (not JSON, or without the fields
    it must carry): something between the client and boardd answered, or the answer was
    mangled on the way. status is the answer's; detail the start of its body."""
    code = 'unexpected_answer'


class ClaimLost(BoarddError):
    """A worker's write not sent: its claim is known lost (a renew refused, the lease ended
    without an acknowledged renew, or the worker stopping past its grace)."""
    code = 'claim_lost'


# (class name, code, base). TerminalStateExit is a kind of TransitionRejected (DESIGN §4).
_TABLE = [
    ('BadRequest', 'bad_request', None),
    ('Unauthorized', 'unauthorized', None),
    ('Forbidden', 'forbidden', None),
    ('NotFound', 'not_found', None),
    ('MethodNotAllowed', 'method_not_allowed', None),
    ('ClaimConflict', 'claim_conflict', None),
    ('StateConflict', 'state_conflict', None),
    ('DependentsOutstanding', 'dependents_outstanding', None),
    ('BlockersPending', 'blockers_pending', None),
    ('RunFinal', 'run_final', None),
    ('AlreadyExists', 'already_exists', None),
    ('CapacityReached', 'capacity_reached', None),          # §17
    ('NotYet', 'not_yet', None),                             # §17
    ('IdempotencyKeyReused', 'idempotency_key_reused', None),  # §18
    ('IdempotencyKeyInFlight', 'idempotency_key_in_flight', None),  # §18: retry shortly
    ('PayloadTooLarge', 'payload_too_large', None),
    ('UnsupportedMediaType', 'unsupported_media_type', None),
    ('TransitionRejected', 'transition_rejected', None),
    ('TerminalStateExit', 'terminal_state_exit', 'TransitionRejected'),
    ('PreconditionRequired', 'precondition_required', None),
    ('UriTooLong', 'uri_too_long', None),
    ('NotImplementedOnServer', 'not_implemented', None),
    ('InvalidBoard', 'invalid_board', None),
    ('StoreUnavailable', 'store_unavailable', None),
    ('Busy', 'busy', None),
    ('OutOfMemory', 'out_of_memory', None),
    ('Internal', 'internal', None),
]

ERRORS = {}
for _name, _code, _base in _TABLE:
    _cls = type(_name, (globals()[_base] if _base else BoarddError,),
                {'code': _code, '__doc__': 'problem code %s' % _code,
                 '__module__': __name__})
    globals()[_name] = _cls
    ERRORS[_code] = _cls
# by status, for an error answer that is not problem+json (a proxy's 502, say)
_BY_STATUS = {400: 'bad_request', 401: 'unauthorized', 403: 'forbidden', 404: 'not_found',
              405: 'method_not_allowed', 413: 'payload_too_large', 415: 'unsupported_media_type',
              428: 'precondition_required', 503: 'store_unavailable'}

__all__ += ['BoarddError', 'TransportError', 'UnexpectedAnswer', 'ClaimLost', 'ERRORS',
            'error_for'] + \
    [n for n, _, _ in _TABLE]


def error_for(status, body, headers=None, method=None, path=None):
    """The exception for an error answer: body is the parsed JSON (a dict) or the raw text."""
    retry_after = None
    if headers:
        ra = headers.get('Retry-After') or headers.get('retry-after')
        try:
            retry_after = float(ra) if ra is not None else None
        except ValueError:
            retry_after = None
    if isinstance(body, dict) and isinstance(body.get('code'), str):
        code = body['code']
        cls = ERRORS.get(code, BoarddError)
        return cls(status, code, str(body.get('detail', '')), str(body.get('title', '')),
                   str(body.get('type', '')), body, retry_after, method, path)
    code = _BY_STATUS.get(status, 'internal' if status >= 500 else 'http_%d' % status)
    cls = ERRORS.get(code, BoarddError)
    text = body if isinstance(body, str) else ''
    return cls(status, code, text[:200], '', '', body, retry_after, method, path)
