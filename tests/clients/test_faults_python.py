#!/usr/bin/env python3
"""The Python worker SDK (clients/python) under lost answers and refusals, against a real
boardd behind a small fault proxy of its own (loopback only, in this process): the proxy
forwards each request and may lose the answer (the server did the work, the client sees the
connection close), answer a chosen status without forwarding, or hold a request a while.

- claim-next's answer lost (one card, and with count): the retry sends the same
  Idempotency-Key, so it gets the same claims; no card is left claimed and never worked;
- POST /v1/runs's answer lost: the retry gets the same run; one run per claim;
- Client.raw() re-sends on a fresh connection only what cannot be done twice (GET, PUT, ...,
  or a request with an Idempotency-Key): a POST whose answer is lost raises TransportError and
  creates one card, not two; a DELETE whose answer is lost is re-sent, and its 404 means done;
- a result over the server's limit (413) or an error text over 4 KiB of UTF-8: the run is
  failed, the card filed into on_failure and released, nothing stranded;
- more than 1000 claims renewed: requests of at most 1000 tokens, every lease extended;
- a renew refused whole with 401: the handler is cancelled at once, not at the lease end;
- every run heartbeat slow (held 1 s by the proxy, 10 jobs, a 6 s lease): the heartbeats of a
  tick go out together, so the next renew comes in time: no job loses its lease, all are done;
- a run cancelled by an operator: its next heartbeat's run_final cancels the handler
  ('run_cancelled') and parks the job: neither filed nor released;
- the final write's answer lost (the run's PATCH, the card's filing with release): the retry's
  refusal is read back and the job counts as succeeded, not lost or parked;
- the filing answered 503 a while, so a renew tick heartbeats the run the worker has just
  finished: that run_final is the worker's own, the card is filed all the same;
- a result that is not JSON (a datetime): the run is failed saying so, the card filed;
- the final write answered 500 or 502 (the run's PATCH, the filing): sent again after a
  backoff, the claim renewed meanwhile; the card is filed, the job counted succeeded; a write
  that keeps failing past WRITE_RETRY_S is given up (an error), after several tries;
- a 429 on claim-next and a 503 on the run's final PATCH, each with Retry-After: 2: the next
  try waits those 2 s, not the backoff's 0.2 s and 0.1 s;
- a renew held by the proxy until the job has filed and released its card, then refused: no
  "claim lost" is logged, the job counts succeeded;
- a card claimed late in a long-poll (4.5 s into the wait of a 6 s lease): the first renew
  goes out at once, the job is not cancelled;
- claim-next retried after a lost answer: the claim's local lease counts from the first try;
- AsyncWorker.run() cancelled (asyncio.wait_for): the worker stops, its threads end, no claim
  is left held, and asyncio.run() returns;
- a handler raising SystemExit: its job fails (run failed, card filed into on_failure and
  released), the worker stops claiming and run() raises the SystemExit; a handler raising
  another BaseException: its job fails, the worker goes on;
- a retry release whose answer is lost: the retry's 409 is read back (the card released), the
  job counts retried and no "claim lost" is logged; a retry release refused: counted an
  error, not retried.

usage: test_faults_python.py BOARDD REPO_ROOT
(BOARDD_TEST_PORT_BASE=N: boardd listens on N, the proxies on N+1 and N+2; else free ports.)
"""
import asyncio
import datetime
import json
import logging
import os
import re
import socket
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'common'))
import boardd_test as bt  # noqa: E402
from fault_proxy import Proxy  # noqa: E402
from boardd_test import check  # noqa: E402

if len(sys.argv) < 3:
    print(__doc__.strip().splitlines()[-2], file=sys.stderr)
    sys.exit(2)
BOARDD = sys.argv[1]
ROOT = os.path.abspath(sys.argv[2])
sys.path.insert(0, os.path.join(ROOT, 'clients', 'python'))
try:
    import boardd  # noqa: E402
except ImportError as e:
    bt.skip_or_fail('the boardd package does not import from %s: %s' % (ROOT, e))

logging.basicConfig(level=logging.ERROR if not os.environ.get('V') else logging.INFO,
                    format='%(threadName)s %(message)s')
LEASE_MS = 3000


# ---- helpers --------------------------------------------------------------------------------

def run_worker(w, max_jobs, timeout=20.0):
    """Worker.run(max_jobs) on a thread; stopped after timeout. (stats, error)."""
    out = {}

    def go():
        try:
            out['stats'] = w.run(max_jobs=max_jobs, handle_signals=False)
        except Exception as e:  # noqa: BLE001
            out['error'] = e
    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        w.stop()
        t.join(w.grace * 2 + w.wait_ms / 1000.0 + 15)
    return out.get('stats') or dict(w.stats), out.get('error')


def mk(bot, label, n=1, prefix=None):
    ids = []
    for i in range(n):
        cid = '%s-%d' % (prefix or label, i)
        bot.create_card({'id': cid, 'title': cid, 'state': 'ready', 'labels': [label]})
        ids.append(cid)
        time.sleep(0.01)
    return ids


def cards(op, ids):
    return {i: op.get_card(i) for i in ids}


def runs_of(op, cid):
    return op.card_runs(cid).get('runs', [])


def ok_handler(job):
    return {'ok': job.id}


