#!/usr/bin/env python3
"""Webhook delivery by two boardd replicas on one MongoDB database (DESIGN §14): a delivery is
leased by one deliverer at a time, and a replica killed mid-delivery has it retried by another
once the lease expires.

  race      replicas A and B, four deliverers each, one slow receiver (0.4 s an answer), 16
            matching events: every delivery done, each attempted exactly once, and never two
            requests of one delivery at the same time (the receiver records overlaps). Run only
            where single-document updates are atomic (mongo-java-server, MongoDB): FerretDB's
            findAndModify is a read then a write, so two processes could both take one lease
            there; the race is skipped on it, saying so.
  takeover  only A delivers (B runs with --deliverers 0); A is killed with SIGKILL while its
            requests hang in the receiver (2 s each); C then starts with deliverers: every
            delivery is done, and each one A had in flight is attempted again, after its lease
            (3 s) expired, never while A's attempt could still be running. Sequential: runs on
            FerretDB too.

usage: replicas.py path/to/boardd     (BOARDD_TEST_MONGO_URI; skips, 77, when unset outside CI)
"""
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import boardd_test as bt  # noqa: E402
from boardd_test import check  # noqa: E402
from receiver import Receiver  # noqa: E402

LEASE_MS = 3000
bt.verbose()


def deliveries(c, prefix):
    out = c.must(200, 'GET', '/v1/deliveries?board=default&limit=1000')['deliveries']
    return [d for d in out if d['card_id'] and d['card_id'].startswith(prefix)]


def wait_done(c, prefix, n, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        dl = deliveries(c, prefix)
        if len(dl) == n and all(d['status'] == 'done' for d in dl):
            return dl
        time.sleep(0.2)
    return deliveries(c, prefix)


def attempts_of(srv, token):
    st, body = bt.Client(srv.port, token).call('GET', '/metrics')
    for line in (body or {}).get('_raw', '').splitlines():
        if line.startswith('boardd_webhook_attempts_total '):
            return int(float(line.split()[1]))
    return None


def main():
    boardd = sys.argv[1]
    store = bt.mongo_database(bt.mongo_uri(), 'dlv')
    ferret = bt.mongo_is_ferretdb()
    recv = Receiver()
    servers = []
    with tempfile.TemporaryDirectory() as tmp:
        tokens = os.path.join(tmp, 'tokens.json')
        ops_t = bt.token_add(boardd, tokens, 'ops', ['operator', 'bot'])

        def start(name, deliverers):
            d = os.path.join(tmp, name)
            os.mkdir(d)
            srv = bt.Server(boardd, d, tokens, d, store=store,
                                     extra=['--deliverers', str(deliverers),
                                            '--delivery-lease-ms', str(LEASE_MS),
                                            '--delivery-timeout-ms', '2500'])
            ok, why = srv.start()
            if not ok:
                raise RuntimeError('replica %s did not start: %s' % (name, why))
            servers.append(srv)
            return srv

        try:
            a = start('a', 4)
            ops = bt.Client(a.port, ops_t)
            ops.must(201, 'PUT', '/v1/boards/default/subscriptions/slow',
                 {'url': recv.base + '/slow/ok', 'on': {'types': ['card_created']}})
            if ferret:
                print('SKIP race: FerretDB 1.24: single-document updates are not atomic under '
                      'concurrency, so two replicas could both take one lease; the race runs '
                      'on mongo-java-server and MongoDB (this process still serialises its own '
                      'deliverers on FerretDB)', flush=True)
            else:
                race(start, a, ops, ops_t, recv)
            takeover(start, a, ops, ops_t, recv)
        except Exception as e:  # a harness error is a failure
            check(False, 'harness: %r' % e)
        finally:
            for s in servers:
                if s.alive():
                    s.kill()
            recv.stop()
    return bt.summary()


def race(start, a, ops, ops_t, recv):
    b = start('b', 4)
    opsb = bt.Client(b.port, ops_t)
    recv.delay_s = 0.4
    for i in range(16):
        (ops if i % 2 else opsb).must(201, 'POST', '/v1/cards', {'id': 'race-%d' % i})
    dl = wait_done(ops, 'race-', 16, 60)
    check(len(dl) == 16 and all(d['status'] == 'done' for d in dl),
          'race: 16 deliveries done (%d)' % len(dl))
    hits = recv.hits_for('/slow/')
    ids = [h['headers'].get('webhook-id') for h in hits]
    check(sorted(ids) == sorted(d['id'] for d in dl),
          'race: each delivery attempted exactly once (%d requests)' % len(ids))
    check(not recv.overlaps, 'race: no delivery attempted by both at once (overlaps: %s)' %
          recv.overlaps)
    na, nb = attempts_of(a, ops_t), attempts_of(b, ops_t)
    print('race: attempts by replica a: %s, b: %s' % (na, nb), flush=True)
    check(na is not None and nb is not None and na + nb == 16,
          'race: the replicas made 16 attempts between them (a %s, b %s)' % (na, nb))
    b.stop()


def takeover(start, a, ops, ops_t, recv):
    quiet = start('quiet', 0)  # serves requests, delivers nothing
    opsq = bt.Client(quiet.port, ops_t)
    recv.delay_s = 2.0
    base = len(recv.hits_for('/slow/'))
    for i in range(4):
        ops.must(201, 'POST', '/v1/cards', {'id': 'take-%d' % i})
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(recv.hits_for('/slow/')) == base:
        time.sleep(0.02)
    time.sleep(0.2)
    in_flight = {h['headers'].get('webhook-id'): h['t'] for h in recv.hits_for('/slow/')[base:]}
    killed_at = time.time()
    a.kill()
    check(len(in_flight) >= 1, 'takeover: A had %d attempts in flight when killed' %
          len(in_flight))
    c = start('c', 4)
    dl = wait_done(opsq, 'take-', 4, 60)
    check(len(dl) == 4 and all(d['status'] == 'done' for d in dl),
          'takeover: every delivery done after A died (%s)' % [(d['id'], d['status'])
                                                              for d in dl])
    later = [h for h in recv.hits_for('/slow/')[base:] if h['t'] > killed_at]
    for hid, t0 in in_flight.items():
        again = [h['t'] for h in later if h['headers'].get('webhook-id') == hid]
        check(bool(again) and min(again) - t0 >= LEASE_MS / 1000.0 * 0.9,
              'takeover: %s retried by another replica after the lease (%.2f s later)' %
              (hid, min(again) - t0 if again else -1))
    check(not recv.overlaps, 'takeover: never two attempts of one delivery at once')
    c.stop()
    quiet.stop()


if __name__ == '__main__':
    sys.exit(main())
