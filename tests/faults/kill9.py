#!/usr/bin/env python3
"""kill -9 under load (issue 5, item 5).

Rounds of load against a real boardd on an FS data directory; in each round the server is
killed with SIGKILL at a random moment and restarted on the same directory. Then a checker
proves, from the server's own answers:

  * the store opens cleanly every time: boardd starts, /readyz answers 200;
  * every acknowledged write is there;
  * no write is half-applied: each client owns its cards and changes them one request at a
    time, so after a restart every card equals either the model of its acknowledged writes,
    or that model plus the one write in flight when the server died (then counted as
    applied) -- nothing else;
  * the events log agrees with the cards: for each card, the sequence of its events is
    exactly the sequence of its applied writes (a change without its event, or an event
    without its change, fails), and event seqs run 1, 2, 3, ... with no hole.

Each client (a thread with its own token, roles worker+bot) creates cards, claims them, and
loops over: absolute labels ["c<i>", "n-<k>"], an owned state write (If-Match epoch) with
reason "n-<k>", a title/body PATCH (with --big the body is 16..60 KB, so the journal passes
its compaction threshold and kills land during compactions too), a comment, and a release
followed by a fresh claim. k is a per-card counter that only grows.

After the last round the server is stopped with SIGTERM (exit status 0 expected), started
again and checked once more.

With --webhooks (issue 13, DESIGN §14) a subscription fires on every owned state write of a
card labelled "go" and consumes that label (a one-shot); label writes add "go" now and then.
The model predicts each consumption (its own card_labels_changed event, reason
consume_labels), so the checks above already prove every one-shot was consumed exactly once,
in the same step as its state change. A receiver (tests/effects/receiver.py) records every
delivery, and the checker adds:

  * the event and its delivery are one atomic step: after every kill, each matched event in
    the log has exactly one delivery, and each delivery names a matched event;
  * every matched event is delivered at least once (the receiver got it, signed, once the
    outbox drained after the last restart);
  * no delivery ever carries a machine event: the run ends with a column rename (machine
    reason state_rename) of the cards in flight, and nothing of it is delivered.

usage: kill9.py BOARDD [--rounds N] [--clients N] [--cards N] [--kill-min-ms MS]
                       [--kill-max-ms MS] [--big] [--webhooks] [--seed S] [--keep]
Exit status 0 when every check passed; the last line is a summary.
"""
import argparse
import os
import random
import shutil
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'effects'))
from boardd_test import Client, Server, cards_all, events_since, token_add  # noqa: E402

STATES = ('in_progress', 'review')
LEASE_MS = 3600000


class Failure(Exception):
    pass


class Model:
    """What a card must look like, and the events it must have, given its applied writes."""

    def __init__(self, cid, marker):
        self.id = cid
        self.marker = marker
        self.exists = False
        self.labels = []
        self.state = 'ready'
        self.state_reason = None  # unchecked until an owned state write
        self.title = 't-0'
        self.body_tag = ''
        self.body_len = 0
        self.comments = 0
        self.claim = None  # (marker, epoch)
        self.claim_epoch = 0
        self.events = []
        self.k = 0  # per-card counter: only grows, also over writes that never landed

    def copy(self):
        m = Model(self.id, self.marker)
        m.__dict__.update(self.__dict__)
        m.labels = list(self.labels)
        m.events = list(self.events)
        return m

    def differences(self, card):
        """What differs between a stored card (or None) and this model; [] when equal."""
        if card is None:
            return [] if not self.exists else ['card missing']
        if not self.exists:
            return ['card exists but its creation is not in the model']
        d = []
        claim = card.get('claim')
        got_claim = (claim['marker'], claim['epoch']) if claim else None
        body = card.get('body') or ''
        tag = body.split(':', 1)[0] if body else ''
        pairs = [('labels', card.get('labels'), self.labels), ('state', card.get('state'),
                 self.state), ('title', card.get('title'), self.title),
                 ('body tag', tag, self.body_tag), ('body length', len(body),
                 self.body_len), ('comments', len(card.get('comments') or []), self.comments),
                 ('claim', got_claim, self.claim), ('claim_epoch', card.get('claim_epoch'),
                 self.claim_epoch)]
        if self.state_reason is not None:
            pairs.append(('state_reason', card.get('state_reason'), self.state_reason))
        for what, got, want in pairs:
            if got != want:
                d.append('%s: stored %r, expected %r' % (what, got, want))
        return d