class RetryAfterProxy(Proxy):
    """The fault proxy whose 'status' answers carry Retry-After: the rule's `retry_after`
    (seconds); `times`: (monotonic time, method, path) of every request."""

    def __init__(self, target, port=0):
        self.local = threading.local()
        self.times = []
        super().__init__(target, port)
        proxy = self

        class H(self.srv.RequestHandlerClass):
            def send_response(self, code, message=None):
                super().send_response(code, message)
                rule = getattr(proxy.local, 'rule', None)
                if rule and rule.get('retry_after'):
                    self.send_header('Retry-After', str(rule['retry_after']))
        self.srv.RequestHandlerClass = H

    def rule_for(self, method, path):
        self.times.append((time.monotonic(), method, path))
        self.local.rule = super().rule_for(method, path)  # this request's, on its own thread
        return self.local.rule


class captured_log:
    """with captured_log() as lines: the boardd.worker logger's messages (WARNING and up)
    inside the block, not printed."""

    def __enter__(self):
        self.lines = []
        self.log = logging.getLogger('boardd.worker')
        self.saved = (self.log.level, self.log.propagate)
        self.handler = logging.Handler(logging.WARNING)
        self.handler.emit = lambda rec: self.lines.append(rec.getMessage())
        self.log.addHandler(self.handler)
        self.log.setLevel(logging.WARNING)
        self.log.propagate = False
        return self.lines

    def __exit__(self, *exc):
        self.log.removeHandler(self.handler)
        self.log.setLevel(self.saved[0])
        self.log.propagate = self.saved[1]
        return False


class SlowHeartbeats(Proxy):
    """The fault proxy with every run heartbeat (POST /v1/runs/{id}/heartbeat) held `seconds`
    before it is forwarded; `peak`: the most heartbeats it held at one time, `seen`: how many
    it held in all."""
    HEARTBEAT = re.compile(r'^/v1/runs/[^/]+/heartbeat$')

    def __init__(self, target, seconds, port=0):
        self.seconds = seconds
        self.held = self.peak = self.seen = 0
        self.held_lock = threading.Lock()
        super().__init__(target, port)

    def rule_for(self, method, path):
        if method != 'POST' or not self.HEARTBEAT.match(path):
            return super().rule_for(method, path)
        with self.held_lock:
            self.held += 1
            self.seen += 1
            self.peak = max(self.peak, self.held)
        try:
            time.sleep(self.seconds)  # on this request's own proxy thread
        finally:
            with self.held_lock:
                self.held -= 1
        return None  # then forwarded as is


# ---- the scenarios --------------------------------------------------------------------------

def t_claim_next_lost(px, wtok, op, bot, count):
    name = 'claim-next%s answer lost' % (' (count)' if count else '')
    label = 'cn%d' % count
    ids = mk(bot, label, 4)
    px.set([{'method': 'POST', 'path': r'/claim-next$', 'nth': [1], 'action': 'drop'}])
    c = boardd.Client(px.url, wtok, timeout=10)
    conc = 3 if count else 1
    w = boardd.Worker(c, 'default', ok_handler, concurrency=conc, labels=[label],
                      lease_ms=LEASE_MS, wait_ms=500, grace=2)
    stats, err = run_worker(w, conc, timeout=15)
    got = cards(op, ids)
    claimed = [i for i, x in got.items() if x.get('claim')]
    done = [i for i, x in got.items() if x['state'] == 'done']
    check(err is None, '%s: the worker ends without an error (%r)' % (name, err))
    check(not claimed, '%s: no card left claimed (stranded: %s)' % (name, claimed))
    check(len(done) == conc and stats.get('succeeded') == conc,
          '%s: %d cards done, stats %s (done: %s)' % (name, conc, stats, done))
    keys = [h.get('Idempotency-Key') for m, p, h, b in px.log if p.endswith('/claim-next')]
    check(len(keys) >= 2 and keys[0] and keys[0] == keys[1],
          '%s: the retry sends the first attempt\'s Idempotency-Key: %s' % (name, keys[:3]))


def t_run_create_lost(px, wtok, op, bot):
    name = 'POST /v1/runs answer lost'
    ids = mk(bot, 'rc', 1)
    px.set([{'method': 'POST', 'path': r'^/v1/runs$', 'nth': [1], 'action': 'drop'}])
    c = boardd.Client(px.url, wtok, timeout=10)
    w = boardd.Worker(c, 'default', ok_handler, labels=['rc'], lease_ms=LEASE_MS,
                      wait_ms=500, grace=2)
    stats, err = run_worker(w, 1, timeout=15)
    runs = runs_of(op, ids[0])
    check(len(runs) == 1, '%s: one run for the claim, not %d: %s' % (
        name, len(runs), [(r['id'], r['status']) for r in runs]))
    check(all(r['status'] == 'finished' for r in runs), '%s: the run finished' % name)
    check(op.get_card(ids[0])['state'] == 'done' and stats.get('succeeded') == 1,
          '%s: the card is done, stats %s' % (name, stats))


