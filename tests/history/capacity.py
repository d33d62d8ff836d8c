"""The capacity replay of an events log (DESIGN §17), shared by the history checker (check h,
tests/history/checker.py) and the limit race (tests/replicas/limit_race.py).

It walks the log in seq order and keeps, for every card, its column and its claim with the
column the claim was taken from (claim.from): a fresh claim (card_claimed without
reclaimed_from) is taken from the column the log has the card in; the reaper's recovery
claim (card_claimed with reclaimed_from) keeps the claim.from of the claim it replaces; moves
of a claimed card change nothing; card_released (owned, retry, reopen, revoke, the reaper's)
ends it. At every seq the live claims taken from a column must number at most its limit, and
a board's live claims at most its max_claims. When the event carries `from` itself it must be
the column the log had the card in.

On the Mongo twin the log orders one card's events as they committed but events of two cards
in the order they were delivered (store/mongo/README.md, "Event seqs"): a release that
committed first can be logged after the claim its freed slot allowed. With cross_doc=False a
claim that puts a column (or board) over its bound is no violation when enough of the live
claims are released later in the log by releases that may have committed before the claim
(the release's earliest possible time, its request's send time or its event's time less the
slack, is no later than the claim's latest: its answer or its event's time plus the slack);
those are counted as released from that claim on, and every such allowance is counted
(`allowances`). Nothing else is relaxed: a fifth claim while four others still live with no
release in sight is reported on both twins.

Not replayed: a column rename (POST /v1/boards/{b}/columns/{c}/rename), which carries the
claims taken from the column along with it, whether or not their cards still sit there; the
histories and the limit race rename nothing.

Standard library only; no I/O.
"""
import collections
import datetime


def at_seconds(at):
    """An event's `at` (RFC 3339, or a number: seconds, or milliseconds when large) as
    seconds since the epoch; None for None."""
    if at is None:
        return None
    if isinstance(at, (int, float)):
        return float(at) / 1000.0 if at > 1e11 else float(at)
    return datetime.datetime.fromisoformat(at.replace('Z', '+00:00')).timestamp()


class Replay:
    def __init__(self, boards, cross_doc=True, slack=0.005, times=None):
        """boards: {board: {'limits': {column: n}, 'max_claims': n}} (a column without a
        limit, or a max_claims of 0, bounds nothing); cross_doc: the log is in commit order
        across cards (the FS twin); times(event) -> (earliest send, latest answer) of the
        request that made the event, or None (the server's own events)."""
        self.boards = boards
        self.cross_doc = cross_doc
        self.slack = slack
        self.times = times or (lambda e: None)
        self.v = []
        self.allowances = 0
        self.checked = 0
        self.peak = collections.Counter()  # (board, column or '') -> the most live at once
        self.cards = {}
        self.early = set()  # (card, epoch) counted as released before its event

    def fail(self, what, events=()):
        self.v.append({'check': 'h', 'what': what, 'ops': [], 'events': list(events)})

    def _earliest(self, e):
        t = at_seconds(e.get('at')) - self.slack
        rt = self.times(e)
        return min(t, rt[0]) if rt else t

    def _latest(self, e):
        t = at_seconds(e.get('at')) + self.slack
        rt = self.times(e)
        return max(t, rt[1]) if rt else t

    def live(self, board, col=None):
        """[(card, claim)] live on board (taken from col when given)."""
        return [(cid, c['claim']) for cid, c in self.cards.items()
                if c['board'] == board and c['claim'] and
                (col is None or c['claim']['from'] == col)]

    def _bound(self, e, board, col, limit, later):
        """The claim event e made `col` (None: the whole board) hold more than `limit`."""
        held = self.live(board, col)
        if len(held) <= limit:
            return
        over = len(held) - limit
        if not self.cross_doc:
            lat = self._latest(e)
            freed = []
            for cid, cl in held:
                if cid == e.get('card_id'):
                    continue
                rel = later.get((cid, cl['epoch']))
                if rel is not None and self._earliest(rel) <= lat:
                    freed.append((cid, cl))
            if len(freed) >= over:
                for cid, cl in freed[:over]:
                    self.early.add((cid, cl['epoch']))
                    self.cards[cid]['claim'] = None
                    self.allowances += 1
                return
        where = 'column %s of board %s' % (col, board) if col else 'board %s' % board
        self.fail('%d live claims taken from %s at seq %d (limit %d): %s' %
                  (len(held), where, e['seq'], limit,
                   ', '.join('%s/%s/%s since seq %s' % (cid, cl['marker'], cl['epoch'],
                                                        cl['seq']) for cid, cl in held)),
                  [cl['event'] for _, cl in held if cl.get('event')] +
                  ([] if any(cl.get('event') is e for _, cl in held) else [e]))

    def run(self, events):
        events = sorted(events, key=lambda e: e['seq'])
        # the release that ends each claim (card, epoch), for the Mongo allowance
        later = {}
        claim_of = {}
        for e in events:
            p = e.get('payload') or {}
            if e['type'] == 'card_claimed':
                claim_of[e.get('card_id')] = p.get('epoch')
            elif e['type'] == 'card_released' and e.get('card_id') in claim_of:
                later.setdefault((e['card_id'], claim_of.pop(e['card_id'])), e)
        for e in events:
            cid, t, p = e.get('card_id'), e['type'], e.get('payload') or {}
            if not cid:
                continue
            c = self.cards.setdefault(cid, {'board': e.get('board'), 'state': None,
                                            'claim': None})
            if t == 'card_created':
                c['state'] = p.get('state', c['state'])
            elif t == 'card_state_changed':
                c['state'] = p.get('to')
            elif t == 'card_deleted':
                del self.cards[cid]
            elif t == 'card_released':
                if c['claim'] is None and (cid, p.get('epoch')) in self.early:
                    continue
                c['claim'] = None
            elif t == 'card_claimed':
                rf = p.get('reclaimed_from')
                if rf:
                    frm = c['claim']['from'] if c['claim'] else None
                    if c['claim'] is None:
                        self.fail('card %s: recovery claim at seq %d of no live claim: its '
                                  'claim.from is unknown' % (cid, e['seq']), [e])
                else:
                    frm = c['state']
                if 'from' in p and p['from'] != frm:
                    self.fail('card %s: the claim at seq %d says it was taken from %r, but the '
                              'log had it %s' % (cid, e['seq'], p['from'],
                                                 'in %r' % frm if frm else 'nowhere'), [e])
                c['claim'] = {'marker': p.get('marker'), 'epoch': p.get('epoch'), 'from': frm,
                              'seq': e['seq'], 'event': e}
                b = self.boards.get(c['board']) or {}
                self.checked += 1
                lim = (b.get('limits') or {}).get(frm) or 0
                if lim > 0:
                    self._bound(e, c['board'], frm, lim, later)
                if (b.get('max_claims') or 0) > 0:
                    self._bound(e, c['board'], None, b['max_claims'], later)
                for col in (frm, None):
                    n = len(self.live(c['board'], col))
                    key = (c['board'], col or '')
                    self.peak[key] = max(self.peak[key], n)
        return self.v