def event_key(e):
    """The part of an event that the model predicts."""
    p = e.get('payload') or {}
    t = e['type']
    if t in ('card_claimed', 'card_released'):
        return (t, p.get('marker'), p.get('epoch'))
    if t == 'card_labels_changed' and e.get('reason') == 'consume_labels':
        return (t, 'consumed', tuple(p.get('removed') or ()))
    if t == 'card_labels_changed':
        return (t, tuple(p.get('labels') or ()))
    if t == 'card_state_changed':
        return (t, p.get('from'), p.get('to'), e.get('reason'))
    if t == 'card_updated':
        return (t, tuple(sorted(p.get('fields') or ())))
    return (t,)


class ClientState:
    def __init__(self, i, token, n_cards, big, seed, webhooks=False):
        self.i = i
        self.webhooks = webhooks
        self.name = 'c%d' % i
        self.token = token
        self.big = big
        self.rng = random.Random(seed)
        self.cards = [Model('k9-c%d-%d' % (i, j), self.name) for j in range(n_cards)]
        self.pending = None  # (card index, model after the write) of the write in flight
        self.acked = 0
        self.uncertain = 0
        self.error = None

    def next_write(self, m):
        """Picks the next write on card m; returns (method, path, body, headers, after)."""
        a = m.copy()
        a.k += 1
        m.k = a.k  # the counter advances even if this write never lands
        k = a.k
        path = '/v1/cards/' + m.id
        if not m.exists:
            a.exists = True
            a.events.append(('card_created',))
            return 'POST', '/v1/cards', {'id': m.id, 'title': 't-0', 'state': 'ready'}, None, a
        if m.claim is None:
            a.claim_epoch = m.claim_epoch + 1  # the FS twin's epoch is a counter
            a.claim = (self.name, a.claim_epoch)
            a.events.append(('card_claimed', self.name, a.claim_epoch))
            return 'POST', path + '/claim', {'marker': self.name, 'lease_ms': LEASE_MS}, None, a
        r = self.rng.random()
        if r < 0.3:
            a.labels = [self.name, 'n-%d' % k]
            if self.webhooks and self.rng.random() < 0.5:
                a.labels.append('go')  # arms the one-shot
            a.events.append(('card_labels_changed', tuple(a.labels)))
            return 'PUT', path + '/labels', {'labels': a.labels}, None, a
        if r < 0.6:
            to = STATES[1] if m.state == STATES[0] else STATES[0]
            a.state = to
            a.state_reason = 'n-%d' % k
            a.events.append(('card_state_changed', m.state, to, a.state_reason))
            if self.webhooks and 'go' in m.labels:
                # The subscription fires and consumes the label, in the same step.
                a.labels = [x for x in m.labels if x != 'go']
                a.events.append(('card_labels_changed', 'consumed', ('go',)))
            return ('PATCH', path + '/state',
                    {'marker': self.name, 'to': to, 'reason': a.state_reason},
                    {'If-Match': '"%d"' % m.claim[1]}, a)
        if r < 0.85:
            size = self.rng.randint(16000, 60000) if self.big else self.rng.randint(0, 64)
            a.title = 't-%d' % k
            a.body_tag = 'n-%d' % k
            body = a.body_tag + ':' + 'x' * size
            a.body_len = len(body)
            a.events.append(('card_updated', ('body', 'title')))
            return 'PATCH', path, {'title': a.title, 'body': body}, None, a
        if r < 0.92:
            a.comments += 1
            a.events.append(('card_comment_added',))
            return 'POST', path + '/comments', {'body': 'n-%d' % k}, None, a
        a.claim = None
        a.events.append(('card_released', m.claim[0], m.claim[1]))
        return 'POST', path + '/release', {'marker': m.claim[0], 'epoch': m.claim[1]}, None, a

    def run_round(self, port, stop, deadline):
        """Writes until the server goes away (or stop/deadline); never raises."""
        c = Client(port, self.token, timeout=15)
        created = sum(1 for m in self.cards if m.exists)
        try:
            while not stop.is_set() and time.monotonic() < deadline:
                if created < len(self.cards) and (created == 0 or self.rng.random() < 0.05):
                    j = created
                    created += 1
                else:
                    j = self.rng.randrange(created)
                m = self.cards[j]
                method, path, body, headers, after = self.next_write(m)
                try:
                    st, resp = c.call(method, path, body, headers)
                except OSError:
                    self.pending = (j, after)
                    self.uncertain += 1
                    return
                if st not in (200, 201):
                    self.error = '%s %s answered %s: %s' % (method, path, st, resp)
                    return
                if path.endswith('/claim') and resp.get('epoch') != after.claim_epoch:
                    self.error = 'claim of %s answered epoch %s, expected %s' % (
                        m.id, resp.get('epoch'), after.claim_epoch)
                    return
                self.cards[j] = after
                self.acked += 1
        finally:
            c.close()


