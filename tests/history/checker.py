"""The offline checker of a recorded boardd history (tests/history/README.md).

Input: the requests every actor made (`ops`: invocation time t0, completion time t1, status,
answer, and the claim token an owned request carried), the server's events log (GET
/v1/events, oldest first) and the final state (every card, every run). Output: a list of
violations, each {check, what, ops, events}: the check that fired ('a'..'g'), one line saying
what is wrong, and the requests and events that show it.

The checks (the invariants of DESIGN §3-§7, ADR-096 §2-§5):
  a  epochs per card strictly increase on every fresh acquisition and never repeat;
  b  every accepted owned write carried the card's current token at its place in the log, and
     no write with an epoch older than an acknowledged claim's was accepted after that claim
     was acknowledged;
  c  a card is acquired only when nobody holds it, except by a reclaim that names the holder
     and bumps the epoch; two tokens' acknowledged holds never overlap;
  d  a card leaves a terminal column only by an operator's reopen (terminal -> terminal: only
     an operator with refile='operator', ADR-096 §5; any writer with refile='any', DESIGN §4);
  e  the reaper never reclaims a claim whose owner renewed in time, nor one whose run was
     running with a live lock, queued, paused or cancelled when it could have looked; it
     promotes only a run whose lock had expired, and files only on its run's own verdict;
  f  every 2xx write is in the log exactly once, in its actor's order and in real-time order
     (a write acknowledged before another was sent has the smaller seq); a refused write left
     no event;
  g  the final state equals the replay of the events log;
  h  (DESIGN §17) at every seq of the log the live claims taken from a column number at most
     its limit and a board's at most its max_claims (capacity.py: claim.from replayed from
     the log, recovery claims keep it);
  i  no fresh claim of a card before its not_before (policy.py);
  j  attempts grow by one per retry release or reaper return, reset on completion and
     reopen, and the attempt that reaches max_attempts files the card attempts_exhausted
     (policy.py).

An op is a dict: {i, actor, kind, card, run, tok: [marker, epoch] or None, t0, t1, st, resp,
tag, lease_ms, to, frm}. Kinds: claim, claim_next, renew, release, state (owned), last_run,
awaiting, gave_up, run_create, run_patch, heartbeat, move (SetStateFrom), reopen, revoke,
cancel, refile, pass, board (the PUT of the board's policy), patch (a bot's PATCH of
not_before: `not_before` in seconds or None); a create carries `not_before` too, a release
`retry: True`. Times are seconds of the host's clock (time.time()), which is the clock of the
FS twin and of a Mongo test server on the same host.

Standard library only; no I/O here.
"""
import bisect
import collections
import datetime

import capacity
import policy

TERMINAL = ('done', 'blocked')
WORKING = ('inbox', 'backlog', 'ready', 'waiting_deps', 'in_progress', 'awaiting_input',
           'review')
PAUSED = ('paused_waiting_human', 'paused_operator')
FINAL_RUN = ('finished', 'failed', 'cancelled')
# Clock slack: event times are whole milliseconds, truncated.
SLACK = 0.005
OWNED = ('state', 'last_run', 'awaiting', 'gave_up')
HOLD = ('claim', 'claim_next', 'renew')  # the requests that set a lease


def at_seconds(at):
    """An event's RFC 3339 `at` as seconds since the epoch."""
    if isinstance(at, (int, float)):
        return float(at)
    return datetime.datetime.fromisoformat(at.replace('Z', '+00:00')).timestamp()


def is_reaper(marker):
    return isinstance(marker, str) and marker.lower().startswith('reaper:')


def ok(op):
    return 200 <= op['st'] < 300


