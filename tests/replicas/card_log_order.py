#!/usr/bin/env python3
"""One card's events are logged in the order its writes committed (DESIGN §7, §16), under a
race on that card: two workers claim and release the same card in a loop while two bots
relabel it, against one boardd on the FS twin (--mode fs) or two replicas sharing one
database of mongo-java-server (--mode mongo; worker x and one bot on replica a, worker y and
the other bot on replica b).

Every acknowledged claim and release must be in the log once, and the log, replayed in seq
order, must never show a claim while another holder has the card, nor a release by anyone
but the holder. On the Mongo twin a write's events are delivered from the card's outbox,
where stored entries wait for their deferred pull: on a busy card they used to fill the
delivery's view of eight, the earlier writer's entry fell out of it, and the later write took
its seq first (card_claimed x logged before card_released y).

usage: card_log_order.py BOARDD [--mode fs|mongo] [--seconds S] [--keep]
Mongo mode runs on mongo-java-server, never FerretDB (bt.mongo_atomic_database).
"""
import argparse
import collections
import os
import shutil
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'common'))
import boardd_test as bt  # noqa: E402

CARD = 'k'


class Race:
    def __init__(self, deadline):
        self.deadline = deadline
        self.lock = threading.Lock()
        self.acked = collections.Counter()  # (type, marker, epoch) -> acknowledged writes
        self.answers = collections.Counter()
        self.errors = []

    def note(self, what):
        with self.lock:
            self.answers[what] += 1

    def worker(self, port, token, marker):
        c = bt.Client(port, token, timeout=60)
        try:
            while time.time() < self.deadline:
                st, body = c.call('POST', '/v1/cards/%s/claim' % CARD,
                                  {'marker': marker, 'lease_ms': 60000})
                self.note('claim %s' % st)
                if st != 200:
                    continue
                epoch = body['epoch']
                with self.lock:
                    self.acked[('card_claimed', marker, epoch)] += 1
                st, body = c.call('POST', '/v1/cards/%s/release' % CARD,
                                  {'marker': marker, 'epoch': epoch})
                self.note('release %s' % st)
                if st != 200:
                    raise RuntimeError('release of %s@%d answered %s %s' %
                                       (marker, epoch, st, body))
                with self.lock:
                    self.acked[('card_released', marker, epoch)] += 1
        except (OSError, RuntimeError, KeyError) as e:
            with self.lock:
                self.errors.append('worker %s: %s' % (marker, e))
        finally:
            c.close()

    def bot(self, port, token, k):
        c = bt.Client(port, token, timeout=60)
        i = 0
        try:
            while time.time() < self.deadline:
                i += 1
                st, body = c.call('PATCH', '/v1/cards/%s/labels' % CARD,
                                  {'add': ['b%d' % ((i + k) % 5)],
                                   'remove': ['b%d' % ((i + k + 2) % 5)]})
                self.note('labels %s' % st)
                if st != 200:
                    raise RuntimeError('labels answered %s %s' % (st, body))
        except (OSError, RuntimeError) as e:
            with self.lock:
                self.errors.append('bot %d: %s' % (k, e))
        finally:
            c.close()


