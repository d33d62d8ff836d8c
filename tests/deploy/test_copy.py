#!/usr/bin/env python3
"""deploy/boardd-copy end to end: a source boardd on the FS store filled over HTTP (two boards,
a chain of blockers, labels, comments, cards in terminal columns, one left waiting on its
blockers and one moved out of waiting_deps by an operator), a target boardd — on the FS store,
or with --mongo on BOARDD_TEST_MONGO_URI's server (the move the tool is for) — then:

- a claimed card in the source makes it refuse, writing nothing;
- the copy puts every card on the target with the same board, title, body, state, labels and
  blockers, and each comment (prefixed with its author);
- a second run creates nothing and still finds everything equal;
- a card changed on the target is reported and the run exits 1;
- the source is unchanged.

usage: test_copy.py path/to/boardd path/to/boardd-copy [--mongo]
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
import boardd_test as bt  # noqa: E402
from boardd_test import check  # noqa: E402

BOARDD, COPY = sys.argv[1], sys.argv[2]
MONGO = '--mongo' in sys.argv[3:]


def start(store, tokens, logdir, name):
    return bt.Server(BOARDD, store=store, tokens=tokens, logdir=logdir, threads=2,
                     name=name).started(timeout=20)


def call(srv, tok, method, path, body=None, headers=None):
    return bt.request(srv.port, method, path, tok, body, headers)[:2]


def must(srv, tok, method, path, body=None, headers=None):
    st, doc = call(srv, tok, method, path, body, headers)
    if st not in (200, 201, 204):
        raise SystemExit('%s %s: %d %s' % (method, path, st, doc))
    return doc


def all_cards(base, tok):
    out = {}
    for b in must(base, tok, 'GET', '/v1/boards')['boards']:
        after = ''
        while True:
            page = must(base, tok, 'GET', '/v1/cards?limit=7&board=%s%s' % (b['name'], after))
            out.update({c['id']: c for c in page['cards']})
            if not page['next']:
                break
            after = '&after=' + page['next']
    return out


def fill(base, ops, wrk):
    board2 = {'name': 'ops', 'columns': [
        {'name': 'todo', 'terminal': False, 'eligible': True},
        {'name': 'doing', 'terminal': False, 'eligible': True},
        {'name': 'parked', 'terminal': False, 'eligible': False},
        {'name': 'shipped', 'terminal': True, 'eligible': False},
        {'name': 'dropped', 'terminal': True, 'eligible': False}],
        'running': 'doing', 'completed': 'shipped', 'failed': 'dropped', 'waiting': 'parked'}
    must(base, ops, 'PUT', '/v1/boards/ops', board2)
    # A chain on the default board, created leaves first so the dependents wait on them.
    must(base, ops, 'POST', '/v1/cards', {'id': 'base', 'title': 'base', 'state': 'done',
                                          'labels': ['infra']})
    must(base, ops, 'POST', '/v1/cards', {'id': 'mid', 'title': 'mid', 'body': 'line 1\nline 2',
                                          'state': 'ready', 'blockers': ['base']})
    must(base, ops, 'POST', '/v1/cards', {'id': 'top', 'title': 'top', 'state': 'ready',
                                          'blockers': ['mid', 'base'], 'labels': ['b', 'a']})
    # An operator moved 'forced' out of waiting_deps although its blocker is not done.
    must(base, ops, 'POST', '/v1/cards', {'id': 'forced', 'title': 'forced', 'state': 'ready',
                                          'blockers': ['mid']})
    must(base, ops, 'PATCH', '/v1/cards/forced/state', {'to': 'review'})
    for i in range(12):
        st = ['inbox', 'backlog', 'blocked', 'done', 'review'][i % 5]
        must(base, ops, 'POST', '/v1/cards', {'id': 'c%02d' % i, 'title': 'card %d' % i,
                                              'state': st, 'labels': ['n%d' % (i % 3)]})
    must(base, ops, 'POST', '/v1/cards', {'id': 'urgent', 'title': 'urgent', 'state': 'ready',
                                          'priority': 7})
    # A scheduled card: not claimable before its time, on the target too.
    must(base, ops, 'POST', '/v1/cards', {'id': 'later', 'title': 'later', 'state': 'ready',
                                          'not_before': '2030-01-01T00:00:00.000Z'})
    for i in range(5):
        must(base, ops, 'POST', '/v1/cards', {'id': 'ops-%d' % i, 'board': 'ops',
                                              'title': 'o%d' % i,
                                              'state': ['todo', 'shipped', 'dropped', 'parked',
                                                        'doing'][i]})
    must(base, ops, 'POST', '/v1/cards/mid/comments', {'body': 'first'})
    must(base, ops, 'POST', '/v1/cards/mid/comments', {'body': 'second'})
    # A finished claim cycle leaves an epoch and a last run behind (not carried).
    tok = must(base, wrk, 'POST', '/v1/cards/c00/claim', {'marker': 'w1'})
    run = must(base, wrk, 'POST', '/v1/runs', {'card_id': 'c00', 'marker': 'w1',
                                               'status': 'running'})
    must(base, wrk, 'PUT', '/v1/cards/c00/last-run', {'marker': 'w1', 'run_id': run['id']},
         {'If-Match': '"%d"' % tok['epoch']})
    must(base, wrk, 'POST', '/v1/cards/c00/release', {'marker': 'w1', 'epoch': tok['epoch']})


def fields(c):
    return {k: c.get(k) for k in ('board', 'title', 'body', 'state', 'labels', 'blockers',
                                  'priority', 'not_before')}


def run_copy(src, dst, ops_file, extra=()):
    return subprocess.run([sys.executable, COPY, '--from', src.url, '--to', dst.url,
                           '--from-token-file', ops_file, '--to-token-file', ops_file,
                           '--comments'] + list(extra),
                          capture_output=True, text=True, timeout=120)


def main():
    uri = bt.mongo_uri() if MONGO else None
    with tempfile.TemporaryDirectory() as tmp:
        tokens = os.path.join(tmp, 'tokens.json')
        plain = {name: bt.token_add(BOARDD, tokens, name, [role])
                 for name, role in (('ops', 'operator'), ('wrk', 'worker'))}
        ops_file = os.path.join(tmp, 'ops.token')
        with open(ops_file, 'w') as f:
            f.write(plain['ops'])
        target = bt.mongo_database(uri, 'copy') if MONGO else 'fs:' + tmp + '/dst'
        src = start('fs:' + tmp + '/src', tokens, tmp, 'src')
        dst = start(target, tokens, tmp, 'dst')
        try:
            ops, wrk = plain['ops'], plain['wrk']
            fill(src, ops, wrk)
            before = all_cards(src, ops)

            # A claim in the source: refused, nothing written.
            tok = must(src, wrk, 'POST', '/v1/cards/c01/claim', {'marker': 'w2'})
            r = run_copy(src, dst, ops_file)
            check(r.returncode != 0 and 'claimed' in r.stderr, 'refuses while claimed: %s%s'
                  % (r.stdout, r.stderr))
            check(call(dst, ops, 'GET', '/v1/cards/base')[0] == 404, 'nothing written then')
            must(src, wrk, 'POST', '/v1/cards/c01/release', {'marker': 'w2', 'epoch': tok['epoch']})
            before = all_cards(src, ops)

            r = run_copy(src, dst, ops_file)
            check(r.returncode == 0, 'copy: %s%s' % (r.stdout, r.stderr))
            after = all_cards(dst, ops)
            check(set(after) == set(before), 'the same cards: %s vs %s'
                  % (sorted(set(before) ^ set(after)), ''))
            for cid, c in before.items():
                if cid in after:
                    check(fields(after[cid]) == fields(c), 'card %s: %s != %s'
                          % (cid, fields(after[cid]), fields(c)))
            check(must(dst, ops, 'GET', '/v1/boards/ops')['columns'] ==
                  must(src, ops, 'GET', '/v1/boards/ops')['columns'], 'board ops copied')
            mid = must(dst, ops, 'GET', '/v1/cards/mid')
            bodies = [m['body'] for m in mid['comments']]
            check(len(bodies) == 2 and bodies[0].endswith('] first') and 'ops' in bodies[0],
                  'comments copied with their author: %s' % bodies)
            check(not any(c.get('claim') for c in after.values()), 'no claim on the target')
            check('not carried' in r.stdout and 'c00' in r.stdout,
                  'the report names the card with a run: %s' % r.stdout)

            # Again: nothing created, all equal.
            r = run_copy(src, dst, ops_file)
            check(r.returncode == 0 and '0 cards created' in r.stdout
                  and '%d already there' % len(before) in r.stdout, 'second run: %s%s'
                  % (r.stdout, r.stderr))
            # A card changed on the target: reported, exit 1.
            must(dst, ops, 'PATCH', '/v1/cards/c02', {'title': 'changed'})
            r = run_copy(src, dst, ops_file)
            check(r.returncode == 1 and 'c02' in r.stdout, 'a differing card is reported: %s'
                  % r.stdout)
            check(all_cards(src, ops) == before, 'the source is unchanged')
        finally:
            for srv in (src, dst):
                srv.stop(timeout=20)
    return bt.summary()


if __name__ == '__main__':
    sys.exit(main())
