#!/usr/bin/env python3
"""The two store twins, side by side through the HTTP API: one boardd on a fresh FS store, one
on a fresh database of the Mongo test server, and the SAME seeded random sequence of requests
replayed against both, one at a time (boards and columns, cards, claims and claim-next, owned
writes with right, stale and wrong tokens, runs, reopen, gave-up, labels and their sweeps,
comments, agent tokens and their use, a board-scoped token, MCP tools/call, subscriptions with
consume_labels, the attention lane, bad inputs). Each answer of one side is compared with the
other's (status, content type, body), never with a hard-coded expectation, after normalising
what legitimately differs: timestamps, the generated ids (mapped to names in order of appearance on
each side), the claim epoch (a counter on the FS twin, a server-clock floor on the Mongo one:
ADR-096 §7; mapped per card to its generation), event seqs and the opaque cursors. At the end
the whole state is compared: every card of every board and every event. The sequence is one
request at a time, so FerretDB's non-atomic updates (which matter under concurrency only) do
not make it differ.

Any difference fails, printing the seed, the step, the request and both answers.

usage: parity.py BOARDD_BINARY [--seeds 1,2,3] [--steps N] [-v]
  needs BOARDD_TEST_MONGO_URI (tests/run.sh sets it); skips with 77 without it, unless
  CI=true, where it fails.
"""
import argparse
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
import boardd_test as bt  # noqa: E402

ROLES = {'op': ['operator'], 'bot': ['bot'], 'worker': ['worker'], 'worker2': ['worker'],
         'scoped': ['worker', 'bot', 'operator']}  # scoped: board b2 only
BOARDS = ['default', 'b2']
DEFAULT_COLS = ['inbox', 'backlog', 'ready', 'waiting_deps', 'in_progress',
                'awaiting_input', 'review', 'done', 'blocked']
MARKERS = ['m1', 'm2', 'Reaper:x']
LABELS = ['bug', 'ui', 'p1', 'once', 'x-y']
RUN_STATUSES = ['queued', 'running', 'paused_operator', 'finished', 'failed',
                'failed_resumable', 'cancelled', 'weird_one', 'Bad Status']
