#!/usr/bin/env python3
"""API tests of DESIGN §15 against the boardd binary: GET /v1/events/stream (framing, resume
with Last-Event-ID, scoping, heartbeats, the stream limit -> 503), GET /v1/attention (each
reason, scope, refusals), GET /v1/whoami and the /ui answers' headers. Standard library only.

usage: test_stream_api.py path/to/boardd [--mongo]
  --mongo: on the Mongo twin at $BOARDD_TEST_MONGO_URI (skipped, exit 77, when unset; in CI
  it fails instead)
"""
import json
import os
import re
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
import boardd_test as bt  # noqa: E402
from boardd_test import Board, check  # noqa: E402


def open_stream(srv, who='op', query='', last_id=None, seconds=15):
    """A stream, retried while the server is at its limit: streams closed by earlier checks
    hold their slot until their next heartbeat write finds the client gone."""
    deadline = time.time() + seconds
    while True:
        s = srv.stream(who, query, last_id)
        if s.status != 503 or time.time() > deadline:
            return s
        time.sleep(0.2)


def test_stream(srv):
    srv.ok('POST', '/v1/cards', 'bot', {'id': 's1', 'title': 'one'})
    srv.ok('POST', '/v1/cards', 'bot', {'id': 's2', 'title': 'two'})
    s = open_stream(srv, query='?board=default')
    check(s.status == 200, 'stream answers 200 (%s %s)' % (s.status, s.body))
    check(s.headers.get('content-type') == 'text/event-stream', 'content type text/event-stream')
    check(s.headers.get('cache-control') == 'no-store', 'the stream is not cached')
    first = s.frame()
    check(first and first['retry'] == '2000', 'the first frame sets the retry delay')
    seen = []
    while True:
        f = s.event(5)
        check(f is not None, 'the backlog is streamed')
        if f is None:
            break
        check(f['id'] == str(f['data']['seq']), 'id: is the event seq')
        check(f['event'] == f['data']['type'], 'event: is the event type')
        seen.append(f)
        if f['data'].get('card_id') == 's2':
            break
    check([f['data']['type'] for f in seen][-2:] == ['card_created', 'card_created'],
          'the two creations, in order')
    # live: an event written now arrives on the open stream
    srv.ok('POST', '/v1/cards', 'bot', {'id': 's3', 'title': 'three'})
    f = s.event()
    check(f and f['data']['card_id'] == 's3' and f['event'] == 'card_created', 'a live event arrives')
    last = int(f['id'])
    s.close()
    # resume: Last-Event-ID wins over after=0; nothing is sent twice
    srv.ok('POST', '/v1/cards', 'bot', {'id': 's4', 'title': 'four'})
    s = open_stream(srv, query='?board=default&after=0', last_id=last)
    f = s.event()
    check(f and int(f['id']) > last and f['data']['card_id'] == 's4',
          'Last-Event-ID resumes right after the last event (%s)' % (f and f['id']))
    s.close()
    s = open_stream(srv, query='?after=%d' % last)
    f = s.event()
    check(f and f['data']['card_id'] == 's4', 'after= resumes too')
    s.close()
    # refusals
    s = open_stream(srv, last_id='x')
    check(s.status == 400 and 'Last-Event-ID' in s.body, 'a bad Last-Event-ID is 400')
    # The same bounds as after=: up to 2^63 - 1, one past it 400.
    s = open_stream(srv, last_id=str(2**63 - 1))
    check(s.status == 200, 'Last-Event-ID 2^63-1 is taken as after= is: %s' % s.status)
    s.close()
    s = open_stream(srv, query='?after=%d' % (2**63 - 1))
    check(s.status == 200, 'after=2^63-1 too: %s' % s.status)
    s.close()
    s = open_stream(srv, last_id=str(2**63))
    check(s.status == 400 and 'Last-Event-ID' in s.body, 'Last-Event-ID 2^63 is 400')
    s = open_stream(srv, query='?after=-1')
    check(s.status == 400, 'a negative after is 400')
    st, _, _ = srv.call('GET', '/v1/events/stream', who=None)
    check(st == 401, 'no token: 401')


