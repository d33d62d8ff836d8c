#!/usr/bin/env python3
"""Many writers of one run, all of them its owner (DESIGN §16: a holder's valid write is never
told its fence is stale): 32 threads with the claim's marker and token append output,
heartbeat, PATCH the run's result and renew the card, against one boardd on the FS twin
(--mode fs) or two replicas sharing one database of mongo-java-server (--mode mongo).

No write may be answered 409 (the claim was never lost: a worker told so kills a job it still
holds); a 503 (the run kept changing under every try) must carry Retry-After and change
nothing; every acknowledged append must be in the run's output, once, and no other (but one
answered by a store failure, which cannot say). On the Mongo twin a run
write is guarded on the version it read, and with this many writers a few used to miss
sixteen times in a row and answer claim_conflict.

usage: run_writers.py BOARDD [--mode fs|mongo] [--threads N] [--rounds N] [--keep]
Mongo mode runs on mongo-java-server, never FerretDB (bt.mongo_atomic_database).
"""
import argparse
import collections
import json
import os
import shutil
import sys
import tempfile
import threading

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'common'))
import boardd_test as bt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('boardd')
    ap.add_argument('--mode', choices=('fs', 'mongo'), default='fs')
    ap.add_argument('--threads', type=int, default=32)
    ap.add_argument('--rounds', type=int, default=40)
    ap.add_argument('--keep', action='store_true')
    o = ap.parse_args()
    uri = bt.mongo_atomic_database('runwriters') if o.mode == 'mongo' else None
    print('run_writers: mode %s, %d threads x %d writes' % (o.mode, o.threads, o.rounds),
          flush=True)
    tmp = tempfile.mkdtemp(prefix='boardd-runwriters.')
    tokens = os.path.join(tmp, 'tokens.json')
    bot_tok = bt.token_add(o.boardd, tokens, 'bot', ['bot'])
    w_tok = bt.token_add(o.boardd, tokens, 'w', ['worker'])
    servers, ok = [], False
    try:
        servers = bt.start_replicas(o.boardd, uri, tmp, tokens, threads=8)
        ports = [s.port for s in servers]
        bt.Client(ports[0], bot_tok, timeout=60).must(
            201, 'POST', '/v1/cards', {'id': 'k', 'title': 'busy run', 'state': 'ready'})
        w = bt.Client(ports[0], w_tok, timeout=60)
        epoch = w.must(200, 'POST', '/v1/cards/k/claim',
                       {'marker': 'm', 'lease_ms': 600000})['epoch']
        w.must(201, 'POST', '/v1/runs', {'card_id': 'k', 'marker': 'm', 'status': 'running',
                                         'id': 'rk'})
        answers = collections.Counter()
        appended, unknown, bad, lock = [], set(), [], threading.Lock()
        bar = threading.Barrier(o.threads)

        def writer(j):
            c = bt.Client(ports[j % len(ports)], w_tok, timeout=60)
            try:
                bar.wait()
                for i in range(o.rounds):
                    op = (i + j) % 4
                    if op == 0:
                        kind, (st, body, hdrs) = 'output', c.call_full(
                            'POST', '/v1/runs/rk/output',
                            {'marker': 'm', 'text': '%d.%d;' % (j, i)})
                    elif op == 1:
                        kind, (st, body, hdrs) = 'heartbeat', c.call_full(
                            'POST', '/v1/runs/rk/heartbeat', {'marker': 'm'})
                    elif op == 2:
                        kind, (st, body, hdrs) = 'patch', c.call_full(
                            'PATCH', '/v1/runs/rk', {'marker': 'm', 'result': {'j': j, 'i': i}})
                    else:
                        kind, (st, body, hdrs) = 'renew', c.call_full(
                            'POST', '/v1/cards/k/renew', {'marker': 'm', 'epoch': epoch})
                    try:
                        body = json.loads(body) if body else None
                    except ValueError:
                        body = None
                    code = body.get('code') if isinstance(body, dict) and st >= 300 else None
                    with lock:
                        answers['%s %s%s' % (kind, st, ' ' + code if code else '')] += 1
                        if op == 0 and st == 200:
                            appended.append('%d.%d' % (j, i))
                        elif op == 0 and code != 'busy':
                            unknown.add('%d.%d' % (j, i))  # a timeout cannot say
                        if st == 503 and not any(k.lower() == 'retry-after' for k in hdrs):
                            bad.append('%s answered 503 without Retry-After' % kind)
            except (OSError, RuntimeError) as e:
                with lock:
                    bad.append('writer %d: %s' % (j, e))
            finally:
                c.close()

        ts = [threading.Thread(target=writer, args=(j,)) for j in range(o.threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(600)
        print('run_writers: answers: %s' %
              ', '.join('%s: %d' % kv for kv in sorted(answers.items())), flush=True)
        fails = list(bad[:5])
        refused = {k: n for k, n in answers.items() if ' 409' in k or ' 4' in k}
        if refused:
            fails.append('the run\'s owner was refused: %s' % refused)
        others = {k: n for k, n in answers.items()
                  if not (k.endswith(' 200') or ' 503' in k or k in refused)}
        if others:
            fails.append('unexpected answers: %s' % others)
        if sum(n for k, n in answers.items() if k.endswith(' 200')) < o.threads * o.rounds / 2:
            fails.append('fewer than half the writes were acknowledged')
        w.close()  # idle all along: the server may have closed it
        run = w.must(200, 'GET', '/v1/runs/rk')
        parts = [p for p in (run.get('output') or '').split(';') if p]
        if sorted(p for p in parts if p not in unknown) != sorted(appended):
            fails.append('the output holds %d appends, %d were acknowledged (missing %s, '
                         'extra %s)' % (len(parts), len(appended),
                                        sorted(set(appended) - set(parts))[:3],
                                        sorted(set(parts) - set(appended))[:3]))
        card = w.must(200, 'GET', '/v1/cards/k')
        claim = card.get('claim') or {}
        if claim.get('marker') != 'm' or claim.get('epoch') != epoch:
            fails.append('the claim moved: %s' % card.get('claim'))
        for f in fails:
            print('FAIL: ' + f, flush=True)
        ok = not fails
    finally:
        for s in servers:
            s.stop()
        if ok and not o.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        elif not ok:
            print('run_writers: logs kept in %s' % tmp, flush=True)
    sys.exit(0 if ok else 1)


if __name__ == '__main__':
    main()
