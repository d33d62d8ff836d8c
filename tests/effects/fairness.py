#!/usr/bin/env python3
"""One receiver cannot delay another (DESIGN §16, issue 31 item 5): a webhook receiver that
hangs holds up only its own subscription's deliveries.

One boardd with the default two deliverers and a 3 s --delivery-timeout-ms; three
subscriptions match every card created: `hang-1` and `hang-2` on a receiver path that answers
only after 20 s (each attempt hangs for the full timeout), `healthy` on one that answers at
once. Five cards are created 0.3 s apart. Asserted:

  - every healthy delivery reaches its receiver within HEALTHY_S (1.5 s, half the hang) of
    the create that fired it was answered, so all of them before the first hanging attempt
    could time out: before the fix two deliverer threads served every subscription, and the
    healthy receiver got its deliveries 3.2, 6.3 ... s after their events;
  - the hanging receivers were being attempted meanwhile (both hung at once), and each of
    their first attempts is recorded as failed (a timeout), so the hang was real;
  - at most one attempt per subscription is in flight at a time (per-subscription queues).

Then a backlog: a fourth subscription `hang-burst` on the hanging path gets BURST (600; 150
on the Mongo twin) deliveries at once (batch creates), and one more card for `healthy` follows. Asserted:

  - the healthy delivery still arrives within HEALTHY_S of its event: before the lease passed
    over a full queue's subscription, the leaser took (and parked) the whole backlog first,
    each lease parsing every due delivery on the FS twin: 2.5 s at 300, 4.9 s at 600;
  - no more of the backlog is leased than its subscription's queue and attempt hold (33):
    the rest waits unleased instead of being leased only to be parked.

A behaviour bound with a wide margin (1.5 s against a 3 s hang), not a benchmark.

usage: fairness.py path/to/boardd [--mongo]
  --mongo: on a fresh database of BOARDD_TEST_MONGO_URI (skips, exit 77, when unset outside CI)
"""
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import boardd_test as bt  # noqa: E402
from boardd_test import check  # noqa: E402
from receiver import Receiver  # noqa: E402

TIMEOUT_MS = 3000
HANG_S = 20.0      # the hanging receiver answers long after the deliverer gave up
HEALTHY_S = 1.5    # the bound asserted for each healthy delivery (the design's is 1 s)
CARDS = 5
SPACING_S = 0.3
BURST = 600        # deliveries to one hanging receiver queued ahead of a healthy one
BURST_MONGO = 150  # on the Mongo twin (FerretDB writes a batch of 500 slower than a client waits)
BATCH = 100
QUEUE_HOLDS = 33   # server/deliver.c: SUBQ_MAX queued + the attempt in flight


def main():
    boardd = sys.argv[1]
    store = bt.mongo_database(bt.mongo_uri(), 'fairness') if '--mongo' in sys.argv else None
    recv = Receiver()
    recv.slow_s = HANG_S
    with tempfile.TemporaryDirectory() as tmp:
        tokens = os.path.join(tmp, 'tokens.json')
        ops_t = bt.token_add(boardd, tokens, 'ops', ['operator', 'bot'])
        srv = bt.Server(boardd, os.path.join(tmp, 'data'), tokens, tmp, store=store,
                        extra=['--deliverers', '2', '--delivery-timeout-ms', str(TIMEOUT_MS),
                               '--delivery-lease-ms', '60000'])
        ok, detail = srv.start()
        if not ok:
            print('FAIL: boardd did not start:', detail)
            return 1
        print('store:', store or 'fs', flush=True)
        ops = bt.Client(srv.port, ops_t)
        try:
            run(ops, recv)
            backlog(ops, recv, BURST_MONGO if store else BURST)
        except Exception as e:  # a harness error is a failure, with the log
            check(False, 'harness: %r\n%s' % (e, srv.log_tail()))
        finally:
            code = srv.stop(timeout=TIMEOUT_MS / 1000 + 30)
            log = srv.log_text()
            check(code == 0 and 'Sanitizer' not in log and 'runtime error' not in log,
                  'boardd stopped cleanly (exit %s)%s' % (code, '' if code == 0 else
                                                          '\n' + srv.log_tail(40)))
            recv.stop()
    return bt.summary()


