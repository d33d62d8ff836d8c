#!/usr/bin/env python3
"""A randomized concurrent history against boardd, checked offline (tests/history/README.md).

Many actors, each a thread with a token of its own, run against one boardd (--mode fs) or two
boardd replicas on one Mongo database (--mode mongo): workers claiming (claim and
claim-next), renewing, writing owned and releasing with short leases, some stalling past
their lease and then writing late with their old token (zombies), some leaving their run
paused or alive behind an expired claim, some dying after their run finished; bots moving
cards with SetStateFrom; an operator reopening terminal cards, refiling, cancelling runs,
revoking claims and asking for reaper passes. The reaper runs every few milliseconds.
The board carries the dispatch policy of DESIGN §17: a limit on ready, max_claims, a retry
policy; some cards are created scheduled (not_before), the bots reschedule some, and workers
end some holds with a retry release.

Every request is recorded with its send and answer times and its answer; afterwards the
events log (GET /v1/events, and the SSE stream read during the run, which must agree with
it), every card and every run are read, and checker.py judges the whole history. A failure
prints the violations with the requests and events that show them, the seed, and keeps the
logs.

usage: history.py BOARDD [--mode fs|mongo] [--seconds S] [--seed N] [--workers N]
                         [--cards N] [--keep] [--refile any|operator]
Mongo mode needs BOARDD_TEST_MONGO_URI (a mongo-java-server: atomic); it is skipped (77)
without it, and on FerretDB (BOARDD_TEST_MONGO_IS_FERRETDB=1), whose single-document updates
are not atomic under concurrency.
"""
import argparse
import collections
import datetime
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'common'))
sys.path.insert(0, HERE)
import boardd_test as bt  # noqa: E402
import checker  # noqa: E402

COLUMNS = ('inbox', 'backlog', 'ready', 'waiting_deps', 'in_progress', 'awaiting_input',
           'review', 'done', 'blocked')
WORK = ('ready', 'in_progress', 'review', 'awaiting_input')
LEASES = (250, 400, 600)  # ms: a few renewals per hold, and stalls that outlive them
# DESIGN §17 on the board: ready holds at most 2 claims taken from it, the board 4; two
# attempts with a short backoff (so retries come back, and some run out, within the run).
LIMITS = {'ready': 2}
MAX_CLAIMS = 4
RETRY = {'max_attempts': 2, 'backoff_ms': 150, 'max_backoff_ms': 600}


def iso(t):
    """Seconds since the epoch as RFC 3339 with milliseconds (what the server keeps)."""
    return datetime.datetime.fromtimestamp(round(t, 3), datetime.timezone.utc).isoformat(
        timespec='milliseconds').replace('+00:00', 'Z')


def board_body(board):
    """The board as PUT takes it (GET's config, its read-only counts left out), with the
    policy."""
    cols = []
    for c in board['columns']:
        col = {'name': c['name'], 'terminal': c['terminal'], 'eligible': c['eligible']}
        if c['name'] in LIMITS:
            col['limit'] = LIMITS[c['name']]
        cols.append(col)
    body = {k: board[k] for k in ('name', 'running', 'completed', 'failed', 'waiting')}
    body.update(columns=cols, max_claims=MAX_CLAIMS, retry=RETRY)
    return body


class History:
    """Every request of every actor, as the checker reads them."""

    def __init__(self):
        self.lock = threading.Lock()
        self.ops = []
        self.runs = []  # run ids created (the operator cancels some)

    def add(self, op):
        with self.lock:
            op['i'] = len(self.ops)
            self.ops.append(op)


