#!/usr/bin/env python3
"""DESIGN §18 from outside, against a real boardd: batch create (POST /v1/cards with a JSON
array) and idempotency keys (the Idempotency-Key header of POST /v1/cards, POST /v1/runs and claim-next,
a batch item's `idempotency_key`, MCP create_card's `idempotency_key` argument).

- a batch answers one result per item, in order; a refused item does not affect another;
- bad lists (empty, over 1000 items, an item of the wrong shape, two items with one id or
  one idempotency_key) are 400 naming the index(es), and nothing is created;
- a repeat under a key answers byte for byte what the first answered and creates nothing;
  the same key with another body is 422 idempotency_key_reused; another token's key is
  another key; a malformed key is 400;
- FS twin: keys survive a kill -9 and a restart;
- Mongo twin (--mongo): keys are shared by two boardd processes on one database, and
  concurrent duplicates (on both replicas at once) create one card.

usage: test_idem.py path/to/boardd [--mongo]
"""
import json
import os
import signal
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'common'))
import boardd_test as bt  # noqa: E402
from boardd_test import Board, check  # noqa: E402


def raw(port, tok, method, path, body, key=None):
    """(status, body text, headers) of one request; body: bytes or a JSON value."""
    h = {'Idempotency-Key': key} if key is not None else {}
    return bt.request(port, method, path, tok, body, h, timeout=20, raw=True)


def count(b, board='default'):
    return len(bt.cards_all(bt.Client(b.port, b.tok['op']), board))


def problem_code(text):
    try:
        return json.loads(text).get('code')
    except ValueError:
        return None


def batch(b):
    b.ok('POST', '/v1/cards', 'bot', {'id': 'bx0', 'title': 'there before'})
    n0 = count(b)
    st, text, _ = raw(b.port, b.tok['bot'], 'POST', '/v1/cards',
                      [{'title': 'a'}, {'id': 'bx1', 'title': 'b', 'labels': ['x']},
                       {'title': 'c', 'state': 'no-such-column'}, {'id': 'bx0', 'title': 'dup'},
                       {'title': 'e', 'board': 'no-such-board'}, {'title': 'f', 'priority': 5}])
    check(st == 200, 'batch: 200 (%s %s)' % (st, text[:200]))
    res = json.loads(text)['results'] if st == 200 else []
    check([r['status'] for r in res] == [201, 201, 422, 409, 404, 201],
          'batch: one result per item, in order: %s' % [r.get('status') for r in res])
    if len(res) == 6:
        check(res[0]['card']['title'] == 'a' and res[1]['card']['id'] == 'bx1' and
              res[1]['card']['labels'] == ['x'] and res[5]['card']['priority'] == 5,
              'batch: the created cards are the items')
        check(res[2]['code'] == 'transition_rejected' and 'no-such-column' in res[2]['detail'],
              'batch: a refused item says why: %s' % res[2])
        check(res[3]['code'] == 'already_exists' and res[4]['code'] == 'not_found',
              'batch: each item refused on its own: %s %s' % (res[3], res[4]))
        got = b.ok('GET', '/v1/cards/bx1')
        check(got['title'] == 'b', 'batch: card bx1 is the first item naming it')
    check(count(b) == n0 + 3, 'batch: three cards created')

    n0 = count(b)
    big = [{'title': 't%d' % i} for i in range(1001)]
    bad = [
        (b'[]', 'empty', None),
        (big, '1000', None),
        ([{'title': 'ok'}, 7], 'item 1', None),
        ([{'title': 'ok'}, {'title': 'ok', 'colour': 'red'}], 'item 1', 'colour'),
        ([{'title': 'ok'}, {'title': 5}], 'item 1', 'title'),
        ([{'title': 'ok'}, {'title': 'x', 'id': 'bad id!'}], 'item 1', 'id'),
        ([{'id': 'd1'}, {'id': 'd2'}, {'id': 'd1'}], 'items 0 and 2', 'd1'),
        ([{'idempotency_key': 'k'}, {'idempotency_key': 'k'}], 'items 0 and 1', 'idempotency_key'),
        ([{'title': 'ok', 'idempotency_key': ''}], 'item 0', 'idempotency_key'),
        ([{'title': 'ok', 'idempotency_key': 3}], 'item 0', 'idempotency_key'),
    ]
    for body, says, also in bad:
        st, text, hdrs = raw(b.port, b.tok['bot'], 'POST', '/v1/cards', body)
        detail = json.loads(text).get('detail', '') if st == 400 else ''
        check(st == 400 and bt.is_problem(hdrs, json.loads(text), 400) and says in detail and
              (also is None or also in detail),
              'batch: bad list %r -> 400 naming %r (%s %s)' % (str(body)[:60], says, st,
                                                              detail[:160]))
    check(count(b) == n0, 'batch: a refused list created nothing')