def t_raw_resend(px, bottok, op):
    name = 'raw() on a broken keep-alive connection'
    tag = 'rs%d' % os.getpid()
    c = boardd.Client(px.url, bottok, timeout=10)
    px.set([{'method': 'POST', 'path': r'^/v1/cards$', 'nth': [2], 'action': 'drop'}])
    c.create_card({'id': tag + '-a', 'title': tag + '-a', 'state': 'backlog'})
    err = None
    try:
        c.create_card({'title': tag + '-second', 'state': 'backlog'})
    except boardd.TransportError as e:
        err = e
    made = [x for x in op.iter_cards(state='backlog') if x['title'] == tag + '-second']
    check(len(made) == 1, '%s: a POST whose answer was lost is not sent twice: %d cards' % (
        name, len(made)))
    check(err is not None, '%s: the POST raises TransportError' % name)
    # with an Idempotency-Key the re-send is safe: done once, answered
    px.set([{'method': 'POST', 'path': r'^/v1/cards$', 'nth': [2], 'action': 'drop'}])
    c.create_card({'id': tag + '-b', 'title': tag + '-b', 'state': 'backlog'})
    try:
        got = c.create_card({'title': tag + '-third', 'state': 'backlog'},
                            idempotency_key=tag + '-k3')
    except boardd.BoarddError as e:
        got = e
    made = [x for x in op.iter_cards(state='backlog') if x['title'] == tag + '-third']
    check(isinstance(got, dict) and len(made) == 1,
          '%s: a POST with an Idempotency-Key is re-sent once and answered: %r, %d cards' % (
              name, got if not isinstance(got, dict) else got.get('id'), len(made)))
    # a GET is re-sent
    px.set([{'method': 'GET', 'path': r'^/v1/cards/', 'nth': [2], 'action': 'drop'}])
    c.get_card(tag + '-a')
    try:
        got = c.get_card(tag + '-b')
    except boardd.BoarddError as e:
        got = e
    check(isinstance(got, dict) and got.get('id') == tag + '-b',
          '%s: a GET is re-sent once: %r' % (name, got))
    # a POST after the server closed the idle connection still goes out (nothing was sent)
    px.set([])
    c.get_card(tag + '-a')
    conn = c._local.conn
    conn.sock.shutdown(socket.SHUT_RD)  # as if the peer had closed it: reads EOF
    try:
        c.create_card({'id': tag + '-c', 'title': tag + '-c', 'state': 'backlog'})
        ok = True
    except boardd.BoarddError as e:
        ok = e
    check(ok is True, '%s: an idle connection found closed is replaced before a POST: %r' % (
        name, ok))
    # a DELETE re-sent after its answer was lost: the re-send's 404 is the first try's doing
    c.create_card({'id': tag + '-d', 'title': tag + '-d', 'state': 'backlog'})
    px.set([{'method': 'DELETE', 'path': r'^/v1/cards/', 'nth': [1], 'action': 'drop'}])
    try:
        got = c.delete_card(tag + '-d')
    except boardd.BoarddError as e:
        got = e
    sent = [p for m, p, h, b in px.log if m == 'DELETE']
    check(got is None and len(sent) == 2,
          '%s: a DELETE re-sent after a lost answer, answered 404, is done: %r (%d sent)' % (
              name, got, len(sent)))
    try:
        op.get_card(tag + '-d')
        gone = False
    except boardd.NotFound:
        gone = True
    check(gone, '%s: the card is deleted' % name)
    try:
        got = c.delete_card(tag + '-never')
    except boardd.BoarddError as e:
        got = e
    check(isinstance(got, boardd.NotFound),
          '%s: a DELETE answered 404 at its first try is NotFound: %r' % (name, got))
    c.close()


def t_refused_final(wtok, url, op, bot, mode):
    name = 'final run write refused (%s)' % mode
    label = 'rf' + mode.replace(' ', '')
    ids = mk(bot, label, 1)

    def h(job):
        if mode == 'result':
            return {'blob': 'x' * 70000}
        if mode == 'not JSON':
            return {'at': datetime.datetime(2026, 12, 7, 9, 0)}
        raise RuntimeError('\u00e9' * 3000)  # 3000 characters, 6000 bytes
    c = boardd.Client(url, wtok, timeout=10)
    w = boardd.Worker(c, 'default', h, labels=[label], lease_ms=LEASE_MS, wait_ms=500, grace=2)
    stats, err = run_worker(w, 1, timeout=12)
    card = op.get_card(ids[0])
    runs = runs_of(op, ids[0])
    check(card.get('claim') is None, '%s: the card is released: %s' % (name, card.get('claim')))
    check(card['state'] == 'blocked', '%s: the card is filed into on_failure: %s' % (
        name, card['state']))
    check(len(runs) == 1 and runs[0]['status'] == 'failed',
          '%s: the run is failed: %s' % (name, [r['status'] for r in runs]))
    if runs:
        e = op.get_run(runs[0]['id']).get('error') or ''
        if mode == 'result':
            check('refused' in e and len(e.encode()) <= 4096,
                  '%s: the run\'s error says the result was refused: %r' % (name, e[:200]))
        elif mode == 'not JSON':
            check('result was refused' in e and 'not JSON' in e and 'datetime' in e,
                  '%s: the run\'s error says the result is not JSON: %r' % (name, e[:200]))
        else:
            check(e.startswith('RuntimeError: \u00e9') and len(e.encode()) <= 4096,
                  '%s: the error text is kept, cut to 4 KiB of UTF-8 (%d bytes)' % (
                      name, len(e.encode())))
    check(stats.get('failed') == 1, '%s: counted failed: %s' % (name, stats))


