"""Checks i and j of the history checker (DESIGN §17; tests/history/README.md): schedules and
retries, judged on the events log in seq order (one card's events are in commit order on
both twins) and on the final cards.

  i  no fresh claim of a card before its not_before: the card_claimed event's time against
     the not_before set by the last create, PATCH or retry release before it (a completion
     and a reopen clear it, as core_attempts_reset does; an exhausted retry leaves it); the
     final card's not_before is the replay's;
  j  attempts grow by one on every retry release (card_released with retry: true, the
     owned release with retry and the reaper's returns to the pool) and the payload's
     `attempts` says so; the retry's not_before is at + the backoff of that attempt
     (min(max_backoff_ms, backoff_ms * 2^(attempts-1)), +-10 %); attempts reset to 0 when
     the card enters its board's completed column and on an operator's reopen; the retry
     that reaches max_attempts files the card into the failed column (reason
     attempts_exhausted, gave_up {reason: "attempts_exhausted"}) and no other does; the final
     card's attempts are the replay's.

Standard library only; no I/O.
"""
import datetime

import capacity

EXHAUSTED = 'attempts_exhausted'
DEFAULT_RETRY = {'max_attempts': 20, 'backoff_ms': 1000, 'max_backoff_ms': 300000}


def backoff_s(r, attempts):
    """The wait before the next claim after `attempts` failed ones, without the jitter."""
    w = r['backoff_ms']
    for _ in range(1, attempts):
        if w >= r['max_backoff_ms']:
            break
        w *= 2
    return min(w, r['max_backoff_ms']) / 1000.0