def metric(b, name):
    st, text, _ = bt.request(b.port, 'GET', '/metrics', raw=True)
    for line in text.splitlines():
        if line.startswith(name + ' ') or line.startswith(name + '{'):
            return float(line.split()[-1])
    return None


def one_sync(b):
    """FS: a batch's items share one durability wait, not a sync each."""
    s0 = metric(b, 'boardd_fs_journal_syncs_total')
    c0 = metric(b, 'boardd_fs_journal_lines_total')
    st, text, _ = raw(b.port, b.tok['bot'], 'POST', '/v1/cards',
                      [{'title': 'bulk %d' % i, 'board': 'bulk'} for i in range(300)])
    s1 = metric(b, 'boardd_fs_journal_syncs_total')
    c1 = metric(b, 'boardd_fs_journal_lines_total')
    check(st == 200 and all(r['status'] == 201 for r in json.loads(text)['results']),
          'batch: 300 cards created (%s)' % st)
    check(None not in (s0, s1, c0, c1) and c1 - c0 >= 300 and s1 - s0 <= 3,
          'batch: 300 journal lines, %s syncs (one durability wait for the batch)' % (
              None if None in (s0, s1) else s1 - s0))


def keys(b):
    bot = b.tok['bot']
    n0 = count(b)
    first = raw(b.port, bot, 'POST', '/v1/cards', {'title': 'keyed'}, 'k-1')
    again = raw(b.port, bot, 'POST', '/v1/cards', {'title': 'keyed'}, 'k-1')
    check(first[0] == 201 and again[0] == 201 and first[1] == again[1],
          'key: the repeat answers the same status and body, byte for byte')
    check(first[2].get('location') and first[2].get('location') == again[2].get('location'),
          'key: and the same Location')
    check(count(b) == n0 + 1, 'key: one card for two requests')
    st, text, _ = raw(b.port, bot, 'POST', '/v1/cards', {'title': 'other'}, 'k-1')
    check(st == 422 and problem_code(text) == 'idempotency_key_reused',
          'key: the same key with another body -> 422 idempotency_key_reused (%s)' % st)
    st, text, _ = raw(b.port, b.tok['op'], 'POST', '/v1/cards', {'title': 'keyed'}, 'k-1')
    check(st == 201 and json.loads(text)['id'] != json.loads(first[1])['id'],
          "key: another token's key is another key")
    check(count(b) == n0 + 2, 'key: nothing else created')
    # a refusal is an answer too
    r1 = raw(b.port, bot, 'POST', '/v1/cards', {'id': 'bx1', 'title': 'x'}, 'k-dup')
    r2 = raw(b.port, bot, 'POST', '/v1/cards', {'id': 'bx1', 'title': 'x'}, 'k-dup')
    check(r1[0] == 409 and r1[:2] == r2[:2], 'key: a refusal repeats the same refusal')

    for k, why in (('', 'empty'), ('x' * 256, 'over 255 bytes'), ('caf\xe9', 'not ASCII')):
        hdr = k.encode('latin-1').decode('latin-1')
        st, text, _ = raw(b.port, bot, 'POST', '/v1/cards', {'title': 'bad key'}, hdr)
        check(st == 400 and 'Idempotency-Key' in text, 'key: malformed (%s) -> 400 (%s)' % (why, st))
    check(count(b) == n0 + 2, 'key: malformed keys created nothing')

    # a batch under the header, and items under their own keys
    body = [{'title': 'b1', 'idempotency_key': 'item-1'}, {'title': 'b2'}]
    b1 = raw(b.port, bot, 'POST', '/v1/cards', body, 'batch-1')
    b2 = raw(b.port, bot, 'POST', '/v1/cards', body, 'batch-1')
    check(b1[0] == 200 and b1[:2] == b2[:2], 'key: a keyed batch repeats byte for byte')
    check(count(b) == n0 + 4, 'key: the keyed batch created its two cards once')
    b3 = raw(b.port, bot, 'POST', '/v1/cards', body, 'batch-2')
    res1, res3 = json.loads(b1[1])['results'], json.loads(b3[1])['results']
    check(res3[0] == res1[0] and res3[1]['card']['id'] != res1[1]['card']['id'],
          'key: an item key answers its first result in another batch; the unkeyed item is new')
    b4 = raw(b.port, bot, 'POST', '/v1/cards', [{'title': 'changed', 'idempotency_key': 'item-1'}])
    r4 = json.loads(b4[1])['results'][0] if b4[0] == 200 else {}
    check(r4.get('status') == 422 and r4.get('code') == 'idempotency_key_reused',
          'key: an item key reused with another body -> that item 422: %s' % r4)
    check(count(b) == n0 + 5, 'key: only the unkeyed item of the second batch was created')

    # runs (on a board of their own: the counts above list the default board)
    cfg = b.ok('GET', '/v1/boards/default')
    cfg['name'] = 'runs'
    b.ok('PUT', '/v1/boards/runs', 'op', cfg)
    b.ok('POST', '/v1/cards', 'bot', {'id': 'rk', 'title': 'run card', 'state': 'ready',
                                      'board': 'runs'})
    b.claim('rk')
    rb = {'card_id': 'rk', 'marker': 'w1', 'status': 'running'}
    r1 = raw(b.port, b.tok['worker'], 'POST', '/v1/runs', rb, 'run-1')
    r2 = raw(b.port, b.tok['worker'], 'POST', '/v1/runs', rb, 'run-1')
    check(r1[0] == 201 and r1[:2] == r2[:2], 'key: POST /v1/runs repeats byte for byte (%s)' % r1[0])
    runs = b.ok('GET', '/v1/runs?board=runs&limit=100')['runs']
    check(len([r for r in runs if r['card_id'] == 'rk']) == 1, 'key: one run for two requests')

    # MCP create_card
    def tool(args):
        st, out, _ = b.call('POST', '/mcp', 'bot', {
            'jsonrpc': '2.0', 'id': 1, 'method': 'tools/call',
            'params': {'name': 'create_card', 'arguments': args}})
        res = out.get('result', {}) if isinstance(out, dict) else {}
        return res.get('isError'), res.get('structuredContent')
    e1, c1 = tool({'title': 'from a bot', 'idempotency_key': 'mcp-1'})
    e2, c2 = tool({'title': 'from a bot', 'idempotency_key': 'mcp-1'})
    check(not e1 and not e2 and c1 and c1 == c2, 'mcp: create_card repeats its card')
    e3, c3 = tool({'title': 'another', 'idempotency_key': 'mcp-1'})
    check(e3 and c3 and c3.get('code') == 'idempotency_key_reused',
          'mcp: create_card with the key and other arguments -> idempotency_key_reused: %s' % c3)
    check(count(b) == n0 + 6, 'mcp: one card for the two calls')
    return first