def t_renew_many(px, wtok, op, bot):
    name = 'renew of 1001 claims'
    label = 'rm'
    for lo, hi in ((0, 1000), (1000, 1001)):
        r = bot.create_cards([{'title': 'rm-%d' % i, 'state': 'ready', 'labels': [label]}
                              for i in range(lo, hi)])
        check(all(x['status'] == 201 for x in r['results']), '%s: cards made' % name)
    c = boardd.Client(px.url, wtok, timeout=30)
    w = boardd.Worker(c, 'default', ok_handler, labels=[label], lease_ms=20000, wait_ms=0)
    held = []
    while len(held) < 1001:
        ans = c.claim_next('default', w.marker, lease_ms=20000, labels=[label],
                           count=min(100, 1001 - len(held)))
        if not ans:
            break
        for p in ans['claims']:
            held.append(boardd.worker.Job(w, p['card'], p['token'], time.monotonic()))
    check(len(held) == 1001, '%s: 1001 claims held (%d)' % (name, len(held)))
    for j in held:
        w._held[j.id] = j
        j.lease_end = time.monotonic() + 1.0  # as if close to its end
    px.set([])
    t0 = time.monotonic()
    answered, _ = w._renew(list(held))
    sizes = [len(json.loads(b)['tokens']) for m, p, h, b in px.log if p == '/v1/claims/renew']
    check(answered, '%s: the renew tick is answered' % name)
    check(sizes and max(sizes) <= 1000 and sum(sizes) == 1001,
          '%s: requests of at most 1000 tokens: %s' % (name, sizes))
    check(all(j.lease_end > t0 + 10 for j in held) and not any(j.is_cancelled() for j in held),
          '%s: every lease extended, none cancelled' % name)
    c.release_many([{'card': j.id, 'marker': j.marker, 'epoch': j.epoch} for j in held[:1000]])
    c.release_many([{'card': j.id, 'marker': j.marker, 'epoch': j.epoch} for j in held[1000:]])


def t_renew_401(px, wtok, op, bot):
    name = 'renew refused whole with 401'
    ids = mk(bot, 'r401', 1)
    lease = 6000  # renew every 2 s
    seen = {}

    def h(job):
        seen['start'] = time.monotonic()
        px.set([{'method': 'POST', 'path': r'^/v1/claims/renew$', 'action': 'status',
                 'status': 401, 'code': 'unauthorized'},
                {'method': 'POST', 'path': r'/renew$', 'action': 'status',
                 'status': 401, 'code': 'unauthorized'}])
        job.wait(20)
        seen['end'] = time.monotonic()
        seen['reason'] = job.cancel_reason
        job.check()
        return 'not cancelled'
    c = boardd.Client(px.url, wtok, timeout=10)
    px.set([])
    w = boardd.Worker(c, 'default', h, labels=['r401'], lease_ms=lease, wait_ms=500, grace=2)
    stats, err = run_worker(w, 1, timeout=25)
    px.set([])
    took = seen.get('end', 1e9) - seen.get('start', 0)
    check(took < lease / 1000.0 - 1.5,
          '%s: the handler is cancelled at the first refused renew (%.1f s), not at the lease '
          'end (%.1f s): %r' % (name, took, lease / 1000.0, seen.get('reason')))
    check(stats.get('lost') == 1, '%s: counted lost: %s' % (name, stats))
    op.revoke_claim(ids[0])


def t_slow_heartbeats(target, port, wtok, op, bot):
    """N jobs, each heartbeat of their runs D seconds long: one after another the tick would
    last N x D, well past the lease, and the watch would cancel every job before the next
    renew; together it lasts about D, well within it."""
    name = 'slow run heartbeats'
    n, d, lease = 10, 1.0, 6000   # renew every 2 s; 2 + 10 x 1 s >> 6 s, 2 + 1 s << 6 s
    hold = 10.0                   # each handler: past the lease end the old tick would reach
    ids = mk(bot, 'hb', n)
    px = SlowHeartbeats(target, d, port)
    cancelled = {}

    def h(job):
        if job.wait(hold):
            cancelled[job.id] = job.cancel_reason
            job.check()
        return {'ok': job.id}
    try:
        c = boardd.Client(px.url, wtok, timeout=10)
        w = boardd.Worker(c, 'default', h, concurrency=n, labels=['hb'], lease_ms=lease,
                          wait_ms=500, grace=2)
        t0 = time.monotonic()
        stats, err = run_worker(w, n, timeout=40)
        took = time.monotonic() - t0
    finally:
        px.close()
    got = cards(op, ids)
    done = [i for i, x in got.items() if x['state'] == 'done' and not x.get('claim')]
    check(err is None, '%s: the worker ends without an error (%r)' % (name, err))
    check(not cancelled, '%s: no job cancelled (%d of %d: %s)' % (
        name, len(cancelled), n, sorted(set(cancelled.values()))))
    check(stats.get('succeeded') == n and not stats.get('lost'),
          '%s: %d jobs succeeded, none lost: %s' % (name, n, stats))
    check(len(done) == n, '%s: every card done and released (%d of %d)' % (
        name, len(done), n))
    check(px.seen >= n, '%s: the runs were heartbeated through the slow proxy (%d)' % (
        name, px.seen))
    check(px.peak > 1, '%s: heartbeats in flight together (at most %d at once, of %d '
          'heartbeats; %.1f s)' % (name, px.peak, px.seen, took))
    for i, x in got.items():  # a card left held (cancelled mid-way): given back
        if x.get('claim'):
            op.revoke_claim(i)


def t_run_cancelled(wtok, url, op, bot):
    name = 'run cancelled by an operator'
    ids = mk(bot, 'rcx', 1)
    lease = 3000  # renew (and heartbeat) every 1 s
    seen = {}

    def h(job):
        seen['job'] = job
        op.cancel_run(job.run_id)
        seen['start'] = time.monotonic()
        job.wait(10)
        seen['took'] = time.monotonic() - seen['start']
        seen['reason'] = job.cancel_reason
        job.check()
        return 'not cancelled'
    c = boardd.Client(url, wtok, timeout=10)
    w = boardd.Worker(c, 'default', h, labels=['rcx'], lease_ms=lease, wait_ms=500, grace=2)
    stats, err = run_worker(w, 1, timeout=20)
    card = op.get_card(ids[0])
    check(seen.get('reason') == 'run_cancelled' and seen.get('took', 1e9) < 5,
          '%s: the handler is cancelled at the next heartbeat (%.1f s): %r' % (
              name, seen.get('took', -1), seen.get('reason')))
    check(seen.get('job') is not None and seen['job'].parked and stats.get('parked') == 1
          and not stats.get('lost'),
          '%s: the job is parked, and counted parked, not lost: %s' % (name, stats))
    check(card['state'] == 'ready' and (card.get('claim') or {}).get('marker') == w.marker,
          '%s: the card is neither filed nor released: %s %s' % (
              name, card['state'], card.get('claim')))
    op.revoke_claim(ids[0])