def test_scope(srv):
    cfg = srv.ok('GET', '/v1/boards/default')
    cfg['name'] = 'other'
    st, _, _ = srv.call('PUT', '/v1/boards/other', 'op', cfg)
    check(st in (200, 201), 'board other created (%s)' % st)
    s = open_stream(srv, 'scoped')
    srv.ok('POST', '/v1/cards', 'bot', {'id': 'd-secret', 'title': 'default board'})
    srv.ok('POST', '/v1/cards', 'scoped', {'id': 'o1', 'title': 'other board', 'board': 'other'})
    f = s.event()
    while f and f['data']['type'] == 'board_updated':
        f = s.event()
    check(f and f['data']['card_id'] == 'o1', 'a scoped token sees its board only (%s)' % (f and f['data']))
    s.close()
    s = open_stream(srv, 'scoped', '?board=default')
    check(s.status == 403, 'a scoped token may not stream another board')
    s = open_stream(srv, 'op', '?board=other&after=0')
    boards = set()
    while True:
        f = s.event(3)
        if not f:
            break
        boards.add(f['data']['board'])
        if f['data'].get('card_id') == 'o1':
            break
    check(boards == {'other'}, 'board=other streams that board only (%s)' % boards)
    s.close()
    s = open_stream(srv, 'op', '?board=no%20such')
    check(s.status == 400, 'a malformed board is 400')


def ended(s, seconds=5):
    """True when the stream ends (EOF) within `seconds` without carrying an event: a live
    stream sends a keep-alive every 300 ms here, so a frame() of None is its end."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        f = s.frame(2)
        if f is None:
            return True
        if f['data'] is not None:
            return False
    return False


def read_until(s, cid, seconds=10):
    """Reads the stream (its backlog first) up to the event of card `cid`; that frame."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        f = s.event(max(0.1, deadline - time.time()))
        if f is None or f['data'].get('card_id') == cid:
            return f
    return None


def remove_token(srv, name):
    """Takes token `name` out of the tokens file, reloads (SIGHUP) and waits until it is 401."""
    with open(srv.tokens_file) as fh:
        doc = json.load(fh)
    doc['tokens'] = [t for t in doc['tokens'] if t['name'] != name]
    with open(srv.tokens_file, 'w') as fh:
        json.dump(doc, fh)
    srv.proc.send_signal(signal.SIGHUP)
    deadline = time.time() + 10
    while srv.call('GET', '/v1/boards', name)[0] != 401 and time.time() < deadline:
        time.sleep(0.1)