def claim_next(b):
    """claim-next under a key: the repeat hands back the same claim, claims nothing more;
    duplicates parked in a long-poll wake to one claim."""
    cfg = b.ok('GET', '/v1/boards/default')
    cfg['name'] = 'next'
    b.ok('PUT', '/v1/boards/next', 'op', cfg)
    b.ok('POST', '/v1/cards', 'bot', [{'id': 'n%d' % i, 'state': 'ready', 'board': 'next'}
                                      for i in range(2)])
    w = b.tok['worker']
    path = '/v1/boards/next/claim-next'
    r1 = raw(b.port, w, 'POST', path, {'marker': 'w1'}, 'next-1')
    r2 = raw(b.port, w, 'POST', path, {'marker': 'w1'}, 'next-1')
    check(r1[0] == 200 and r1[:2] == r2[:2], 'claim-next: the repeat answers the same claim')
    r2 = raw(b.port, w, 'POST', '/v1/boards/%6Eext/claim-next', {'marker': 'w1'}, 'next-1')
    check(r1[:2] == r2[:2], 'claim-next: the repeat on the path percent-encoded is the same '
                            'route and key: the same claim (%s)' % r2[1][:120])
    r3 = raw(b.port, w, 'POST', path, {'marker': 'w1'}, 'next-2')
    check(r3[0] == 200 and json.loads(r3[1])['card']['id'] != json.loads(r1[1])['card']['id'],
          'claim-next: another key claims the other card')
    r4 = raw(b.port, w, 'POST', path, {'marker': 'w1'}, 'next-3')
    check(r4[0] == 204, 'claim-next: nothing left (%s)' % r4[0])
    r5 = raw(b.port, w, 'POST', path, {'marker': 'w2'}, 'next-1')
    check(r5[0] == 422 and problem_code(r5[1]) == 'idempotency_key_reused',
          'claim-next: the key with another body -> 422 (%s)' % r5[0])
    out = []

    def waiter():
        out.append(raw(b.port, w, 'POST', path, {'marker': 'w1', 'wait_ms': 5000}, 'next-4'))
    ts = [threading.Thread(target=waiter) for _ in range(2)]
    for t in ts:
        t.start()
    bt.wait_for(lambda: False, timeout=0.3)
    b.ok('POST', '/v1/cards', 'bot', [{'id': 'n%d' % i, 'state': 'ready', 'board': 'next'}
                                      for i in range(2, 4)])
    for t in ts:
        t.join(30)
    check(len(out) == 2 and out[0][0] == 200 and out[0][:2] == out[1][:2],
          'claim-next: two parked duplicates wake to one claim: %s' % [o[0] for o in out])
    left = raw(b.port, w, 'POST', path, {'marker': 'w1'}, 'next-5')
    check(left[0] == 200, 'claim-next: the other new card is still free (%s)' % left[0])
    b.ok('POST', '/v1/cards', 'bot', [{'id': 'n%d' % i, 'state': 'ready', 'board': 'next'}
                                      for i in range(4, 7)])
    m1 = raw(b.port, w, 'POST', path, {'marker': 'w1', 'count': 2}, 'next-6')
    m2 = raw(b.port, w, 'POST', path, {'marker': 'w1', 'count': 2}, 'next-6')
    check(m1[0] == 200 and len(json.loads(m1[1]).get('claims', [])) == 2 and m1[:2] == m2[:2],
          'claim-next count: the repeat answers the same claims (%s)' % m1[0])
    m3 = raw(b.port, w, 'POST', path, {'marker': 'w1', 'count': 2}, 'next-7')
    check(m3[0] == 200 and len(json.loads(m3[1]).get('claims', [])) == 1,
          'claim-next count: one card was left for another key')


