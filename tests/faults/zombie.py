#!/usr/bin/env python3
"""Zombie workers (issue 5, item 6; ADR-096 §2-§3: a zombie's late write never clobbers the
new owner).

A real boardd runs with the reaper on (--reaper=on --reaper-interval-ms 200). Worker
processes (this script with --worker) claim cards with a 1000 ms lease and hold them: a run
created and recorded (last-run), owned writes -- state moves, awaiting-input, gave-up --
renewals every lease/3, then the run marked failed_resumable and the claim released. Every
owned write carries its token in something the events log keeps: the state reason and the
gave_up reason are "<marker>/<epoch>/<n>", the run id is "<marker>.e<epoch>.n<n>".

The controller repeatedly picks a worker that holds a card and SIGSTOPs it. While it sleeps,
the reaper reclaims the card (epoch advances) and other workers take it. Still during the
stop, the controller sends every fenced write with the sleeper's old token (state,
last-run, awaiting-input, gave-up, renew, release): each must answer 409. Then SIGCONT: the
zombie wakes up mid-hold and carries on with its old token.

Checks, over GET /v1/events and the workers' request logs:
  * fence: per card, claim epochs only grow; a reclaim names exactly the owner it took the
    card from; a release names the current owner;
  * no two owners' writes accepted in one epoch: every accepted owned write (state,
    last_run, gave_up, awaiting_input) comes from the owner of the card at that point of the
    log, and when the write names its epoch (reason / run id) that epoch is the current one;
  * every 2xx owned write of a worker is in the log exactly once, every 409 is absent, and
    nothing else was answered;
  * every write of a zombie with its old token after SIGCONT (its run writes included: a run
    is fenced by the claim it was created under, DESIGN §11), and every write of the
    controller's burst, was refused 409 and left no event.

usage: zombie.py BOARDD [--workers N] [--cards N] [--stops N] [--lease-ms MS] [--seed S]
Exit status 0 when every check passed; the last line is a summary.
"""
import argparse
import collections
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
from boardd_test import (Client, Server, cards_all, events_since, token_add,  # noqa: E402
                         wait_for)

STATES = ('ready', 'in_progress', 'review')
OWNED_WRITES = ('state', 'last_run', 'awaiting', 'gave_up')


class Failure(Exception):
    pass


# ---- the worker process ---------------------------------------------------------------------