class Actor(threading.Thread):
    def __init__(self, name, role, token, ports, hist, seed, deadline, ctx):
        super().__init__(name=name, daemon=True)
        self.actor, self.role, self.hist = name, role, hist
        self.rng = random.Random(seed)
        self.clients = [bt.Client(p, token, timeout=60) for p in ports]
        self.deadline = deadline
        self.ctx = ctx
        self.n = 0
        self.error = None

    def call(self, kind, method, path, body=None, headers=None, **fields):
        c = self.rng.choice(self.clients)
        t0 = time.time()
        try:
            st, resp = c.call(method, path, body, headers)
        except OSError as e:
            st, resp = 0, {'error': str(e)}
        t1 = time.time()
        op = {'actor': self.actor, 'kind': kind, 't0': t0, 't1': t1, 'st': st, 'resp': resp,
              'card': None, 'tok': None, 'run': None, 'tag': None, 'lease_ms': 0}
        op.update(fields)
        self.hist.add(op)
        if st >= 500 or st == 0:
            self.error = '%s %s answered %s: %s' % (method, path, st, resp)
        return st, resp

    def tag(self):
        self.n += 1
        return '%s#%d' % (self.actor, self.n)

    def done(self):
        return time.time() > self.deadline or self.error is not None

    def run(self):
        try:
            self.loop()
        except Exception as e:  # the history stops; the test fails with the reason
            self.error = '%s: %r' % (self.actor, e)
        for c in self.clients:
            c.close()