def scopes(b):
    """Whose key, and which: an Idempotency-Key never meets a batch item's idempotency_key
    (the header key "item a" was the item key "a"); a token named outside ASCII can use keys
    (its every keyed request was 400); the route is the path as routed, percent-decoded."""
    bot = b.tok['bot']
    st, text, _ = raw(b.port, bot, 'POST', '/v1/cards',
                      [{'title': 'one', 'idempotency_key': 'sc-a'}])
    check(st == 200 and json.loads(text)['results'][0]['status'] == 201,
          'scope: an item keyed sc-a is created (%s)' % st)
    st, text, _ = raw(b.port, bot, 'POST', '/v1/cards', {'title': 'two'}, 'item sc-a')
    check(st == 201, 'scope: Idempotency-Key "item sc-a" is another key than item sc-a '
                     '(%s %s)' % (st, text[:120]))
    st, text, _ = raw(b.port, bot, 'POST', '/v1/cards', {'title': 'three'}, 'item sc-b')
    check(st == 201, 'scope: Idempotency-Key "item sc-b" creates (%s)' % st)
    st, text, _ = raw(b.port, bot, 'POST', '/v1/cards',
                      [{'title': 'four', 'idempotency_key': 'sc-b'}])
    res = json.loads(text)['results'] if st == 200 else [{}]
    check(res[0].get('status') == 201,
          'scope: and the item key sc-b is another key again (%s)' % res[0].get('status'))

    tok = bt.token_add(b.binary, b.tokens_file, '\u00e9quipe', ['bot'])
    b.proc.send_signal(signal.SIGHUP)
    check(bt.wait_for(lambda: raw(b.port, tok, 'GET', '/v1/boards', None)[0] == 200),
          'scope: a token named \u00e9quipe is served after SIGHUP')
    first = raw(b.port, tok, 'POST', '/v1/cards', {'title': 'utf8'}, 'u-1')
    again = raw(b.port, tok, 'POST', '/v1/cards', {'title': 'utf8'}, 'u-1')
    check(first[0] == 201 and first[:2] == again[:2],
          'scope: a token named in UTF-8 uses an Idempotency-Key (%s %s)' % (first[0], again[0]))
    one = raw(b.port, tok, 'POST', '/v1/cards', [{'title': 'u2', 'idempotency_key': 'u-2'}])
    two = raw(b.port, tok, 'POST', '/v1/cards', [{'title': 'u2', 'idempotency_key': 'u-2'}])
    check(one[0] == 200 and json.loads(one[1])['results'][0]['status'] == 201 and
          one[1] == two[1], 'scope: and a batch item\'s key (%s)' % one[1][:120])

    # A token narrowed since its key was answered is not shown that answer's card of a
    # board it may no longer access (the replay came before the handler's board check).
    cfg = b.ok('GET', '/v1/boards/default')
    cfg['name'] = 'narrowed'
    b.ok('PUT', '/v1/boards/narrowed', 'op', cfg)
    tok = bt.token_add(b.binary, b.tokens_file, 'narrow', ['bot'])
    b.proc.send_signal(signal.SIGHUP)
    check(bt.wait_for(lambda: raw(b.port, tok, 'GET', '/v1/boards', None)[0] == 200),
          'scope: token narrow is served after SIGHUP')
    far = raw(b.port, tok, 'POST', '/v1/cards', {'title': 'far', 'board': 'narrowed'}, 'n-1')
    near = raw(b.port, tok, 'POST', '/v1/cards', {'title': 'near'}, 'n-2')
    with open(b.tokens_file) as fh:
        doc = json.load(fh)
    for t in doc['tokens']:
        if t['name'] == 'narrow':
            t['boards'] = ['default']
    with open(b.tokens_file, 'w') as fh:
        json.dump(doc, fh)
    b.proc.send_signal(signal.SIGHUP)
    check(bt.wait_for(lambda: raw(b.port, tok, 'GET', '/v1/boards/narrowed', None)[0] == 403),
          'scope: token narrow no longer reads board narrowed after SIGHUP')
    st, text, _ = raw(b.port, tok, 'POST', '/v1/cards', {'title': 'far', 'board': 'narrowed'},
                      'n-1')
    check(far[0] == 201 and st == 403 and 'narrowed' not in text.replace('"narrow"', ''),
          'scope: its replay of a card of that board is 403 (%s %s)' % (st, text[:160]))
    again = raw(b.port, tok, 'POST', '/v1/cards', {'title': 'near'}, 'n-2')
    check(near[0] == 201 and again[:2] == near[:2],
          'scope: one of a board it still reads replays (%s)' % again[0])