class Worker:
    def __init__(self, a):
        self.a = a
        self.marker = a.marker
        self.rng = random.Random(a.seed)
        self.c = Client(a.port, a.token, timeout=30)
        self.log = open(a.log, 'a', buffering=1)
        self.n = 0

    def call(self, op, card, epoch, tag, method, path, body, headers=None):
        t0 = time.monotonic()
        try:
            st, resp = self.c.call(method, path, body, headers)
        except OSError as e:
            st, resp = 0, {'error': str(e)}
        self.log.write(json.dumps({'t0': t0, 't1': time.monotonic(), 'op': op, 'card': card,
                                   'marker': self.marker, 'epoch': epoch, 'tag': tag,
                                   'status': st}) + '\n')
        return st, resp

    def tag(self, epoch):
        self.n += 1
        return '%s/%d/%d' % (self.marker, epoch, self.n)

    def owned(self, kind, card, epoch, state):
        """One owned write; returns (status, new state)."""
        hdr = {'If-Match': '"%d"' % epoch}
        p = '/v1/cards/' + card
        if kind == 'state':
            to = self.rng.choice([s for s in STATES if s != state])
            tag = self.tag(epoch)
            st, _ = self.call('state', card, epoch, tag, 'PATCH', p + '/state',
                              {'marker': self.marker, 'to': to, 'reason': tag}, hdr)
            return st, to if st == 200 else state
        if kind == 'awaiting':
            st, _ = self.call('awaiting', card, epoch, None, 'PUT', p + '/awaiting-input',
                              {'marker': self.marker,
                               'awaiting_input': self.rng.random() < 0.5}, hdr)
            return st, state
        tag = self.tag(epoch)
        gave_up = {'reason': tag} if self.rng.random() < 0.7 else None
        st, _ = self.call('gave_up', card, epoch, tag if gave_up else None, 'PUT',
                          p + '/gave-up', {'marker': self.marker, 'gave_up': gave_up}, hdr)
        return st, state

    def hold(self, card, epoch, deadline):
        lease = self.a.lease_ms
        p = '/v1/cards/' + card
        st, body = self.call('get', card, epoch, None, 'GET', p, None)
        if st != 200:
            return
        state = body['state']
        self.n += 1
        run_id = '%s.e%d.n%d' % (self.marker, epoch, self.n)
        st, _ = self.call('run_create', card, epoch, None, 'POST', '/v1/runs',
                          {'id': run_id, 'card_id': card, 'marker': self.marker,
                           'status': 'running', 'lease_ms': lease})
        if st != 201:
            return
        st, _ = self.call('last_run', card, epoch, run_id, 'PUT', p + '/last-run',
                          {'marker': self.marker, 'run_id': run_id},
                          {'If-Match': '"%d"' % epoch})
        lost = st != 200
        renewed = time.monotonic()
        for _ in range(self.rng.randint(5, 40)):
            if lost or time.monotonic() > deadline or os.path.exists(self.a.stop_file):
                break
            # The work write first, the heartbeat after: a zombie's first act on waking
            # is then a late owned write, as with a worker whose heartbeat is a thread.
            kind = self.rng.choice(('state', 'state', 'awaiting', 'gave_up'))
            st, state = self.owned(kind, card, epoch, state)
            if st != 200:
                lost = True
                break
            if time.monotonic() - renewed > lease / 3000.0:
                st, _ = self.call('renew', card, epoch, None, 'POST', p + '/renew',
                                  {'marker': self.marker, 'epoch': epoch, 'lease_ms': lease})
                self.call('heartbeat', card, epoch, None, 'POST',
                          '/v1/runs/%s/heartbeat' % run_id, {'marker': self.marker})
                renewed = time.monotonic()
                lost = st != 200
            time.sleep(self.rng.uniform(0.005, 0.04))
        self.call('run_update', card, epoch, None, 'PATCH', '/v1/runs/' + run_id,
                  {'marker': self.marker, 'status': 'failed_resumable'})
        if not lost:
            self.call('release', card, epoch, None, 'POST', p + '/release',
                      {'marker': self.marker, 'epoch': epoch})

    def run(self):
        deadline = time.monotonic() + self.a.seconds
        cards = self.a.cards.split(',')
        while time.monotonic() < deadline and not os.path.exists(self.a.stop_file):
            card = self.rng.choice(cards)
            st, body = self.call('claim', card, None, None, 'POST', '/v1/cards/%s/claim' % card,
                                 {'marker': self.marker, 'lease_ms': self.a.lease_ms})
            if st == 200:
                self.hold(card, body['epoch'], deadline)
            else:
                time.sleep(self.rng.uniform(0.005, 0.03))
        self.c.close()
        self.log.close()


def worker_main(argv):
    ap = argparse.ArgumentParser()
    for k in ('port', 'lease-ms', 'seed'):
        ap.add_argument('--' + k, type=int, required=True)
    for k in ('token', 'marker', 'cards', 'log', 'stop-file'):
        ap.add_argument('--' + k, required=True)
    ap.add_argument('--seconds', type=float, required=True)
    Worker(ap.parse_args(argv)).run()
    return 0


# ---- the checker ----------------------------------------------------------------------------

def tag_token(s):
    """(marker, epoch) from "<marker>/<epoch>/<n>" or "<marker>.e<epoch>.n<n>", else None."""
    if not s:
        return None
    if '/' in s:
        m, e, _ = s.split('/', 2)
        return m, int(e)
    m, e, _ = s.rsplit('.', 2)
    return m, int(e[1:])


def write_tag(e):
    """(kind, tag or None) of an owned-write event, or None for other events."""
    t, p = e['type'], e.get('payload') or {}
    if t == 'card_state_changed':
        return 'state', e.get('reason')
    if t == 'card_last_run':
        return 'last_run', p.get('run_id')
    if t == 'card_gave_up':
        return 'gave_up', (p.get('gave_up') or {}).get('reason')
    if t == 'card_updated' and 'awaiting_input' in (p.get('fields') or []):
        return 'awaiting', None
    return None