MACHINE = ('watchdog', 'state_rename', 'state_delete', 'migration')


class EffectsChecker:
    """The webhook checks of --webhooks: fed the events log as the Checker reads it."""

    def __init__(self, receiver, sub='k9'):
        self.receiver = receiver
        self.sub = sub
        self.prev = {}        # card id -> its last event
        self.matched = set()  # seqs of the events that fired the subscription
        self.machine = set()  # seqs of machine events

    def observe(self, evs, where):
        for e in evs:
            cid = e.get('card_id')
            if e.get('machine') or e.get('reason') in MACHINE:
                self.machine.add(e['seq'])
            if e['type'] == 'card_labels_changed' and e.get('reason') == 'consume_labels':
                p = self.prev.get(cid)
                if not p or p['type'] != 'card_state_changed' or p['seq'] != e['seq'] - 1:
                    raise Failure('%s: card %s: a consumption (seq %d) without the state change '
                                  'that fired it right before it' % (where, cid, e['seq']))
                self.matched.add(p['seq'])
            if cid:
                self.prev[cid] = e

    def prev_seq(self):
        return max((e['seq'] for e in self.prev.values()), default=0)

    def deliveries(self, port, token, where):
        c = Client(port, token, timeout=30)
        try:
            st, body = c.call('GET', '/v1/deliveries?board=default&limit=1000')
        except OSError as e:
            raise Failure('%s: GET /v1/deliveries: %s' % (where, e))
        finally:
            c.close()
        if st != 200:
            raise Failure('%s: GET /v1/deliveries answered %s: %s' % (where, st, body))
        got = body['deliveries']
        if len(got) >= 1000:
            raise Failure('%s: 1000 deliveries or more: beyond what this checker lists; run '
                          'fewer rounds or cards' % where)
        return got

    def check(self, port, token, where):
        """Each matched event has exactly one delivery, and each delivery a matched event."""
        dl = self.deliveries(port, token, where)
        seqs = [d['event_seq'] for d in dl]
        if len(seqs) != len(set(seqs)):
            raise Failure('%s: an event was enqueued twice' % where)
        if set(seqs) != self.matched:
            raise Failure('%s: events and deliveries disagree: matched without a delivery %s, '
                          'delivered without a match %s' %
                          (where, sorted(self.matched - set(seqs))[:10],
                           sorted(set(seqs) - self.matched)[:10]))
        return dl

    def drained(self, port, token, where, timeout=60.0):
        """Waits (bounded) until no delivery is pending, then checks the receiver."""
        deadline = time.monotonic() + timeout
        while True:
            dl = self.check(port, token, where)
            pending = [d for d in dl if d['status'] != 'done']
            if not pending:
                break
            if time.monotonic() > deadline:
                raise Failure('%s: %d deliveries still not done after %.0f s: %s' %
                              (where, len(pending), timeout, pending[:3]))
            time.sleep(0.2)
        got = {}
        for body in self.receiver.events('/k9/'):
            got.setdefault(body['event']['seq'], body['event'])
        missing = self.matched - set(got)
        if missing:
            raise Failure('%s: matched events never received: %s' % (where, sorted(missing)[:10]))
        self.no_machine(where)
        return len(self.matched), len(self.receiver.hits_for('/k9/'))

    def no_machine(self, where):
        for body in self.receiver.events('/k9/'):
            e = body['event']
            if e.get('machine') or e.get('reason') in MACHINE or e['seq'] in self.machine:
                raise Failure('%s: a machine event was delivered: %s' % (where, e))