def concurrent(ports, tok, key, body, n=12):
    """n requests with one key at once, spread over ports: [(status, text)]."""
    out = []
    lock = threading.Lock()
    go = threading.Barrier(n)

    def one(i):
        go.wait()
        try:
            st, text, _ = raw(ports[i % len(ports)], tok, 'POST', '/v1/cards', body, key)
        except OSError as e:
            st, text = 0, str(e)
        with lock:
            out.append((st, text))
    ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    return out


def duplicates(b, ports, key):
    n0 = count(b)
    out = concurrent(ports, b.tok['bot'], key, {'title': 'race ' + key})
    created = [t for s, t in out if s == 201]
    others = [(s, problem_code(t)) for s, t in out if s != 201]
    check(created and len(set(created)) == 1, 'race: every 201 is the same card (%d)' % len(created))
    check(all(o == (409, 'idempotency_key_in_flight') for o in others),
          'race: the rest wait, or answer 409 idempotency_key_in_flight: %s' % others[:3])
    races = [c for c in bt.cards_all(bt.Client(b.port, b.tok['op'])).values()
             if c['title'] == 'race ' + key]
    check(count(b) == n0 + 1, 'race: %d concurrent duplicates created one card (%d, %s)' % (
        len(out), count(b) - n0, [(c['id'], c['created_at']) for c in races]))


