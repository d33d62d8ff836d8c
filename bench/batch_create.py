#!/usr/bin/env python3
"""What batch create and idempotency keys (DESIGN §18) cost: N cards created one POST
/v1/cards at a time, then with an Idempotency-Key each, then in batches of B (a JSON array),
then in batches of B whose items each carry an idempotency_key, all sequential on one
keep-alive connection against a boardd started here on a temporary FS store (or the Mongo
store SPEC names). Prints cards/s and the p99 per request of each.

usage: bench/batch_create.py path/to/boardd [N] [B] [--store SPEC]
"""
import http.client
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests',
                                'common'))
import boardd_test as bt  # noqa: E402

args = [a for a in sys.argv[1:] if not a.startswith('--store')]
store = sys.argv[sys.argv.index('--store') + 1] if '--store' in sys.argv else None
if store:
    args.remove(store)
boardd = args[0]
n = int(args[1]) if len(args) > 1 else 2000
b = int(args[2]) if len(args) > 2 else 100

with tempfile.TemporaryDirectory() as tmp:
    tok = bt.token_add(boardd, tmp + '/t.json', 'b', ['bot'])
    srv = bt.Server(boardd, tmp + '/d', tmp + '/t.json', tmp, threads=2, store=store).started()
    c = http.client.HTTPConnection('127.0.0.1', srv.port)
    h = {'Authorization': 'Bearer ' + tok, 'Content-Type': 'application/json'}
    seq = [0]

    def post(body, key=None):
        hh = dict(h, **({'Idempotency-Key': key} if key else {}))
        t = time.perf_counter()
        c.request('POST', '/v1/cards', json.dumps(body), hh)
        r = c.getresponse()
        r.read()
        if r.status not in (200, 201):
            raise SystemExit('POST /v1/cards: %d' % r.status)
        return time.perf_counter() - t

    def uniq():
        seq[0] += 1
        return 'k%d' % seq[0]

    def run(label, requests, per):
        t0 = time.perf_counter()
        ts = sorted(fn() for fn in requests)
        dt = time.perf_counter() - t0
        print('%-34s %8.0f cards/s   p99 %8.2f ms per request (%d cards each)' % (
            label, len(requests) * per / dt, ts[int(len(ts) * 0.99)] * 1e3, per), flush=True)

    run('single', [lambda: post({'title': 't'}) for _ in range(n)], 1)
    run('single + Idempotency-Key', [lambda: post({'title': 't'}, uniq()) for _ in range(n)], 1)
    run('batch of %d' % b, [lambda: post([{'title': 't'}] * b) for _ in range(n // b)], b)
    run('batch of %d, a key per item' % b,
        [lambda: post([{'title': 't', 'idempotency_key': uniq()} for _ in range(b)])
         for _ in range(n // b)], b)
    run('repeat of a keyed single', [lambda: post({'title': 't'}, 'k1') for _ in range(n)], 1)
    srv.stop()