class Checker:
    def __init__(self, clients, effects=None):
        self.clients = clients
        self.effects = effects
        self.last_seq = 0
        self.by_card = {}
        self.applied_in_flight = 0
        self.dropped_in_flight = 0

    def check(self, port, admin_token, where):
        """Resolves the writes in flight at the kill, then checks every card and the log.
        Raises Failure."""
        c = Client(port, admin_token, timeout=30)
        try:
            try:
                cards = cards_all(c, limit=25)  # pages: the cursor is checked too
                evs, _ = events_since(c, self.last_seq)
            except (OSError, RuntimeError) as e:
                raise Failure('%s: reading the store back: %s' % (where, e))
        finally:
            c.close()
        self.verify(cards, evs, where)
        if self.effects:
            self.effects.check(port, admin_token, where)
        return len(cards)

    def verify(self, cards, evs, where):
        """The checks over what was read back ({id: card}, the new events)."""
        for e in evs:
            if e['seq'] != self.last_seq + 1:
                raise Failure('%s: event seq %d follows %d: an event is missing' %
                              (where, e['seq'], self.last_seq))
            self.last_seq = e['seq']
            if e.get('card_id'):
                self.by_card.setdefault(e['card_id'], []).append(event_key(e))
        if self.effects:
            self.effects.observe(evs, where)
        for cl in self.clients:
            if cl.pending:
                j, after = cl.pending
                cl.pending = None
                stored = cards.get(after.id)
                before = cl.cards[j]
                if not after.differences(stored):
                    cl.cards[j] = after
                    self.applied_in_flight += 1
                elif not before.differences(stored):
                    self.dropped_in_flight += 1
                else:
                    raise Failure('%s: card %s matches neither its acknowledged state nor the '
                                  'write in flight (half-applied?)\n  vs acked: %s\n  vs in '
                                  'flight: %s' % (where, after.id,
                                                  '; '.join(before.differences(stored)),
                                                  '; '.join(after.differences(stored))))
            for m in cl.cards:
                d = m.differences(cards.get(m.id))
                if d:
                    raise Failure('%s: card %s: %s' % (where, m.id, '; '.join(d)))
                got = self.by_card.get(m.id, [])
                if got != m.events:
                    raise Failure('%s: card %s: the events log disagrees with the card\n  '
                                  'log:      %s\n  expected: %s' % (where, m.id, got[-8:],
                                                                    m.events[-8:]))


def self_test():
    """The checker must be able to fail: a lost acknowledged write, a change without its
    event, an event without its change, a hole in the seqs, a half-applied write."""
    def run(card, evs, pending=None):
        cl = ClientState(0, 't', 1, False, 1)
        m = cl.cards[0]
        m.exists, m.events = True, [('card_created',)]
        if pending:
            a = m.copy()
            a.labels = ['c0', 'n-1']
            a.events.append(('card_labels_changed', ('c0', 'n-1')))
            cl.pending = (0, a)
        Checker([cl]).verify({m.id: card} if card else {}, evs, 'self-test')
    cid = 'k9-c0-0'
    card = {'id': cid, 'labels': [], 'state': 'ready', 'title': 't-0', 'body': '',
            'comments': [], 'claim': None, 'claim_epoch': 0}
    created = {'seq': 1, 'type': 'card_created', 'card_id': cid, 'payload': {}}
    labelled = {'seq': 2, 'type': 'card_labels_changed', 'card_id': cid,
                'payload': {'labels': ['c0', 'n-1']}}
    run(card, [created])
    run(dict(card, labels=['c0', 'n-1']), [created, labelled], pending=True)
    run(card, [created], pending=True)
    bad = [(None, [created], None), (dict(card, title='t-9'), [created], None),
           (card, [], None), (card, [created, labelled], None),
           (card, [dict(created, seq=2)], None),
           (dict(card, labels=['c0', 'n-1']), [created], True),
           (card, [created, labelled], True), (dict(card, labels=['x']), [created], True)]
    for i, (c, evs, pending) in enumerate(bad):
        try:
            run(c, evs, pending)
        except Failure:
            continue
        raise SystemExit('kill9: self-test: the checker missed bad case #%d' % i)
    # The webhook checker: a consumption needs the state change that fired it right before.
    moved = {'seq': 3, 'type': 'card_state_changed', 'card_id': cid, 'payload': {}}
    consumed = {'seq': 4, 'type': 'card_labels_changed', 'card_id': cid,
                'reason': 'consume_labels', 'payload': {'removed': ['go']}}
    fx = EffectsChecker(None)
    fx.observe([created, moved, consumed], 'self-test')
    if fx.matched != {3}:
        raise SystemExit('kill9: self-test: the webhook checker missed a match')
    for evs in ([created, consumed], [moved, dict(consumed, seq=5)]):
        try:
            EffectsChecker(None).observe(evs, 'self-test')
        except Failure:
            continue
        raise SystemExit('kill9: self-test: the webhook checker missed a lone consumption')