def check_log(events, workers, by_time=False):
    """The fence and one-owner-per-epoch checks over the events log, walked in commit order:
    seq order (FS twin: seqs are handed out under the write lock, in journal order), or with
    by_time the order of the writes' own times, then seq (the Mongo twin delivers events
    through an outbox: a seq says when the event was delivered, `at` when its write
    committed). Returns the tags present and counters."""
    owner, max_epoch = {}, {}
    writers = collections.defaultdict(set)
    tags = collections.Counter()
    reclaims = 0
    prev = 0
    for e in events:
        if e['seq'] <= prev:
            raise Failure('event seqs out of order at %d' % e['seq'])
        prev = e['seq']
    if by_time:
        events = sorted(events, key=lambda e: (e['at'], e['seq']))
    for e in events:
        cid, t, p = e.get('card_id'), e['type'], e.get('payload') or {}
        if not cid:
            continue
        cur = owner.get(cid)
        if t == 'card_claimed':
            ep = p.get('epoch')
            if not isinstance(ep, int) or ep <= max_epoch.get(cid, 0):
                raise Failure('seq %d: card %s claimed at epoch %r after epoch %d: the fence '
                              'repeated' % (e['seq'], cid, ep, max_epoch.get(cid, 0)))
            rf = p.get('reclaimed_from')
            was = (rf['marker'], rf['epoch']) if rf else None
            if was != cur:
                raise Failure('seq %d: card %s claimed by %s/%d from %s, but the owner was %s' %
                              (e['seq'], cid, p.get('marker'), ep, was, cur))
            if rf:
                reclaims += 1
            owner[cid] = (p.get('marker'), ep)
            max_epoch[cid] = ep
            continue
        if t == 'card_released':
            if cur != (p.get('marker'), p.get('epoch')):
                raise Failure('seq %d: card %s released by %s/%s while the owner was %s' %
                              (e['seq'], cid, p.get('marker'), p.get('epoch'), cur))
            owner[cid] = None
            continue
        wt = write_tag(e)
        if not wt:
            continue
        kind, tag = wt
        actor = e.get('actor') or ''
        if actor not in workers and not (cur and cur[0].startswith('reaper:')):
            raise Failure('seq %d: %s on card %s by unknown actor %r' % (e['seq'], t, cid, actor))
        writer = actor if actor in workers else cur[0]
        if cur is None or cur[0] != writer:
            raise Failure('seq %d: %s on card %s accepted from %s while the owner was %s' %
                          (e['seq'], kind, cid, writer, cur))
        tok = tag_token(tag) if actor in workers else None
        if tok and tok != cur:
            raise Failure('seq %d: %s on card %s with token %s/%d accepted while the owner was '
                          '%s/%d: two owners in one epoch' % (e['seq'], kind, cid, tok[0],
                                                              tok[1], cur[0], cur[1]))
        writers[(cid, cur[1])].add(writer)
        if tag:
            tags[tag] += 1
    for (cid, ep), who in writers.items():
        if len(who) > 1:
            raise Failure('card %s epoch %d: writes accepted from %s' % (cid, ep, sorted(who)))
    return tags, reclaims, len(writers)


def check_requests(logs, tags, episodes, burst_tags):
    """Every worker request against the log, and the zombies' late writes."""
    n_ok = n_409 = late = fenced_409 = 0
    for rec in logs:
        st, op, tag = rec['status'], rec['op'], rec['tag']
        if op == 'get':
            if st != 200:
                raise Failure('%s answered %s: %s' % (op, st, rec))
            continue
        if op in ('run_create', 'run_update', 'heartbeat'):
            # Runs are fenced by the claim they were created under (DESIGN §11): a worker
            # that lost its claim is refused 409 on its run too.
            if st not in (200, 201, 409):
                raise Failure('%s answered %s: %s' % (op, st, rec))
            if st == 409:
                fenced_409 += 1
            continue
        if st not in (200, 409):
            raise Failure('%s answered %s: %s' % (op, st, rec))
        if st == 409 and op != 'claim':
            fenced_409 += 1
        if op in OWNED_WRITES:
            if st == 200:
                n_ok += 1
            else:
                n_409 += 1
            if tag is not None and tags.get(tag, 0) != (1 if st == 200 else 0):
                raise Failure('%s %s answered %d but the events log holds it %d time(s)' %
                              (op, tag, st, tags.get(tag, 0)))
    for ep in episodes:
        for rec in logs:
            if (rec['marker'] == ep['marker'] and rec['card'] == ep['card'] and
                    rec['epoch'] == ep['epoch'] and rec['t0'] >= ep['t_cont'] and
                    rec['op'] != 'get'):
                late += 1
                if rec['status'] != 409:
                    raise Failure('zombie %s wrote %s to card %s with its old epoch %d after '
                                  'SIGCONT and got %s' % (ep['marker'], rec['op'], ep['card'],
                                                          ep['epoch'], rec['status']))
    for t in burst_tags:
        if tags.get(t):
            raise Failure('the stale-token burst write %s left an event' % t)
    return n_ok, n_409, late, fenced_409