class Worker(Actor):
    def loop(self):
        while not self.done():
            lease = self.rng.choice(LEASES)
            if self.rng.random() < 0.5:
                st, r = self.call('claim_next', 'POST', '/v1/boards/default/claim-next',
                                  {'marker': self.actor, 'lease_ms': lease})
                op = self.hist.ops[-1]
                if st == 200:
                    op.update(card=r['card']['id'], tok=[self.actor, r['token']['epoch']],
                              lease_ms=r['token']['lease_ms'])
                    self.hold(r['card']['id'], r['token']['epoch'], lease, r['card']['state'])
                    continue
            else:
                cid = self.rng.choice(self.ctx['cards'])
                st, r = self.call('claim', 'POST', '/v1/cards/%s/claim' % cid,
                                  {'marker': self.actor, 'lease_ms': lease}, card=cid)
                if st == 200:
                    self.hist.ops[-1].update(tok=[self.actor, r['epoch']],
                                             lease_ms=r['lease_ms'])
                    self.hold(cid, r['epoch'], lease, None)
                    continue
            time.sleep(self.rng.uniform(0.01, 0.04))

    def owned(self, kind, cid, epoch, state):
        hdr = {'If-Match': '"%d"' % epoch}
        p = '/v1/cards/' + cid
        tok = [self.actor, epoch]
        if kind == 'state':
            to = self.rng.choice([s for s in WORK if s != state])
            tag = self.tag()
            st, _ = self.call('state', 'PATCH', p + '/state',
                              {'marker': self.actor, 'to': to, 'reason': tag}, hdr, card=cid,
                              tok=tok, tag=tag, to=to)
            return st, to if st == 200 else state
        if kind == 'awaiting':
            v = self.rng.random() < 0.5
            st, _ = self.call('awaiting', 'PUT', p + '/awaiting-input',
                              {'marker': self.actor, 'awaiting_input': v}, hdr, card=cid,
                              tok=tok, awaiting=v)
            return st, state
        g = {'reason': self.tag()} if self.rng.random() < 0.7 else None
        st, _ = self.call('gave_up', 'PUT', p + '/gave-up', {'marker': self.actor, 'gave_up': g},
                          hdr, card=cid, tok=tok)
        return st, state

    def file(self, cid, epoch, to):
        """The owner's own filing into a terminal column (its last owned write)."""
        tag = self.tag()
        return self.call('state', 'PATCH', '/v1/cards/%s/state' % cid,
                         {'marker': self.actor, 'to': to, 'reason': tag},
                         {'If-Match': '"%d"' % epoch}, card=cid, tok=[self.actor, epoch],
                         tag=tag, to=to)[0]

    def renew(self, cid, epoch, lease):
        return self.call('renew', 'POST', '/v1/cards/%s/renew' % cid,
                         {'marker': self.actor, 'epoch': epoch, 'lease_ms': lease}, card=cid,
                         tok=[self.actor, epoch], lease_ms=lease)[0]

    def heartbeat(self, cid, epoch, rid, lease):
        return self.call('heartbeat', 'POST', '/v1/runs/%s/heartbeat' % rid,
                         {'marker': self.actor}, card=cid, tok=[self.actor, epoch], run=rid,
                         lease_ms=lease)[0]

    def run_patch(self, cid, epoch, rid, status, lease):
        return self.call('run_patch', 'PATCH', '/v1/runs/' + rid,
                         {'marker': self.actor, 'status': status}, card=cid,
                         tok=[self.actor, epoch], run=rid, status=status, lease_ms=lease)[0]

    def release(self, cid, epoch, retry=False):
        body = {'marker': self.actor, 'epoch': epoch}
        if retry:  # DESIGN §17: an attempt counted, the card scheduled after the backoff
            body['retry'] = True
        return self.call('release', 'POST', '/v1/cards/%s/release' % cid, body, card=cid,
                         tok=[self.actor, epoch], retry=retry)[0]

    def late_writes(self, cid, epoch, rid, state, lease):
        """A zombie wakes up: every fenced write with its old token, in a random order."""
        kinds = ['state', 'awaiting', 'gave_up', 'renew', 'last_run', 'run', 'run_patch']
        self.rng.shuffle(kinds)
        kinds.append('release')  # last: a zombie that was not reclaimed ends its hold here
        lost = False
        for k in kinds:
            if k in ('state', 'awaiting', 'gave_up'):
                st, state = self.owned(k, cid, epoch, state)
            elif k == 'renew':
                st = self.renew(cid, epoch, lease)
            elif k == 'last_run' and rid:
                st = self.call('last_run', 'PUT', '/v1/cards/%s/last-run' % cid,
                               {'marker': self.actor, 'run_id': rid},
                               {'If-Match': '"%d"' % epoch}, card=cid, tok=[self.actor, epoch],
                               run=rid)[0]
            elif k == 'run' and rid:
                st = self.heartbeat(cid, epoch, rid, lease)
            elif k == 'run_patch' and rid:
                st = self.run_patch(cid, epoch, rid, 'failed_resumable', lease)
            elif k == 'release':
                if lost or self.rng.random() < 0.5:
                    st = self.release(cid, epoch)
                    lost = True
            else:
                continue
            lost = lost or st == 409
        return lost, state

    def hold(self, cid, epoch, lease, state):
        fate = self.rng.choices(
            ('normal', 'zombie', 'die_final', 'pause', 'live_run', 'no_run'),
            (40, 22, 12, 6, 12, 8))[0]
        self.ctx['fates'][fate] += 1
        if fate == 'no_run':
            return  # dies before launching anything: the reaper releases it
        rid = '%s-r%d' % (self.actor, self.n)
        self.n += 1
        st, _ = self.call('run_create', 'POST', '/v1/runs',
                          {'id': rid, 'card_id': cid, 'marker': self.actor,
                           'status': 'running', 'lease_ms': lease},
                          card=cid, tok=[self.actor, epoch], run=rid, status='running',
                          lease_ms=lease)
        if st != 201:
            return
        with self.hist.lock:
            self.hist.runs.append(rid)
        st = self.call('last_run', 'PUT', '/v1/cards/%s/last-run' % cid,
                       {'marker': self.actor, 'run_id': rid}, {'If-Match': '"%d"' % epoch},
                       card=cid, tok=[self.actor, epoch], run=rid)[0]
        if st != 200:
            return
        renewed = time.time()
        steps = self.rng.randint(2, 6)
        stall_at = self.rng.randrange(steps)
        for k in range(steps):
            if self.done():
                break
            if k == stall_at and fate == 'zombie':
                time.sleep(self.rng.uniform(2.0, 4.0) * lease / 1000.0)
                lost, state = self.late_writes(cid, epoch, rid, state, lease)
                if lost:
                    return
                renewed = time.time()
            if k == stall_at and fate == 'live_run':
                # The claim's heartbeat stops, the run's goes on: the run is alive, so the
                # reaper must keep the card (liveness first) however long the lease is gone.
                end = time.time() + 2.5 * lease / 1000.0
                while time.time() < end:
                    time.sleep(lease / 3000.0)
                    if self.heartbeat(cid, epoch, rid, lease) != 200:
                        return
                renewed = 0
            if time.time() - renewed > lease / 3000.0:
                if self.renew(cid, epoch, lease) != 200:
                    return
                self.heartbeat(cid, epoch, rid, lease)
                renewed = time.time()
            st, state = self.owned(self.rng.choice(('state', 'state', 'awaiting', 'gave_up')),
                                   cid, epoch, state)
            if st != 200:
                return
            time.sleep(self.rng.uniform(0.005, 0.03))
        if fate == 'pause':
            # Parked for a human, then the worker goes away: the pause brake holds the card.
            self.run_patch(cid, epoch, rid, self.rng.choice(checker.PAUSED), lease)
            return
        status = self.rng.choice(('finished', 'failed', 'failed_resumable'))
        if self.run_patch(cid, epoch, rid, status, lease) != 200:
            return
        if fate == 'die_final':
            if self.rng.random() < 0.7:  # else it dies wherever it was (maybe parked)
                self.file(cid, epoch, 'in_progress')
            return  # the reaper files (finished/failed) or returns it to the pool
        if status != 'failed_resumable' and self.rng.random() < 0.7:
            if self.file(cid, epoch, 'done' if status == 'finished' else 'blocked') != 200:
                return
            self.release(cid, epoch)
            return
        self.release(cid, epoch, retry=status != 'finished' and self.rng.random() < 0.6)