def check_done_once(name, op, card_id, stats):
    """The card done and released, its one run finished, the job counted succeeded (neither
    lost nor parked); the card as read."""
    card = op.get_card(card_id)
    runs = runs_of(op, card_id)
    check(card['state'] == 'done' and card.get('claim') is None,
          '%s: the card is done and released: %s %s' % (name, card['state'], card.get('claim')))
    check([r['status'] for r in runs] == ['finished'], '%s: the run finished: %s' % (
        name, [r['status'] for r in runs]))
    check(stats.get('succeeded') == 1 and not stats.get('lost') and not stats.get('parked'),
          '%s: counted succeeded, not lost or parked: %s' % (name, stats))
    return card


def t_final_lost(px, wtok, op, bot, what):
    name = 'final write answer lost (%s)' % what
    label = 'fl' + what
    ids = mk(bot, label, 1)
    path = r'^/v1/runs/[^/]+$' if what == 'run' else r'/state$'
    px.set([{'method': 'PATCH', 'path': path, 'nth': [1], 'action': 'drop'}])
    c = boardd.Client(px.url, wtok, timeout=10)
    w = boardd.Worker(c, 'default', ok_handler, labels=[label], lease_ms=LEASE_MS,
                      wait_ms=500, grace=2)
    stats, err = run_worker(w, 1, timeout=15)
    check_done_once(name, op, ids[0], stats)


def t_final_heartbeat(px, wtok, op, bot):
    """The filing answered 503 four times (1.5 s of retries): a renew tick (every 1 s) comes
    between the run's final PATCH and the filing, and its heartbeat of the run is refused
    run_final. That is the worker's own write, not an operator's cancel: the job is neither
    parked nor cancelled, and the card is filed."""
    name = 'heartbeat after the run\'s own final write'
    ids = mk(bot, 'fhb', 1)
    px.set([{'method': 'PATCH', 'path': r'/state$', 'nth': [1, 2, 3, 4], 'action': 'status',
             'status': 503, 'code': 'store_unavailable'}])
    c = boardd.Client(px.url, wtok, timeout=10)
    w = boardd.Worker(c, 'default', ok_handler, labels=['fhb'], lease_ms=LEASE_MS, wait_ms=500,
                      grace=2)
    stats, err = run_worker(w, 1, timeout=15)
    beats = [p for m, p, h, b in px.log if p.endswith('/heartbeat')]
    px.set([])
    card = check_done_once(name, op, ids[0], stats)
    check(beats, '%s: the run was heartbeated meanwhile' % name)
    if card.get('claim'):
        op.revoke_claim(ids[0])


def t_final_5xx(px, wtok, op, bot, what):
    """The run's final PATCH answered 500 once, or the filing answered 502 (a proxy's, no
    problem code of boardd's) twice: sent again after a backoff, never taken for a refusal."""
    name = 'final write answered %s' % ('500 (run)' if what == 'run' else '502 (state)')
    label = 'f5' + what
    ids = mk(bot, label, 1)
    if what == 'run':
        rule = {'method': 'PATCH', 'path': r'^/v1/runs/[^/]+$', 'nth': [1], 'action': 'status',
                'status': 500, 'code': 'internal'}
    else:
        rule = {'method': 'PATCH', 'path': r'/state$', 'nth': [1, 2], 'action': 'status',
                'status': 502, 'code': 'bad_gateway'}
    px.set([rule])
    c = boardd.Client(px.url, wtok, timeout=10)
    w = boardd.Worker(c, 'default', ok_handler, labels=[label], lease_ms=LEASE_MS,
                      wait_ms=500, grace=2)
    stats, err = run_worker(w, 1, timeout=15)
    sent = [p for m, p, h, b in px.log if m == 'PATCH' and re.search(rule['path'], p)]
    px.set([])
    check(len(sent) == len(rule['nth']) + 1, '%s: the write sent again, %d times in all' % (
        name, len(sent)))
    check_done_once(name, op, ids[0], stats)


def t_final_bounded(px, wtok, op, bot):
    """The run's final PATCH answered 500 every time: after WRITE_RETRY_S (1 s here) of tries
    the worker gives the claim up, an error."""
    name = 'final write failing for longer than WRITE_RETRY_S'
    ids = mk(bot, 'f5b', 1)
    px.set([{'method': 'PATCH', 'path': r'^/v1/runs/[^/]+$', 'action': 'status',
             'status': 500, 'code': 'internal'}])
    saved, boardd.worker.WRITE_RETRY_S = boardd.worker.WRITE_RETRY_S, 1.0
    try:
        c = boardd.Client(px.url, wtok, timeout=10)
        w = boardd.Worker(c, 'default', ok_handler, labels=['f5b'], lease_ms=LEASE_MS,
                          wait_ms=500, grace=2)
        with captured_log():
            stats, err = run_worker(w, 1, timeout=15)
    finally:
        boardd.worker.WRITE_RETRY_S = saved
    sent = [p for m, p, h, b in px.log if m == 'PATCH' and '/v1/runs/' in p]
    px.set([])
    check(3 <= len(sent) <= 6, '%s: the write sent %d times in 1 s' % (name, len(sent)))
    check(err is None and stats.get('errors') == 1 and not stats.get('succeeded'),
          '%s: given up, counted an error: %s %r' % (name, stats, err))
    op.revoke_claim(ids[0])