class Checker:
    def __init__(self, ops, events, cards, runs, actors, refile='any', slack=SLACK,
                 cross_doc_order=True, boards=None):
        """actors: {token name: role} of every client actor; events with another actor are the
        server's own (the reaper's). refile: 'any' (DESIGN §4: terminal -> terminal is an
        ordinary refiling) or 'operator'."""
        self.ops = sorted(ops, key=lambda o: (o['t0'], o['i']))
        self.events = list(events)
        self.cards = cards
        self.runs = runs
        self.actors = actors
        self.refile = refile
        self.slack = slack
        # False (the Mongo twin): the log orders one document's events as they committed, but
        # events of two documents (a run's promotion, the card's reclaim) in the order they
        # were delivered, which may not be the order they committed.
        self.cross_doc_order = cross_doc_order
        # DESIGN §17: {board: {limits: {column: n}, max_claims, completed, failed, retry}}
        # (None: checks h, i, j are not run)
        self.boards = boards
        self.v = []
        self.n = collections.Counter()  # how often each check was put to the test
        self.op_of = {}  # event seq -> op

    def fail(self, check, what, ops=(), events=()):
        self.v.append({'check': check, 'what': what, 'ops': list(ops), 'events': list(events)})

    # ---- f: the events log against the requests ------------------------------------------------

    @staticmethod
    def expected(op):
        """[(required, predicate(event))] of a request answered 2xx, in log order."""
        k, cid, r = op['kind'], op.get('card'), op.get('resp') or {}
        tok = op.get('tok')

        def ev(t, card=cid, **want):
            def pred(e):
                if e['type'] != t or (card is not None and e.get('card_id') != card):
                    return False
                p = e.get('payload') or {}
                return all((e.get(key[2:]) if key.startswith('e_') else p.get(key)) == val
                           for key, val in want.items())
            return pred
        if k in ('claim', 'claim_next'):
            if k == 'claim_next':
                if op['st'] == 204:
                    return []
                return [(True, ev('card_claimed', r['card']['id'], marker=tok[0],
                                  epoch=tok[1]))]
            return [(True, ev('card_claimed', marker=tok[0], epoch=tok[1]))] \
                if r.get('fresh') else []
        if k == 'create':
            return [(True, ev('card_created'))]
        if k == 'board':
            return [(True, ev('board_updated', None))]
        if k == 'patch':  # (a PATCH that leaves not_before as it was may write no event)
            return [(False, lambda e: e['type'] == 'card_updated' and e.get('card_id') == cid
                     and 'not_before' in ((e.get('payload') or {}).get('fields') or []))]
        if k == 'heartbeat':  # a run update that changes nothing but the lock
            return [(True, ev('run_updated', None, run_id=op['run']))]
        if k in ('renew', 'pass'):
            return []
        if k == 'release':
            rel = [(True, ev('card_released', marker=tok[0], epoch=tok[1]))]
            if op.get('retry'):  # the attempt that reaches max_attempts files it first
                return [(False, ev('card_state_changed', e_reason=policy.EXHAUSTED)),
                        (False, ev('card_gave_up'))] + rel
            return rel
        if k == 'state':
            # A move onto the column the card is in changes nothing and writes no event; the
            # answer tells: the card's state_reason is this write's unique tag only if it moved.
            return [(True, ev('card_state_changed', e_reason=op['tag'], to=op['to']))] \
                if r.get('state_reason') == op['tag'] else []
        if k == 'last_run':
            return [(True, ev('card_last_run', run_id=op['run']))]
        if k == 'awaiting':
            return [(True, ev('card_updated', fields=['awaiting_input']))]
        if k == 'gave_up':
            return [(True, ev('card_gave_up'))]
        if k == 'run_create':
            return [(True, ev('run_created', None, run_id=op['run'], status=op['status']))]
        if k in ('run_patch', 'cancel'):
            return [(True, ev('run_updated', None, run_id=op['run'], status=op['status']))]
        if k in ('move', 'refile'):
            return [(True, ev('card_state_changed', to=op['to'], **{'from': op['frm']}))]
        if k == 'reopen':
            return [(True, ev('card_state_changed', to=op['to'], reopened=True)),
                    (False, ev('card_released', e_reason='reopen'))]
        if k == 'revoke':
            return [(False, ev('card_released', e_reason='operator_revoke'))]
        raise ValueError('unknown op kind %r' % k)

    def match(self):
        """Assigns every client event to the request that made it (per actor, in order)."""
        by_actor = collections.defaultdict(list)
        for e in self.events:
            a = e.get('actor') or ''
            if a in self.actors:
                by_actor[a].append(e)
            elif not (a == '' or is_reaper(a)):
                self.fail('f', 'event seq %d by unknown actor %r' % (e['seq'], a), events=[e])
        prev = 0
        for e in self.events:
            if e['seq'] <= prev:
                self.fail('f', 'event seqs out of order: %d after %d' % (e['seq'], prev),
                          events=[e])
            prev = e['seq']
        ops_by_actor = collections.defaultdict(list)
        for op in self.ops:
            ops_by_actor[op['actor']].append(op)
        for actor in sorted(set(by_actor) | set(ops_by_actor)):
            evs, j = by_actor.get(actor, []), 0
            for op in ops_by_actor.get(actor, []):
                op['events'] = []
                if op['st'] == 0:
                    self.fail('f', 'request %d (%s) has no answer (transport failure): its '
                              'effect cannot be judged' % (op['i'], op['kind']), [op])
                    continue
                if not ok(op):
                    continue
                for required, pred in self.expected(op):
                    self.n['f: write matched to its event'] += 1 if required else 0
                    if j < len(evs) and pred(evs[j]):
                        op['events'].append(evs[j])
                        self.op_of[evs[j]['seq']] = op
                        j += 1
                        continue
                    if not required:
                        continue
                    # Resynchronise on the write's own event further on: what lies between
                    # belongs to no acknowledged write of this actor.
                    k = next((k for k in range(j, len(evs)) if pred(evs[k])), None)
                    if k is None:
                        self.fail('f', '%s answered %d by %s on %s has no event of its own in '
                                  'the log (the next event of %s is %s)' %
                                  (op['kind'], op['st'], actor, op.get('card'), actor,
                                   describe(evs[j]) if j < len(evs) else 'none'),
                                  [op], evs[j:j + 1])
                        break
                    self.fail('f', '%d event(s) of %s before the one of its %s (request %d) '
                              'match no acknowledged write of its, or are out of its order: '
                              'first %s' % (k - j, actor, op['kind'], op['i'],
                                            describe(evs[j])), [op], evs[j:k])
                    op['events'].append(evs[k])
                    self.op_of[evs[k]['seq']] = op
                    j = k + 1
            if j < len(evs):
                self.fail('f', '%d event(s) of %s match no acknowledged write of its (refused '
                          'or never sent): first %s' % (len(evs) - j, actor, describe(evs[j])),
                          events=evs[j:j + 3])

    def real_time(self):
        """f: a write acknowledged before another was sent has the smaller seq."""
        done = sorted((op for op in self.ops if op.get('events')), key=lambda o: o['t1'])
        t1s = [op['t1'] for op in done]
        best, best_op = [], []
        m, mo = 0, None
        for op in done:
            s = max(e['seq'] for e in op['events'])
            if s > m:
                m, mo = s, op
            best.append(m)
            best_op.append(mo)
        for op in self.ops:
            if not op.get('events'):
                continue
            k = bisect.bisect_left(t1s, op['t0']) - 1
            first = min(e['seq'] for e in op['events'])
            self.n['f: real-time order'] += 1 if k >= 0 else 0
            if k >= 0 and best[k] > first:
                self.fail('f', '%s by %s (sent %.3f) has seq %d, but %s by %s acknowledged '
                          'before it was sent (%.3f) has seq %d' %
                          (op['kind'], op['actor'], op['t0'], first, best_op[k]['kind'],
                           best_op[k]['actor'], best_op[k]['t1'], best[k]), [best_op[k], op])

    # ---- a, b, c (client side): tokens in real time --------------------------------------------

    def tokens(self):
        acq = collections.defaultdict(list)   # card -> [(t1, epoch, op)] of fresh acquisitions
        seen = collections.defaultdict(dict)  # card -> epoch -> op
        for op in self.ops:
            if op['kind'] not in ('claim', 'claim_next') or op['st'] != 200:
                continue
            r = op['resp']
            if op['kind'] == 'claim' and not r.get('fresh'):
                continue
            cid, e = op['card'], op['tok'][1]
            if e in seen[cid]:
                self.fail('a', 'card %s: epoch %d handed out twice (to %s and %s)' %
                          (cid, e, seen[cid][e]['actor'], op['actor']), [seen[cid][e], op])
            seen[cid][e] = op
            acq[cid].append((op['t1'], e, op))
        for cid, v in acq.items():
            v.sort(key=lambda x: x[0])
            for op in self.ops:
                if op['card'] != cid or op['kind'] in ('claim', 'claim_next'):
                    continue
                if op['kind'] == 'release' or op['kind'] in OWNED + ('renew',):
                    if not ok(op) or not op.get('tok'):
                        continue
                    # every acquisition acknowledged before this write was sent
                    k = bisect.bisect_left([x[0] for x in v], op['t0'])
                    self.n['b/c: accepted token against earlier acquisitions'] += 1
                    for t1, e, cop in v[:k]:
                        if e > op['tok'][1]:
                            chk = 'b' if op['kind'] in OWNED else 'c'
                            self.fail(chk, 'card %s: %s with epoch %d by %s accepted (sent '
                                      '%.3f) after the claim of epoch %d by %s was acknowledged '
                                      '(%.3f)' % (cid, op['kind'], op['tok'][1], op['actor'],
                                                  op['t0'], e, cop['actor'], t1), [cop, op])
                            break
            for a, b in zip(v, v[1:]):
                # acquisitions in real-time order have growing epochs
                if b[2]['t0'] > a[0] and b[1] <= a[1]:
                    self.fail('a', 'card %s: epoch %d acquired after epoch %d was acknowledged' %
                              (cid, b[1], a[1]), [a[2], b[2]])

    # ---- the walk: a, b, c, d, e over the log in seq order -------------------------------------

    def lease_bound(self, cid, tok):
        """The earliest the lease of `tok` on card `cid` can have ended. Each acknowledged
        claim or renewal SETS lease_until to its own time + lease (>= its send + lease), and
        every one of them was applied before the reaper listed the claim (one after the
        listing would have made the transfer's "still expired" condition fail), so the lease
        the reaper saw is the one of the holder's last request (its requests are sequential)."""
        last = None
        for op in self.ops:
            if (op['card'] == cid and op['kind'] in HOLD and ok(op) and op.get('tok') and
                    tuple(op['tok']) == tuple(tok) and op['st'] != 204):
                if last is None or op['t0'] > last['t0']:
                    last = op
        if last is None:
            return None, None
        return last['t0'] + last['lease_ms'] / 1000.0, last

    def lock_bound(self, rid, before):
        """The earliest the lock of run `rid` can have ended at time `before`: each owner
        write sets lock_until to its time + lease; the last one acknowledged before `before`,
        or one sent after it and before `before`, was the last applied."""
        ops = sorted((op for op in self.ops if op.get('run') == rid and ok(op) and
                      op['kind'] in ('run_create', 'run_patch', 'heartbeat')),
                     key=lambda o: o['t0'])
        acked = [k for k, op in enumerate(ops) if op['t1'] < before - self.slack]
        if not acked:
            return None, None
        cand = [op for op in ops[acked[-1]:] if op['t0'] < before]
        by = min(cand, key=lambda op: op['t0'] + op['lease_ms'] / 1000.0)
        return by['t0'] + by['lease_ms'] / 1000.0, by

    def walk(self):
        card = {}  # cid -> model
        runs = {}  # rid -> {status, card, tok, at (since when it has that status), ev}
        for e in self.events:
            cid, t, p = e.get('card_id'), e['type'], e.get('payload') or {}
            op = self.op_of.get(e['seq'])
            machine = (e.get('actor') or '') not in self.actors
            if t in ('run_created', 'run_updated'):
                rid = p.get('run_id')
                r = runs.setdefault(rid, {'card': cid, 'tok': None})
                if t == 'run_created' and op:
                    r['tok'] = tuple(op['tok'])
                if machine and t == 'run_updated':
                    self.check_promotion(e, rid, r)
                if r.get('status') != p.get('status'):  # a heartbeat keeps the status
                    r.update(status=p.get('status'), at=at_seconds(e['at']), ev=e)
                continue
            if not cid:
                continue
            c = card.setdefault(cid, {'owner': None, 'max': 0, 'state': None, 'last_run': None,
                                      'awaiting': False, 'gave_up': False, 'claimed': False})
            if t == 'card_created':
                c['state'] = p.get('state') or c['state']
                continue
            if t == 'card_claimed':
                self.n['a/c: acquisition in the log'] += 1
                ep, rf = p.get('epoch'), p.get('reclaimed_from')
                if not isinstance(ep, int) or ep <= c['max']:
                    self.fail('a', 'card %s: claimed at epoch %r after epoch %d (seq %d): the '
                              'fence went back or repeated' % (cid, ep, c['max'], e['seq']),
                              [op] if op else [], [e])
                if rf:
                    was = (rf.get('marker'), rf.get('epoch'))
                    if not is_reaper(p.get('marker')):
                        self.fail('c', 'card %s: reclaimed by %s, which is not the reaper' %
                                  (cid, p.get('marker')), events=[e])
                    if was != c['owner']:
                        self.fail('c', 'card %s: reclaimed from %s/%s but the holder was %s '
                                  '(seq %d)' % (cid, was[0], was[1], fmt_tok(c['owner']),
                                                e['seq']), events=[e])
                    else:
                        self.check_reclaim(e, cid, was, c, runs)
                elif c['owner'] is not None:
                    self.fail('c', 'card %s: acquired by %s/%s (seq %d) while %s held it: two '
                              'holders' % (cid, p.get('marker'), ep, e['seq'],
                                           fmt_tok(c['owner'])), [op] if op else [], [e])
                c['owner'] = (p.get('marker'), ep)
                c['max'] = max(c['max'], ep if isinstance(ep, int) else 0)
                continue
            if t == 'card_released':
                tok = (p.get('marker'), p.get('epoch'))
                if tok != c['owner']:
                    self.fail('b', 'card %s: release of %s/%s (seq %d) while the holder was %s'
                              % (cid, tok[0], tok[1], e['seq'], fmt_tok(c['owner'])),
                              [op] if op else [], [e])
                c['owner'] = None
                continue
            owned = op is not None and op['kind'] in OWNED
            if owned or (machine and t in ('card_state_changed', 'card_gave_up',
                                           'card_last_run')):
                who = tuple(op['tok']) if owned else None
                self.n['b: owned write against the holder'] += 1
                if owned and who != c['owner']:
                    self.fail('b', 'card %s: %s by %s with token %s accepted (seq %d) while the '
                              'holder was %s' % (cid, op['kind'], op['actor'], fmt_tok(who),
                                                 e['seq'], fmt_tok(c['owner'])), [op], [e])
                # The retry that reaches max_attempts files the card under machine provenance
                # in the holder's own step (check j: its retry release follows).
                exhausted = machine and (e.get('reason') == policy.EXHAUSTED or (
                    t == 'card_gave_up' and ((p.get('gave_up') or {}) if isinstance(
                        p.get('gave_up'), dict) else {}).get('reason') == policy.EXHAUSTED))
                if machine and not exhausted and not (c['owner'] and is_reaper(c['owner'][0])):
                    self.fail('b', 'card %s: the server wrote %s (seq %d) without holding the '
                              'recovery claim (holder %s)' % (cid, t, e['seq'],
                                                              fmt_tok(c['owner'])), events=[e])
            if t == 'card_state_changed':
                self.check_state(e, op, c, machine, runs)
                c['state'] = p.get('to')
            elif t == 'card_last_run':
                c['last_run'] = p.get('run_id')
                c['last_run_at'] = at_seconds(e['at'])
            elif t == 'card_gave_up':
                c['gave_up'] = bool(p.get('gave_up'))
            elif t == 'card_updated' and 'awaiting_input' in (p.get('fields') or []) and op:
                c['awaiting'] = bool(op.get('awaiting'))
        self.model, self.run_model = card, runs

    def check_state(self, e, op, c, machine, runs):
        p = e.get('payload') or {}
        frm, to = p.get('from'), p.get('to')
        if c['state'] is not None and frm != c['state']:
            self.fail('g', 'card %s: moved from %s (seq %d) but the log had it in %s' %
                      (e['card_id'], frm, e['seq'], c['state']), [op] if op else [], [e])
        if frm in TERMINAL:
            self.n['d: move out of a terminal column'] += 1
        if frm in TERMINAL and to not in TERMINAL:
            if not (op and op['kind'] == 'reopen' and self.actors.get(op['actor']) ==
                    'operator' and p.get('reopened') is True):
                self.fail('d', 'card %s left terminal %s for %s (seq %d) by %s, not by an '
                          "operator's reopen" % (e['card_id'], frm, to, e['seq'],
                                                 describe_writer(e, op)),
                          [op] if op else [], [e])
        elif frm in TERMINAL and to in TERMINAL and self.refile == 'operator':
            if not (op and self.actors.get(op['actor']) == 'operator'):
                self.fail('d', 'card %s refiled %s -> %s (seq %d) by %s, not by an operator' %
                          (e['card_id'], frm, to, e['seq'], describe_writer(e, op)),
                          [op] if op else [], [e])
        if machine and e.get('reason') in ('run_finished', 'run_failed'):
            want = 'finished' if e['reason'] == 'run_finished' else 'failed'
            r = runs.get(c['last_run'])
            if not r or r['status'] != want:
                self.fail('e', 'card %s filed into %s (seq %d) with reason %s, but its run %s '
                          'is %s' % (e['card_id'], to, e['seq'], e['reason'], c['last_run'],
                                     r['status'] if r else 'unknown'), events=[e])

    def check_reclaim(self, e, cid, was, c, runs):
        """e: the reaper may take `was` only when its lease ran out and nothing alive is behind
        it."""
        at = at_seconds(e['at'])
        lb, by = self.lease_bound(cid, was)
        self.n['e: reclaim against the lease'] += 1 if lb is not None else 0
        if lb is not None and at < lb - self.slack:
            self.fail('e', 'card %s: the reaper reclaimed %s/%s at %.3f (seq %d), but its owner '
                      'renewed in time: lease until >= %.3f (request sent at %.3f, lease %d ms)'
                      % (cid, was[0], was[1], at, e['seq'], lb, by['t0'], by['lease_ms']),
                      [by], [e])
            return
        if lb is None:
            return  # a recovery claim, or an acquisition this history did not make
        r = runs.get(c['last_run'])
        if not r or r['tok'] != was:
            return  # no run of this claim: the table's no-run rows
        # The reaper lists a claim only after its lease ran out (>= lb) and reads the run after
        # listing; a pointer and a status set before lb and unchanged until the transfer are
        # what it read.
        if r['at'] > lb - self.slack or c.get('last_run_at', 0) > lb - self.slack:
            return
        st = r['status']
        self.n['e: reclaim against its run (%s)' % st] += 1
        if st in ('running', 'queued') and not self.cross_doc_order:
            at_r = at_seconds(e['at'])
            late = [p for p in self.events if p['seq'] > e['seq'] and
                    p['type'] == 'run_updated' and (p.get('actor') or '') not in self.actors
                    and (p.get('payload') or {}).get('run_id') == c['last_run'] and
                    at_seconds(p['at']) <= at_r + self.slack]
            if late:
                self.n['e: promotion logged after the reclaim it allowed'] += 1
                return
        if st in PAUSED or st == 'cancelled' or st in ('running', 'queued'):
            self.fail('e', 'card %s: the reaper reclaimed %s/%s (seq %d) while its run %s was '
                      '%s since %.3f, before the lease could run out (%.3f)%s' %
                      (cid, was[0], was[1], e['seq'], c['last_run'], st, r['at'], lb,
                       ' (never promoted)' if st in ('running', 'queued') else ''),
                      [by], [r['ev'], e])

    def check_promotion(self, e, rid, r):
        """e: a promotion to failed_resumable only once the run's lock expired."""
        at = at_seconds(e['at'])
        lb, by = self.lock_bound(rid, at)
        self.n['e: promotion against the run lock'] += 1 if lb is not None else 0
        if lb is not None and at < lb - self.slack:
            self.fail('e', 'run %s promoted to %s at %.3f (seq %d), but its owner renewed its '
                      'lock until >= %.3f (request sent at %.3f)' %
                      ((rid, (e.get('payload') or {}).get('status'), at, e['seq'], lb,
                        by['t0'])), [by], [e])

    # ---- g: the final state is the replay of the log ---------------------------------------------

    def replay(self):
        for cid, m in self.model.items():
            self.n['g: card replayed'] += 1
            fin = self.cards.get(cid)
            if fin is None:
                self.fail('g', 'card %s is in the log but not in the final state' % cid)
                continue
            claim = fin.get('claim')
            got = {'state': fin.get('state'),
                   'owner': (claim['marker'], fin.get('claim_epoch')) if claim else None,
                   'epoch': fin.get('claim_epoch'),
                   'last_run': fin.get('last_run_id'),
                   'gave_up': bool(fin.get('gave_up')),
                   'awaiting': bool(fin.get('awaiting_input'))}
            want = {'state': m['state'], 'owner': m['owner'], 'epoch': m['max'],
                    'last_run': m['last_run'], 'gave_up': m['gave_up'],
                    'awaiting': m['awaiting']}
            if got != want:
                diff = ', '.join('%s: log %r, card %r' % (k, want[k], got[k]) for k in want
                                 if want[k] != got[k])
                self.fail('g', 'card %s: the final card differs from the replay of the log '
                          '(%s)' % (cid, diff))
        for rid, r in self.run_model.items():
            fin = self.runs.get(rid)
            if fin is None or fin.get('status') != r['status']:
                self.fail('g', 'run %s: log says %s, the run says %s' %
                          (rid, r['status'], fin.get('status') if fin else 'missing'))

    def policy(self):
        """h, i, j (DESIGN §17)."""
        def times(e):
            op = self.op_of.get(e['seq'])
            return (op['t0'], op['t1']) if op else None
        cap = capacity.Replay(self.boards, cross_doc=self.cross_doc_order, slack=self.slack,
                              times=times)
        self.v += cap.run(self.events)
        self.n['h: claim against the bounds'] += cap.checked
        self.n['h: Mongo delivery-order allowance'] += cap.allowances
        for (b, col), n in cap.peak.items():
            key = 'h: peak %s' % (col or 'board')
            self.n[key] = max(self.n[key], n)
        pol = policy.Policy(self.boards, self.op_of, self.slack)
        self.v += pol.run(self.events, self.cards)
        self.n.update(pol.n)

    def run(self):
        self.match()
        self.real_time()
        self.tokens()
        self.walk()
        self.replay()
        if self.boards is not None:
            self.policy()
        return self.v