def self_test():
    """The checker must be able to fail: a stale write accepted after a reclaim, a reclaim
    from the wrong owner, a repeated epoch."""
    def ev(seq, t, cid, actor='', reason=None, **payload):
        return {'seq': seq, 'type': t, 'card_id': cid, 'actor': actor, 'reason': reason,
                'payload': payload}
    good = [ev(1, 'card_created', 'c'),
            ev(2, 'card_claimed', 'c', 'wk0', marker='wk0', epoch=1),
            ev(3, 'card_state_changed', 'c', 'wk0', 'wk0/1/1', **{'from': 'ready',
                                                                  'to': 'review'}),
            ev(4, 'card_claimed', 'c', '', 'watchdog', marker='reaper:h', epoch=2,
               reclaimed_from={'marker': 'wk0', 'epoch': 1}),
            ev(5, 'card_released', 'c', 'reaper:h', marker='reaper:h', epoch=2),
            ev(6, 'card_claimed', 'c', 'wk1', marker='wk1', epoch=3),
            ev(7, 'card_last_run', 'c', 'wk1', run_id='wk1.e3.n1')]
    check_log(good, {'wk0', 'wk1'})
    bad = [
        good + [ev(8, 'card_state_changed', 'c', 'wk0', 'wk0/1/2', **{'from': 'review',
                                                                      'to': 'ready'})],
        good + [ev(8, 'card_gave_up', 'c', 'wk1', gave_up={'reason': 'wk1/2/9'})],
        good + [ev(8, 'card_updated', 'c', 'wk0', fields=['awaiting_input'])],
        good[:5] + [ev(6, 'card_claimed', 'c', 'wk1', marker='wk1', epoch=2)],
        good[:3] + [ev(4, 'card_claimed', 'c', '', 'watchdog', marker='reaper:h', epoch=2,
                       reclaimed_from={'marker': 'wk1', 'epoch': 1})],
    ]
    for i, b in enumerate(bad):
        try:
            check_log(b, {'wk0', 'wk1'})
        except Failure:
            continue
        raise SystemExit('zombie: self-test: the checker missed bad log #%d' % i)
    tags, _, _ = check_log(good, {'wk0', 'wk1'})
    late = [{'t0': 5.0, 'op': 'state', 'card': 'c', 'marker': 'wk0', 'epoch': 1,
             'tag': 'wk0/1/1', 'status': 200}]
    try:
        check_requests(late, tags, [{'marker': 'wk0', 'card': 'c', 'epoch': 1, 't_cont': 4.0}],
                       [])
    except Failure:
        return
    raise SystemExit('zombie: self-test: the checker missed a late write answered 200')


# ---- the controller -------------------------------------------------------------------------

def burst(port, token, marker, card, epoch, k):
    """Every fenced write with a stale token; returns (statuses, tags sent)."""
    c = Client(port, token, timeout=15)
    p = '/v1/cards/' + card
    hdr = {'If-Match': '"%d"' % epoch}
    t_state = '%s/%d/burst%d' % (marker, epoch, k)
    t_gave = '%s/%d/burstg%d' % (marker, epoch, k)
    t_run = '%s.e%d.nburst%d' % (marker, epoch, k)
    calls = [
        ('state', 'PATCH', p + '/state', {'marker': marker, 'to': 'review', 'reason': t_state},
         hdr),
        ('last_run', 'PUT', p + '/last-run', {'marker': marker, 'run_id': t_run}, hdr),
        ('awaiting', 'PUT', p + '/awaiting-input', {'marker': marker, 'awaiting_input': True},
         hdr),
        ('gave_up', 'PUT', p + '/gave-up', {'marker': marker, 'gave_up': {'reason': t_gave}},
         hdr),
        ('renew', 'POST', p + '/renew', {'marker': marker, 'epoch': epoch, 'lease_ms': 1000},
         None),
        ('release', 'POST', p + '/release', {'marker': marker, 'epoch': epoch}, None),
    ]
    out = {}
    try:
        for op, m, path, body, h in calls:
            out[op] = c.call(m, path, body, h)[0]
    finally:
        c.close()
    return out, [t_state, t_gave, t_run]