def t_retry_after(target, wtok, op, bot):
    name = 'Retry-After'
    ids = mk(bot, 'ra', 1)
    px = RetryAfterProxy(target)
    px.set([{'method': 'POST', 'path': r'/claim-next$', 'nth': [1], 'action': 'status',
             'status': 429, 'code': 'too_many_requests', 'retry_after': 2},
            {'method': 'PATCH', 'path': r'^/v1/runs/[^/]+$', 'nth': [1], 'action': 'status',
             'status': 503, 'code': 'store_unavailable', 'retry_after': 2}])
    try:
        c = boardd.Client(px.url, wtok, timeout=10)
        w = boardd.Worker(c, 'default', ok_handler, labels=['ra'], lease_ms=LEASE_MS,
                          wait_ms=500, grace=2)
        stats, err = run_worker(w, 1, timeout=20)
    finally:
        px.close()
    for method, path in (('POST', r'/claim-next$'), ('PATCH', r'^/v1/runs/[^/]+$')):
        at = [t for t, m, p in px.times if m == method and re.search(path, p)]
        gap = at[1] - at[0] if len(at) > 1 else -1
        check(1.9 <= gap <= 4, '%s: %s %s tried again %.2f s after a Retry-After: 2' % (
            name, method, path, gap))
    check(err is None, '%s: the worker ends without an error (%r)' % (name, err))
    check_done_once(name, op, ids[0], stats)


def t_renew_races_release(px, wtok, op, bot):
    """A renew sent while the job works, held by the proxy until the job has filed and
    released its card, then forwarded: refused (409), as the release's doing, not a loss."""
    name = 'a renew answered after the job\'s own release'
    ids = mk(bot, 'rrr', 1)
    px.set([{'method': 'POST', 'path': r'^/v1/claims/renew$', 'nth': [1], 'action': 'hold',
             'seconds': 1.0}])

    def h(job):
        bt.wait_for(lambda: any(p == '/v1/claims/renew' for m, p, hd, b in list(px.log)),
                    timeout=5, final=False)
        return {'ok': job.id}
    c = boardd.Client(px.url, wtok, timeout=10)
    w = boardd.Worker(c, 'default', h, labels=['rrr'], lease_ms=LEASE_MS, wait_ms=500, grace=2)
    with captured_log() as lines:
        stats, err = run_worker(w, 1, timeout=15)
        time.sleep(1.5)  # the held renew is answered after run() has returned
    px.set([])
    lost = [x for x in lines if 'claim lost' in x]
    check(not lost, '%s: no claim lost logged: %s' % (name, lost))
    check_done_once(name, op, ids[0], stats)


def t_late_claim(px, wtok, op, bot):
    """A long-poll answered late: lease 6 s, the card created 4.5 s into a 5 s wait. The local
    lease counts from the send (1.5 s left at the answer); the first renew goes out at once,
    not renew_after_ms (2 s) after the answer, so the job outlives the first lease."""
    name = 'card claimed late in a long-poll'
    lease = 6000
    px.set([])
    made = []

    def later():
        end = time.monotonic() + 10
        while time.monotonic() < end and not any(
                p.endswith('/claim-next') for m, p, h, b in list(px.log)):
            time.sleep(0.01)
        time.sleep(4.5)
        made.extend(mk(bot, 'late', 1))
    threading.Thread(target=later, daemon=True).start()
    seen = {}

    def h(job):
        seen['claimed'] = time.monotonic()
        if job.wait(4.0):  # past the first lease's local end
            seen['cancelled'] = (job.cancel_reason, time.monotonic() - seen['claimed'])
            job.check()
        return {'ok': job.id}
    c = boardd.Client(px.url, wtok, timeout=10)
    w = boardd.Worker(c, 'default', h, labels=['late'], lease_ms=lease, wait_ms=5000, grace=2)
    stats, err = run_worker(w, 1, timeout=20)
    card = op.get_card(made[0]) if made else {}
    check(made and 'claimed' in seen, '%s: the card was claimed' % name)
    check('cancelled' not in seen, '%s: the job is not cancelled (%r)' % (
        name, seen.get('cancelled')))
    check(card.get('state') == 'done' and card.get('claim') is None and
          stats.get('succeeded') == 1 and not stats.get('lost'),
          '%s: the card is done and released, stats %s' % (name, stats))
    if card.get('claim'):
        op.revoke_claim(made[0])


