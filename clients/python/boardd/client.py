"""The synchronous REST client of boardd (DESIGN §8, §12, §17, §18, §20; openapi/openapi.yaml):
one method per route, standard library only (http.client), one keep-alive connection per
thread, JSON in and out, error answers raised as the classes of boardd.errors.

Every method that maps a route is marked with @route(METHOD, PATH): Client.routes() lists them,
and tests/clients walks openapi/openapi.yaml against that list (a route no method calls fails).
Owned (fenced) writes take the claim's `marker` and `epoch`; the epoch goes in If-Match.
"""
import datetime
import http.client
import json
import select
import threading
import time
import urllib.parse

from .errors import StoreUnavailable, TransportError, error_for

__all__ = ['Client', 'route', 'rfc3339']


def route(method, path):
    """Marks a Client method as the caller of one route of the OpenAPI document."""
    def mark(fn):
        fn.route = (method, path)
        return fn
    return mark


def _q(s):
    return urllib.parse.quote(str(s), safe='')


def _query(**kw):
    items = []
    for k, v in kw.items():
        if v is None:
            continue
        if isinstance(v, bool):
            v = 'true' if v else 'false'
        if isinstance(v, (list, tuple)):
            items += [(k, str(x)) for x in v]
        else:
            items.append((k, str(v)))
    return ('?' + urllib.parse.urlencode(items)) if items else ''


def _body(**kw):
    return {k: v for k, v in kw.items() if v is not None}