def poll(fn, timeout):
    return wait_for(fn, timeout, final=False)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == '--worker':
        return worker_main(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('boardd')
    ap.add_argument('--workers', type=int, default=4)
    ap.add_argument('--cards', type=int, default=6)
    ap.add_argument('--stops', type=int, default=3, help='zombie episodes')
    ap.add_argument('--lease-ms', type=int, default=1000)
    ap.add_argument('--seed', type=int, default=None)
    ap.add_argument('--store', default=None,
                    help='a store spec instead of a fresh FS directory, e.g. '
                         'mongodb://127.0.0.1:27017/zombie_1 (use a fresh database)')
    ap.add_argument('--keep', action='store_true')
    o = ap.parse_args()
    self_test()
    seed = o.seed if o.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    lease = o.lease_ms / 1000.0
    print('zombie: seed %d, %d workers, %d cards, %d stops, lease %d ms, store %s' %
          (seed, o.workers, o.cards, o.stops, o.lease_ms, o.store or 'fs (fresh directory)'),
          flush=True)

    tmp = tempfile.mkdtemp(prefix='boardd-zombie.')
    tokens = os.path.join(tmp, 'tokens.json')
    admin = token_add(o.boardd, tokens, 'z-admin', ['operator', 'bot'])
    wtok = {'wk%d' % i: token_add(o.boardd, tokens, 'wk%d' % i, ['worker'])
            for i in range(o.workers)}
    srv = Server(o.boardd, os.path.join(tmp, 'data'), tokens, tmp,
                 ['--reaper=on', '--reaper-interval-ms', '200',
                  '--lease-default-ms', str(o.lease_ms), '--lease-min-ms', str(min(o.lease_ms,
                                                                                  1000))],
                 store=o.store)
    procs = {}
    episodes = []
    burst_tags = []
    ok = False
    try:
        started, why = srv.start()
        if not started:
            raise Failure(why)
        adm = Client(srv.port, admin, timeout=15)
        cards = ['z-%d' % j for j in range(o.cards)]
        for cid in cards:
            st, body = adm.call('POST', '/v1/cards', {'id': cid, 'title': cid, 'state': 'ready'})
            if st != 201:
                raise Failure('create %s: %s %s' % (cid, st, body))
        # A bound only: the workers stop when stop_file appears, after the last episode.
        seconds = 10.0 + o.stops * (12 * lease + 6)
        stop_file = os.path.join(tmp, 'stop')
        for i, (marker, tok) in enumerate(wtok.items()):
            procs[marker] = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), '--worker', '--port',
                 str(srv.port), '--token', tok, '--marker', marker, '--cards', ','.join(cards),
                 '--lease-ms', str(o.lease_ms), '--seed', str(rng.randrange(1 << 30)),
                 '--log', os.path.join(tmp, marker + '.log'), '--seconds', str(seconds),
                 '--stop-file', stop_file])
        time.sleep(1.0)
        attempts = 0
        while len(episodes) < o.stops and attempts < 50 * o.stops:
            attempts += 1
            marker = rng.choice(sorted(procs))

            def held_by(m):
                return [c for c in cards_all(adm).values()
                        if c.get('claim') and c['claim']['marker'] == m]
            if not held_by(marker):
                time.sleep(0.03)
                continue
            procs[marker].send_signal(signal.SIGSTOP)
            held = held_by(marker)
            if not held:
                procs[marker].send_signal(signal.SIGCONT)
                continue
            card = held[0]['id']
            epoch = held[0]['claim']['epoch']
            t_stop = time.monotonic()

            def reclaimed():
                st, c = adm.call('GET', '/v1/cards/' + card)
                return c if st == 200 and c['claim_epoch'] > epoch else None
            after = poll(reclaimed, 10 * lease + 10)
            if not after:
                raise Failure('card %s held by stopped %s/%d was never reclaimed' %
                              (card, marker, epoch))

            def taken():
                st, c = adm.call('GET', '/v1/cards/' + card)
                cl = c.get('claim') if st == 200 else None
                return cl if cl and cl['marker'].startswith('wk') else None
            taker = poll(taken, 2 * lease + 1)
            statuses, tags = burst(srv.port, wtok[marker], marker, card, epoch, len(episodes))
            burst_tags += tags
            bad = {k: v for k, v in statuses.items() if v != 409}
            if bad:
                raise Failure('stale token %s/%d on card %s: %s answered %s instead of 409' %
                              (marker, epoch, card, ', '.join(bad), bad))
            t_cont = time.monotonic()
            procs[marker].send_signal(signal.SIGCONT)
            episodes.append({'marker': marker, 'card': card, 'epoch': epoch, 't_cont': t_cont})
            print('zombie: stop %d: %s stopped %.1f s holding %s epoch %d; reclaimed (epoch now '
                  '%d)%s; 6 stale-token writes refused 409; SIGCONT' %
                  (len(episodes), marker, t_cont - t_stop, card, epoch,
                   after['claim_epoch'],
                   ', then taken by %s epoch %d' % (taker['marker'], taker['epoch'])
                   if taker else ', not retaken within the wait'), flush=True)
            time.sleep(0.5)
        if len(episodes) < o.stops:
            raise Failure('only %d of %d stops could be staged' % (len(episodes), o.stops))
        time.sleep(2 * lease)  # the last zombie works on a little after waking up
        open(stop_file, 'w').close()
        for marker, p in procs.items():
            try:
                p.wait(timeout=seconds + 60)
            except subprocess.TimeoutExpired:
                raise Failure('worker %s did not finish' % marker)
            if p.returncode != 0:
                raise Failure('worker %s exited %s' % (marker, p.returncode))
        mongo = (o.store or '').startswith('mongodb')
        events, last = events_since(adm, 0)
        if mongo:
            # The outbox may deliver an event after its write answered: read until quiet.
            for _ in range(30):
                time.sleep(1.0)
                more, last = events_since(adm, last)
                if not more:
                    break
                events += more
        tags, reclaims, epochs = check_log(events, set(wtok), by_time=mongo)
        for ep in episodes:
            if not any(e['type'] == 'card_claimed' and e.get('card_id') == ep['card'] and
                       (e['payload'].get('reclaimed_from') or {}) ==
                       {'marker': ep['marker'], 'epoch': ep['epoch']} for e in events):
                raise Failure('card %s left %s/%d (its epoch advanced) but the log has no '
                              'reclaim from that token' % (ep['card'], ep['marker'],
                                                           ep['epoch']))
        logs = []
        for marker in wtok:
            with open(os.path.join(tmp, marker + '.log')) as f:
                logs += [json.loads(line) for line in f]
        n_ok, n_409, late, fenced_409 = check_requests(logs, tags, episodes, burst_tags)
        adm.close()
        log = srv.log_text()
        acts = collections.Counter(m.group(1) for m in
                                   re.finditer(r'reclaimed card \S+ from \S+ epoch \d+: (\S+)',
                                               log))
        acts['promoted runs'] = log.count(' promoted to ')
        acts['recovery holds released'] = (log.count('recovery hold by') +
                                           log.count('released abandoned recovery claim'))
        code = srv.stop()
        if code != 0:
            raise Failure('boardd exited %s on SIGTERM' % code)
        ok = True
        print('zombie: PASS: %d stops, %d events, %d reclaims by the reaper, %d owned epochs '
              'each written by one owner only, %d owned writes accepted (%d refused), %d '
              'fenced requests refused 409 of which %d late writes of zombies after SIGCONT, '
              '%d stale-token burst writes refused, seed %d' %
              (len(episodes), len(events), reclaims, epochs, n_ok, n_409, fenced_409, late,
               6 * len(episodes), seed), flush=True)
        print('zombie: the reaper: %s' % ', '.join('%s %d' % kv for kv in sorted(acts.items())),
              flush=True)
    except (Failure, OSError, RuntimeError) as e:
        print('zombie: FAIL: %s (seed %d)' % (e, seed), flush=True)
        o.keep = True
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
                p.wait(timeout=30)
        if srv.alive():
            srv.kill()
    if o.keep:
        print('zombie: data and logs kept in %s' % tmp)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