def test_token_checked_again(srv):
    """DESIGN §13, §16: a revoked agent token, or a tokens-file token a reload removed, is
    401 on its next request; its open stream ends too, before the next event."""
    srv.ok('POST', '/v1/cards', 'bot', {'id': 'ag1', 'title': 'agent', 'state': 'ready'})
    e = srv.claim('ag1', 'm-ag')['epoch']
    srv.tok['agent'] = srv.ok('POST', '/v1/cards/ag1/agent-tokens', 'worker',
                              {'marker': 'm-ag', 'caps': ['board.read']},
                              {'If-Match': '"%d"' % e})['token']
    s = open_stream(srv, 'agent')
    check(s.status == 200, 'an agent token streams its board (%s %s)' % (s.status, s.body))
    srv.ok('POST', '/v1/cards', 'bot', {'id': 'ag2', 'title': 'seen'})
    f = read_until(s, 'ag2')
    check(f and f['data'].get('card_id') == 'ag2', 'the agent stream carries events (%s)' % f)
    srv.ok('POST', '/v1/cards/ag1/claim/revoke', 'op')
    srv.ok('POST', '/v1/cards', 'bot', {'id': 'ag3', 'title': 'after the revoke'})
    check(ended(s), 'the revoked agent token\'s stream ends without the next event')
    s.close()
    s = open_stream(srv, 'agent')
    check(s.status == 401, 'a new stream with it is 401 (%s)' % s.status)
    # a tokens-file token removed by a reload; an unchanged one's stream goes on
    srv.tok['gone'] = bt.token_add(srv.binary, srv.tokens_file, 'gone', ['bot'])
    srv.proc.send_signal(signal.SIGHUP)
    deadline = time.time() + 10
    while srv.call('GET', '/v1/boards', 'gone')[0] != 200 and time.time() < deadline:
        time.sleep(0.1)
    gone = open_stream(srv, 'gone')
    kept = open_stream(srv, 'op')
    check(gone.status == 200 and kept.status == 200, 'both stream (%s %s)' % (gone.status,
                                                                             kept.status))
    srv.ok('POST', '/v1/cards', 'bot', {'id': 'ag-mark', 'title': 'the backlog ends here'})
    check(read_until(gone, 'ag-mark') and read_until(kept, 'ag-mark'), 'both read to now')
    remove_token(srv, 'gone')
    srv.ok('POST', '/v1/cards', 'bot', {'id': 'ag4', 'title': 'after the reload'})
    check(ended(gone), 'the removed token\'s stream ends without the next event')
    f = read_until(kept, 'ag4')
    check(f is not None, 'an unchanged token\'s stream goes on (%s)'
          % f)
    gone.close()
    kept.close()


def test_long_poll_token_checked_again(srv):
    """A long-poll whose token a reload removes while it waits answers 401, not the events
    written since (it answered 200 with them)."""
    srv.tok['poller'] = bt.token_add(srv.binary, srv.tokens_file, 'poller', ['bot'])
    srv.proc.send_signal(signal.SIGHUP)
    deadline = time.time() + 10
    while srv.call('GET', '/v1/boards', 'poller')[0] != 200 and time.time() < deadline:
        time.sleep(0.1)
    tail = srv.ok('GET', '/v1/events?limit=1000&after=0', 'op')
    after = tail['next']
    got = {}

    def poll():
        got['r'] = srv.call('GET', '/v1/events?after=%d&wait_ms=15000' % after, 'poller')
    th = threading.Thread(target=poll)
    th.start()
    time.sleep(0.5)
    remove_token(srv, 'poller')
    srv.ok('POST', '/v1/cards', 'bot', {'id': 'lp-after', 'title': 'after the reload'})
    th.join(30)
    st = got.get('r', (None,))[0]
    check(st == 401, 'the removed token\'s long-poll answers 401 (%s %s)'
          % (st, str(got.get('r', ('', ''))[1])[:160]))