def startup_check(srv, where):
    """A clean open says nothing about damage: only a torn last record may be mentioned."""
    for line in srv.log_text().splitlines():
        low = line.lower()
        if line.startswith('boardd: fs store') and 'cutting a torn last line' not in line:
            raise Failure('%s: the store complained at start: %s' % (where, line))
        if 'corrupt' in low or 'refusing' in low or 'failed' in low:
            raise Failure('%s: the server logged: %s' % (where, line))


def compaction_leftovers(datadir, files):
    """What an interrupted compaction left (file names, temp snapshot mtime), or None."""
    tmp = [f for f in files if f.endswith('.tmp')]
    if not tmp and sum(f.startswith('journal.') for f in files) < 2:
        return None
    return tuple(files), tuple(os.stat(os.path.join(datadir, f)).st_mtime_ns for f in tmp)


def journal_files(datadir):
    return sorted(f for f in os.listdir(datadir) if f.startswith(('journal.', 'snapshot')))


def subscribe(port, token, receiver):
    c = Client(port, token, timeout=30)
    try:
        st, body = c.call('PUT', '/v1/boards/default/subscriptions/k9',
                          {'url': receiver.base + '/k9/ok',
                           'on': {'types': ['card_state_changed'], 'all_labels': ['go']},
                           'consume_labels': ['go']})
    finally:
        c.close()
    if st != 201:
        raise Failure('PUT the subscription answered %s: %s' % (st, body))