def run(ops, recv):
    for name, kind in (('hang-1', 'slow'), ('hang-2', 'slow'), ('healthy', 'ok')):
        ops.must(201, 'PUT', '/v1/boards/default/subscriptions/' + name,
                 {'url': recv.base + '/%s/%s' % (name, kind), 'on': {'all_labels': ['fan']}})
    made = {}  # card id -> when its create was answered
    for i in range(CARDS):
        cid = 'fan-%d' % i
        ops.must(201, 'POST', '/v1/cards', {'id': cid, 'labels': ['fan']})
        made[cid] = time.time()
        time.sleep(SPACING_S)
    got = recv.wait_for('/healthy/', CARDS, HEALTHY_S + 2 * TIMEOUT_MS / 1000)
    late = []
    seen = {}
    for r in got:
        cid = json.loads(r['body'])['card']['id']
        seen.setdefault(cid, r['t'])
    for cid, t_made in sorted(made.items()):
        t = seen.get(cid)
        delay = None if t is None else t - t_made
        print('healthy delivery of %s: %s' % (cid, 'never' if delay is None
                                                else '%.3f s after its event' % delay))
        if delay is None or delay > HEALTHY_S:
            late.append((cid, delay))
    check(not late, 'every healthy delivery within %.1f s of its event while two receivers '
                    'hang (late: %s)' % (HEALTHY_S, late))

    # The hang was real: both hanging subscriptions were attempted, at once, and timed out.
    h1 = recv.hits_for('/hang-1/')
    h2 = recv.hits_for('/hang-2/')
    check(h1 and h2, 'both hanging subscriptions were attempted (%d, %d)' % (len(h1), len(h2)))
    if h1 and h2:
        check(abs(h1[0]['t'] - h2[0]['t']) < TIMEOUT_MS / 1000,
              'the two hanging attempts overlapped (first at %.3f and %.3f)'
              % (h1[0]['t'], h2[0]['t']))
    want = {'hang-1', 'hang-2'}

    def first_attempts_failed():
        dl = ops.must(200, 'GET', '/v1/deliveries?board=default&limit=1000')['deliveries']
        failed = {d['id'].rsplit('.', 1)[-1] for d in dl
                  if d['id'].rsplit('.', 1)[-1] in want and d.get('attempts', 0) >= 1
                  and d.get('status') == 'pending'}
        return failed == want
    check(bt.wait_for(first_attempts_failed, timeout=2 * TIMEOUT_MS / 1000 + 5),
          'the hanging receivers\' attempts were recorded as failed (the full timeout)')

    # Per subscription, one attempt at a time: the hanging receivers never saw two of their
    # own deliveries overlap (each hangs 20 s, far past the 3 s timeout: a request is
    # "in flight" for the deliverer from its arrival until the timeout).
    for name, hits in (('hang-1', recv.hits_for('/hang-1/')),
                       ('hang-2', recv.hits_for('/hang-2/'))):
        ts = sorted(r['t'] for r in hits)
        close = [b - a for a, b in zip(ts, ts[1:]) if b - a < TIMEOUT_MS / 1000 - 0.5]
        check(not close, '%s: one attempt at a time (%d attempts, gaps under the timeout: %s)'
              % (name, len(ts), close))


def backlog(ops, recv, burst):
    ops.must(201, 'PUT', '/v1/boards/default/subscriptions/hang-burst',
             {'url': recv.base + '/hang-burst/slow', 'on': {'all_labels': ['burst']}})
    made = 0
    for start in range(0, burst, BATCH):
        items = [{'id': 'burst-%d' % i, 'labels': ['burst']}
                 for i in range(start, min(start + BATCH, burst))]
        res = ops.must(200, 'POST', '/v1/cards', items)['results']
        made += sum(1 for r in res if r.get('status') == 201)
    check(made == burst, 'the backlog was created (%d of %d cards)' % (made, burst))
    before = len(recv.hits_for('/healthy/'))
    ops.must(201, 'POST', '/v1/cards', {'id': 'after-burst', 'labels': ['fan']})
    t_made = time.time()
    got = recv.wait_for('/healthy/', before + 1, HEALTHY_S + 2 * TIMEOUT_MS / 1000)
    t = next((r['t'] for r in got
              if json.loads(r['body'])['card']['id'] == 'after-burst'), None)
    delay = None if t is None else t - t_made
    print('healthy delivery behind a backlog of %d to a hanging receiver: %s'
          % (burst, 'never' if delay is None else '%.3f s after its event' % delay))
    check(delay is not None and delay <= HEALTHY_S,
          'the healthy delivery within %.1f s of its event behind a backlog of %d'
          % (HEALTHY_S, burst))
    check(bool(recv.hits_for('/hang-burst/')), 'the backlog\'s receiver was attempted')
    dl = ops.must(200, 'GET', '/v1/deliveries?board=default&status=pending&limit=1000')
    leased = [d for d in dl['deliveries']
              if d['id'].endswith('.hang-burst') and d.get('lease')]
    check(len(leased) <= QUEUE_HOLDS,
          'no more of the backlog leased than its queue holds (%d leased, at most %d)'
          % (len(leased), QUEUE_HOLDS))


if __name__ == '__main__':
    sys.exit(main())
