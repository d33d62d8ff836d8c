#!/usr/bin/env python3
"""DESIGN §11: a token scoped to some boards reads events one board at a time, in that
board's own sequence (board_seq), so its cursors reveal nothing about other boards' traffic.

The same scenario runs on two fresh servers: on one, the default board is quiet; on the
other, it is busy between every step. What the token scoped to board `other` sees — each
event's seq, `next` (paged, long-polled), the SSE `id:` lines, resumed with Last-Event-ID —
must be identical on both, and gap-free from 1. Also: a token scoped to several boards must
name one (400 naming `board`); an unscoped token keeps the global seq and sees board_seq.
Standard library only.

usage: test_board_seq.py path/to/boardd [--mongo]
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'common'))
sys.path.insert(0, os.path.join(HERE, '..', 'ui'))
import boardd_test as bt  # noqa: E402
from boardd_test import Board, check  # noqa: E402
from test_stream_api import open_stream  # noqa: E402


def noise(srv, busy, tag):
    """Traffic on the default board (created, moved, retitled) when busy."""
    if not busy:
        return
    for i in range(3):
        cid = 'n-%s-%d' % (tag, i)
        srv.ok('POST', '/v1/cards', 'bot', {'id': cid, 'title': cid, 'state': 'ready'})
        srv.ok('PATCH', '/v1/cards/' + cid, 'bot', {'title': 'busy'})


def events(srv, who, query):
    j = srv.ok('GET', '/v1/events' + query, who)
    return [(e['seq'], e.get('board_seq'), e['type'], e.get('card_id')) for e in j['events']], j['next']


def scenario(srv, busy):
    """What the token scoped to `other` observes, as one comparable value."""
    seen = {}
    noise(srv, busy, 'a')
    cfg = srv.ok('GET', '/v1/boards/default')
    cfg['name'] = 'other'
    srv.ok('PUT', '/v1/boards/other', 'op', cfg)
    for i in range(4):
        noise(srv, busy, 'b%d' % i)
        srv.ok('POST', '/v1/cards', 'scoped', {'id': 'o%d' % i, 'title': 'o', 'board': 'other'})
    noise(srv, busy, 'c')
    seen['all'] = events(srv, 'scoped', '?limit=1000')
    seen['named'] = events(srv, 'scoped', '?board=other&limit=1000')
    seen['page'] = events(srv, 'scoped', '?after=2&limit=2')
    seen['rest'] = events(srv, 'scoped', '?after=%d' % seen['page'][1])
    last = seen['all'][1]
    noise(srv, busy, 'd')
    # a long-poll that other boards' writes do not end or move
    seen['poll'] = events(srv, 'scoped', '?after=%d&wait_ms=300' % last)
    # the stream, resumed from the second event
    s = open_stream(srv, 'scoped', '', last_id=2)
    ids = []
    while s.status == 200:
        f = s.event(10)
        if f is None:
            break
        ids.append((f['id'], f['data']['seq'], f['data']['card_id']))
        if f['data'].get('card_id') == 'o3':
            break
    seen['stream_status'] = s.status
    noise(srv, busy, 'e')
    srv.ok('POST', '/v1/cards', 'scoped', {'id': 'o-live', 'title': 'o', 'board': 'other'})
    f = s.event(10) if s.status == 200 else None
    ids.append(f and (f['id'], f['data']['seq'], f['data']['card_id']))
    s.close()
    seen['stream'] = ids
    return seen


def test_scoped_cursors(binary, uri):
    views = []
    for busy in (False, True):
        srv = Board(binary, mongo_uri=uri, db_tag='bseq_busy' if busy else 'bseq_quiet')
        try:
            views.append(scenario(srv, busy))
            if busy:
                test_unscoped_and_several(srv)
        finally:
            check(srv.stop() == 0, 'boardd stopped cleanly')
    quiet, busy = views
    for k in quiet:
        check(quiet[k] == busy[k], 'what the scoped token sees (%s) does not depend on other '
              "boards' traffic:\n  quiet %r\n  busy  %r" % (k, quiet[k], busy[k]))
    evs, nxt = busy['all']
    check([e[0] for e in evs] == list(range(1, len(evs) + 1)) and len(evs) == 5,
          'seq is the board_seq: 1..5 without gaps (%r)' % evs)
    check(all(e[0] == e[1] for e in evs), 'seq == board_seq for a scoped token')
    check(nxt == 5, 'next is the last board_seq (%s)' % nxt)
    check(busy['named'] == busy['all'], 'board=other is its only board, the default')
    check([e[0] for e in busy['page'][0]] == [3, 4] and busy['page'][1] == 4,
          'a page after board_seq 2 (%r)' % (busy['page'],))
    check([e[0] for e in busy['rest'][0]] == [5] and busy['rest'][1] == 5,
          'the rest after the page cursor (%r)' % (busy['rest'],))
    check(busy['poll'] == ([], 5), 'an empty long-poll keeps next (%r)' % (busy['poll'],))
    check(busy['stream_status'] == 200, 'the stream opens')
    check([x[0] for x in busy['stream'][:-1]] == ['3', '4', '5'] and
          all(x[0] == str(x[1]) for x in busy['stream'][:-1]),
          'SSE ids are board_seqs, resumed after Last-Event-ID 2 (%r)' % busy['stream'])
    check(busy['stream'][-1] == ('6', 6, 'o-live'), 'a live event takes the next board_seq '
          '(%r)' % (busy['stream'][-1],))


def test_unscoped_and_several(srv):
    """On the busy server: the unscoped view and the token scoped to two boards."""
    evs, nxt = events(srv, 'op', '?limit=1000')
    seqs = [e[0] for e in evs]
    check(seqs == sorted(seqs) and nxt >= seqs[-1], 'an unscoped token keeps the global seq')
    other = [e for e in evs if e[3] and e[3].startswith('o')]
    check([e[1] for e in other] == list(range(2, 2 + len(other))),
          'an unscoped token also sees each event\'s board_seq (%r)' % other)
    check(any(e[0] != e[1] for e in other), 'the global seq differs from board_seq when busy')
    st, j, h = srv.call('GET', '/v1/events', 'scoped2')
    check(st == 400 and h.get('content-type', '').startswith('application/problem+json') and
          j.get('code') == 'bad_request' and 'board' in j.get('detail', ''),
          'a token scoped to several boards must name one (%s %r)' % (st, j))
    s = open_stream(srv, 'scoped2')
    check(s.status == 400 and 'board' in (s.body or ''), 'the stream too (%s)' % s.status)
    evs, nxt = events(srv, 'scoped2', '?board=other&limit=1000')
    check([e[0] for e in evs] == list(range(1, len(evs) + 1)) and nxt == len(evs),
          'with board= it reads that board in board_seq (%r)' % evs)
    st, j, _ = srv.call('GET', '/v1/events?board=default', 'scoped2')
    check(st == 403, 'a board outside its scope is 403 (%s)' % st)


def main():
    uri = bt.mongo_uri() if '--mongo' in sys.argv[2:] else None
    try:
        test_scoped_cursors(sys.argv[1], uri)
    except Exception as e:
        check(False, 'raised %r' % e)
    sys.exit(bt.summary())


if __name__ == '__main__':
    main()
