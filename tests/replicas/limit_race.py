#!/usr/bin/env python3
"""The column limit under a race (DESIGN §17, issue 27): 32 workers calling claim-next and
claim (by id) on a board whose launch column `ready` has limit 3 (and the board max_claims
8), against one boardd on the FS twin (--mode fs) or two replicas sharing one database of
mongo-java-server (--mode mongo).

Each worker holds its claim a short random time and ends it: a plain release, a release
with retry (an attempt counted, the card scheduled after the backoff, at max_attempts filed
into the failed column), a filing into done with the release, sometimes after moving the
card to in_progress while held (it still counts against ready); some die holding it (a short
lease: the reaper transfers the claim and returns the card, an attempt counted). An operator
puts cards back into ready (reopens done/blocked ones, moves idle in_progress ones).

Three independent views must never see more than 3 live claims taken from ready (nor more
than 8 on the board):
  1. the workers' own count: +1 after a claim from ready was answered 200, -1 before its
     release (or filing) is sent, so it never exceeds the live claims;
  2. a sampler polling GET /v1/boards/race (each column's `claimed`, the board's `claimed`)
     and, independently, listing the claimed cards (claim.from);
  3. offline, the replay of the events log (tests/history/capacity.py): claims with the
     column they were taken from, releases, filings, the reaper's transfers, at every seq.
And the race must have happened (claims refused capacity_reached, every column's count back
to 0 once the reaper settled the dead workers' claims). --no-limit puts the board without
its limits (and retry policy) while the checks still expect them: it must fail.

usage: limit_race.py BOARDD [--mode fs|mongo] [--seconds S] [--workers N] [--seed N]
                            [--no-limit] [--keep]
Mongo mode needs BOARDD_TEST_MONGO_URI (or BOARDD_TEST_MONGO_URI_MJS) on mongo-java-server;
it is skipped (77, saying why) without a server and on FerretDB, whose single-document
updates are not atomic under concurrency (a pass there would prove nothing).
"""
import argparse
import collections
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
sys.path.insert(0, os.path.join(HERE, '..', 'history'))
import boardd_test as bt  # noqa: E402
import capacity  # noqa: E402

BOARD = 'race'
LIMIT = 3
MAX_CLAIMS = 8
COLUMNS = [('inbox', False, False), ('backlog', False, False), ('ready', False, True),
           ('waiting_deps', False, False), ('in_progress', False, True),
           ('awaiting_input', False, False), ('review', False, False), ('done', True, False),
           ('blocked', True, False)]
RETRY = {'max_attempts': 3, 'backoff_ms': 40, 'max_backoff_ms': 160}
LEASE_MS, DIE_LEASE_MS = 20000, 300


def board_body(limits):
    cols = []
    for name, term, elig in COLUMNS:
        c = {'name': name, 'terminal': term, 'eligible': elig}
        if limits and name == 'ready':
            c['limit'] = LIMIT
        cols.append(c)
    b = {'name': BOARD, 'columns': cols, 'running': 'in_progress', 'completed': 'done',
         'failed': 'blocked', 'waiting': 'waiting_deps'}
    if limits:
        b['max_claims'] = MAX_CLAIMS
        b['retry'] = RETRY
    return b


class Shared:
    def __init__(self):
        self.lock = threading.Lock()
        self.held = 0        # claims from ready, as the workers count them
        self.held_all = 0    # claims on the board
        self.max_held = 0
        self.max_all = 0
        self.over = []       # (time, held, held_all) above a bound
        self.ops = []        # every claim and release: {kind, card, marker, epoch, t0, t1, st}
        self.answers = collections.Counter()
        self.errors = []
        self.cards = []

    def count(self, d, from_ready):
        with self.lock:
            self.held_all += d
            if from_ready:
                self.held += d
            if d > 0:
                self.max_held = max(self.max_held, self.held)
                self.max_all = max(self.max_all, self.held_all)
                if self.held > LIMIT or self.held_all > MAX_CLAIMS:
                    self.over.append((time.time(), self.held, self.held_all))