class Bot(Actor):
    def loop(self):
        while not self.done():
            cid = self.rng.choice(self.ctx['cards'])
            if self.rng.random() < 0.15:
                # DESIGN §17: (re)schedules the card a little later, or clears its schedule
                nb = None if self.rng.random() < 0.4 else round(
                    time.time() + self.rng.uniform(0.2, 1.5), 3)
                self.call('patch', 'PATCH', '/v1/cards/' + cid,
                          {'not_before': iso(nb) if nb else None}, card=cid, not_before=nb)
                time.sleep(self.rng.uniform(0.03, 0.1))
                continue
            st, c = self.clients[0].call('GET', '/v1/cards/' + cid)
            if st == 200:
                frm = c['state']
                to = self.rng.choice([s for s in COLUMNS if s != frm])
                self.call('move', 'PATCH', '/v1/cards/%s/state' % cid, {'from': frm, 'to': to},
                          card=cid, frm=frm, to=to)
            time.sleep(self.rng.uniform(0.03, 0.1))


class Operator(Actor):
    def loop(self):
        while not self.done():
            time.sleep(self.rng.uniform(0.04, 0.12))
            act = self.rng.choices(('reopen', 'refile', 'cancel', 'revoke', 'pass'),
                                   (40, 10, 20, 15, 15))[0]
            if act == 'pass':
                self.call('pass', 'POST', '/v1/reaper/pass')
                continue
            if act == 'cancel':
                with self.hist.lock:
                    runs = list(self.hist.runs)
                if runs:
                    rid = self.rng.choice(runs)
                    self.call('cancel', 'POST', '/v1/runs/%s/cancel' % rid, run=rid,
                              status='cancelled')
                continue
            cards = bt.cards_all(self.clients[0])
            now = time.time()
            if act == 'revoke':
                # Claims parked by a gone worker (a paused run, a cancelled run) stay for
                # ever: the operator's lever.
                held = [c for c in cards.values() if c.get('claim') and
                        now - checker.at_seconds(c['claim']['claimed_at']) > 2.0]
                if held:
                    c = self.rng.choice(held)
                    self.call('revoke', 'POST', '/v1/cards/%s/claim/revoke' % c['id'],
                              card=c['id'])
                continue
            term = [c for c in cards.values() if c['state'] in checker.TERMINAL]
            if not term:
                continue
            c = self.rng.choice(term)
            if act == 'reopen':
                to = self.rng.choice(('ready', 'in_progress', 'backlog'))
                self.call('reopen', 'POST', '/v1/cards/%s/reopen' % c['id'],
                          {'to': to, 'reason': self.tag()}, card=c['id'], to=to)
            else:
                to = 'blocked' if c['state'] == 'done' else 'done'
                self.call('refile', 'PATCH', '/v1/cards/%s/state' % c['id'],
                          {'from': c['state'], 'to': to}, card=c['id'], frm=c['state'], to=to)