def rfc3339(when):
    """A time as boardd takes it (RFC 3339, UTC, milliseconds): a str is sent as given; a
    datetime (naive ones are UTC); a timedelta or a number of seconds is that long from now.
    None stays None (on PATCH, not_before=None clears the schedule)."""
    if when is None or isinstance(when, str):
        return when
    if isinstance(when, datetime.timedelta):
        when = datetime.datetime.now(datetime.timezone.utc) + when
    elif isinstance(when, (int, float)) and not isinstance(when, bool):
        when = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=when)
    if not isinstance(when, datetime.datetime):
        raise TypeError('a time is a str, datetime, timedelta or seconds: %r' % (when,))
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    when = when.astimezone(datetime.timezone.utc)
    return when.strftime('%Y-%m-%dT%H:%M:%S.') + '%03dZ' % (when.microsecond // 1000)


class Client:
    """Client('http://127.0.0.1:8080', token). timeout: seconds per request (a long-poll adds
    its wait). Safe to share between threads: each thread gets its own connection."""

    def __init__(self, url, token=None, timeout=30.0, user_agent='boardd-python'):
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ('http', 'https') or not u.hostname:
            raise ValueError('boardd URL must be http(s)://host[:port]: %r' % url)
        self.url = url.rstrip('/')
        self._https = u.scheme == 'https'
        self._host = u.hostname
        self._port = u.port or (443 if self._https else 80)
        self._prefix = u.path.rstrip('/')
        self.token = token
        self.timeout = timeout
        self.user_agent = user_agent
        self._local = threading.local()

    # ---- transport ------------------------------------------------------------------------

    def _conn(self, timeout):
        c = getattr(self._local, 'conn', None)
        if c is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            c = cls(self._host, self._port, timeout=timeout)
            self._local.conn = c
        c.timeout = timeout
        if c.sock is not None:
            c.sock.settimeout(timeout)
        return c

    def close(self):
        """Closes this thread's connection (others close with their threads)."""
        c = getattr(self._local, 'conn', None)
        if c is not None:
            c.close()
            self._local.conn = None

    # a request re-sent on a fresh connection when a reused one breaks (Go's net/http rule):
    # only these methods, or a request that carries an Idempotency-Key
    _RESEND = frozenset(('GET', 'HEAD', 'PUT', 'DELETE', 'OPTIONS'))

    @staticmethod
    def _closed_by_peer(c):
        """True when the idle keep-alive connection has been closed by the server (its socket
        reads as ready with nothing pending: EOF or a reset)."""
        try:
            r, _, _ = select.select([c.sock], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(r)

    def raw(self, method, path, body=None, headers=None, timeout=None):
        """(status, parsed JSON or text or None, headers) of one request; no error raised for
        an error status. An idle keep-alive connection the server closed is replaced before the
        request is sent; when a reused connection breaks after the request went out, the
        request is sent once more on a fresh one only if that cannot do it twice: a GET, HEAD,
        PUT, DELETE or OPTIONS, or a request with an Idempotency-Key header. Any other
        (a POST, a PATCH) raises TransportError: the server may have done it. A DELETE so
        sent again that is answered 404 was done by the first try: it is answered 204."""
        hdrs = {'Accept': 'application/json', 'User-Agent': self.user_agent}
        if self.token:
            hdrs['Authorization'] = 'Bearer ' + self.token
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            hdrs['Content-Type'] = 'application/json'
        hdrs.update(headers or {})
        timeout = timeout or self.timeout
        resend = method.upper() in self._RESEND or any(
            k.lower() == 'idempotency-key' and v for k, v in hdrs.items())
        for attempt in (0, 1):
            c = self._conn(timeout)
            if c.sock is not None and self._closed_by_peer(c):
                c.close()  # closed while idle: nothing was sent on it, a fresh one
            fresh = c.sock is None
            try:
                c.request(method, self._prefix + path, body=data, headers=hdrs)
                r = c.getresponse()
                raw = r.read()
            except (OSError, http.client.HTTPException) as e:
                c.close()
                self._local.conn = None
                # a reused keep-alive connection broke: once more, if that cannot do it twice
                if attempt == 0 and not fresh and resend and not isinstance(e, TimeoutError):
                    continue
                raise TransportError(0, 'transport', '%s: %s' % (type(e).__name__, e),
                                     method=method, path=path) from None
            if r.getheader('Connection', '').lower() == 'close':
                c.close()
                self._local.conn = None
            if attempt == 1 and r.status == 404 and method.upper() == 'DELETE':
                return 204, None, {k: v for k, v in r.getheaders()}  # gone: the lost try's doing
            ctype = (r.getheader('Content-Type') or '').split(';')[0].strip()
            if not raw:
                parsed = None
            elif ctype.endswith('json'):
                try:
                    parsed = json.loads(raw)
                except ValueError:
                    parsed = raw.decode('utf-8', 'replace')
            else:
                parsed = raw.decode('utf-8', 'replace')
            return r.status, parsed, {k: v for k, v in r.getheaders()}
        raise AssertionError('unreachable')

    def call(self, method, path, body=None, headers=None, timeout=None):
        """The answer's body (None for 204); an error status raises its BoarddError class."""
        st, parsed, hdrs = self.raw(method, path, body, headers, timeout)
        if st >= 400:
            raise error_for(st, parsed, hdrs, method, path)
        return parsed

    @staticmethod
    def _fence(epoch):
        return {'If-Match': '"%d"' % int(epoch)}

    @classmethod
    def routes(cls):
        """{(METHOD, '/path/{param}'): method name} of every route this client calls."""
        out = {}
        for name in dir(cls):
            r = getattr(getattr(cls, name), 'route', None)
            if r:
                out[r] = name
        return out

    # ---- service ----------------------------------------------------------------------------

    @route('GET', '/healthz')
    def healthz(self):
        return self.call('GET', '/healthz')

    @route('GET', '/readyz')
    def readyz(self):
        return self.call('GET', '/readyz')

    @route('GET', '/metrics')
    def metrics(self):
        """The Prometheus text."""
        return self.call('GET', '/metrics')

    @route('GET', '/openapi.json')
    def openapi_json(self):
        return self.call('GET', '/openapi.json')

    @route('GET', '/openapi.yaml')
    def openapi_yaml(self):
        return self.call('GET', '/openapi.yaml')

    @route('GET', '/v1/whoami')
    def whoami(self):
        return self.call('GET', '/v1/whoami')

    @route('GET', '/')
    def root(self):
        """The server's root (it sends a browser to the UI); the answer as given."""
        return self.call('GET', '/')

    @route('GET', '/ui')
    def ui(self):
        return self.call('GET', '/ui')

    @route('GET', '/ui/')
    def ui_index(self):
        return self.call('GET', '/ui/')

    @route('GET', '/ui/{file}')
    def ui_file(self, file):
        return self.call('GET', '/ui/' + _q(file))

    @route('POST', '/mcp')
    def mcp(self, message, session=None):
        """One JSON-RPC message to the MCP endpoint; the answer as parsed."""
        h = {'Accept': 'application/json, text/event-stream'}
        if session:
            h['Mcp-Session-Id'] = session
        return self.call('POST', '/mcp', message, h)

    # ---- cards --------------------------------------------------------------------------

    @route('POST', '/v1/cards')
    def create_card(self, card, idempotency_key=None, not_before=None):
        """A dict creates one card (201: the card); a list is a batch (§18: {results}).
        not_before (§17; see rfc3339: a datetime, a str, a timedelta or seconds from now):
        the card is not claimed before then (a claim is refused NotYet)."""
        h = {'Idempotency-Key': idempotency_key} if idempotency_key else None
        if not_before is not None:
            card = dict(card, not_before=rfc3339(not_before))
        return self.call('POST', '/v1/cards', card, h)

    def create_cards(self, cards):
        """A batch create (§18), at most 1 000 card bodies: {results: [...]}."""
        return self.call('POST', '/v1/cards', list(cards))

    @route('GET', '/v1/cards')
    def list_cards(self, board=None, state=None, label=None, claimed=None, limit=None,
                   after=None):
        """One page: {cards, next}."""
        return self.call('GET', '/v1/cards' + _query(board=board, state=state, label=label,
                                                     claimed=claimed, limit=limit,
                                                     after=after))

    def iter_cards(self, board=None, state=None, label=None, claimed=None, limit=500):
        """Every card, page after page."""
        after = None
        while True:
            page = self.list_cards(board, state, label, claimed, limit, after)
            yield from page.get('cards', [])
            after = page.get('next')
            if not after:
                return

    @route('GET', '/v1/cards/{id}')
    def get_card(self, card_id):
        return self.call('GET', '/v1/cards/' + _q(card_id))

    @route('PATCH', '/v1/cards/{id}')
    def update_card(self, card_id, **fields):
        """title, body, blockers, priority, not_before (as create_card's; None clears it)."""
        if 'not_before' in fields:
            fields['not_before'] = rfc3339(fields['not_before'])
        return self.call('PATCH', '/v1/cards/' + _q(card_id), fields)

    @route('DELETE', '/v1/cards/{id}')
    def delete_card(self, card_id):
        return self.call('DELETE', '/v1/cards/' + _q(card_id))

    @route('POST', '/v1/cards/{id}/reopen')
    def reopen(self, card_id, to, reason=None):
        return self.call('POST', '/v1/cards/%s/reopen' % _q(card_id), _body(to=to, reason=reason))

    @route('PATCH', '/v1/cards/{id}/state')
    def set_state(self, card_id, to, frm=None, reason=None, marker=None, epoch=None,
                  release=None, retry=None):
        """With marker and epoch: the holder's fenced move (release=True also releases, one
        step; with retry=True an attempt is counted too, §17). Without: SetStateFrom (bots
        send frm; operators may omit it)."""
        if marker is not None:
            return self.call('PATCH', '/v1/cards/%s/state' % _q(card_id),
                             _body(marker=marker, to=to, reason=reason, release=release,
                                   retry=retry),
                             self._fence(epoch))
        return self.call('PATCH', '/v1/cards/%s/state' % _q(card_id),
                         _body(to=to, reason=reason, **({'from': frm} if frm else {})))

    @route('PUT', '/v1/cards/{id}/labels')
    def set_labels(self, card_id, labels):
        return self.call('PUT', '/v1/cards/%s/labels' % _q(card_id), {'labels': list(labels)})

    @route('PATCH', '/v1/cards/{id}/labels')
    def adjust_labels(self, card_id, add=(), remove=()):
        return self.call('PATCH', '/v1/cards/%s/labels' % _q(card_id),
                         {'add': list(add), 'remove': list(remove)})

    @route('POST', '/v1/cards/{id}/comments')
    def comment(self, card_id, body, marker=None, epoch=None):
        """A bot's or operator's comment; with marker and epoch the claim holder's (fenced)."""
        if marker is not None:
            return self.call('POST', '/v1/cards/%s/comments' % _q(card_id),
                             {'marker': marker, 'body': body}, self._fence(epoch))
        return self.call('POST', '/v1/cards/%s/comments' % _q(card_id), {'body': body})

    @route('GET', '/v1/cards/{id}/runs')
    def card_runs(self, card_id, limit=None, after=None):
        """One page of the card's runs, newest first (§20): {runs, next}."""
        return self.call('GET', '/v1/cards/%s/runs%s' % (_q(card_id),
                                                          _query(limit=limit, after=after)))

    # ---- claims -------------------------------------------------------------------------

    @route('POST', '/v1/cards/{id}/claim')
    def claim(self, card_id, marker, lease_ms=None):
        return self.call('POST', '/v1/cards/%s/claim' % _q(card_id),
                         _body(marker=marker, lease_ms=lease_ms))

    @route('POST', '/v1/cards/{id}/renew')
    def renew(self, card_id, marker, epoch, lease_ms=None):
        return self.call('POST', '/v1/cards/%s/renew' % _q(card_id),
                         _body(marker=marker, epoch=epoch, lease_ms=lease_ms))

    @route('POST', '/v1/cards/{id}/release')
    def release(self, card_id, marker, epoch, retry=None):
        """retry=True (§17): the card goes back with one more attempt and a backoff
        (not_before); at the board's retry.max_attempts the server files it into the failed
        column with gave_up {reason: attempts_exhausted} instead. Answers the card."""
        return self.call('POST', '/v1/cards/%s/release' % _q(card_id),
                         _body(marker=marker, epoch=epoch, retry=retry))

    @route('POST', '/v1/cards/{id}/claim/revoke')
    def revoke_claim(self, card_id):
        """Drops any claim on the card (operator)."""
        return self.call('POST', '/v1/cards/%s/claim/revoke' % _q(card_id))

    @route('PUT', '/v1/cards/{id}/last-run')
    def set_last_run(self, card_id, marker, epoch, run_id):
        return self.call('PUT', '/v1/cards/%s/last-run' % _q(card_id),
                         {'marker': marker, 'run_id': run_id}, self._fence(epoch))

    @route('PUT', '/v1/cards/{id}/awaiting-input')
    def set_awaiting_input(self, card_id, marker, epoch, awaiting_input):
        return self.call('PUT', '/v1/cards/%s/awaiting-input' % _q(card_id),
                         {'marker': marker, 'awaiting_input': awaiting_input},
                         self._fence(epoch))

    @route('PUT', '/v1/cards/{id}/gave-up')
    def set_gave_up(self, card_id, marker, epoch, gave_up):
        return self.call('PUT', '/v1/cards/%s/gave-up' % _q(card_id),
                         {'marker': marker, 'gave_up': gave_up}, self._fence(epoch))

    @route('POST', '/v1/cards/{id}/agent-tokens')
    def agent_token(self, card_id, marker, epoch, caps, ttl_ms=None):
        return self.call('POST', '/v1/cards/%s/agent-tokens' % _q(card_id),
                         _body(marker=marker, caps=list(caps), ttl_ms=ttl_ms),
                         self._fence(epoch))

    @route('POST', '/v1/boards/{b}/claim-next')
    def claim_next(self, board, marker, lease_ms=None, columns=None, labels=None, wait_ms=None,
                   count=None, idempotency_key=None):
        """None when nothing came within wait_ms (204); else {card, token}, or with count
        (§18) {claims: [{card, token}, ...]}."""
        h = {'Idempotency-Key': idempotency_key} if idempotency_key else None
        return self.call('POST', '/v1/boards/%s/claim-next' % _q(board),
                         _body(marker=marker, lease_ms=lease_ms, columns=columns,
                               labels=labels, wait_ms=wait_ms, count=count), h,
                         timeout=self.timeout + (wait_ms or 0) / 1000.0)

    @route('POST', '/v1/claims/renew')
    def renew_many(self, tokens, lease_ms=None):
        """§18: tokens [{card, marker, epoch}] -> {results: [...]}, one per token."""
        return self.call('POST', '/v1/claims/renew', _body(tokens=list(tokens),
                                                            lease_ms=lease_ms))

    @route('POST', '/v1/claims/release')
    def release_many(self, tokens):
        """§18: tokens [{card, marker, epoch, to?, reason?, retry?}] -> {results: [...]}."""
        return self.call('POST', '/v1/claims/release', {'tokens': list(tokens)})

    # ---- labels -------------------------------------------------------------------------

    @route('GET', '/v1/labels')
    def labels(self, board=None):
        return self.call('GET', '/v1/labels' + _query(board=board))

    @route('POST', '/v1/labels/rename')
    def rename_label(self, frm, to, board=None):
        return self.call('POST', '/v1/labels/rename', _body(board=board, to=to, **{'from': frm}))

    @route('POST', '/v1/labels/merge')
    def merge_labels(self, frm, to, board=None):
        """frm: a label or a list of labels merged into `to`."""
        return self.call('POST', '/v1/labels/merge', _body(board=board, to=to, **{'from': frm}))

    @route('DELETE', '/v1/labels/{name}')
    def delete_label(self, name, board=None):
        return self.call('DELETE', '/v1/labels/%s%s' % (_q(name), _query(board=board)))

    # ---- runs ---------------------------------------------------------------------------

    @route('POST', '/v1/runs')
    def create_run(self, card_id, marker, status='running', run_id=None, lease_ms=None,
                   idempotency_key=None):
        h = {'Idempotency-Key': idempotency_key} if idempotency_key else None
        return self.call('POST', '/v1/runs', _body(card_id=card_id, marker=marker, status=status,
                                                   id=run_id, lease_ms=lease_ms), h)

    @route('GET', '/v1/runs')
    def list_runs(self, board=None, status=None, limit=None, after=None):
        """§20: {runs, next}."""
        return self.call('GET', '/v1/runs' + _query(board=board, status=status, limit=limit,
                                                    after=after))

    @route('GET', '/v1/runs/{id}')
    def get_run(self, run_id):
        return self.call('GET', '/v1/runs/' + _q(run_id))

    _UNSET = object()

    @route('PATCH', '/v1/runs/{id}')
    def update_run(self, run_id, marker, status=None, continuation=_UNSET, failure_code=None,
                   result=_UNSET, error=None, lease_ms=None):
        """The owner's write (renews the run lock). result may be any JSON value (None too)."""
        b = _body(marker=marker, status=status, failure_code=failure_code, error=error,
                  lease_ms=lease_ms)
        if continuation is not Client._UNSET:
            b['continuation'] = continuation
        if result is not Client._UNSET:
            b['result'] = result
        return self.call('PATCH', '/v1/runs/' + _q(run_id), b)

    @route('DELETE', '/v1/runs/{id}')
    def prune_run(self, run_id):
        return self.call('DELETE', '/v1/runs/' + _q(run_id))

    @route('POST', '/v1/runs/{id}/heartbeat')
    def heartbeat_run(self, run_id, marker, lease_ms=None, timeout=None):
        """timeout: seconds for this request (the worker's renew tick bounds it by its own)."""
        return self.call('POST', '/v1/runs/%s/heartbeat' % _q(run_id),
                         _body(marker=marker, lease_ms=lease_ms), timeout=timeout)

    @route('POST', '/v1/runs/{id}/cancel')
    def cancel_run(self, run_id):
        return self.call('POST', '/v1/runs/%s/cancel' % _q(run_id))

    @route('POST', '/v1/runs/{id}/output')
    def append_output(self, run_id, marker, text):
        """§20: appends to the run's output tail (64 KiB kept)."""
        return self.call('POST', '/v1/runs/%s/output' % _q(run_id),
                         {'marker': marker, 'text': text})

    # ---- events -------------------------------------------------------------------------

    @route('GET', '/v1/events')
    def events(self, board=None, after=None, limit=None, wait_ms=None):
        """One page of the audit tail: {events, next}."""
        return self.call('GET', '/v1/events' + _query(board=board, after=after, limit=limit,
                                                      wait_ms=wait_ms),
                         timeout=self.timeout + (wait_ms or 0) / 1000.0)

    def follow_events(self, board=None, after=None, wait_ms=10000, limit=500):
        """Every event after `after`, for ever (long-poll), resuming from the last one seen
        after any transport error: yields events."""
        while True:
            try:
                page = self.events(board, after, limit, wait_ms)
            except (TransportError, StoreUnavailable):
                time.sleep(0.5)
                continue
            for ev in page.get('events', []):
                after = ev.get('seq', after)
                yield ev
            if page.get('next') is not None:
                after = page['next']

    @route('GET', '/v1/events/stream')
    def stream_events(self, board=None, after=None, last_event_id=None, timeout=None):
        """The event stream (SSE): yields events (dicts) as they come; keep-alives skipped.
        Reconnect with last_event_id = the last event's seq to resume."""
        h = {'Accept': 'text/event-stream'}
        if self.token:
            h['Authorization'] = 'Bearer ' + self.token
        if last_event_id is not None:
            h['Last-Event-ID'] = str(last_event_id)
        cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        c = cls(self._host, self._port, timeout=timeout or 60)
        path = '/v1/events/stream' + _query(board=board, after=after)
        try:
            c.request('GET', self._prefix + path, headers=h)
            r = c.getresponse()
            if r.status >= 400:
                raw = r.read()
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = raw.decode('utf-8', 'replace')
                raise error_for(r.status, body, dict(r.getheaders()), 'GET', path)
            data = []
            for line in r:
                line = line.decode('utf-8').rstrip('\r\n')
                if line.startswith('data:'):
                    data.append(line[5:].lstrip(' '))
                elif line == '' and data:
                    yield json.loads('\n'.join(data))
                    data = []
        except (OSError, http.client.HTTPException) as e:
            raise TransportError(0, 'transport', str(e), method='GET', path=path) from None
        finally:
            c.close()

    @route('GET', '/v1/attention')
    def attention(self, board=None):
        return self.call('GET', '/v1/attention' + _query(board=board))

    # ---- boards -------------------------------------------------------------------------

    @route('GET', '/v1/boards')
    def boards(self):
        return self.call('GET', '/v1/boards')

    @route('GET', '/v1/boards/{b}')
    def get_board(self, board):
        """The board (§17 adds): each column's `limit` (absent: none) beside its `claimed`
        count, the board's `max_claims` and `claimed` total, its own `retry` policy (absent:
        none) and `retry_effective`, the one in force {max_attempts, backoff_ms,
        max_backoff_ms}."""
        return self.call('GET', '/v1/boards/' + _q(board))

    @route('PUT', '/v1/boards/{b}')
    def put_board(self, board, config):
        """config: {columns, running, completed, failed, waiting}; columns may carry `limit`,
        the board `max_claims` and `retry` (§17). What get_board answers may come back as is:
        the read-only `claimed` counts and `retry_effective` are ignored."""
        return self.call('PUT', '/v1/boards/' + _q(board), config)

    @route('POST', '/v1/boards/{b}/columns/{c}/rename')
    def rename_column(self, board, column, to):
        return self.call('POST', '/v1/boards/%s/columns/%s/rename' % (_q(board), _q(column)),
                         {'to': to})

    @route('GET', '/v1/boards/{b}/activity')
    def activity(self, board, minutes=None):
        """The last hour per minute (this replica's, reset on restart): {board, minute_ms,
        minutes, series: {claims, completions, failures, reaper_actions}, columns}."""
        return self.call('GET', '/v1/boards/%s/activity' % _q(board) + _query(minutes=minutes))

    @route('GET', '/v1/boards/{b}/subscriptions')
    def subscriptions(self, board):
        return self.call('GET', '/v1/boards/%s/subscriptions' % _q(board))

    @route('GET', '/v1/boards/{b}/subscriptions/{name}')
    def get_subscription(self, board, name):
        return self.call('GET', '/v1/boards/%s/subscriptions/%s' % (_q(board), _q(name)))

    @route('PUT', '/v1/boards/{b}/subscriptions/{name}')
    def put_subscription(self, board, name, config):
        return self.call('PUT', '/v1/boards/%s/subscriptions/%s' % (_q(board), _q(name)), config)

    @route('DELETE', '/v1/boards/{b}/subscriptions/{name}')
    def delete_subscription(self, board, name):
        return self.call('DELETE', '/v1/boards/%s/subscriptions/%s' % (_q(board), _q(name)))

    @route('GET', '/v1/deliveries')
    def deliveries(self, board=None, status=None, limit=None):
        return self.call('GET', '/v1/deliveries' + _query(board=board, status=status,
                                                          limit=limit))

    @route('POST', '/v1/deliveries/{id}/retry')
    def retry_delivery(self, delivery_id):
        return self.call('POST', '/v1/deliveries/%s/retry' % _q(delivery_id))

    @route('GET', '/v1/reaper')
    def reaper(self):
        return self.call('GET', '/v1/reaper')

    @route('POST', '/v1/reaper/pass')
    def reaper_pass(self):
        return self.call('POST', '/v1/reaper/pass')