class Worker(threading.Thread):
    def __init__(self, k, port, token, sh, seed, deadline):
        super().__init__(daemon=True)
        self.k, self.gen = k, 0
        self.marker = 'w%d' % k
        self.c = bt.Client(port, token, timeout=60)
        self.sh, self.rng, self.deadline = sh, random.Random(seed), deadline

    def call(self, kind, method, path, body=None, headers=None, card=None, epoch=None):
        t0 = time.time()
        try:
            st, r = self.c.call(method, path, body, headers)
        except OSError as e:
            st, r = 0, {'error': str(e)}
        t1 = time.time()
        code = r.get('code') if isinstance(r, dict) and st >= 400 else None
        op = {'kind': kind, 'card': card, 'marker': self.marker, 'epoch': epoch, 't0': t0,
              't1': t1, 'st': st}
        with self.sh.lock:
            self.sh.answers['%s %d%s' % (kind, st, ' ' + code if code else '')] += 1
            if kind in ('claim', 'next', 'release', 'file', 'retry'):
                self.sh.ops.append(op)
        if st == 0 or st >= 500:
            self.sh.errors.append('%s %s answered %s: %s' % (method, path, st, r))
        return st, r, op

    def claimed_from(self, cid, epoch, card):
        """The column the claim was taken from: claim.from of the answer's card, else of the
        card read back while we hold it (the claim's from never changes while it lives)."""
        if card and (card.get('claim') or {}).get('from'):
            return card['claim']['from']
        st, c = self.c.call('GET', '/v1/cards/' + cid)
        cl = (c or {}).get('claim') or {} if st == 200 else {}
        if cl.get('marker') == self.marker and c.get('claim_epoch') == epoch:
            return cl.get('from') or ('?' + c['state'])  # '?': the server serves no from
        return None  # lost already (cannot happen with a 20 s lease): not counted

    def run(self):
        try:
            while time.time() < self.deadline and not self.sh.errors:
                self.once()
        except Exception as e:  # the test fails with the reason
            self.sh.errors.append('%s: %r' % (self.marker, e))
        self.c.close()

    def once(self):
        rng = self.rng
        die = rng.random() < 0.08
        lease = DIE_LEASE_MS if die else LEASE_MS
        body = {'marker': self.marker, 'lease_ms': lease}
        if rng.random() < 0.5:
            if rng.random() < 0.5:
                body['columns'] = ['ready']
            st, r, op = self.call('next', 'POST', '/v1/boards/%s/claim-next' % BOARD, body)
            if st != 200:
                time.sleep(rng.uniform(0.005, 0.02))
                return
            cid, epoch, card = r['card']['id'], r['token']['epoch'], r['card']
        else:
            cid = rng.choice(self.sh.cards)
            st, r, op = self.call('claim', 'POST', '/v1/cards/%s/claim' % cid, body, card=cid)
            if st != 200:
                time.sleep(rng.uniform(0.005, 0.02))
                return
            epoch, card = r['epoch'], None
            if not r.get('fresh', True):  # our own hold, not ended (a refused release)
                self.call('release', 'POST', '/v1/cards/%s/release' % cid,
                          {'marker': self.marker, 'epoch': epoch}, card=cid, epoch=epoch)
                return
        op.update(card=cid, epoch=epoch)
        frm = self.claimed_from(cid, epoch, card)
        if frm is None:
            return
        op['from'] = frm
        ready = frm.lstrip('?') == 'ready'
        self.sh.count(+1, ready)
        hdr = {'If-Match': '"%d"' % epoch}
        p = '/v1/cards/' + cid
        time.sleep(rng.uniform(0.005, 0.04))
        if rng.random() < 0.3:  # moved while held: it still counts against ready
            self.call('move', 'PATCH', p + '/state',
                      {'marker': self.marker, 'to': 'in_progress', 'reason': 'race'}, hdr)
            time.sleep(rng.uniform(0.002, 0.02))
        self.sh.count(-1, ready)  # before the release is sent: never above the live claims
        if die:
            # The lease runs out; the reaper transfers and returns the card. The next hold
            # is another worker's (a marker of its own), not a re-claim of this one.
            self.gen += 1
            self.marker = 'w%d.%d' % (self.k, self.gen)
            return
        fate = rng.random()
        if fate < 0.4:
            self.call('release', 'POST', p + '/release', {'marker': self.marker, 'epoch': epoch},
                      card=cid, epoch=epoch)
        elif fate < 0.75:
            self.call('retry', 'POST', p + '/release',
                      {'marker': self.marker, 'epoch': epoch, 'retry': True}, card=cid,
                      epoch=epoch)
        else:
            self.call('file', 'PATCH', p + '/state',
                      {'marker': self.marker, 'to': 'done', 'reason': 'race', 'release': True},
                      hdr, card=cid, epoch=epoch)