class Policy:
    def __init__(self, boards, op_of, slack):
        """boards: {board: {'completed', 'failed', 'retry': {max_attempts, backoff_ms,
        max_backoff_ms}}}; op_of: {seq: the request that made the event}."""
        self.boards = boards
        self.op_of = op_of
        self.slack = slack
        self.v = []
        self.n = {'i: fresh claim against not_before': 0, 'j: retry release counted': 0,
                  'j: exhausted filing': 0, 'j: reset': 0}
        self.model = {}

    def fail(self, check, what, events=(), ops=()):
        self.v.append({'check': check, 'what': what, 'ops': [o for o in ops if o],
                       'events': list(events)})

    def board(self, name):
        b = dict(self.boards.get(name) or {})
        b.setdefault('completed', 'done')
        b.setdefault('failed', 'blocked')
        b['retry'] = dict(DEFAULT_RETRY, **(b.get('retry') or {}))
        return b

    def nb_of(self, e, p, op, key='not_before'):
        """The not_before an event set (seconds, None: none), or 'unknown'."""
        if key in p:
            return capacity.at_seconds(p[key])
        if op is not None and key in op:
            return op[key]
        if op is not None and isinstance(op.get('resp'), dict) and key in op['resp']:
            return capacity.at_seconds(op['resp'][key])
        return 'unknown'

    def run(self, events, final):
        cards = self.model
        for e in sorted(events, key=lambda x: x['seq']):
            cid, t, p = e.get('card_id'), e['type'], e.get('payload') or {}
            if not cid:
                continue
            op = self.op_of.get(e['seq'])
            at = capacity.at_seconds(e['at'])
            c = cards.setdefault(cid, {'board': e.get('board') or 'default', 'state': None,
                                       'nb': None, 'attempts': 0, 'exhaust': None,
                                       'gave_up': None})
            b = self.board(c['board'])
            if t == 'card_created':
                c['state'] = p.get('state', c['state'])
                c['nb'] = self.nb_of(e, p, op)
            elif t == 'card_updated' and 'not_before' in (p.get('fields') or []):
                c['nb'] = self.nb_of(e, p, op)
            elif t == 'card_state_changed':
                c['state'] = p.get('to')
                # the holder's retry: reason attempts_exhausted; the reaper's: reason
                # watchdog (machine provenance), cause attempts_exhausted
                if e.get('reason') == EXHAUSTED or p.get('cause') == EXHAUSTED:
                    c['exhaust'] = e
                    if p.get('to') != b['failed']:
                        self.fail('j', 'card %s: filed %s into %s (seq %d), not into the failed '
                                  'column %s' % (cid, EXHAUSTED, p.get('to'), e['seq'],
                                                 b['failed']), [e])
                if p.get('to') == b['completed'] or p.get('reopened'):
                    self.n['j: reset'] += 1
                    c['attempts'] = 0
                    c['nb'] = None  # core_attempts_reset: no schedule left over either
            elif t == 'card_gave_up':
                g = p.get('gave_up') if isinstance(p.get('gave_up'), dict) else p
                c['gave_up'] = (g or {}).get('reason')
                # A card already in the failed column (a bot filed it while it was held) is
                # not moved again: the stamp alone marks the exhausted filing.
                if c['gave_up'] == EXHAUSTED and c['state'] == b['failed'] and not c['exhaust']:
                    c['exhaust'] = e
            elif t == 'card_claimed' and not p.get('reclaimed_from'):
                nb = c['nb']
                if isinstance(nb, float):
                    self.n['i: fresh claim against not_before'] += 1
                    if at < nb - self.slack:
                        self.fail('i', 'card %s: claimed by %s/%s at %s (seq %d) before its '
                                  'not_before %s' % (cid, p.get('marker'), p.get('epoch'),
                                                     e['at'], e['seq'], fmt(nb)), [e], [op])
            elif t == 'card_released':
                self.release(e, p, op, at, c, b, cid)
        for cid, c in cards.items():
            fin = final.get(cid)
            if fin is None:
                continue
            if 'attempts' in fin and fin['attempts'] != c['attempts']:
                self.fail('j', 'card %s: attempts: log %d, card %d' %
                          (cid, c['attempts'], fin['attempts']))
            if 'not_before' in fin and c['nb'] != 'unknown':
                got = capacity.at_seconds(fin['not_before'])
                if (got is None) != (c['nb'] is None) or (
                        got is not None and abs(got - c['nb']) > 0.0015):
                    self.fail('i', 'card %s: not_before: log %s, card %s' %
                              (cid, fmt(c['nb']), fmt(got)))
        return self.v

    def release(self, e, p, op, at, c, b, cid):
        ex, c['exhaust'] = c['exhaust'], None
        if not p.get('retry'):
            if ex is not None:
                self.fail('j', 'card %s: filed %s (seq %d) by no retry (the next release, seq '
                          '%d, is none)' % (cid, EXHAUSTED, ex['seq'], e['seq']), [ex, e])
            return
        self.n['j: retry release counted'] += 1
        r = b['retry']
        c['attempts'] += 1
        n = c['attempts']
        if 'attempts' in p and p['attempts'] != n:
            self.fail('j', 'card %s: the retry release at seq %d says attempts %r, the log '
                      'counts %d' % (cid, e['seq'], p['attempts'], n), [e], [op])
        if n >= r['max_attempts']:
            self.n['j: exhausted filing'] += 1
            if ex is None or c['state'] != b['failed'] or c['gave_up'] != EXHAUSTED:
                self.fail('j', 'card %s: attempt %d of max_attempts %d (retry release seq %d) '
                          'left it in %s, not filed into %s with gave_up %s' %
                          (cid, n, r['max_attempts'], e['seq'], c['state'], b['failed'],
                           EXHAUSTED), [e], [op])
            return
        if ex is not None:
            self.fail('j', 'card %s: filed %s (seq %d) after %d attempt(s) of %d' %
                      (cid, EXHAUSTED, ex['seq'], n, r['max_attempts']), [ex, e], [op])
        nb = self.nb_of(e, p, op)
        c['nb'] = nb
        if isinstance(nb, float):
            w = backoff_s(r, n)
            if not (0.9 * w - self.slack - 0.001 <= nb - at <= 1.1 * w + self.slack):
                self.fail('j', 'card %s: attempt %d scheduled %.3f s after the retry (seq %d); '
                          'the backoff is %.3f s +-10 %%' % (cid, n, nb - at, e['seq'], w),
                          [e], [op])


def fmt(t):
    if t is None or isinstance(t, str):
        return t or 'none'
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat(
        timespec='milliseconds').replace('+00:00', 'Z')