def t_claim_retry_lease(px, wtok, op, bot):
    """claim-next's answer lost, then three tries answered 503 (3 s of backoff): the replay
    answers the first try's claim, whose server lease began after the first send. The local
    lease counts from that send, not from the last retry's (it would outlive the server's)."""
    name = 'claim-next retried: the lease from the first try'
    lease = 30000  # no renew before the handler looks
    ids = mk(bot, 'clr', 1)
    px.set([{'method': 'POST', 'path': r'/claim-next$', 'nth': [1], 'action': 'drop'},
            {'method': 'POST', 'path': r'/claim-next$', 'nth': [1, 2, 3], 'action': 'status',
             'status': 503, 'code': 'store_unavailable'}])
    seen = {}

    def h(job):
        seen['lease_end'] = job.lease_end
        return {'ok': job.id}
    c = boardd.Client(px.url, wtok, timeout=10)
    w = boardd.Worker(c, 'default', h, labels=['clr'], lease_ms=lease, wait_ms=500, grace=2)
    t0 = time.monotonic()  # the first try is sent just after
    stats, err = run_worker(w, 1, timeout=15)
    keys = [hd.get('Idempotency-Key') for m, p, hd, b in px.log if p.endswith('/claim-next')]
    px.set([])
    card = op.get_card(ids[0])
    check(len(keys) >= 5 and len(set(keys[:5])) == 1,
          '%s: five tries with one Idempotency-Key: %s' % (name, keys[:5]))
    over = seen.get('lease_end', 1e18) - (t0 + lease / 1000.0)
    check(over < 0.5, '%s: the local lease ends %.2f s after the first try\'s send + lease '
          '(the last retry was sent 3 s after the first)' % (name, over))
    check(card['state'] == 'done' and card.get('claim') is None and
          stats.get('succeeded') == 1, '%s: the card is done, stats %s' % (name, stats))


def t_async_cancel(wtok, url, op, bot):
    """AsyncWorker.run() under asyncio.wait_for: the timeout cancels run(), which stops the
    worker as stop() does and returns (raises) once its threads are done; asyncio.run()
    returns; nothing claims the board's cards afterwards."""
    name = 'AsyncWorker.run() cancelled'
    ids = mk(bot, 'acx', 2)

    async def h(job):
        await asyncio.sleep(0.5)
        return {'ok': job.id}
    c = boardd.Client(url, wtok, timeout=10)
    aw = boardd.AsyncWorker(c, 'default', h, labels=['acx'], lease_ms=LEASE_MS, wait_ms=500,
                            grace=2)
    before = set(threading.enumerate())
    out = {}

    async def main():
        try:
            await asyncio.wait_for(aw.run(handle_signals=False), 2.0)
        except asyncio.TimeoutError:
            out['timeout'] = True
    t = threading.Thread(target=lambda: asyncio.run(main()), daemon=True)
    t.start()
    t.join(15)
    ended = not t.is_alive()
    end = time.monotonic() + 3  # a heartbeat thread ends on its own, just after
    while time.monotonic() < end:
        left = [x.name for x in set(threading.enumerate()) - before
                if x.name.startswith(('boardd-', 'asyncio_'))]
        if not left:
            break
        time.sleep(0.05)
    check(ended and out.get('timeout'), '%s: asyncio.run() returns after the timeout' % name)
    check(not left, '%s: no thread of the worker left: %s' % (name, sorted(left)))
    more = mk(bot, 'acx', 1, prefix='acx-after')
    time.sleep(1.5)
    got = cards(op, ids + more)
    held = [i for i, x in got.items() if x.get('claim')]
    check(not held and all(x['state'] in ('done', 'ready') for x in got.values()),
          '%s: no card held, none filed as failed: %s' % (
              name, {i: (x['state'], bool(x.get('claim'))) for i, x in got.items()}))
    check(got[more[0]]['state'] == 'ready', '%s: a card made afterwards is not claimed' % name)
    if not ended:
        aw.stop()
        t.join(10)
    for i in held:
        op.revoke_claim(i)


def t_base_exception(wtok, url, op, bot):
    """SystemExit from a handler: the job fails as for an exception (its run failed, the card
    filed into blocked and released), the worker stops claiming (the next card is left alone)
    and run() raises the SystemExit once stopped. Another BaseException fails its job and the
    worker goes on with the next card."""
    name = 'a handler raising SystemExit'
    a, b = mk(bot, 'bx', 2)

    def h(job):
        raise SystemExit(3)
    c = boardd.Client(url, wtok, timeout=10)
    w = boardd.Worker(c, 'default', h, labels=['bx'], lease_ms=LEASE_MS, wait_ms=500, grace=2)
    out = {}

    def go():
        try:
            out['stats'] = w.run(handle_signals=False)
        except BaseException as e:  # noqa: BLE001 - what run() raises is the point
            out['raised'] = e
    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(15)
    ended = not t.is_alive()
    if not ended:
        w.stop()
        t.join(w.grace * 2 + 10)
    raised = out.get('raised')
    check(ended and isinstance(raised, SystemExit) and raised.code == 3,
          '%s: run() stops and raises it (ended %s, %r)' % (name, ended, raised))
    card = op.get_card(a)
    runs = runs_of(op, a)
    check(card['state'] == 'blocked' and card.get('claim') is None,
          '%s: the card is filed into blocked and released: %s %s' % (
              name, card['state'], card.get('claim')))
    check([r['status'] for r in runs] == ['failed'] and
          'SystemExit' in (op.get_run(runs[0]['id']).get('error') or ''),
          '%s: its run failed, saying SystemExit: %s' % (name, [r['status'] for r in runs]))
    card = op.get_card(b)
    check(card['state'] == 'ready' and card.get('claim') is None and not runs_of(op, b),
          '%s: the worker stopped claiming: the next card is untouched (%s, %s)' % (
              name, card['state'], card.get('claim')))
    check(w.stats.get('failed') == 1, '%s: counted failed: %s' % (name, w.stats))
    for i in (a, b):
        if op.get_card(i).get('claim'):
            op.revoke_claim(i)

    name = 'a handler raising another BaseException'

    class Fatal(BaseException):
        pass
    ids = mk(bot, 'bf', 2)

    def h2(job):
        if job.id == ids[0]:
            raise Fatal('not an Exception')
        return {'ok': job.id}
    w = boardd.Worker(c, 'default', h2, labels=['bf'], lease_ms=LEASE_MS, wait_ms=500, grace=2)
    stats, err = run_worker(w, 2, timeout=15)
    got = cards(op, ids)
    check(err is None and stats.get('failed') == 1 and stats.get('succeeded') == 1,
          '%s: its job fails, the next is done: %s %r' % (name, stats, err))
    check((got[ids[0]]['state'], got[ids[1]]['state']) == ('blocked', 'done') and
          not any(x.get('claim') for x in got.values()),
          '%s: filed blocked and done, none left claimed: %s' % (
              name, [(x['state'], x.get('claim')) for x in got.values()]))
    for i, x in got.items():
        if x.get('claim'):
            op.revoke_claim(i)