TS_RE = re.compile(r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$')
TS_KEYS = {'created_at', 'updated_at', 'state_at', 'claimed_at', 'lease_until', 'at',
           'lock_until', 'expires_at', 'next_at', 'duration_ms', 'last_pass'}
SEQ_KEYS = {'seq'}
EPOCH_KEYS = {'epoch', 'claim_epoch', 'actor_epoch'}
GEN_KEYS = {'id', 'card_id', 'run_id', 'last_run_id', 'blockers', 'blocker', 'card'}


class Side:
    """One boardd and what the driver learnt from its answers (its own epochs, ids)."""

    def __init__(self, name, binary, tokens, tmp, store=None):
        self.name = name
        d = os.path.join(tmp, name)
        os.makedirs(d)
        self.srv = bt.Server(binary, datadir=os.path.join(d, 'data'), tokens=tokens,
                             logdir=d, store=store, threads=2, name=name,
                             extra=['--log-format', 'text', '--lease-min-ms', '1000'])
        self.srv.started()
        self.clients = {}
        self.gen = {}        # this side's generated value -> shared name
        self.gen_back = {}   # shared name -> this side's value
        self.gen_count = {}
        self.epochs = {}     # card id (side) -> [epoch values in order of appearance]
        self.tokens = {}     # card id (side) -> [(marker, epoch)] in order taken
        self.seqs = {}       # seq value -> ordinal
        self.agent = None    # the last agent token made on this side

    def client(self, who, token):
        if who not in self.clients:
            self.clients[who] = bt.Client(self.srv.port, token, timeout=30)
        return self.clients[who]

    def stop(self):
        for c in self.clients.values():
            c.close()
        return self.srv.stop(timeout=20)

    # ---- names --------------------------------------------------------------------------

    def name_of(self, kind, value):
        """The shared name of a value this side generated (first seen: the next of its kind)."""
        key = (kind, value)
        if key not in self.gen:
            n = self.gen_count.get(kind, 0) + 1
            self.gen_count[kind] = n
            shared = '<%s%d>' % (kind, n)
            self.gen[key] = shared
            self.gen_back[shared] = value
        return self.gen[key]

    def resolve(self, shared):
        """A name the driver uses in a request -> this side's value (itself when the driver
        chose it)."""
        return self.gen_back.get(shared, shared)

    def epoch_name(self, card, e):
        if not isinstance(e, int) or isinstance(e, bool) or e == 0:
            return e
        lst = self.epochs.setdefault(card, [])
        if e not in lst:
            lst.append(e)
            lst.sort()
        return '<e%d>' % (lst.index(e) + 1)

    def seq_name(self, s):
        if not isinstance(s, int):
            return s
        if s not in self.seqs:
            self.seqs[s] = len(self.seqs) + 1
        # Relative order is what a client can rely on; the values are the twin's.
        return '<s%d>' % self.seqs[s]


def normalise(side, v, card=None, key=None):
    """v with what legitimately differs between the twins replaced by shared names."""
    if isinstance(v, dict):
        c = card
        if isinstance(v.get('card_id'), str):
            c = v['card_id']
        elif isinstance(v.get('id'), str) and 'claim_epoch' in v:
            c = v['id']
        elif isinstance(v.get('card'), dict) and isinstance(v['card'].get('id'), str):
            c = v['card']['id']
        out = {}
        for k, x in v.items():
            out[k] = normalise(side, x, c, k)
        return out
    if isinstance(v, list):
        return [normalise(side, x, card, key) for x in v]
    if key == 'text' and isinstance(v, str) and v[:1] in '{[':  # MCP content: JSON as text
        try:
            return normalise(side, json.loads(v), card)
        except ValueError:
            pass
    if key == 'detail' and isinstance(v, str):
        return norm_detail(side, v, card)
    if key in TS_KEYS and v is not None:
        return '<ts>' if not isinstance(v, (dict, list)) else normalise(side, v, card)
    if isinstance(v, str) and TS_RE.match(v):
        return '<ts>'
    if key in EPOCH_KEYS:
        return side.epoch_name(card, v)
    if key in SEQ_KEYS or key == 'next' and isinstance(v, int):
        return side.seq_name(v)
    if key == 'next' and isinstance(v, str):
        return '<cursor>'
    if key in ('token', 'secret') and isinstance(v, str):
        return '<token>'
    if isinstance(v, str) and (key in GEN_KEYS or key == 'location'):
        return side.gen.get(('id', v), v)
    return v


def norm_detail(side, text, card):
    """A problem detail with this side's generated ids and epochs of the card named."""
    if not isinstance(text, str):
        return text
    for (kind, val), shared in side.gen.items():
        text = text.replace(val, shared)
    if card:
        for e in side.epochs.get(card, []):
            text = re.sub(r'(epoch |If-Match "?)%d(?![0-9])' % e,
                          lambda m: m.group(1) + side.epoch_name(card, e), text)
    text = re.sub(r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z', '<ts>', text)
    return text


class Driver:
    def __init__(self, seed, sides, toks, steps, verbose):
        self.seed = seed
        self.rng = random.Random(seed)
        self.sides = sides
        self.toks = toks
        self.steps = steps
        self.verbose = verbose
        self.step = 0
        self.cards = []       # names the driver created (or tried to)
        self.live = set()     # the cards that exist (as the first side answered)
        self.runs = []
        self.failed = False
        self.columns = {b: list(DEFAULT_COLS) for b in BOARDS}

    # ---- one request on both sides ------------------------------------------------------

    def both(self, what, build, card=None, learn=None):
        """build(side) -> (who, method, path, body, headers) in that side's own terms.
        Sends it to each side, normalises, compares; learn(side, status, body) runs on each
        answer before normalising. Returns [(status, body)] per side (raw)."""
        answers = []
        for s in self.sides:
            who, method, path, body, headers = build(s)
            if self.verbose:
                print('  -> %s %s %s %s as %s' % (s.name, method, path, str(body)[:300], who),
                      flush=True)
            c = s.client(who, self.toks.get(who))
            if method == 'HEAD':
                c.close()  # http.client reads no body after a HEAD: a fresh connection
            st, raw, hdrs = c.call_full(method, path, body, headers)
            if method == 'POST' and path in ('/v1/cards', '/mcp'):
                # claim-next ranks by created_at, then id: two cards made in one
                # millisecond on one twin only would rank apart
                time.sleep(0.002)
            parsed = bt.decode_body(raw)
            side_card = s.resolve(card) if card else None
            if learn:
                learn(s, st, parsed)
            n = normalise(s, parsed, side_card)
            ctype = hdrs.get('content-type', '').split(';')[0]
            loc = hdrs.get('location')
            if loc:
                loc = re.sub(r'[^/]+$', lambda m: s.gen.get(('id', urllib.parse.unquote(
                    m.group(0))), m.group(0)), loc)
            answers.append(((method, path, body), st, parsed, (st, ctype, loc, n)))
        a, b = answers
        if a[3] != b[3]:
            self.fail(what, a, b)
        elif self.verbose:
            print('ok   %s %s -> %s' % (self.step, what[:300], a[1]), flush=True)
        return [(x[1], x[2]) for x in answers]

    def fail(self, what, a, b):
        self.failed = True
        bt.check(False, 'seed %d step %s: %s: the twins differ' % (self.seed, self.step,
                                                                  what[:300]))
        for s, x in zip(self.sides, (a, b)):
            print('  %-5s %s %s %s' % (s.name, x[0][0], x[0][1],
                                       json.dumps(x[0][2])[:600] if x[0][2] is not None
                                       else ''))
            print('        -> %s %s' % (x[1], json.dumps(x[2], sort_keys=True)[:600]))
        for where, x, y in first_diffs(a[3], b[3]):
            print('  differ at %s: %s %s / %s %s' % (where, self.sides[0].name,
                                                     json.dumps(x)[:300], self.sides[1].name,
                                                     json.dumps(y)[:300]))

    # ---- learning from answers ----------------------------------------------------------

    def learn_token(self, side_card):
        def f(s, st, body):
            if st == 200 and isinstance(body, dict) and 'epoch' in body:
                s.tokens.setdefault(side_card(s), []).append((body['marker'], body['epoch']))
        return f

    # ---- choices --------------------------------------------------------------------------

    def pick(self, seq):
        return self.rng.choice(seq)

    def p(self, x):
        return self.rng.random() < x

    def card(self):
        """A card name: mostly one that exists, sometimes a deleted one or one nobody made."""
        if not self.cards or self.p(0.04):
            return self.pick(['nope', 'c999', 'bad id!'])
        if self.live and self.p(0.92):
            return self.pick(sorted(self.live))
        return self.pick(self.cards)

    def column(self, board='default'):
        if self.p(0.04):
            return self.pick(['nowhere', '', 'DONE'])
        return self.pick(self.columns.get(board, DEFAULT_COLS))

    def labels(self):
        n = self.rng.randint(0, 3)
        ls = [self.pick(LABELS) for _ in range(n)]
        if self.p(0.05):
            ls.append(self.pick(['has space', 'a,b', '', 7]))
        return ls

    def token_of(self, s, card, which):
        """(marker, epoch) of this side's claims on `card`: 'cur' the last taken, 'stale' an
        earlier one, 'other' the last with the other marker; None when none."""
        lst = s.tokens.get(s.resolve(card), [])
        if not lst:
            return None
        if which == 'cur':
            return lst[-1]
        if which == 'stale':
            return lst[0] if len(lst) > 1 else (lst[-1][0], 0)  # 0: before any claim
        m, e = lst[-1]
        return ('m2' if m == 'm1' else 'm1', e)

    def tok_choice(self):
        return self.pick(['cur'] * 10 + ['stale', 'other'])

    def worker(self):
        return 'worker' if self.p(0.92) else self.pick(['worker2', 'bot'])

    # ---- the operations -------------------------------------------------------------------

    def op_create(self):
        body = {'title': 't%d' % self.step}
        name = None
        if self.p(0.85):
            name = 'c%d' % (len(self.cards) + 1)
            if self.cards and self.p(0.05):
                name = self.pick(self.cards)  # already exists
            elif self.p(0.05):
                name = self.pick(['a:b.c-d_%d' % self.step, 'x' * 127 + str(self.step % 10),
                                  'y' * 129, 'sp ace', '\u00e9t\u00e9'])
            body['id'] = name
        if self.p(0.3):
            body['board'] = self.pick(BOARDS + ['nob'])
        if self.p(0.6):
            body['state'] = self.column(body.get('board', 'default'))
        if self.p(0.5):
            body['labels'] = self.labels()
        if self.cards and self.p(0.3):
            body['blockers'] = [self.card() for _ in range(self.rng.randint(1, 2))]
        if self.p(0.2):
            body['priority'] = self.pick([0, 3, -1, 'high', 2 ** 40])
        if self.p(0.2):
            body['body'] = self.pick(['text', '\u00fcml\u00e4ut \u2603', 'x' * 70000])
        if self.p(0.04):
            body['colour'] = 'red'
        if self.p(0.03):
            body['title'] = 5
        who = self.pick(['bot', 'op', 'bot', 'bot', 'op', 'worker'])
        if name and name not in self.cards:
            self.cards.append(name)

        def build(s):
            b = dict(body)
            if 'blockers' in b:
                b['blockers'] = [s.resolve(x) for x in b['blockers']]
            return who, 'POST', '/v1/cards', b, None
        res = self.both('create %s' % json.dumps(body), build, learn=self.learn_gen_card)
        if name and res[0][0] == 201:
            self.live.add(name)
        if not name:
            for s, (st, out) in zip(self.sides, res):
                if st == 201 and isinstance(out, dict):
                    shared = s.gen.get(('id', out['id']))
                    if shared and shared not in self.cards:
                        self.cards.append(shared)
                        self.live.add(shared)

    def learn_gen_card(self, s, st, body):
        if st == 201 and isinstance(body, dict) and isinstance(body.get('id'), str) and \
                body['id'] not in self.cards:
            s.name_of('id', body['id'])

    def op_patch(self):
        c = self.card()
        body = {}
        for k, gen in (('title', lambda: 'p%d' % self.step), ('body', lambda: 'b'),
                       ('blockers', lambda: [self.card() for _ in range(self.rng.randint(0, 2))]),
                       ('priority', lambda: self.pick([1, 5, 'x']))):
            if self.p(0.4):
                body[k] = gen()
        if self.p(0.05):
            body['state'] = 'done'
        if self.p(0.03):
            body = self.pick([[], 'x', None])

        def build(s):
            b = dict(body) if isinstance(body, dict) else body
            if isinstance(b, dict) and 'blockers' in b:
                b['blockers'] = [s.resolve(x) for x in b['blockers']]
            return self.pick_fixed('who', ['bot', 'op']), 'PATCH', '/v1/cards/' + q(s, c), b, None
        self.fixed = {}
        self.both('patch %s %s' % (c, json.dumps(body)), build, card=c)

    def pick_fixed(self, key, choices):
        """One choice for this step shared by both sides' build()."""
        if key not in self.fixed:
            self.fixed[key] = self.pick(choices)
        return self.fixed[key]

    def op_get(self):
        c = self.card()
        self.both('get %s' % c, lambda s: ('worker', 'GET', '/v1/cards/' + q(s, c), None,
                                           None), card=c)

    def op_list(self):
        qs = {'board': self.pick(BOARDS)}
        if self.p(0.4):
            qs['state'] = self.column(qs['board'])
        if self.p(0.3):
            qs['label'] = self.pick(LABELS)
        if self.p(0.3):
            qs['claimed'] = self.pick(['true', 'false', 'maybe'])
        if self.p(0.5):
            qs['limit'] = self.pick([1, 2, 5, 0, 1001])
        path = '/v1/cards?' + urllib.parse.urlencode(qs)
        res = self.both('list %s' % path, lambda s: ('bot', 'GET', path, None, None))
        # One more page, by each side's own cursor.
        if all(st == 200 and isinstance(b, dict) and b.get('next') for st, b in res):
            nexts = [b['next'] for _, b in res]
            self.both('list page 2 %s' % path, lambda s: (
                'bot', 'GET', path + '&after=' + urllib.parse.quote(
                    nexts[self.sides.index(s)], safe=''), None, None))

    def op_delete(self):
        c = self.card()
        who = self.pick(['op', 'op', 'op', 'bot'])
        res = self.both('delete %s' % c, lambda s: (who, 'DELETE', '/v1/cards/' + q(s, c), None,
                                                    None), card=c)
        if res[0][0] == 204:
            self.live.discard(c)

    def op_claim(self):
        c = self.card()
        marker = self.pick(['m1'] * 10 + ['m2', 'm2', 'Reaper:x', ''])
        body = {'marker': marker}
        if self.p(0.5):
            body['lease_ms'] = self.pick([60000, 120000] * 4 + [10, 'x', 10 ** 9])
        who = self.worker()
        self.both('claim %s %s as %s' % (c, json.dumps(body), who),
                  lambda s: (who, 'POST', '/v1/cards/%s/claim' % q(s, c), body, None),
                  card=c, learn=self.learn_token(lambda s: s.resolve(c)))

    def op_claim_next(self):
        board = self.pick(BOARDS + ['nob'])
        body = {'marker': self.pick(['m1', 'm1', 'm2'])}
        if self.p(0.3):
            body['columns'] = [self.column(board) for _ in range(self.rng.randint(1, 2))]
        if self.p(0.3):
            body['labels'] = [self.pick(LABELS)]
        if self.p(0.2):
            body['lease_ms'] = 60000
        who = self.worker()

        def learn(s, st, out):
            if st == 200 and isinstance(out, dict) and isinstance(out.get('token'), dict):
                t = out['token']
                s.tokens.setdefault(out['card']['id'], []).append((t['marker'], t['epoch']))
        self.both('claim-next %s %s' % (board, json.dumps(body)), lambda s: (
            who, 'POST', '/v1/boards/%s/claim-next' % board, body, None), learn=learn)

    def op_claim_many(self):
        """claim-next with count (DESIGN §18)."""
        board = self.pick(BOARDS)
        body = {'marker': self.pick(['m1', 'm1', 'm2']),
                'count': self.pick([1, 2, 3, 5] * 5 + [0, 101, 'x'])}
        who = self.worker()

        def learn(s, st, out):
            for it in (out.get('claims') or []) if st == 200 and isinstance(out, dict) else []:
                t = it['token']
                s.tokens.setdefault(it['card']['id'], []).append((t['marker'], t['epoch']))
        self.both('claim-next %s %s' % (board, json.dumps(body)), lambda s: (
            who, 'POST', '/v1/boards/%s/claim-next' % board, body, None), learn=learn)

    def many_items(self):
        """1..4 cards for a batch (now and then one twice: 400), each with a token choice."""
        cards = [self.card() for _ in range(self.rng.randint(1, 4))]
        if not self.p(0.1):
            cards = list(dict.fromkeys(cards))
        return [(c, self.tok_choice()) for c in cards]

    def op_renew_many(self):
        """POST /v1/claims/renew (DESIGN §18): per-item answers."""
        items, who = self.many_items(), self.worker()
        lease = self.pick([None, None, 90000, 5])

        def build(s):
            toks = []
            for c, which in items:
                m, e, _ = self.owned_body(s, c, which, {})
                toks.append({'card': s.resolve(c), 'marker': m, 'epoch': e})
            b = {'tokens': toks}
            if lease is not None:
                b['lease_ms'] = lease
            return who, 'POST', '/v1/claims/renew', b, None
        self.both('renew many %s (%s, lease %s)' % (items, who, lease), build)

    def op_release_many(self):
        """POST /v1/claims/release (DESIGN §18): each the owned write to `to` and the release,
        or the release alone."""
        items, who = self.many_items(), self.worker()
        tos = [self.column() if self.p(0.6) else None for _ in items]

        def build(s):
            toks = []
            for (c, which), to in zip(items, tos):
                m, e, _ = self.owned_body(s, c, which, {})
                t = {'card': s.resolve(c), 'marker': m, 'epoch': e}
                if to is not None:
                    t['to'] = to
                toks.append(t)
            return who, 'POST', '/v1/claims/release', {'tokens': toks}, None
        self.both('release many %s to %s (%s)' % (items, tos, who), build)

    def owned_body(self, s, c, which, extra):
        t = self.token_of(s, c, which)
        m, e = t if t else ('m1', 0)  # 0: no claim of this card seen
        return m, e, dict({'marker': m}, **extra)

    def op_renew(self):
        c, which, who = self.card(), self.tok_choice(), self.worker()
        lease = self.pick([None, None, 90000, 5])

        def build(s):
            m, e, _ = self.owned_body(s, c, which, {})
            b = {'marker': m, 'epoch': e}
            if lease is not None:
                b['lease_ms'] = lease
            return who, 'POST', '/v1/cards/%s/renew' % q(s, c), b, None
        self.both('renew %s (%s token, %s, lease %s)' % (c, which, who, lease), build, card=c)

    def op_release(self):
        c, which, who = self.card(), self.tok_choice(), self.worker()

        def build(s):
            m, e, _ = self.owned_body(s, c, which, {})
            return who, 'POST', '/v1/cards/%s/release' % q(s, c), {'marker': m, 'epoch': e}, None
        self.both('release %s (%s token, %s)' % (c, which, who), build, card=c)

    def if_match(self, e, mode):
        if mode == 'none':
            return None
        if mode == 'garbage':
            return {'If-Match': 'W/"x"'}
        return {'If-Match': '"%d"' % e}

    def op_owned(self):
        c, which, who = self.card(), self.tok_choice(), self.worker()
        mode = self.pick(['ok'] * 16 + ['none', 'garbage'])
        kind = self.pick(['state', 'state', 'last-run', 'awaiting-input', 'gave-up', 'comment',
                          'agent'])
        if kind == 'state':
            extra = {'to': self.column(), 'reason': self.pick(['r'] * 4 + ['run_finished',
                                                                          'watchdog'])}
            if self.p(0.2):
                extra['release'] = self.pick([True, True, False, 'yes'])
            method, path = 'PATCH', '/state'
        elif kind == 'last-run':
            extra = {'run_id': self.pick(self.runs) if self.runs and self.p(0.8) else 'rnope'}
            method, path = 'PUT', '/last-run'
        elif kind == 'awaiting-input':
            extra = {'awaiting_input': self.pick([True, False, 1])}
            method, path = 'PUT', '/awaiting-input'
        elif kind == 'gave-up':
            extra = {'gave_up': self.pick([{'reason': 'tired', 'run_id': 'r1'}] * 3 +
                                          [None, {'reason': 'x'}, 'no'])}
            method, path = 'PUT', '/gave-up'
        elif kind == 'comment':
            extra = {'body': self.pick(['hi', '', 'x' * 10])}
            method, path = 'POST', '/comments'
        else:
            extra = {'caps': self.pick([['board.read'], ['board.move', 'board.label'], ['nope']])}
            method, path = 'POST', '/agent-tokens'

        def build(s):
            m, e, b = self.owned_body(s, c, which, extra)
            if kind == 'last-run':
                b['run_id'] = s.resolve(b['run_id'])
            return who, method, '/v1/cards/%s%s' % (q(s, c), path), b, self.if_match(e, mode)
        self.both('owned %s %s %s (%s token, %s, if-match %s)' % (kind, c, json.dumps(extra),
                                                                   which, who, mode), build,
                  card=c)

    def op_move(self):
        c = self.card()
        who = self.pick(['bot', 'bot', 'op'])
        frm = self.pick(['cur', 'cur', 'other', 'none'])
        to = self.column()

        def build(s):
            b = {'to': to}
            if frm == 'cur':
                st, cur = s.client('op', self.toks['op']).call('GET', '/v1/cards/' + q(s, c))
                b['from'] = cur.get('state') if st == 200 and isinstance(cur, dict) else 'inbox'
            elif frm == 'other':
                b['from'] = 'review'
            return who, 'PATCH', '/v1/cards/%s/state' % q(s, c), b, None
        self.both('move %s from %s to %s as %s' % (c, frm, to, who), build, card=c)

    def op_reopen(self):
        c = self.card()
        body = {'to': self.column()}
        if self.p(0.3):
            body['reason'] = 'again'
        who = self.pick(['op'] * 5 + ['bot'])
        self.both('reopen %s %s' % (c, json.dumps(body)),
                  lambda s: (who, 'POST', '/v1/cards/%s/reopen' % q(s, c), body, None), card=c)

    def op_revoke(self):
        c = self.card()
        self.both('revoke %s' % c, lambda s: ('op', 'POST', '/v1/cards/%s/claim/revoke' % q(s, c),
                                              None, None), card=c)

    def op_labels(self):
        c = self.card()
        if self.p(0.5):
            body = {'labels': self.labels()}
            method = 'PUT'
        else:
            body = {'add': self.labels(), 'remove': self.labels()}
            if self.p(0.1):
                del body[self.pick(['add', 'remove'])]
            method = 'PATCH'
        self.both('labels %s %s %s' % (method, c, json.dumps(body)), lambda s: (
            'bot', method, '/v1/cards/%s/labels' % q(s, c), body, None), card=c)

    def op_sweep(self):
        kind = self.pick(['rename', 'merge', 'delete', 'count'])
        board = self.pick([None, None] + BOARDS + ['nob'])
        if kind == 'rename':
            body = {'from': self.pick(LABELS), 'to': self.pick(LABELS + ['new'])}
            method, path = 'POST', '/v1/labels/rename'
        elif kind == 'merge':
            body = {'from': [self.pick(LABELS) for _ in range(2)], 'to': self.pick(LABELS)}
            method, path = 'POST', '/v1/labels/merge'
        elif kind == 'delete':
            body = None
            method, path = 'DELETE', '/v1/labels/' + self.pick(LABELS)
        else:
            body = None
            method, path = 'GET', '/v1/labels'
        if board:
            if body is not None:
                body['board'] = board
            else:
                path += '?board=' + board
        self.both('labels %s %s %s' % (kind, path, json.dumps(body)),
                  lambda s: ('op', method, path, body, None))

    def op_comment(self):
        c = self.card()
        body = {'body': self.pick(['a comment', '', 'x'])}
        if self.p(0.05):
            body = {'text': 'x'}
        self.both('comment %s %s' % (c, json.dumps(body)), lambda s: (
            self.pick_fixed('who', ['bot', 'op']), 'POST', '/v1/cards/%s/comments' % q(s, c),
            body, None), card=c)

    def op_run(self):
        kind = self.pick(['create', 'create', 'patch', 'patch', 'heartbeat', 'cancel', 'delete',
                          'get'])
        who = self.worker()
        if kind == 'create':
            c = self.card()
            which = self.tok_choice()
            rid = None
            if self.p(0.8):
                rid = 'r%d' % (len(self.runs) + 1)
            status = self.pick(RUN_STATUSES[:3] * 3 + RUN_STATUSES)

            def build(s):
                m, _, _ = self.owned_body(s, c, which, {})
                b = {'card_id': s.resolve(c), 'marker': m, 'status': status}
                if rid:
                    b['id'] = rid
                return who, 'POST', '/v1/runs', b, None

            def learn(s, st, out):
                if st == 201 and isinstance(out, dict) and not rid:
                    s.name_of('id', out['id'])
            res = self.both('run create %s %s (%s)' % (c, rid, status), build, card=c,
                            learn=learn)
            if rid:
                self.runs.append(rid)
            else:
                s0, (st, out) = self.sides[0], res[0]
                if st == 201:
                    self.runs.append(s0.gen[('id', out['id'])])
            return
        r = self.pick(self.runs[-6:]) if self.runs and self.p(0.93) else 'rnope'
        body = None
        method, suffix = {'patch': ('PATCH', ''), 'heartbeat': ('POST', '/heartbeat'),
                          'cancel': ('POST', '/cancel'), 'delete': ('DELETE', ''),
                          'get': ('GET', '')}[kind]
        if kind in ('cancel', 'delete'):
            who = 'op'
        if kind in ('get', 'patch', 'heartbeat') and self.runs and self.p(0.5):
            r = self.runs[-1]
        if kind == 'patch':
            body = {}
            if self.p(0.7):
                body['status'] = self.pick(RUN_STATUSES)
            if self.p(0.2):
                body['continuation'] = self.pick(['retry_armed', 'final', None, 'nah'])
            if self.p(0.2):
                body['failure_code'] = 'E1'
            if self.p(0.15):
                body['result'] = {'n': self.step}
            if self.p(0.1):
                body['error'] = 'boom'
        elif kind == 'heartbeat':
            body = {}
            if self.p(0.2):
                body['lease_ms'] = 30000

        def build(s):
            b = None
            if body is not None:
                b = dict(body)
                b['marker'] = self.pick_fixed('marker', ['m1'] * 4 + ['m2'])
            return who, method, '/v1/runs/' + q(s, r) + suffix, b, None
        self.fixed = {}
        self.both('run %s %s %s as %s' % (kind, r, json.dumps(body), who), build)

    def op_board(self):
        kind = self.pick(['get', 'list', 'put', 'put', 'rename', 'rename'])
        b = self.pick(BOARDS + ['nob'])
        if kind == 'get':
            self.both('board get ' + b, lambda s: ('bot', 'GET', '/v1/boards/' + b, None, None))
        elif kind == 'list':
            self.both('board list', lambda s: ('bot', 'GET', '/v1/boards', None, None))
        elif kind == 'put':
            cols = list(self.columns.get(b, DEFAULT_COLS))
            if self.p(0.5):
                cols.insert(self.rng.randint(0, len(cols)), 'extra%d' % self.step)
            if self.p(0.3):
                cols.remove(self.pick([c for c in cols if c not in
                                       ('ready', 'in_progress', 'done', 'blocked',
                                        'waiting_deps')]))
            body = {'columns': [{'name': c, 'terminal': c in ('done', 'blocked'),
                                 'eligible': c in ('ready', 'in_progress')} for c in cols],
                    'running': 'in_progress', 'completed': 'done', 'failed': 'blocked',
                    'waiting': 'waiting_deps'}
            if self.p(0.05):
                body['running'] = 'nowhere'
            if self.p(0.03):
                body['columns'][0]['colour'] = 1
            res = self.both('board put %s %s' % (b, cols), lambda s: (
                'op', 'PUT', '/v1/boards/' + b, body, None))
            if res[0][0] == 200:
                self.columns[b] = cols
        else:
            frm = self.column(b)
            to = self.pick(['renamed%d' % self.step, 'done', 'review'])
            res = self.both('column rename %s %s -> %s' % (b, frm, to), lambda s: (
                'op', 'POST', '/v1/boards/%s/columns/%s/rename' % (b, q(s, frm)), {'to': to},
                None))
            if res[0][0] == 200 and b in self.columns:
                self.columns[b] = [to if c == frm else c for c in self.columns[b]]

    def op_flow(self):
        """A worker's whole hold of one card, each step compared: claim, a run, last-run, the
        run's outcome, an owned move, release (the deep paths: dependents unblocked, finals)."""
        c = self.card()
        res = self.both('flow claim %s' % c, lambda s: (
            'worker', 'POST', '/v1/cards/%s/claim' % q(s, c), {'marker': 'm1', 'lease_ms': 60000},
            None), card=c, learn=self.learn_token(lambda s: s.resolve(c)))
        if res[0][0] != 200:
            return
        rid = 'r%d' % (len(self.runs) + 1)
        self.runs.append(rid)
        self.both('flow run %s on %s' % (rid, c), lambda s: (
            'worker', 'POST', '/v1/runs', {'card_id': s.resolve(c), 'marker': 'm1',
                                           'status': 'running', 'id': rid}, None), card=c)

        def owned(method, path, extra):
            def build(s):
                m, e, b = self.owned_body(s, c, 'cur', extra)
                return 'worker', method, '/v1/cards/%s%s' % (q(s, c), path), b, \
                    self.if_match(e, 'ok')
            return build
        self.both('flow last-run %s' % c, owned('PUT', '/last-run', {'run_id': rid}), card=c)
        if self.p(0.3):
            self.both('flow awaiting-input %s' % c, owned('PUT', '/awaiting-input',
                                                          {'awaiting_input': self.p(0.5)}),
                      card=c)
        if self.p(0.3):
            self.both('flow comment %s' % c, owned('POST', '/comments', {'body': 'progress'}),
                      card=c)
        if self.p(0.8):
            st = self.pick(['finished', 'finished', 'failed', 'failed_resumable', 'paused_operator'])
            self.both('flow run %s %s' % (rid, st), lambda s: (
                'worker', 'PATCH', '/v1/runs/' + rid,
                {'marker': 'm1', 'status': st, 'result': {'ok': st == 'finished'}}, None))
        to = self.pick(['done', 'done', 'done', 'blocked', 'review', 'in_progress'])
        extra = {'to': to, 'reason': 'run_finished' if to == 'done' else 'r'}
        rel = self.p(0.3)
        if rel:
            extra['release'] = True
        self.both('flow state %s -> %s' % (c, to), owned('PATCH', '/state', extra), card=c)
        if not rel and self.p(0.8):
            self.both('flow release %s' % c, lambda s: (
                'worker', 'POST', '/v1/cards/%s/release' % q(s, c),
                dict(zip(('marker', 'epoch'), self.token_of(s, c, 'cur'))), None), card=c)

    def op_bad(self):
        kind = self.pick(['json', 'type', 'route', 'method', 'auth'])
        c = self.card()
        if kind == 'json':
            self.both('garbage json', lambda s: ('bot', 'POST', '/v1/cards', b'{"title":', None))
        elif kind == 'type':
            self.both('wrong types on claim', lambda s: (
                'worker', 'POST', '/v1/cards/%s/claim' % q(s, c), {'marker': 5}, None), card=c)
        elif kind == 'route':
            self.both('missing run', lambda s: ('op', 'GET', '/v1/runs/zz', None, None))
        elif kind == 'method':
            self.both('bad method', lambda s: ('op', 'PUT', '/v1/cards/%s/claim' % q(s, c),
                                               {}, None), card=c)
        else:
            self.both('no token', lambda s: (None, 'GET', '/v1/cards/' + q(s, c), None, None),
                      card=c)

    def op_attention(self):
        """GET /v1/attention: newest update first, and the twins' clocks tick apart, so
        compared as a list ordered by card."""
        board = self.pick(BOARDS + ['nob'])

        def learn(s, st, out):
            if st == 200 and isinstance(out, dict) and isinstance(out.get('cards'), list):
                out['cards'].sort(key=lambda x: s.gen.get(('id', x['card']['id']),
                                                          x['card']['id']))
        self.both('attention ' + board, lambda s: (
            'op', 'GET', '/v1/attention?limit=1000&board=' + board, None, None), learn=learn)

    def op_agent(self):
        """A worker's agent token for the card it holds, then a request with it."""
        c = self.card()
        caps = self.pick([['board.read'], ['board.move', 'board.read'], ['board.label'],
                          ['board.comment']])

        def build(s):
            m, e, b = self.owned_body(s, c, 'cur', {'caps': caps})
            return 'worker', 'POST', '/v1/cards/%s/agent-tokens' % q(s, c), b, \
                self.if_match(e, 'ok')

        def learn(s, st, out):
            s.agent = out.get('token') if st == 201 and isinstance(out, dict) else None
        self.both('agent token %s %s' % (c, caps), build, card=c, learn=learn)
        use = self.pick(['get', 'move', 'label', 'comment'])
        for s in self.sides:
            self.toks['agent-' + s.name] = s.agent
            s.clients.pop('agent-' + s.name, None)
        req = {'get': ('GET', '', None), 'move': ('PATCH', '/state', {'to': 'review'}),
               'label': ('PATCH', '/labels', {'add': ['agent']}),
               'comment': ('POST', '/comments', {'body': 'from an agent'})}[use]
        if all(s.agent for s in self.sides):
            self.both('agent %s %s' % (use, c), lambda s: (
                'agent-' + s.name, req[0], '/v1/cards/%s%s' % (q(s, c), req[1]), req[2], None),
                card=c)

    def op_reaper(self):
        """One pass with the gate off: repair only (nothing of ours to repair)."""
        self.both('reaper pass', lambda s: ('op', 'POST', '/v1/reaper/pass', None, None))

    def op_subscription(self):
        """A subscription whose consume_labels strips a one-shot label in the event's step
        (its deliveries go to a closed port and are not compared: their timing is the
        deliverer's)."""
        b = self.pick(BOARDS)
        name = self.pick(['s1', 's2'])
        if self.p(0.3):
            self.both('subscription delete %s/%s' % (b, name), lambda s: (
                'op', 'DELETE', '/v1/boards/%s/subscriptions/%s' % (b, name), None, None))
            return
        on = {}
        if self.p(0.5):
            on['to_states'] = [self.column(b)]
        if self.p(0.5):
            on['all_labels'] = [self.pick(LABELS)]
        body = {'url': 'http://127.0.0.1:9/hook', 'secret': 'whsec_' + 'QUJD' * 8, 'on': on,
                'consume_labels': ['once'] if self.p(0.7) else []}
        self.both('subscription put %s/%s %s' % (b, name, json.dumps(body)), lambda s: (
            'op', 'PUT', '/v1/boards/%s/subscriptions/%s' % (b, name), body, None))

    def op_mcp(self):
        """One MCP tools/call (the 2026-07-28 stateless envelope) as the bot."""
        c = self.card()
        tool = self.pick(['list_cards', 'get_card', 'create_card', 'move_card', 'move_card',
                          'close_card', 'set_labels', 'adjust_labels', 'add_comment', 'nope'])
        args = {'list_cards': {'board': self.pick(BOARDS), 'limit': 5},
                'get_card': {'id': c},
                'create_card': {'title': 'mcp %d' % self.step, 'labels': self.labels()[:2],
                                'state': self.column()},
                'move_card': {'id': c, 'to': self.column()},
                'close_card': {'id': c},
                'set_labels': {'id': c, 'labels': self.labels()},
                'adjust_labels': {'id': c, 'add': self.labels(), 'remove': self.labels()},
                'add_comment': {'id': c, 'body': 'via mcp'},
                'nope': {}}[tool]
        if tool == 'move_card' and self.p(0.5):
            args['from'] = self.column()
        if tool == 'close_card' and self.p(0.5):
            args['to'] = self.pick(['done', 'blocked', 'review'])
        ver = '2026-07-28'
        hdrs = {'MCP-Protocol-Version': ver, 'Mcp-Method': 'tools/call', 'Mcp-Name': tool,
                'Accept': 'application/json, text/event-stream'}

        def build(s):
            a = dict(args)
            if 'id' in a:
                a['id'] = s.resolve(a['id'])
            body = {'jsonrpc': '2.0', 'id': self.step, 'method': 'tools/call',
                    'params': {'name': tool, 'arguments': a,
                               '_meta': {'io.modelcontextprotocol/protocolVersion': ver,
                                         'io.modelcontextprotocol/clientCapabilities': {}}}}
            return self.pick_fixed('who', ['bot', 'bot', 'op']), 'POST', '/mcp', body, hdrs

        def learn(s, st, out):
            # a card the tool created: its generated id gets a shared name
            sc = (out or {}).get('result', {}).get('structuredContent') if isinstance(
                out, dict) else None
            if tool == 'create_card' and isinstance(sc, dict):
                cid = sc.get('id') or (sc.get('card') or {}).get('id')
                if isinstance(cid, str):
                    s.name_of('id', cid)
        res = self.both('mcp %s %s' % (tool, json.dumps(args)), build,
                        card=c if 'id' in args else None, learn=learn)
        if tool == 'create_card':
            sc = (res[0][1] or {}).get('result', {}).get('structuredContent') if isinstance(
                res[0][1], dict) else None
            cid = isinstance(sc, dict) and (sc.get('id') or (sc.get('card') or {}).get('id'))
            if isinstance(cid, str):
                shared = self.sides[0].gen.get(('id', cid))
                if shared and shared not in self.cards:
                    self.cards.append(shared)
                    self.live.add(shared)

    def op_head(self):
        c = self.card()
        self.both('head %s' % c, lambda s: ('bot', 'HEAD', '/v1/cards/' + q(s, c), None, None),
                  card=c)

    def op_events(self):
        board = self.pick(BOARDS)
        who = self.pick(['op', 'op', 'scoped'])
        if who == 'scoped':  # its cursors are board_seqs, the same on both twins
            after = self.rng.randint(0, 40)
            path = '/v1/events?board=%s&limit=%d&after=%d' % (board, self.pick([1, 5, 50]),
                                                              after)
            if self.p(0.2):
                path += '&wait_ms=20'
            self.both('events %s as scoped' % path, lambda s: ('scoped', 'GET', path, None,
                                                               None))
            return
        self.both('events ' + board, lambda s: ('op', 'GET', '/v1/events?board=%s&limit=5&after=%d'
                                                % (board, self.after_of(s)), None, None))

    def op_scoped(self):
        """The token scoped to board b2: a card of either board read, moved, claimed."""
        c = self.card()
        kind = self.pick(['get', 'move', 'claim', 'list', 'labels'])
        if kind == 'get':
            req = ('GET', '/v1/cards/{}', None)
        elif kind == 'move':
            req = ('PATCH', '/v1/cards/{}/state', {'to': self.column('b2')})
        elif kind == 'claim':
            req = ('POST', '/v1/cards/{}/claim', {'marker': 'm3'})
        elif kind == 'labels':
            req = ('GET', '/v1/labels' + self.pick(['', '?board=b2', '?board=default']), None)
        else:
            req = ('GET', '/v1/cards' + self.pick(['', '?board=b2', '?board=default']), None)
        self.both('scoped %s %s' % (kind, c), lambda s: (
            'scoped', req[0], req[1].replace('{}', q(s, c)), req[2], None), card=c)

    def after_of(self, s):
        """A seq in this side's own numbering: the k-th seen (same k on both)."""
        if not s.seqs:
            return 0
        k = self.pick_fixed('after', sorted(s.seqs.values()))
        return [v for v, o in s.seqs.items() if o == k][0]

    OPS = [('op_create', 14), ('op_patch', 5), ('op_get', 3), ('op_list', 3), ('op_delete', 2),
           ('op_claim', 10), ('op_claim_next', 4), ('op_renew', 5), ('op_release', 5),
           ('op_owned', 14), ('op_move', 8), ('op_reopen', 5), ('op_revoke', 2),
           ('op_labels', 5), ('op_sweep', 3), ('op_comment', 3), ('op_run', 10),
           ('op_board', 3), ('op_bad', 3), ('op_events', 2), ('op_flow', 8),
           ('op_attention', 2), ('op_agent', 2), ('op_reaper', 1), ('op_subscription', 1),
           ('op_head', 1), ('op_scoped', 3), ('op_mcp', 4), ('op_claim_many', 2),
           ('op_renew_many', 2), ('op_release_many', 2)]

    def run(self):
        names = [n for n, _ in self.OPS]
        weights = [w for _, w in self.OPS]
        body = {'columns': [{'name': c, 'terminal': c in ('done', 'blocked'),
                             'eligible': c in ('ready', 'in_progress')} for c in DEFAULT_COLS],
                'running': 'in_progress', 'completed': 'done', 'failed': 'blocked',
                'waiting': 'waiting_deps'}
        self.both('board b2 made', lambda s: ('op', 'PUT', '/v1/boards/b2', body, None))
        for self.step in range(1, self.steps + 1):
            self.fixed = {}
            getattr(self, self.rng.choices(names, weights)[0])()
            if self.failed:
                return False
        self.final()
        return not self.failed

    def final(self):
        self.step = 'final'
        for board in BOARDS:
            states = []
            for s in self.sides:
                c = s.client('op', self.toks['op'])
                cards = bt.cards_all(c, board)
                evs, _ = bt.events_since(c, 0, board)
                norm = {}
                for cid, card in cards.items():
                    norm[s.gen.get(('id', cid), cid)] = normalise(s, card, cid)
                states.append((norm, [normalise(s, e) for e in evs]))
            (ca, ea), (cb, eb) = states
            for cid in sorted(set(ca) | set(cb)):
                if ca.get(cid) != cb.get(cid):
                    self.fail('final card %s of board %s' % (cid, board),
                              (('GET', '/v1/cards', None), 200, ca.get(cid), ca.get(cid)),
                              (('GET', '/v1/cards', None), 200, cb.get(cid), cb.get(cid)))
            if len(ea) != len(eb):
                bt.check(False, 'seed %d: board %s has %d events on %s, %d on %s' % (
                    self.seed, board, len(ea), self.sides[0].name, len(eb), self.sides[1].name))
                self.failed = True
            for i, (x, y) in enumerate(zip(ea, eb)):
                if x != y:
                    self.fail('final event #%d of board %s' % (i + 1, board),
                              (('GET', '/v1/events', None), 200, x, x),
                              (('GET', '/v1/events', None), 200, y, y))
                    break
        bt.check(not self.failed, 'seed %d: %d steps, the twins agree' % (self.seed, self.steps))


def first_diffs(a, b, where='', out=None, limit=5):
    """Up to `limit` (path, a's value, b's value) where two normalised answers differ."""
    out = [] if out is None else out
    if len(out) >= limit:
        return out
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            first_diffs(a.get(k, '<absent>'), b.get(k, '<absent>'), '%s.%s' % (where, k), out)
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            first_diffs(x, y, '%s[%d]' % (where, i), out)
    elif a != b:
        out.append((where or '.', a, b))
    return out


def q(s, name):
    return urllib.parse.quote(s.resolve(name), safe='')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('boardd')
    ap.add_argument('--seeds', default='1,2,3')
    ap.add_argument('--steps', type=int, default=300)
    ap.add_argument('-v', '--verbose', action='store_true')
    a = ap.parse_args()
    uri = bt.mongo_uri()
    status = 0
    for seed in [int(x) for x in a.seeds.split(',')]:
        tmp = tempfile.mkdtemp(prefix='boardd-parity-')
        try:
            tokens = os.path.join(tmp, 'tokens.json')
            toks = {who: bt.token_add(a.boardd, tokens, who, roles,
                                      ['b2'] if who == 'scoped' else ())
                    for who, roles in ROLES.items()}
            toks[None] = None
            fs = Side('fs', a.boardd, tokens, tmp)
            mg = Side('mongo', a.boardd, tokens, tmp,
                      store=bt.mongo_database(uri, 'parity%d' % seed))
            try:
                d = Driver(seed, [fs, mg], toks, a.steps, a.verbose)
                if not d.run():
                    status = 1
            finally:
                for s in (fs, mg):
                    rc = s.stop()
                    if rc != 0:
                        bt.check(False, '%s exited %s on SIGTERM:\n%s' % (s.name, rc,
                                                                       s.srv.log_tail(40)))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return bt.summary('parity') or status


if __name__ == '__main__':
    sys.exit(main())