class StreamReader(threading.Thread):
    """GET /v1/events/stream for the whole run: every event it delivers, in order."""

    def __init__(self, port, token):
        super().__init__(daemon=True)
        self.port, self.token = port, token
        self.events = []
        self.stop = False
        self.error = None

    def run(self):
        try:
            s = bt.Stream(self.port, self.token, '?board=default', timeout=30)
            if s.status != 200:
                self.error = 'the stream answered %s: %s' % (s.status, s.body)
                return
            while not self.stop:
                f = s.frame(10.0)
                if f and f['data'] is not None:
                    self.events.append(f['data'])
            s.close()
        except OSError as e:
            self.error = 'the stream failed: %s' % e


def read_final(clients, ops, quiet):
    """The events log, every card and every run, once the log has not grown for `quiet`
    seconds (the reaper may still settle what the actors left; the Mongo tail serves a seq
    only once every seq before it is filled or older than its gap grace). Every replica must
    serve the same log. Returns (events, cards, runs, [problems])."""
    adm = clients[0]
    deadline = time.time() + 90
    events, last = bt.events_since(adm, 0)
    while True:
        still = time.time()
        while time.time() - still < quiet:
            if time.time() > deadline:
                raise RuntimeError('the events log never stopped growing')
            time.sleep(0.2)
            more, last = bt.events_since(adm, last)
            if more:
                events += more
                still = time.time()
        cards = bt.cards_all(adm)
        runs = {}
        for rid in sorted({op['run'] for op in ops if op.get('run')}):
            st, r = adm.call('GET', '/v1/runs/' + rid)
            if st == 200:
                runs[rid] = r
        again, last = bt.events_since(adm, last)
        if not again:
            break
        events += again  # the reaper acted meanwhile: read the final state again
    problems = []
    for k, c in enumerate(clients[1:], 1):
        # another replica's tail may be a moment behind: it must catch up, and agree
        other = bt.wait_for(lambda: (lambda o: o if o == events else None)(
            bt.events_since(c, 0)[0]), 10.0, step=0.5, final=False)
        other = other if other is not None else bt.events_since(c, 0)[0]
        if other != events:
            first = next((i for i, (x, y) in enumerate(zip(other, events)) if x != y),
                         min(len(other), len(events)))
            problems.append('replica %d serves another events log than replica 0: from '
                            'position %d (%d events against %d): %s / %s' %
                            (k, first, len(other), len(events),
                             other[first] if first < len(other) else None,
                             events[first] if first < len(events) else None))
    return events, cards, runs, problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('boardd')
    ap.add_argument('--mode', choices=('fs', 'mongo'), default='fs')
    ap.add_argument('--seconds', type=float, default=12.0)
    ap.add_argument('--seed', type=int, default=None)
    ap.add_argument('--workers', type=int, default=6)
    ap.add_argument('--bots', type=int, default=2)
    ap.add_argument('--cards', type=int, default=8)
    ap.add_argument('--reaper-interval-ms', type=int, default=20)
    ap.add_argument('--refile', choices=('any', 'operator'), default='operator',
                    help='who may refile terminal -> terminal (ADR-096 §5: an operator)')
    ap.add_argument('--keep', action='store_true')
    o = ap.parse_args()
    seed = o.seed if o.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    uri = None
    if o.mode == 'mongo':
        uri = bt.mongo_uri()
        if bt.mongo_is_ferretdb():
            print('SKIP: the Mongo history needs atomic single-document updates; FerretDB\'s '
                  'are not atomic under concurrency (run it on mongo-java-server: '
                  'tests/run.sh does)', flush=True)
            return 77
        uri = bt.mongo_database(uri, 'history')
    print('history: seed %d, mode %s, %d workers, %d bots, 1 operator, %d cards, %.0f s, '
          'reaper every %d ms, leases %s ms' % (seed, o.mode, o.workers, o.bots, o.cards,
                                                o.seconds, o.reaper_interval_ms, LEASES),
          flush=True)
    tmp = tempfile.mkdtemp(prefix='boardd-history.')
    tokens = os.path.join(tmp, 'tokens.json')
    actors = {'op': 'operator'}
    tok = {'op': bt.token_add(o.boardd, tokens, 'op', ['operator'])}
    for k in range(o.workers):
        tok['w%d' % k] = bt.token_add(o.boardd, tokens, 'w%d' % k, ['worker'])
        actors['w%d' % k] = 'worker'
    for k in range(o.bots):
        tok['b%d' % k] = bt.token_add(o.boardd, tokens, 'b%d' % k, ['bot'])
        actors['b%d' % k] = 'bot'
    extra = ['--reaper=on', '--reaper-interval-ms', str(o.reaper_interval_ms),
             '--lease-min-ms', '1', '--lease-default-ms', str(LEASES[0]),
             '--stream-heartbeat-ms', '200']
    servers = []
    ok = False
    try:
        for name in (('a', 'b') if uri else ('a',)):
            s = bt.Server(o.boardd, None if uri else os.path.join(tmp, 'data'), tokens, tmp,
                          extra, store=uri, threads=4, name=name)
            started, why = s.start()
            if not started:
                raise RuntimeError('boardd %s did not start: %s' % (name, why))
            servers.append(s)
        ports = [s.port for s in servers]
        hist = History()
        adm = bt.Client(ports[0], tok['op'], timeout=60)
        cards = ['h%d' % k for k in range(o.cards)]
        board = adm.must(200, 'GET', '/v1/boards/default')
        t0 = time.time()
        st, r = adm.call('PUT', '/v1/boards/default', board_body(board))
        hist.add({'actor': 'op', 'kind': 'board', 't0': t0, 't1': time.time(), 'st': st,
                  'resp': r, 'card': None, 'tok': None, 'run': None, 'tag': None,
                  'lease_ms': 0})
        if st != 200:
            raise RuntimeError('PUT /v1/boards/default with its policy: %s %s' % (st, r))
        boards = {'default': {'limits': LIMITS, 'max_claims': MAX_CLAIMS, 'retry': RETRY,
                              'completed': board['completed'], 'failed': board['failed']}}
        for k, cid in enumerate(cards):
            body = {'id': cid, 'title': cid, 'state': 'ready'}
            nb = None
            if k % 4 == 3:  # DESIGN §17: a quarter of the cards start scheduled
                nb = round(time.time() + rng.uniform(0.5, 3.0), 3)
                body['not_before'] = iso(nb)
            t0 = time.time()
            st, r = adm.call('POST', '/v1/cards', body)
            hist.add({'actor': 'op', 'kind': 'create', 't0': t0, 't1': time.time(), 'st': st,
                      'resp': r, 'card': cid, 'tok': None, 'run': None, 'tag': None,
                      'lease_ms': 0, 'not_before': nb})
            if st != 201:
                raise RuntimeError('create %s: %s %s' % (cid, st, r))
        streams = [StreamReader(p, tok['op']) for p in ports]
        for s in streams:
            s.start()
        ctx = {'cards': cards, 'fates': collections.Counter()}
        deadline = time.time() + o.seconds
        th = [Worker('w%d' % k, 'worker', tok['w%d' % k], ports, hist, rng.randrange(1 << 30),
                     deadline, ctx) for k in range(o.workers)]
        th += [Bot('b%d' % k, 'bot', tok['b%d' % k], ports, hist, rng.randrange(1 << 30),
                   deadline, ctx) for k in range(o.bots)]
        th.append(Operator('op', 'operator', tok['op'], ports, hist, rng.randrange(1 << 30),
                           deadline, ctx))
        for t in th:
            t.start()
        for t in th:
            t.join(o.seconds + 120)
            if t.is_alive():
                raise RuntimeError('actor %s did not finish' % t.actor)
        errors = [t.error for t in th if t.error]
        if errors:
            raise RuntimeError('; '.join(errors))
        time.sleep(1.0)  # the reaper settles what was left behind
        readers = [bt.Client(p, tok['op'], timeout=60) for p in ports]
        events, final_cards, runs, problems = read_final(readers, hist.ops,
                                                         3.0 if uri else 0.5)
        last = events[-1]['seq'] if events else 0
        bt.wait_for(lambda: all(not s.events or s.events[-1]['seq'] >= last for s in streams),
                    10.0)
        for s in streams:
            s.stop = True
        for s in streams:
            s.join(5)
        counts = {}
        vs = checker.check(hist.ops, events, final_cards, runs, actors, refile=o.refile,
                           slack=0.05 if uri else checker.SLACK, counts=counts,
                           cross_doc_order=not uri, boards=boards)
        vs += [{'check': 'f', 'what': p, 'ops': [], 'events': []} for p in problems]
        by = collections.Counter((op['kind'], op['st']) for op in hist.ops)
        reclaims = sum(1 for e in events if e['type'] == 'card_claimed' and
                       (e.get('payload') or {}).get('reclaimed_from'))
        promoted = sum(1 for e in events if e['type'] == 'run_updated' and
                       (e.get('actor') or '') not in actors)
        refused_late = sum(1 for op in hist.ops if op['st'] == 409 and op.get('tok'))
        # Holds whose lease surely lapsed (the previous renewal's answer + lease, plus two
        # reaper intervals, before the next renewal was sent) and that the reaper left to
        # their owner, who renewed them afterwards: a live run behind them, or a stall the
        # reaper had not judged yet.
        lapsed_kept, last = 0, {}
        for op in sorted(hist.ops, key=lambda x: x['t0']):
            if op['kind'] in checker.HOLD and op['st'] == 200 and op.get('tok'):
                k = (op['card'], tuple(op['tok']))
                prev = last.get(k)
                if prev and op['kind'] == 'renew' and op['t0'] > (
                        prev['t1'] + prev['lease_ms'] / 1000.0 + 2 * o.reaper_interval_ms / 1000.0):
                    lapsed_kept += 1
                last[k] = op
        print('history: %d requests, %d events, %d reclaims by the reaper, %d runs promoted, '
              '%d fenced requests refused 409, %d lapsed leases left to their owner; holds: %s'
              % (len(hist.ops), len(events), reclaims, promoted, refused_late, lapsed_kept,
               ', '.join('%s %d' % kv for kv in sorted(ctx['fates'].items()))), flush=True)
        retries = sum(1 for e in events if e['type'] == 'card_released' and
                      (e.get('payload') or {}).get('retry'))
        exhausted = counts.get('j: exhausted filing', 0)
        print('history: policy: %d claims checked against the bounds (at most %d live from '
              'ready, %d on the board), %d fresh claims against a not_before, %d retry '
              'releases (%d exhausted), %d resets%s' %
              (counts.get('h: claim against the bounds', 0),
               counts.get('h: peak ready', 0), counts.get('h: peak board', 0),
               counts.get('i: fresh claim against not_before', 0), retries, exhausted,
               counts.get('j: reset', 0),
               '; %d Mongo delivery-order allowance(s)' %
               counts.get('h: Mongo delivery-order allowance', 0) if uri else ''), flush=True)
        print('history: answers: %s' % ', '.join('%s %d: %d' % (k, s, n) for (k, s), n in
                                                 sorted(by.items())), flush=True)
        for s in servers:
            st, r = bt.Client(s.port, tok['op']).call('GET', '/v1/reaper')
            if st == 200 and r.get('last_pass'):
                print('history: replica %s reaper: %d passes' % (s.name, r['passes']),
                      flush=True)
        with open(os.path.join(tmp, 'history.json'), 'w') as f:
            json.dump({'seed': seed, 'ops': hist.ops, 'events': events, 'cards': final_cards,
                       'runs': runs, 'actors': actors}, f)
        if vs:
            for line in checker.report(vs):
                print(line, flush=True)
            print('history: FAIL: %d violation(s) (seed %d; rerun: history.py BOARDD --mode %s '
                  '--seed %d)' % (len(vs), seed, o.mode, seed), flush=True)
        else:
            ok = True
            print('history: PASS: checks a-j hold over the whole history (seed %d)' % seed,
                  flush=True)
        adm.close()
        for s in servers:
            code = s.stop(timeout=30)
            if code != 0:
                ok = False
                print('history: FAIL: boardd %s exited %s on SIGTERM:\n%s' %
                      (s.name, code, s.log_tail(40)), flush=True)
    except (RuntimeError, OSError) as e:
        print('history: FAIL: %s (seed %d)' % (e, seed), flush=True)
    finally:
        for s in servers:
            if s.alive():
                s.kill()
    if not ok or o.keep:
        print('history: history, data and logs kept in %s' % tmp, flush=True)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