class Operator(threading.Thread):
    """Puts cards back: reopens done/blocked ones into ready, moves idle in_progress ones."""

    def __init__(self, port, token, sh, seed, stop):
        super().__init__(daemon=True)
        self.c = bt.Client(port, token, timeout=60)
        self.sh, self.rng, self.stop = sh, random.Random(seed), stop

    def run(self):
        try:
            while not self.stop.is_set() and not self.sh.errors:
                time.sleep(0.03)
                for cid, c in bt.cards_all(self.c, BOARD).items():
                    if c['state'] in ('done', 'blocked'):
                        st, r = self.c.call('POST', '/v1/cards/%s/reopen' % cid,
                                            {'to': 'ready', 'reason': 'race'})
                    elif (c['state'] == 'in_progress' and not c.get('claim') and
                          self.rng.random() < 0.3):
                        st, r = self.c.call('PATCH', '/v1/cards/%s/state' % cid,
                                            {'from': 'in_progress', 'to': 'ready'})
                    else:
                        continue
                    with self.sh.lock:
                        self.sh.answers['operator %d' % st] += 1
                    if st >= 500:
                        self.sh.errors.append('operator: %s %s' % (st, r))
        except Exception as e:
            self.sh.errors.append('operator: %r' % e)
        self.c.close()


class Sampler(threading.Thread):
    """GET /v1/boards/race (the counts) and the claimed cards' listing, in turn, on every
    replica, for the whole run."""

    def __init__(self, ports, token, stop):
        super().__init__(daemon=True)
        self.cs = [bt.Client(p, token, timeout=60) for p in ports]
        self.stop = stop
        self.counts = []    # (t, ready claimed, board claimed)
        self.listings = []  # (t0, t1, [(card, epoch, from)])
        self.missing = None
        self.error = None

    def run(self):
        k = 0
        try:
            while not self.stop.is_set():
                c = self.cs[k % len(self.cs)]
                k += 1
                b = c.must(200, 'GET', '/v1/boards/' + BOARD)
                col = next(x for x in b['columns'] if x['name'] == 'ready')
                if 'claimed' not in col or 'claimed' not in b:
                    self.missing = 'GET /v1/boards/%s serves no claimed count: %s' % (BOARD, col)
                self.counts.append((time.time(), col.get('claimed', -1), b.get('claimed', -1)))
                t0 = time.time()
                st, r = c.call('GET', '/v1/cards?board=%s&claimed=true&limit=1000' % BOARD)
                if st != 200:
                    raise RuntimeError('listing: %s %s' % (st, r))
                self.listings.append((t0, time.time(), [
                    (x['id'], x.get('claim_epoch'), (x.get('claim') or {}).get('from'))
                    for x in r['cards'] if x.get('claim')]))
        except Exception as e:
            self.error = 'sampler: %r' % e
        for c in self.cs:
            c.close()


