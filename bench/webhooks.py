#!/usr/bin/env python3
"""Webhook figures (issue 13): what a subscription costs a write, and how fast the deliverers
drain an outbox into a local receiver that answers at once.

  1. N card creations without any subscription, then N with one matching subscription
     (sequential, one keep-alive connection): the write's median and p99, each way.
  2. The time from the first of those N creations until all N deliveries are done, and the
     deliveries per second that makes, for --deliverers threads.

Prints figures only; nothing is asserted (bench/README.md: how to read them).

usage: webhooks.py path/to/boardd [--cards N] [--deliverers N] [--store SPEC]
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, '..', 'tests', 'common'))
sys.path.insert(0, os.path.join(here, '..', 'tests', 'effects'))
import boardd_test  # noqa: E402
from receiver import Receiver  # noqa: E402


def creates(c, prefix, n):
    lat = []
    for i in range(n):
        t0 = time.perf_counter()
        st, body = c.call('POST', '/v1/cards', {'id': '%s-%d' % (prefix, i)})
        lat.append(time.perf_counter() - t0)
        if st != 201:
            raise SystemExit('create answered %s: %s' % (st, body))
    return lat


def q(lat, p):
    s = sorted(lat)
    return s[min(len(s) - 1, int(p * len(s)))] * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('boardd')
    ap.add_argument('--cards', type=int, default=500)
    ap.add_argument('--deliverers', type=int, default=2)
    ap.add_argument('--store', default=None)
    o = ap.parse_args()
    recv = Receiver()
    with tempfile.TemporaryDirectory() as tmp:
        tokens = os.path.join(tmp, 'tokens.json')
        tok = boardd_test.token_add(o.boardd, tokens, 'ops', ['operator', 'bot'])
        srv = boardd_test.Server(o.boardd, os.path.join(tmp, 'data'), tokens, tmp,
                                 store=o.store, extra=['--deliverers', str(o.deliverers)])
        ok, why = srv.start()
        if not ok:
            raise SystemExit(why)
        c = boardd_test.Client(srv.port, tok)
        try:
            base = creates(c, 'plain', o.cards)
            st, _ = c.call('PUT', '/v1/boards/default/subscriptions/bench',
                           {'url': recv.base + '/bench/ok', 'on': {'types': ['card_created']}})
            assert st == 201
            t0 = time.monotonic()
            sub = creates(c, 'sub', o.cards)
            while True:
                st, body = c.call('GET', '/v1/deliveries?status=done&limit=1000')
                if len(body['deliveries']) >= o.cards:
                    break
                time.sleep(0.02)
            drained = time.monotonic() - t0
        finally:
            srv.stop()
            recv.stop()
    print('store %s, %d cards, %d deliverers' % (o.store or 'fs', o.cards, o.deliverers))
    print('create without a subscription: median %.2f ms, p99 %.2f ms' %
          (statistics.median(base) * 1000, q(base, 0.99)))
    print('create with one matching subscription: median %.2f ms, p99 %.2f ms' %
          (statistics.median(sub) * 1000, q(sub, 0.99)))
    print('all %d deliveries done %.2f s after the first create: %.0f deliveries/s' %
          (o.cards, drained, o.cards / drained))
    print('receiver got %d requests' % len(recv.hits_for('/bench/')))


if __name__ == '__main__':
    main()