def fmt_tok(t):
    return '%s/%s' % t if t else 'nobody'


def describe(e):
    return 'seq %d %s %s by %r reason %r %s' % (e['seq'], e['type'], e.get('card_id'),
                                                e.get('actor'), e.get('reason'),
                                                e.get('payload'))


def describe_writer(e, op):
    if op:
        return '%s (%s, %s)' % (op['actor'], op['kind'], op.get('tok'))
    return 'the server (actor %r, reason %r)' % (e.get('actor'), e.get('reason'))


def check(ops, events, cards, runs, actors, refile='any', slack=SLACK, counts=None,
          cross_doc_order=True, boards=None):
    """The violations of a history (empty: it passed). counts: a dict that receives how often
    each check was applied; cross_doc_order, boards: Checker's."""
    c = Checker(ops, events, cards, runs, actors, refile, slack, cross_doc_order, boards)
    v = c.run()
    if counts is not None:
        counts.update(c.n)
    return v


def report(violations, limit=20):
    """Printable lines: each violation with the requests and events that show it."""
    out = []
    for v in violations[:limit]:
        out.append('VIOLATION (%s) %s' % (v['check'], v['what']))
        for op in v['ops']:
            out.append('    request %d %s %s card %s tok %s sent %.3f answered %.3f: %d %s' %
                       (op['i'], op['actor'], op['kind'], op.get('card'), op.get('tok'),
                        op['t0'], op['t1'], op['st'], str(op.get('resp'))[:160]))
        for e in v['events']:
            out.append('    event %s at %s' % (describe(e), e.get('at')))
    if len(violations) > limit:
        out.append('... and %d more' % (len(violations) - limit))
    return out