def machine_rename(port, token, effects, where):
    """Renames the column most cards sit in (machine reason state_rename): cards that carry
    "go" move under a machine event, which must fire nothing."""
    c = Client(port, token, timeout=30)
    try:
        st, body = c.call('POST', '/v1/boards/default/columns/%s/rename' % STATES[0],
                          {'to': 'k9-renamed'})
        if st != 200:
            raise Failure('%s: the column rename answered %s: %s' % (where, st, body))
        time.sleep(1.5)  # the deliverers poll every 250 ms: time to (wrongly) fire
        evs, _ = events_since(c, 0)
    except OSError as e:
        raise Failure('%s: %s' % (where, e))
    finally:
        c.close()
    effects.observe([e for e in evs if e['seq'] > max(effects.prev_seq(), 0)], where)
    effects.check(port, token, where)
    effects.no_machine(where)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('boardd')
    ap.add_argument('--rounds', type=int, default=20)
    ap.add_argument('--clients', type=int, default=6)
    ap.add_argument('--cards', type=int, default=12, help='cards per client')
    ap.add_argument('--kill-min-ms', type=int, default=300)
    ap.add_argument('--kill-max-ms', type=int, default=3000)
    ap.add_argument('--big', action='store_true', help='16..60 KB bodies (compactions)')
    ap.add_argument('--webhooks', action='store_true',
                    help='a subscription with a one-shot label and a receiver (issue 13)')
    ap.add_argument('--seed', type=int, default=None)
    ap.add_argument('--keep', action='store_true', help='keep the data directory and logs')
    o = ap.parse_args()
    self_test()
    seed = o.seed if o.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    print('kill9: seed %d, %d rounds, %d clients x %d cards, kill after %d..%d ms%s%s' %
          (seed, o.rounds, o.clients, o.cards, o.kill_min_ms, o.kill_max_ms,
           ', big bodies' if o.big else '', ', webhooks' if o.webhooks else ''), flush=True)

    tmp = tempfile.mkdtemp(prefix='boardd-kill9.')
    datadir = os.path.join(tmp, 'data')
    tokens = os.path.join(tmp, 'tokens.json')
    admin = token_add(o.boardd, tokens, 'k9-admin', ['operator', 'bot'])
    clients = [ClientState(i, token_add(o.boardd, tokens, 'c%d' % i, ['worker', 'bot']),
                           o.cards, o.big, rng.randrange(1 << 30), o.webhooks)
               for i in range(o.clients)]
    extra, effects, receiver = [], None, None
    if o.webhooks:
        from receiver import Receiver
        receiver = Receiver()
        effects = EffectsChecker(receiver)
        # A lease short enough that a delivery in flight at a kill is retried soon after.
        extra = ['--delivery-lease-ms', '2000', '--delivery-timeout-ms', '1000']
    srv = Server(o.boardd, datadir, tokens, tmp, extra=extra)
    chk = Checker(clients, effects)
    ok = False
    torn = mid_compaction = 0
    last_sig = None
    try:
        for rnd in range(1, o.rounds + 1):
            started, why = srv.start()
            if not started:
                raise Failure('round %d: the store did not open cleanly: %s' % (rnd, why))
            startup_check(srv, 'round %d' % rnd)
            if rnd == 1 and effects:
                subscribe(srv.port, admin, receiver)
            n_cards = chk.check(srv.port, admin, 'round %d (after restart)' % rnd)
            stop = threading.Event()
            deadline = time.monotonic() + o.kill_max_ms / 1000.0 + 30
            threads = [threading.Thread(target=cl.run_round, args=(srv.port, stop, deadline))
                       for cl in clients]
            acked0 = sum(cl.acked for cl in clients)
            for t in threads:
                t.start()
            delay = rng.uniform(o.kill_min_ms, o.kill_max_ms) / 1000.0
            time.sleep(delay)
            status = srv.kill()
            stop.set()
            for t in threads:
                t.join(timeout=60)
            if any(t.is_alive() for t in threads):
                raise Failure('round %d: a client did not stop after the kill' % rnd)
            for cl in clients:
                if cl.error:
                    raise Failure('round %d: client %s: %s' % (rnd, cl.name, cl.error))
            # A kill during a compaction leaves a second generation and/or a temp snapshot;
            # both stay until the next compaction, so only a change of them counts.
            files = journal_files(datadir)
            sig = compaction_leftovers(datadir, files)
            if sig and sig != last_sig:
                mid_compaction += 1
            last_sig = sig
            log = srv.log_text()
            cut = log.count('cutting a torn last line')
            torn += cut
            print('kill9: round %2d: %4d cards, %5d writes acknowledged, killed after %4.0f ms '
                  '(status %s); files: %s%s' %
                  (rnd, n_cards, sum(cl.acked for cl in clients) - acked0, delay * 1000,
                   status, ' '.join(files),
                   ', recovery cut %d torn line(s)' % cut if cut else ''), flush=True)
        # One more restart after the last kill, a clean stop, and a last check.
        for what in ('after the last kill', 'after a clean SIGTERM'):
            started, why = srv.start()
            if not started:
                raise Failure('%s: the store did not open cleanly: %s' % (what, why))
            startup_check(srv, what)
            torn += srv.log_text().count('cutting a torn last line')
            n_cards = chk.check(srv.port, admin, what)
            if effects and what == 'after the last kill':
                fx = effects.drained(srv.port, admin, what)
            if effects and what == 'after a clean SIGTERM':
                machine_rename(srv.port, admin, effects, what)
            code = srv.stop()
            if code != 0:
                raise Failure('%s: boardd exited %s on SIGTERM:\n%s' % (what, code,
                                                                        srv.log_tail()))
        ok = True
    except Failure as e:
        print('kill9: FAIL: %s' % e, flush=True)
        o.keep = True
    finally:
        if srv.alive():
            srv.kill()
    if receiver:
        receiver.stop()
    acked = sum(cl.acked for cl in clients)
    unc = sum(cl.uncertain for cl in clients)
    if effects and ok:
        print('kill9: webhooks: %d matched events, each enqueued once with its event and '
              'delivered (%d requests received), one-shots consumed exactly once, no machine '
              'event delivered' % fx, flush=True)
    print('kill9: %s: %d rounds, %d writes acknowledged and all present, %d in flight at a kill '
          '(%d landed, %d did not), %d events checked, %d torn journal line(s) cut, %d kill(s) '
          'during a compaction, seed %d' %
          ('PASS' if ok else 'FAIL', o.rounds, acked, unc, chk.applied_in_flight,
           chk.dropped_in_flight, chk.last_seq, torn, mid_compaction, seed), flush=True)
    if o.keep:
        print('kill9: data and logs kept in %s' % tmp)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