def replay(events):
    """The log's contradictions: a claim while held, a release by a non-holder."""
    held, bad = None, []
    for e in events:
        if e.get('card_id') != CARD:
            continue
        p = e.get('payload') or {}
        tok = (p.get('marker'), p.get('epoch'))
        if e['type'] == 'card_claimed':
            if held:
                bad.append('seq %d: card_claimed %s@%s while %s@%s holds the card' %
                           (e['seq'], tok[0], tok[1], held[0], held[1]))
            held = tok
        elif e['type'] == 'card_released':
            if held != tok:
                bad.append('seq %d: card_released %s@%s while %s holds the card' %
                           (e['seq'], tok[0], tok[1],
                            '%s@%s' % held if held else 'nobody'))
            held = None
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('boardd')
    ap.add_argument('--mode', choices=('fs', 'mongo'), default='fs')
    ap.add_argument('--seconds', type=float, default=8.0)
    ap.add_argument('--keep', action='store_true')
    o = ap.parse_args()
    uri = bt.mongo_atomic_database('logorder') if o.mode == 'mongo' else None
    print('card_log_order: mode %s, %.0f s' % (o.mode, o.seconds), flush=True)
    tmp = tempfile.mkdtemp(prefix='boardd-logorder.')
    tokens = os.path.join(tmp, 'tokens.json')
    bot_tok = bt.token_add(o.boardd, tokens, 'bot', ['bot'])
    w_tok = {m: bt.token_add(o.boardd, tokens, 'w' + m, ['worker']) for m in ('x', 'y')}
    servers, ok = [], False
    try:
        servers = bt.start_replicas(o.boardd, uri, tmp, tokens)
        ports = [s.port for s in servers]
        adm = bt.Client(ports[0], bot_tok, timeout=60)
        adm.must(201, 'POST', '/v1/cards', {'id': CARD, 'title': 'raced', 'state': 'ready'})
        race = Race(time.time() + o.seconds)
        ts = [threading.Thread(target=race.worker, args=(ports[0], w_tok['x'], 'x')),
              threading.Thread(target=race.worker, args=(ports[-1], w_tok['y'], 'y')),
              threading.Thread(target=race.bot, args=(ports[0], bot_tok, 0)),
              threading.Thread(target=race.bot, args=(ports[-1], bot_tok, 1))]
        for t in ts:
            t.start()
        for t in ts:
            t.join(o.seconds + 120)
        if race.errors:
            raise RuntimeError('; '.join(race.errors[:5])[:2000])
        # The log, once it has been quiet (the Mongo tail serves a seq once the ones before
        # it are filled or older than its gap grace).
        events, last = bt.events_since(adm, 0)
        quiet = time.time()
        while time.time() - quiet < (3.0 if uri else 0.5):
            time.sleep(0.2)
            more, last = bt.events_since(adm, last)
            if more:
                events += more
                quiet = time.time()
        print('card_log_order: answers: %s' %
              ', '.join('%s: %d' % kv for kv in sorted(race.answers.items())), flush=True)
        fails = []
        claims = sum(n for (t, _, _), n in race.acked.items() if t == 'card_claimed')
        by_x = sum(n for (t, m, _), n in race.acked.items() if t == 'card_claimed' and m == 'x')
        if claims < 20 or by_x in (0, claims):
            fails.append('no race: %d claims acknowledged, %d of them by x' % (claims, by_x))
        logged = collections.Counter(
            (e['type'], (e.get('payload') or {}).get('marker'),
             (e.get('payload') or {}).get('epoch'))
            for e in events if e['type'] in ('card_claimed', 'card_released'))
        lost = [k for k in race.acked if logged[k] != race.acked[k]]
        extra = [k for k in logged if k not in race.acked]
        if lost:
            fails.append('%d acknowledged writes not logged exactly once, first %s' %
                         (len(lost), lost[0]))
        if extra:
            fails.append('%d claim/release events with no acknowledged write, first %s' %
                         (len(extra), extra[0]))
        seqs = [e['seq'] for e in events]
        if seqs != sorted(set(seqs)):
            fails.append('the log\'s seqs do not grow')
        bad = replay(events)
        if bad:
            fails.append('%d contradictions in the replayed log: %s' %
                         (len(bad), '; '.join(bad[:3])))
        print('card_log_order: %d claims acknowledged (%d by x), %d events logged, %d '
              'contradictions' % (claims, by_x, len(events), len(bad)), flush=True)
        for f in fails:
            print('FAIL: ' + f, flush=True)
        ok = not fails
    finally:
        for s in servers:
            s.stop()
        if ok and not o.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        elif not ok:
            print('card_log_order: logs kept in %s' % tmp, flush=True)
    sys.exit(0 if ok else 1)


if __name__ == '__main__':
    main()