def test_heartbeat_and_limit(srv):
    # the server runs with --max-streams 3 --stream-heartbeat-ms 300
    a = open_stream(srv, query='?after=999999')
    a.frame()  # the opening frame
    f = a.frame(10)
    check(f and 'keep-alive' in f['comments'], 'an idle stream gets a comment line')
    # a busy stream gets its comment line too (every heartbeat, not only when idle)
    last = srv.ok('GET', '/v1/events?after=0&limit=1000')['next']
    busy = open_stream(srv, query='?after=%d' % last)
    busy.frame()
    for i in range(12):
        srv.ok('POST', '/v1/cards', 'bot', {'title': 'busy %d' % i})
        time.sleep(0.1)
    events = comments = 0
    while True:
        f = busy.frame(1)
        if f is None:
            break
        events += f['data'] is not None
        comments += 'keep-alive' in f['comments']
        if events >= 12 and comments:
            break
    check(events >= 12 and comments >= 1,
          'a busy stream gets comment lines as well (%d events, %d comments)' % (events, comments))
    busy.close()
    b = open_stream(srv, query='?after=999999')
    # One token holds at most all but a quarter of the slots (one, of three): a client that
    # keeps streams open never keeps every other client out (DESIGN §11).
    mine = srv.stream(query='?after=999999')
    mb = json.loads(mine.body or '{}')
    check(mine.status == 503 and mb.get('code') == 'busy' and 'its share' in mb.get('detail', '')
          and mine.headers.get('retry-after') is not None,
          'a third stream of one token is refused 503 busy, its share (%s %s)'
          % (mine.status, mb))
    c = open_stream(srv, who='bot', query='?after=999999')
    check(b.status == 200 and c.status == 200, 'three streams open (two tokens)')
    st, text, _ = srv.call('GET', '/metrics', None)
    check(st == 200 and 'boardd_event_streams_open 3' in text, 'the gauge counts three streams')
    d = srv.stream(query='?after=999999')
    check(d.status == 503, 'a fourth stream is refused (%s)' % d.status)
    check(d.headers.get('retry-after') is not None, '... with Retry-After')
    check(d.headers.get('content-type') == 'application/problem+json', '... as problem+json')
    check(d.body and json.loads(d.body).get('code') == 'busy', '... code busy')
    # a client that goes away frees its slot (found at its next heartbeat at the latest)
    a.close()
    ok = False
    deadline = time.time() + 15
    while time.time() < deadline and not ok:
        e = srv.stream(query='?after=999999')
        ok = e.status == 200
        if not ok:
            time.sleep(0.2)
        else:
            e.close()
    check(ok, 'a closed stream frees its slot')
    b.close()
    c.close()


def reasons(srv, cid, who='op', board=None):
    q = '/v1/attention' + ('?board=' + board if board else '')
    j = srv.ok('GET', q, who)
    for item in j['cards']:
        if item['card']['id'] == cid:
            return sorted(item['reasons'])
    return []


def test_attention(srv):
    check(srv.ok('GET', '/v1/attention')['truncated'] is False, 'attention answers {cards, truncated}')
    # gave_up: stamped by its holder and filed to blocked
    srv.give_up('a-gave', 'gave up')
    check(reasons(srv, 'a-gave') == ['gave_up'], 'gave_up (%s)' % reasons(srv, 'a-gave'))
    # run_failed
    srv.ok('POST', '/v1/cards', 'bot', {'id': 'a-fail', 'title': 'failed', 'state': 'in_progress'})
    ep = srv.claim('a-fail')['epoch']
    srv.run_with_status('a-fail', ep, 'r-fail', 'failed')
    check(reasons(srv, 'a-fail') == ['run_failed'], 'run_failed (%s)' % reasons(srv, 'a-fail'))
    # run_paused
    srv.ok('POST', '/v1/cards', 'bot', {'id': 'a-pause', 'title': 'paused', 'state': 'in_progress'})
    ep = srv.claim('a-pause')['epoch']
    srv.run_with_status('a-pause', ep, 'r-pause', 'paused_waiting_human')
    check(reasons(srv, 'a-pause') == ['run_paused'], 'run_paused')
    # awaiting_input
    srv.ok('POST', '/v1/cards', 'bot', {'id': 'a-input', 'title': 'input', 'state': 'in_progress'})
    ep = srv.claim('a-input')['epoch']
    srv.owned('PUT', '/v1/cards/a-input/awaiting-input', ep, {'marker': 'w1', 'awaiting_input': True})
    check(reasons(srv, 'a-input') == ['awaiting_input'], 'awaiting_input')
    # recovery_hold: the reaper transfers an expired claim and keeps it (a resumable run
    # parked outside the running and eligible columns)
    srv.ok('POST', '/v1/cards', 'bot', {'id': 'a-hold', 'title': 'held', 'state': 'review'})
    ep = srv.claim('a-hold', lease_ms=200)['epoch']
    srv.run_with_status('a-hold', ep, 'r-hold', 'failed_resumable')
    time.sleep(0.4)
    check(reasons(srv, 'a-hold') == ['lease_expired_kept'], 'lease_expired_kept before the pass')
    p = srv.ok('POST', '/v1/reaper/pass')
    check(p['actions']['keep'] >= 1, 'the reaper kept it (%s)' % p)
    check(reasons(srv, 'a-hold') == ['recovery_hold'], 'recovery_hold (%s)' % reasons(srv, 'a-hold'))
    # lease_expired_kept: nobody took it (no pass since)
    srv.ok('POST', '/v1/cards', 'bot', {'id': 'a-live', 'title': 'live', 'state': 'in_progress'})
    srv.claim('a-live', lease_ms=600000)
    check(reasons(srv, 'a-live') == [], 'a live lease is fine')
    srv.ok('POST', '/v1/cards', 'bot', {'id': 'a-lease', 'title': 'lease', 'state': 'in_progress'})
    srv.claim('a-lease', lease_ms=200)
    time.sleep(0.4)
    check(reasons(srv, 'a-lease') == ['lease_expired_kept'], 'lease_expired_kept')
    # a reopen answers a give-up
    srv.ok('POST', '/v1/cards/a-gave/reopen', 'op', {'to': 'ready'})
    check(reasons(srv, 'a-gave') == [], 'reopened: out of the lane')
    # scope and refusals
    check(reasons(srv, 'a-fail', 'scoped') == [], 'a scoped token sees no other board in the lane')
    st, _, _ = srv.call('GET', '/v1/attention?board=default', 'scoped')
    check(st == 403, 'a scoped token may not ask for another board')
    st, _, _ = srv.call('GET', '/v1/attention?limit=0')
    check(st == 400, 'limit=0 is 400')
    j = srv.ok('GET', '/v1/attention?limit=1')
    check(len(j['cards']) == 1 and j['truncated'] is True, 'limit cuts and says so')
    check(reasons(srv, 'a-fail', 'bot') == ['run_failed'], 'any role reads the lane')