def t_release_lost(px, wtok, op, bot):
    """A retry release (boardd.Retry) whose answer is lost: sent again, refused 409 (the first
    did it); the card is read back: released, so the job counts retried, not lost, and no
    "claim lost" is logged. Then a retry release refused 422: counted an error, not retried."""
    name = 'a retry release whose answer is lost'
    ids = mk(bot, 'rl', 1)
    px.set([{'method': 'POST', 'path': r'/release$', 'nth': [1], 'action': 'drop'}])

    def h(job):
        raise boardd.Retry('later')
    c = boardd.Client(px.url, wtok, timeout=10)
    w = boardd.Worker(c, 'default', h, labels=['rl'], lease_ms=LEASE_MS, wait_ms=500, grace=2)
    with captured_log() as lines:
        stats, err = run_worker(w, 1, timeout=15)
    sent = [p for m, p, hd, b in px.log if m == 'POST' and p.endswith('/release')]
    px.set([])
    lost = [x for x in lines if 'claim lost' in x]
    card = op.get_card(ids[0])
    check(len(sent) == 2 and not lost,
          '%s: sent again, no claim lost logged (%d sent): %s' % (name, len(sent), lost))
    check(stats.get('retried') == 1 and not stats.get('lost') and not stats.get('errors'),
          '%s: counted retried: %s' % (name, stats))
    check(card.get('claim') is None and card.get('attempts') == 1,
          '%s: the card released with one attempt: %s %s' % (
              name, card.get('claim'), card.get('attempts')))

    name = 'a retry release refused'
    ids = mk(bot, 'rr', 1)
    px.set([{'method': 'POST', 'path': r'/release$', 'action': 'status', 'status': 422,
             'code': 'transition_rejected'}])
    w = boardd.Worker(c, 'default', h, labels=['rr'], lease_ms=LEASE_MS, wait_ms=500, grace=2)
    stats, err = run_worker(w, 1, timeout=15)
    px.set([])
    check(not stats.get('retried') and stats.get('errors') == 1,
          '%s: counted an error, not retried: %s' % (name, stats))
    if op.get_card(ids[0]).get('claim'):
        op.revoke_claim(ids[0])


def main():
    if not os.access(BOARDD, os.X_OK):
        bt.skip_or_fail('no boardd binary at %s' % BOARDD)
    base = int(os.environ.get('BOARDD_TEST_PORT_BASE', '0'))
    tmp = tempfile.mkdtemp(prefix='boardd-faults-py-')
    tokens = os.path.join(tmp, 'tokens.json')
    wtok = bt.token_add(BOARDD, tokens, 'fault-worker', ['worker'])
    optok = bt.token_add(BOARDD, tokens, 'fault-op', ['operator', 'bot'])
    srv = bt.Server(BOARDD, os.path.join(tmp, 'data'), tokens, tmp, keep_port=bool(base),
                    extra=['--log-format', 'text', '--max-connections-per-ip', '4096'])
    if base:
        srv.port = base
    srv.started()
    px = Proxy(srv.port, base + 1 if base else 0)
    op = boardd.Client(srv.url, optok, timeout=30)
    try:
        t_raw_resend(px, optok, op)
        t_claim_next_lost(px, wtok, op, op, 0)
        t_claim_next_lost(px, wtok, op, op, 1)
        t_run_create_lost(px, wtok, op, op)
        t_refused_final(wtok, srv.url, op, op, 'result')
        t_refused_final(wtok, srv.url, op, op, 'error')
        t_refused_final(wtok, srv.url, op, op, 'not JSON')
        t_final_lost(px, wtok, op, op, 'state')
        t_final_lost(px, wtok, op, op, 'run')
        t_renew_401(px, wtok, op, op)
        t_slow_heartbeats(srv.port, base + 2 if base else 0, wtok, op, op)
        t_run_cancelled(wtok, srv.url, op, op)
        t_final_heartbeat(px, wtok, op, op)
        t_final_5xx(px, wtok, op, op, 'run')
        t_final_5xx(px, wtok, op, op, 'state')
        t_final_bounded(px, wtok, op, op)
        t_retry_after(srv.port, wtok, op, op)
        t_renew_races_release(px, wtok, op, op)
        t_late_claim(px, wtok, op, op)
        t_claim_retry_lease(px, wtok, op, op)
        t_async_cancel(wtok, srv.url, op, op)
        t_renew_many(px, wtok, op, op)
        t_base_exception(wtok, srv.url, op, op)
        t_release_lost(px, wtok, op, op)
    finally:
        px.close()
        srv.stop()
    return bt.summary('test_faults_python')


if __name__ == '__main__':
    sys.exit(main())