def settle(client, deadline):
    """Waits (bounded) until the board holds no claim: the reaper returned the dead
    workers' cards. Returns the last board read."""
    b = None
    while time.time() < deadline:
        b = client.must(200, 'GET', '/v1/boards/' + BOARD)
        cards = bt.cards_all(client, BOARD)
        if not any(c.get('claim') for c in cards.values()):
            return b, cards
        time.sleep(0.1)
    return b, bt.cards_all(client, BOARD)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('boardd')
    ap.add_argument('--mode', choices=('fs', 'mongo'), default='fs')
    ap.add_argument('--seconds', type=float, default=6.0)
    ap.add_argument('--workers', type=int, default=32)
    ap.add_argument('--seed', type=int, default=None)
    ap.add_argument('--no-limit', action='store_true',
                    help='put the board without its limits and retry policy (the checks must '
                    'then fail)')
    ap.add_argument('--keep', action='store_true')
    o = ap.parse_args()
    seed = o.seed if o.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    uri = bt.mongo_atomic_database('limitrace') if o.mode == 'mongo' else None
    print('limit_race: seed %d, mode %s, %d workers, %.0f s, ready limit %d, max_claims %d%s' %
          (seed, o.mode, o.workers, o.seconds, LIMIT, MAX_CLAIMS,
           ' (NOT put on the board: --no-limit)' if o.no_limit else ''), flush=True)
    tmp = tempfile.mkdtemp(prefix='boardd-limitrace.')
    tokens = os.path.join(tmp, 'tokens.json')
    op_tok = bt.token_add(o.boardd, tokens, 'op', ['operator', 'bot'])
    w_tok = bt.token_add(o.boardd, tokens, 'w', ['worker'])
    extra = ['--reaper=on', '--reaper-interval-ms', '50', '--lease-min-ms', '1']
    servers, ok = [], False
    try:
        servers = bt.start_replicas(o.boardd, uri, tmp, tokens, extra)
        ports = [s.port for s in servers]
        adm = bt.Client(ports[0], op_tok, timeout=60)
        adm.must(200, 'PUT', '/v1/boards/' + BOARD, board_body(not o.no_limit))
        sh = Shared()
        for k in range(12):
            sh.cards.append('r%02d' % k)
            adm.must(201, 'POST', '/v1/cards', {'id': sh.cards[-1], 'board': BOARD,
                                                 'title': 'r', 'state': 'ready'})
        for k in range(4):
            sh.cards.append('p%02d' % k)
            adm.must(201, 'POST', '/v1/cards', {'id': sh.cards[-1], 'board': BOARD,
                                                 'title': 'p', 'state': 'in_progress'})
        stop = threading.Event()
        deadline = time.time() + o.seconds
        ws = [Worker(k, ports[k % len(ports)], w_tok, sh, rng.randrange(1 << 30), deadline)
              for k in range(o.workers)]
        others = [Operator(ports[-1], op_tok, sh, rng.randrange(1 << 30), stop),
                  Sampler(ports, op_tok, stop)]
        for t in others + ws:
            t.start()
        for t in ws:
            t.join(o.seconds + 120)
        stop.set()
        for t in others:
            t.join(60)
        sampler = others[1]
        if sh.errors or sampler.error:
            raise RuntimeError('; '.join(sh.errors[:5] + [sampler.error or ''])[:2000])
        final_board, final_cards = settle(adm, time.time() + 20)
        # The log: once it has been quiet (the Mongo tail serves a seq once the ones before
        # it are filled or older than its gap grace).
        events, last = bt.events_since(adm, 0, BOARD)
        quiet = time.time()
        while time.time() - quiet < (3.0 if uri else 0.5):
            time.sleep(0.2)
            more, last = bt.events_since(adm, last, BOARD)
            if more:
                events += more
                quiet = time.time()

        fails = []
        answers = ', '.join('%s: %d' % kv for kv in sorted(sh.answers.items()))
        print('limit_race: answers: %s' % answers, flush=True)
        claims = [x for x in sh.ops if x['kind'] in ('claim', 'next') and x['st'] == 200
                  and x.get('epoch') is not None]
        from_ready = sum(1 for x in claims if (x.get('from') or '').lstrip('?') == 'ready')
        refused = sum(n for k, n in sh.answers.items() if 'capacity_reached' in k)
        print('limit_race: %d claims (%d from ready), %d refused capacity_reached; workers\' '
              'count at most %d from ready, %d on the board' %
              (len(claims), from_ready, refused, sh.max_held, sh.max_all), flush=True)
        # 1. the workers' count
        if sh.over:
            fails.append('the workers counted more live claims than the bounds allow %d '
                         'time(s), first %d from ready and %d on the board at %.3f' %
                         (len(sh.over), sh.over[0][1], sh.over[0][2], sh.over[0][0]))
        if any(x.get('from', '').startswith('?') for x in claims):
            fails.append('the cards carry no claim.from (DESIGN §17): counted by their column')
        # 2. the sampler
        if sampler.missing:
            fails.append(sampler.missing)
        bad = [x for x in sampler.counts if x[1] > LIMIT or x[2] > MAX_CLAIMS]
        print('limit_race: sampler: %d reads of the board (ready claimed at most %d, board at '
              'most %d), %d listings' % (len(sampler.counts),
                                         max((x[1] for x in sampler.counts), default=-1),
                                         max((x[2] for x in sampler.counts), default=-1),
                                         len(sampler.listings)), flush=True)
        if bad:
            fails.append('GET /v1/boards/%s served more claims than the bounds %d time(s): '
                         'first ready %d, board %d' % (BOARD, len(bad), bad[0][1], bad[0][2]))
        # 3. the log, replayed
        by_tok = {(x['kind'] in ('release', 'retry', 'file'), x['card'], x['marker'],
                   x['epoch']): x for x in sh.ops if x['st'] == 200}

        def times(e):
            """The send and answer times of the request behind a claim or release event."""
            p = e.get('payload') or {}
            x = by_tok.get((e['type'] == 'card_released', e.get('card_id'), p.get('marker'),
                            p.get('epoch')))
            return (x['t0'], x['t1']) if x else None
        rp = capacity.Replay({BOARD: {'limits': {'ready': LIMIT}, 'max_claims': MAX_CLAIMS}},
                             cross_doc=not uri, slack=0.05 if uri else 0.005, times=times)
        vs = rp.run(events)
        logged = {(e.get('card_id'), (e.get('payload') or {}).get('marker'),
                   (e.get('payload') or {}).get('epoch'))
                  for e in events if e['type'] == 'card_claimed'}
        missing = [x for x in claims if (x['card'], x['marker'], x['epoch']) not in logged]
        reclaims = sum(1 for e in events if e['type'] == 'card_claimed' and
                       (e.get('payload') or {}).get('reclaimed_from'))
        retries = sum(1 for e in events if e['type'] == 'card_released' and
                      (e.get('payload') or {}).get('retry'))
        print('limit_race: log: %d events, %d claims replayed, %d by the reaper, %d retry '
              'releases; at most %d live from ready, %d on the board; %d Mongo delivery-order '
              'allowance(s)' % (len(events), rp.checked, reclaims, retries,
                                rp.peak[(BOARD, 'ready')], rp.peak[(BOARD, '')],
                                rp.allowances), flush=True)
        for v in vs[:10]:
            fails.append('log: ' + v['what'])
        if missing:
            fails.append('%d claims answered 200 have no card_claimed in the log, first %s' %
                         (len(missing), missing[0]))
        # listings: on FS a listing is one snapshot (the store's lock). On Mongo a find is no
        # snapshot across documents in general (mongo-java-server serialises a collection's
        # queries and updates, so its first batch is one), so an over-full listing counts
        # when its claims were live at once in the log (the replay reports that by itself)
        # and is shown otherwise. GET /v1/boards' claimed is held to the bound on both.
        over_l = [x for x in sampler.listings
                  if sum(1 for _, _, f in x[2] if f == 'ready') > LIMIT]
        if over_l and not uri:
            fails.append('a listing of the claimed cards showed %d claims from ready (%s)' %
                         (sum(1 for _, _, f in over_l[0][2] if f == 'ready'), over_l[0][2]))
        elif over_l:
            print('limit_race: note: %d listing(s) showed more than %d claims from ready; on '
                  'the Mongo twin a find is no snapshot across documents: the replay of the '
                  'log above judges whether they were live at once' % (len(over_l), LIMIT),
                  flush=True)
        # the race happened, and left nothing behind
        if not o.no_limit and refused == 0:
            fails.append('no claim was refused capacity_reached: the race did not happen')
        if from_ready < 3 * LIMIT:
            fails.append('only %d claims from ready: the race did not happen' % from_ready)
        col = next(x for x in final_board['columns'] if x['name'] == 'ready')
        held = [cid for cid, c in final_cards.items() if c.get('claim')]
        if held or col.get('claimed') != 0 or final_board.get('claimed') != 0:
            fails.append('after the run: claims %s still held, ready claimed %s, board claimed '
                         '%s (want none, 0, 0)' % (held, col.get('claimed'),
                                                  final_board.get('claimed')))
        for f in fails:
            print('FAIL: ' + f, flush=True)
        for v in vs[:3]:
            for e in v['events'][:6]:
                print('    event seq %s %s %s %s' % (e['seq'], e['type'], e.get('card_id'),
                                                     e.get('payload')), flush=True)
        ok = not fails
        for s in servers:
            code = s.stop(timeout=30)
            if code != 0:
                ok = False
                print('FAIL: boardd %s exited %s on SIGTERM:\n%s' % (s.name, code,
                                                                     s.log_tail(30)))
        adm.close()
        print('limit_race: %s (seed %d)' % ('PASS: never more than %d live claims from ready, '
                                            'nor %d on the board, in any of the three views'
                                            % (LIMIT, MAX_CLAIMS) if ok else 'FAIL', seed),
              flush=True)
    except (RuntimeError, OSError) as e:
        print('FAIL: %s (seed %d)' % (e, seed), flush=True)
    finally:
        for s in servers:
            if s.alive():
                s.kill()
    if not ok or o.keep:
        print('limit_race: logs kept in %s' % tmp, flush=True)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