def test_whoami_and_ui(srv):
    j = srv.ok('GET', '/v1/whoami', 'bot')
    check(j == {'name': 'bot', 'roles': ['bot'], 'boards': ['*'],
                'caps': ['board.read', 'board.create', 'board.move', 'board.label',
                         'board.comment', 'board.close']}, 'whoami bot (%s)' % j)
    j = srv.ok('GET', '/v1/whoami', 'scoped')
    check(j['roles'] == ['bot', 'operator'] and j['boards'] == ['other'], 'whoami scoped')
    st, _, _ = srv.call('GET', '/v1/whoami', None)
    check(st == 401, 'whoami needs a token')
    # read-only tokens are refused by the server, whatever a UI shows
    st, j, _ = srv.call('POST', '/v1/cards/a-fail/reopen', 'bot', {'to': 'ready'})
    check(st == 403, 'a bot may not reopen')
    st, j, _ = srv.call('POST', '/v1/reaper/pass', 'worker')
    check(st == 403, 'a worker may not run a reaper pass')
    st, html, h = srv.call('GET', '/ui/', None)
    check(st == 200 and h['content-type'].startswith('text/html'), '/ui/ is the index')
    csp = h.get('content-security-policy', '')
    check("script-src 'self'" in csp and "default-src 'none'" in csp and 'unsafe-inline' not in csp,
          'a strict CSP (%s)' % csp)
    check(h.get('x-content-type-options') == 'nosniff', 'nosniff')
    check(h.get('referrer-policy') == 'no-referrer', 'no-referrer')
    check(h.get('cache-control') == 'no-cache', 'the index is revalidated')
    check('<script>' not in html and ' style=' not in html, 'no inline script or style')
    assets = re.findall(r'/ui/([a-z]+\.[0-9a-f]{12}\.(?:js|css))', html)
    check(sorted(a.split('.')[0] + '.' + a.split('.')[2] for a in assets) ==
          ['app.css', 'app.js', 'board.js', 'card.js', 'charts.js', 'stream.js'],
          'six fingerprinted assets (%s)' % assets)
    for a in assets:
        st, _, h = srv.call('GET', '/ui/' + a, None)
        check(st == 200 and 'immutable' in h.get('cache-control', '') and 'max-age=31536000' in h.get('cache-control', ''),
              '%s cached for a year' % a)
    st, _, _ = srv.call('GET', '/ui/app.js', None)
    check(st == 404, 'an unfingerprinted name is 404')
    st, html2, _ = srv.call('GET', '/ui', None)
    check(st == 200 and html2 == html, '/ui is the index too')
    # issue 30: the server's address sends a person to the UI (it answered a 404 JSON)
    st, _, h = srv.call('GET', '/', None)
    check(st == 302 and h.get('location') == '/ui/', 'GET / redirects to /ui/ (%s %s)'
          % (st, h.get('location')))