def main():
    mongo = '--mongo' in sys.argv[2:]
    uri = bt.mongo_uri() if mongo else None
    binary = sys.argv[1]
    b = Board(binary, mongo_uri=uri, db_tag='s27idem')
    try:
        batch(b)
        first = keys(b)
        scopes(b)
        claim_next(b)
        if not mongo:
            cfg = b.ok('GET', '/v1/boards/default')
            cfg['name'] = 'bulk'
            b.ok('PUT', '/v1/boards/bulk', 'op', cfg)
            one_sync(b)
        duplicates(b, [b.port], 'race-1')
        if not mongo:
            # keys survive a crash and a restart
            b.srv.kill()
            ok, detail = b.srv.start()
            check(ok, 'restart: boardd comes back (%s)' % detail)
            b.port = b.srv.port
            again = raw(b.port, b.tok['bot'], 'POST', '/v1/cards', {'title': 'keyed'}, 'k-1')
            check(again[:2] == first[:2], 'restart: the key answers the same after kill -9')
            st, text, _ = raw(b.port, b.tok['bot'], 'POST', '/v1/cards', {'title': 'x'}, 'k-1')
            check(st == 422, 'restart: and still refuses another body (%s)' % st)
        else:
            # a second replica on the same database shares the keys
            store = b.srv.store
            r2 = bt.Server(binary, store=store, tokens=b.tokens_file, logdir=b.dir,
                           extra=['--log-format', 'text'], threads=2, name='replica2').started()
            try:
                again = raw(r2.port, b.tok['bot'], 'POST', '/v1/cards', {'title': 'keyed'}, 'k-1')
                check(again[:2] == first[:2], 'replicas: the other replica answers the same')
                st, _, _ = raw(r2.port, b.tok['bot'], 'POST', '/v1/cards', {'title': 'y'}, 'k-1')
                check(st == 422, 'replicas: and refuses another body there (%s)' % st)
                duplicates(b, [b.port, r2.port], 'race-2')
            finally:
                r2.stop()
    finally:
        rc = b.stop()
        check(rc == 0, 'boardd stops cleanly (%s)' % rc)
    sys.exit(bt.summary('idem' + (' (mongo)' if mongo else '')))


if __name__ == '__main__':
    main()