def test_claim_next_token_checked_again(srv):
    """A claim-next waiting for work whose token a reload removes answers 401 when work
    comes, and the card stays unclaimed (it was claimed for the removed token and handed to
    it, held by a token nobody could renew or release with)."""
    srv.tok['waiter'] = bt.token_add(srv.binary, srv.tokens_file, 'waiter', ['worker'])
    srv.proc.send_signal(signal.SIGHUP)
    deadline = time.time() + 10
    while srv.call('GET', '/v1/boards', 'waiter')[0] != 200 and time.time() < deadline:
        time.sleep(0.1)
    cfg = srv.ok('GET', '/v1/boards/default')
    cfg['name'] = 'quiet'
    st, _, _ = srv.call('PUT', '/v1/boards/quiet', 'op', cfg)
    check(st in (200, 201), 'board quiet created (%s)' % st)
    got = {}

    def wait():
        got['r'] = srv.call('POST', '/v1/boards/quiet/claim-next', 'waiter',
                            {'marker': 'late', 'wait_ms': 20000})
    th = threading.Thread(target=wait)
    th.start()
    time.sleep(0.5)
    remove_token(srv, 'waiter')
    srv.ok('POST', '/v1/cards', 'bot', {'id': 'cn-after', 'title': 'work', 'board': 'quiet',
                                        'state': 'ready'})
    th.join(30)
    st = got.get('r', (None,))[0]
    check(st == 401, 'the removed token\'s claim-next answers 401 (%s %s)'
          % (st, str(got.get('r', ('', ''))[1])[:160]))
    c = srv.ok('GET', '/v1/cards/cn-after', 'op')
    check(c['claim'] is None, 'and the card is not claimed: %s' % c['claim'])


def main():
    held = None
    uri = bt.mongo_uri() if '--mongo' in sys.argv[2:] else None
    srv = Board(sys.argv[1], ['--max-streams', '3', '--stream-heartbeat-ms', '300',
                               '--lease-min-ms', '100', '--reaper=on',
                               '--reaper-interval-ms', '3600000'], mongo_uri=uri)
    try:
        for t in (test_stream, test_scope, test_token_checked_again,
                  test_long_poll_token_checked_again, test_claim_next_token_checked_again,
                  test_heartbeat_and_limit,
                  test_attention, test_whoami_and_ui):
            try:
                t(srv)
            except Exception as e:  # a crash in one group is a failure, the others still run
                check(False, '%s raised %r' % (t.__name__, e))
        # a stream open at shutdown ends, and boardd still stops cleanly
        held = open_stream(srv, query='?after=999999')
        check(held.status == 200, 'a stream is open at shutdown')
    finally:
        rc = srv.stop()
        check(rc == 0, 'boardd stopped cleanly on SIGTERM (exit %s)' % rc)
    if held is not None and held.status == 200:
        end = None
        for _ in range(5):
            end = held.frame(5)
            if end is None or end['data'] is not None:
                break
        check(end is None, 'the open stream ended with the server')
    sys.exit(bt.summary())


if __name__ == '__main__':
    main()
