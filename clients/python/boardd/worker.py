"""The worker (DESIGN §19, §12, §17, §18, §20): Worker(client, board, handler, concurrency=N)
claims cards with claim-next (long-poll; `count` when the server takes it), creates a run per
card, calls handler(job) on a thread of its own, and meanwhile keeps every held claim alive:
one renew per tick for all of them (POST /v1/claims/renew; one by one where the server has no
such route) and a heartbeat of each run, the heartbeats of a tick sent together (a slow server
does not make the tick N heartbeats long). When the handler returns, the run gets its result
(or its error) and the card is filed (on_success / on_failure, or back to the pool with
`retry`) and released, each write fenced by the claim's epoch. claim-next and the run's create
carry an Idempotency-Key kept across their retries (a lost answer claims nothing twice); a
write that gets no answer, a 5xx or a 429 is sent again with a backoff (longer when the answer
says Retry-After) while the claim is renewed, for WRITE_RETRY_S at most; a final write refused
4xx (a result over the server's limit, the run pruned) fails the run with a short error and
files the card as a failed job, never leaving it held. A card that cannot be filed (its column
refused: renamed, removed) or whose run cannot be started is released with an attempt counted
(§17 `retry`), so it comes back after a backoff and at max_attempts is filed into the failed
column by the server, never claimed again at once for ever; run() checks before it claims
anything that on_success and on_failure are columns of the board. An answer to claim-next that
is not one (a proxy's page) is taken as no answer: said, and tried again after a backoff.

The claim can be lost while the handler works: a renew refused (the claim was revoked,
reclaimed, or the card deleted; not one refused after the job's own release was sent), or no
renew acknowledged before the lease ends (measured here, from the moment the claim-next — its
first try, when retried — and then each acknowledged renew was sent: a worker cut off from its
server knows when it stopped owning the card). Each renew is due renew_after_ms after that
same moment, so the first goes out at once for a claim that came late in a long-poll or after
retries; a claim whose lease is over when its answer arrives is renewed before anything else,
and lost when that is not acknowledged. Then job.cancelled is set at once and nothing more is
written for that card: the job's own writes (job.comment, job.output, ...) raise ClaimLost
before they are sent, and the server would refuse them anyway (claim_conflict).

Stopping (stop(), or SIGTERM/SIGINT while run() holds the main thread): no new claims; running
jobs get `grace` seconds to finish; then they are cancelled (job.cancel_reason 'stopping'), a
job that ends by raising gets its run marked failed_resumable and its claim released, and a
handler that does not return within a further `grace` has its claim released for it. A
handler that raises SystemExit or KeyboardInterrupt fails its job as an exception does, then
stops the worker so; run() raises it once the worker has stopped.
"""
import concurrent.futures
import logging
import os
import queue
import signal
import socket
import threading
import time
import uuid

from .errors import (BadRequest, Busy, ClaimConflict, ClaimLost, BoarddError, Forbidden,
                     IdempotencyKeyInFlight, MethodNotAllowed, NotFound, RunFinal,
                     StoreUnavailable, TransportError, UnexpectedAnswer, error_for)

__all__ = ['Worker', 'Job', 'Retry']

log = logging.getLogger('boardd.worker')
# no answer, or none to go by (an UnexpectedAnswer: a proxy's page for claim-next's)
_TRANSIENT = (TransportError, UnexpectedAnswer, StoreUnavailable, Busy, IdempotencyKeyInFlight)
_now = time.monotonic
RENEW_MANY_MAX = 1000       # tokens per POST /v1/claims/renew (the server's limit)
RUN_ERROR_MAX = 4096        # a run's error, bytes of UTF-8 (CORE_RUN_ERROR_MAX)
HEARTBEATS_MAX = 16         # run heartbeats in flight at once (threads; one per slot below it)
WRITE_RETRY_S = 60.0        # one write of a job is retried this long at most (then given up)
RETRY_AFTER_MAX = 60.0      # a Retry-After is waited at most this long (a job's write: one lease)


def _again(e):
    """An answer that says "the same request again, later": none at all, a 5xx (but 501), a
    429, or the first request with this Idempotency-Key still being served."""
    return isinstance(e, _TRANSIENT) or e.status == 429 or (e.status >= 500 and e.status != 501)


def _pause(delay, e, limit=RETRY_AFTER_MAX):
    """The wait before the next try after e: the backoff `delay`, or the answer's Retry-After
    (a 429 or 503) when that is longer, at most `limit` seconds."""
    ra = getattr(e, 'retry_after', None)
    if ra and e.status in (429, 503) and ra > delay:
        return max(delay, min(ra, limit))
    return delay


def _cut(text, limit):
    """text cut to at most `limit` bytes of UTF-8, never inside a character."""
    b = text.encode('utf-8', 'replace')
    if len(b) <= limit:
        return text
    return b[:limit].decode('utf-8', 'ignore')


def _claims_of(ans):
    """The [{card, token}] of a claim-next answer ({claims: [...]} or one {card, token}), or
    None when it is not one: each card an object with an id, each token with marker and epoch."""
    if not isinstance(ans, dict):
        return None
    pairs = ans.get('claims') if 'claims' in ans else [ans]
    if not isinstance(pairs, list):
        return None
    for p in pairs:
        card = p.get('card') if isinstance(p, dict) else None
        tok = p.get('token') if isinstance(p, dict) else None
        if not (isinstance(card, dict) and isinstance(card.get('id'), str) and
                isinstance(tok, dict) and isinstance(tok.get('marker'), str) and
                isinstance(tok.get('epoch'), int)):
            return None
    return pairs


def _key():
    """A fresh Idempotency-Key: one per logical call, reused by each of its retries."""
    return uuid.uuid4().hex


class Retry(Exception):
    """Raised by a handler: the card goes back to the pool with one more attempt and a backoff
    (DESIGN §17 `retry`), instead of being filed into on_failure."""


class Job:
    """One claimed card while its handler runs. card: the card (dict); id, board, marker,
    epoch, lease_ms; run_id; cancelled: a threading.Event set when the claim is lost (or the
    worker stops past its grace), with cancel_reason saying which."""

    def __init__(self, worker, card, token, sent_at):
        self.worker = worker
        self.client = worker.client
        self.card = card
        self.id = card['id']
        self.board = card.get('board', worker.board)
        self.marker = token['marker']
        self.epoch = token['epoch']
        self.lease_ms = int(token.get('lease_ms') or 60000)
        self.renew_after_ms = int(token.get('renew_after_ms') or self.lease_ms // 3)
        self.lease_end = sent_at + self.lease_ms / 1000.0  # local, from the claim's send time
        self.renew_at = sent_at + self.renew_after_ms / 1000.0  # the next renew is due
        self.run_id = None
        self.cancelled = threading.Event()
        self.cancel_reason = None
        self.lost = False       # the claim is gone (cancel_reason may still say 'stopping')
        self._mu = threading.Lock()  # cancelled, cancel_reason, lost and _on_cancel together
        self.parked = False     # an operator cancelled the run: neither filed nor released
        self.abandoned = False  # released for the handler after the grace: it writes nothing
        self.final = False      # its run's final status is being written: a run_final is ours
        self.releasing = False  # its release was sent: a renew refused now is that release's doing
        self._on_cancel = []
        self._beat = None       # the run's last heartbeat (a Future; the renew thread's own)

    # ---- the cancel token ----

    def is_cancelled(self):
        return self.cancelled.is_set()

    def wait(self, timeout=None):
        """Sleeps up to timeout seconds; True as soon as the job is cancelled."""
        return self.cancelled.wait(timeout)

    def check(self):
        """Raises ClaimLost when the job is cancelled."""
        if self.cancelled.is_set():
            raise ClaimLost(0, 'claim_lost', 'card %s: %s' % (self.id, self.cancel_reason))

    def on_cancel(self, fn):
        """fn() is called (once, from the thread that sees the loss) when the job is cancelled."""
        with self._mu:
            self._on_cancel.append(fn)
            now = self.cancelled.is_set()
        if now:  # else the cancel, which had not taken the lock yet, calls it
            fn()

    def _cancel(self, reason):
        """Cancels the job (the first reason stays). True when this call cancelled it."""
        with self._mu:
            if self.cancelled.is_set():
                return False
            self.cancel_reason = reason
            self.cancelled.set()
            fns = list(self._on_cancel)
        for fn in fns:
            try:
                fn()
            except Exception:  # noqa: BLE001 - a callback must not stop the others
                log.exception('on_cancel callback')
        return True

    def _lost(self):
        """The claim is gone: recorded apart from cancel_reason, which may say 'stopping' (the
        job was cancelled by a stop before its claim was then lost)."""
        return self.lost

    # ---- the holder's own writes, fenced, refused locally once the claim is lost ----

    def _fenced(self, fn):
        self.check()
        try:
            return fn()
        except ClaimConflict:
            self.worker._lose(self, 'claim_conflict')
            raise

    def comment(self, body):
        return self._fenced(lambda: self.client.comment(self.id, body, self.marker, self.epoch))

    def output(self, text):
        """Appends to the run's output (§20); a server without the route: nothing (None)."""
        if self.worker._has['output'] is False or self.run_id is None:
            self.check()
            return None
        try:
            r = self._fenced(lambda: self.client.append_output(self.run_id, self.marker, text))
            self.worker._has['output'] = True
            return r
        except (NotFound, MethodNotAllowed) as e:
            # the run exists: the route does not (a server before §20)
            if self.worker._has['output'] is None and 'route' in e.detail:
                self.worker._has['output'] = False
                return None
            raise

    def update_run(self, **fields):
        return self._fenced(lambda: self.client.update_run(self.run_id, self.marker, **fields))

    def set_awaiting_input(self, awaiting_input):
        return self._fenced(lambda: self.client.set_awaiting_input(
            self.id, self.marker, self.epoch, awaiting_input))

    def set_state(self, to, reason=None):
        """Moves the card (still held) to another column."""
        return self._fenced(lambda: self.client.set_state(
            self.id, to, reason=reason, marker=self.marker, epoch=self.epoch))


class Worker:
    """Worker(client, board, handler, concurrency=1, columns=None, labels=None, ...).

    handler(job) -> result (any JSON value) is success; raising Retry sends the card back
    (§17); any other exception is a failure (its text becomes the run's error), a
    BaseException too (SystemExit, KeyboardInterrupt: the job fails, then the worker stops
    as stop() does and run() raises it). on_failure may be 'retry' to send every failure back.
    on_success and on_failure must be columns of the board: run() checks that before it claims
    anything. lease_ms: None for the server's default. wait_ms: the claim-next long-poll.
    marker: the claims' marker (default host-pid-random)."""

    def __init__(self, client, board, handler, concurrency=1, columns=None, labels=None,
                 lease_ms=None, on_success='done', on_failure='blocked', marker=None,
                 wait_ms=5000, grace=10.0):
        if concurrency < 1:
            raise ValueError('concurrency must be >= 1')
        self.client = client
        self.board = board
        self.handler = handler
        self.concurrency = concurrency
        self.columns = list(columns) if columns else None
        self.labels = list(labels) if labels else None
        self.lease_ms = lease_ms
        self.on_success = on_success
        self.on_failure = on_failure
        self.marker = marker or '%s-%d-%s' % (socket.gethostname()[:40], os.getpid(),
                                              uuid.uuid4().hex[:8])
        self.wait_ms = wait_ms
        self.grace = grace
        self.stats = {k: 0 for k in ('claimed', 'succeeded', 'failed', 'retried', 'lost',
                                     'stopped', 'parked', 'errors')}
        # what the server has (None: not known yet): claim-next count, batched renew (§18),
        # release with retry (§17), run output (§20)
        self._has = {'count': None, 'renew_many': None, 'retry': None, 'output': None}
        self._cv = threading.Condition()
        self._held = {}         # card id -> Job
        self._free = concurrency
        self._jobs = queue.Queue()
        self._stopping = threading.Event()
        self._finished = threading.Event()
        self._claimed_total = 0
        self._max_jobs = None
        self._error = None
        self._exit = None       # a handler's SystemExit or KeyboardInterrupt: run() raises it
        self._beats = None      # the heartbeat threads (an executor): made at the first one

    # ---- public ----

    def stop(self):
        """Stops claiming; run() then lets running jobs finish within the grace."""
        self._stopping.set()
        with self._cv:
            self._cv.notify_all()

    def run(self, max_jobs=None, handle_signals=True):
        """Works until stop() (or SIGTERM/SIGINT), or until max_jobs cards were claimed and
        finished. Returns the stats. Before anything is claimed, on_success and on_failure are
        checked to be columns of the board: ValueError when one is not. A refusal of
        claim-next itself (403, 422: a wrong board, column or token) stops the worker and is
        raised; so is a handler's SystemExit or KeyboardInterrupt, once the worker stopped."""
        self._max_jobs = max_jobs
        old = {}
        if handle_signals and threading.current_thread() is threading.main_thread():
            for s in (signal.SIGTERM, signal.SIGINT):
                old[s] = signal.signal(s, lambda *_: self.stop())
        try:
            self._check_columns()
            if self._stopping.is_set():  # stopped while the board could not be read
                return dict(self.stats)
            return self._run()
        finally:
            for s, h in old.items():
                signal.signal(s, h)

    def _check_columns(self):
        """on_success and on_failure (but 'retry') are columns of the board, as boardctl checks
        its --on-success and --on-failure: a filing into a column the board does not have is
        refused (422), and the card would come back for ever. ValueError when one is not; the
        board unreadable for want of an answer: tried again (until stop()); a token that may
        not read it (403): not checked, the server judges each filing."""
        delay = 0.2
        while not self._stopping.is_set():
            try:
                board = self.client.get_board(self.board)
                break
            except Forbidden as e:
                log.warning('board %s: its columns are not checked: %s', self.board, e)
                return
            except BoarddError as e:
                if not _again(e):
                    raise
                wait = _pause(delay, e)
                log.warning('board %s: %s; again in %.1f s', self.board, e, wait)
                self._stopping.wait(wait)
                delay = min(delay * 2, 5.0)
        else:
            return
        cols = [c.get('name') for c in board.get('columns') or []
                if isinstance(c, dict)] if isinstance(board, dict) else []
        for opt, col in (('on_success', self.on_success), ('on_failure', self.on_failure)):
            if opt == 'on_failure' and col == 'retry':
                continue
            if col not in cols:
                raise ValueError('%s=%r: board %s has no column %r (its columns: %s)' % (
                    opt, col, self.board, col, ', '.join(str(c) for c in cols)))

    def _run(self):
        threads = [threading.Thread(target=self._slot, name='boardd-job-%d' % i, daemon=True)
                   for i in range(self.concurrency)]
        threads += [threading.Thread(target=self._renew_loop, name='boardd-renew', daemon=True),
                    threading.Thread(target=self._watch_loop, name='boardd-watch', daemon=True)]
        pollers = [threading.Thread(target=self._poll_loop, name='boardd-poll-0', daemon=True)]
        for t in threads + pollers:
            t.start()
        try:
            while not self._stopping.is_set():
                self._stopping.wait(0.2)
                if self._all_done():
                    break
                # claim-next refused count: claim one card at a time, one poller per slot
                if self._has['count'] is False and len(pollers) == 1 and self.concurrency > 1:
                    for i in range(1, self.concurrency):
                        t = threading.Thread(target=self._poll_loop, daemon=True,
                                             name='boardd-poll-%d' % i)
                        t.start()
                        pollers.append(t)
            self._stopping.set()
            stopped_at = _now()  # the grace counts from here
            with self._cv:
                self._cv.notify_all()
            # a long-poll in flight may still claim: its poller gives the cards back
            for t in pollers:
                t.join(self.wait_ms / 1000.0 + self.client.timeout)
            self._drain(stopped_at)
        finally:
            self._finished.set()
            with self._cv:
                self._cv.notify_all()
                beats, self._beats = self._beats, None
            if beats is not None:  # a heartbeat still out is not waited for: the jobs are over
                beats.shutdown(wait=False, cancel_futures=True)
            for _ in range(self.concurrency):
                self._jobs.put(None)
        if self._exit is not None:
            raise self._exit
        if self._error:
            raise self._error
        return dict(self.stats)

    # ---- claiming ----

    def _all_done(self):
        with self._cv:
            return (self._max_jobs is not None and self._claimed_total >= self._max_jobs
                    and not self._held and self._free == self.concurrency)

    def _poll_loop(self):
        delay = 0.2
        # (key, n, use_count, sent) of a claim-next that got no answer: retried as is; its
        # claims' leases count from `sent`, the first try's (which may have been the claim)
        pending = None
        while True:
            if self._stopping.is_set():
                if pending is not None:  # it may have claimed: its answer, given back at once
                    self._reclaim_pending(pending)
                return
            with self._cv:
                if pending is not None:
                    n = pending[1]
                    while self._free < n and not self._stopping.is_set():
                        self._cv.wait(1.0)
                else:
                    while self._free == 0 and not self._stopping.is_set():
                        self._cv.wait(1.0)
                if self._stopping.is_set():
                    continue
                if pending is None:
                    n = self._free if self._has['count'] is not False else 1
                    if self._max_jobs is not None:
                        n = min(n, self._max_jobs - self._claimed_total)
                        if n <= 0:
                            return
                    n = min(n, 100)
                self._free -= n
                self._claimed_total += n
            if pending is None:
                pending = (_key(), n, n > 1 and self._has['count'] is not False, _now())
            got = []
            try:
                key, n, use_count, sent = pending
                got = self._claim(n, key, use_count, sent)
                pending = None
                delay = 0.2
            except BoarddError as e:
                # no answer, or one that is none (UnexpectedAnswer): the same key again, a lost
                # answer claims nothing more
                if _again(e):
                    wait = _pause(delay, e)
                    log.warning('claim-next: %s; again in %.1f s', e, wait)
                    self._stopping.wait(wait)
                    delay = min(delay * 2, 5.0)
                else:
                    pending = None
                    log.error('claim-next refused: %s', e)
                    self._error = e
                    self.stop()
            except Exception:  # noqa: BLE001 - never the poller's silent end: said, tried again
                log.exception('claim-next: again in %.1f s', delay)
                self._stopping.wait(delay)
                delay = min(delay * 2, 5.0)
            with self._cv:
                self._free += n - len(got)
                self._claimed_total -= n - len(got)
                self._cv.notify_all()
            for job in got:
                if self._stopping.is_set():  # claimed while stopping: given back at once
                    self._release(job)
                    self._slot_done(job)
                else:
                    self._jobs.put(job)

    def _reclaim_pending(self, pending):
        """Stopping with a claim-next unanswered: its key asked once more (the server answers
        what it did, if it did anything) and whatever it claimed is released."""
        key, n, use_count, sent = pending
        try:
            jobs = self._claim(n, key, use_count, sent)
        except BoarddError as e:
            log.warning('claim-next (stopping): %s', e)
            return
        for job in jobs:
            self._release(job)

    def _claim(self, n, key=None, use_count=None, sent=None):
        """The claims of one claim-next; `sent`: when its first try was sent (default now)."""
        kw = dict(lease_ms=self.lease_ms, columns=self.columns, labels=self.labels,
                  wait_ms=self.wait_ms)
        if sent is None:
            sent = _now()
        if use_count is None:
            use_count = n > 1 and self._has['count'] is not False
        try:
            ans = self.client.claim_next(self.board, self.marker, count=n if use_count else None,
                                         idempotency_key=key or _key(), **kw)
        except BadRequest as e:
            if not use_count or self._has['count'] is not None or 'count' not in e.detail:
                raise
            self._has['count'] = False  # a server before §18: one card per call
            log.info('claim-next: no count on this server; claiming one card at a time')
            return []
        if not ans:
            return []
        pairs = _claims_of(ans)
        if pairs is None:  # not claim-next's answer (a proxy's page): no answer at all
            raise UnexpectedAnswer(200, 'unexpected_answer', 'claim-next: not claims: %.200r'
                                   % (ans,), method='POST', path='/v1/boards/%s/claim-next'
                                   % self.board)
        if use_count:
            self._has['count'] = True
        jobs = [Job(self, p['card'], p['token'], sent) for p in pairs]
        # a lease over (locally) before the answer came: renewed before anything else is done
        # (the server keeps an expired claim its holder's until the reaper takes it), else lost
        late = [j for j in jobs if _now() >= j.lease_end]
        if late:
            self._renew(late)
        with self._cv:
            for j in jobs:
                if not j.is_cancelled():
                    self._held[j.id] = j
            self.stats['claimed'] += len(jobs)
            self._cv.notify_all()  # the renew loop: a first renew may be due now
        for j in jobs:
            if _now() >= j.lease_end:  # nothing is written for it, its handler not called
                self._lose(j, 'the lease ended before claim-next\'s answer arrived')
        return jobs

    # ---- one job ----

    def _slot(self):
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                self._work(job)
            except BaseException:  # noqa: BLE001 - a slot never dies
                log.exception('card %s', job.id)
                self._count('errors')
                self._give_back(job)
            finally:
                self._slot_done(job)

    def _give_back(self, job):
        """After an error of the worker's own in a job: a claim it still holds, with no job
        behind it now, is released (an attempt counted: such an error may come again)."""
        with self._cv:
            held = self._held.get(job.id) is job
        if held and not (job.releasing or job.abandoned or job.parked or job._lost()):
            self._release(job, retry=True)

    def _slot_done(self, job):
        with self._cv:
            if self._held.get(job.id) is job:
                del self._held[job.id]
            self._free += 1
            self._cv.notify_all()

    def _count(self, k):
        with self._cv:
            self.stats[k] += 1

    def _write(self, job, fn, done=None):
        """One fenced write, sent again while no answer comes (network, 5xx, 429) and the claim
        lasts (renewed meanwhile), with a backoff (or the answer's Retry-After when longer), for
        WRITE_RETRY_S at most: then the last error is raised. A job already lost writes nothing
        (ClaimLost), nor one whose lease ends while it waits. done(): after an attempt without
        an answer (or a 5xx, which may come after the write was made), a refusal of the retry
        (409 claim_conflict, run_final) may be the first attempt's own doing: done() reads the
        resources and says whether the write is there (then it counts as made: None)."""
        delay = 0.1
        unanswered = False
        give_up = _now() + WRITE_RETRY_S
        while True:
            if job._lost() or job.abandoned:
                raise ClaimLost(0, 'claim_lost', 'card %s: %s' % (job.id, job.cancel_reason))
            try:
                return fn()
            except (ClaimConflict, RunFinal) as e:
                if unanswered and done is not None:
                    try:
                        if done():
                            log.info('card %s: %s on a retry, but the first attempt had made '
                                     'the write', job.id, e.code)
                            return None
                    except BoarddError as e2:
                        log.warning('card %s: reading back after %s: %s', job.id, e.code, e2)
                if isinstance(e, ClaimConflict):
                    self._lose(job, 'claim_conflict')
                raise
            except BoarddError as e:
                if not _again(e):
                    raise
                unanswered = True
                wait = _pause(delay, e, min(RETRY_AFTER_MAX, job.lease_ms / 1000.0))
                if _now() + wait >= give_up:
                    raise
                log.warning('card %s: %s; again in %.1f s', job.id, e, wait)
                end = _now() + wait
                while _now() < end and not (job._lost() or job.abandoned):
                    time.sleep(max(0.0, min(0.05, end - _now())))
                if _now() >= job.lease_end:  # no renew acknowledged meanwhile: not ours now
                    self._lose(job, 'the lease ended without an acknowledged renew')
                    raise ClaimLost(0, 'claim_lost', 'card %s: the lease ended' % job.id)
                delay = min(delay * 2, 2.0)

    def _work(self, job):
        c = self.client
        try:
            key = _key()  # one run: every retry of its create sends the same key
            run = self._write(job, lambda: c.create_run(job.id, job.marker, 'running',
                                                        lease_ms=job.lease_ms,
                                                        idempotency_key=key))
            job.run_id = run['id']
            self._write(job, lambda: c.set_last_run(job.id, job.marker, job.epoch, job.run_id))
        except (ClaimLost, ClaimConflict):
            self._count('lost')
            return
        except BoarddError as e:
            # refused (4xx), or no answer for WRITE_RETRY_S: given back with an attempt counted,
            # so a card whose run is refused every time ends in the failed column (§17)
            log.error('card %s: the run could not be started: %s', job.id, e)
            self._count('errors')
            self._release(job, retry=True)
            return
        outcome, value = 'ok', None
        try:
            value = self.handler(job)
        except Retry as e:
            outcome, value = 'retry', e
        except Exception as e:  # noqa: BLE001 - the handler's failure is the job's
            outcome, value = 'error', e
        except BaseException as e:  # noqa: BLE001 - SystemExit, KeyboardInterrupt, ...: the
            outcome, value = 'error', e  # job fails as for an exception, never left held
            if isinstance(e, (SystemExit, KeyboardInterrupt)):
                log.error('card %s: the handler raised %s: the job fails, the worker stops',
                          job.id, type(e).__name__)
                with self._cv:
                    if self._exit is None:
                        self._exit = e
                self.stop()
        self._finish(job, outcome, value)

    def _finish(self, job, outcome, value):
        c = self.client
        if job.parked:  # cancelled by the run's end, not by a loss: its claim is still held
            self._count('parked')
            return
        if job._lost():
            self._count('lost')
            return
        if job.abandoned:  # counted when its claim was released for it
            return
        stopping = job.cancel_reason == 'stopping' and outcome != 'ok'
        if stopping:
            status, key = 'failed_resumable', 'stopped'
        elif outcome == 'ok':
            status, key = 'finished', 'succeeded'
        elif outcome == 'retry' or self.on_failure == 'retry':
            status, key = 'failed_resumable', 'retried'
        else:
            status, key = 'failed', 'failed'
        fields = {'status': status}
        if outcome == 'ok':
            fields['result'] = value
        else:
            fields['error'] = _cut('%s: %s' % (type(value).__name__, value), RUN_ERROR_MAX)

        def run_is(want):  # the run already holds the final status we write
            return lambda: c.get_run(job.run_id).get('status') == want
        job.final = True  # a run_final from now on is this write's, not an operator's cancel
        try:
            try:
                refused = None  # why what the write carries was refused
                try:
                    self._write(job, lambda: c.update_run(job.run_id, job.marker, **fields),
                                done=run_is(status))
                except (ClaimLost, ClaimConflict, RunFinal):
                    raise
                except BoarddError as e:
                    if not 400 <= e.status < 500:
                        raise
                    refused = 'by the server: %d %s: %s' % (e.status, e.code, e.detail)
                except (TypeError, ValueError) as e:  # json.dumps: the result is not JSON
                    if 'result' not in fields:
                        raise
                    refused = 'as not JSON: %s: %s' % (type(e).__name__, e)
                if refused is not None:
                    # the result (or the error text) refused, 413 or 400, or not JSON: the run
                    # is failed with a short error saying why, the card filed as for a failed job
                    log.error('card %s: the run\'s %s was refused %s', job.id,
                              'result' if outcome == 'ok' else 'error', refused)
                    if outcome == 'ok':
                        outcome = 'error'
                        if self.on_failure == 'retry':
                            status, key = 'failed_resumable', 'retried'
                        else:
                            status, key = 'failed', 'failed'
                    why = _cut('the run\'s %s was refused %s' % (
                        'result' if 'result' in fields else 'error', refused), 500)
                    fields = {'status': status, 'error': why}
                    try:
                        self._write(job, lambda: c.update_run(job.run_id, job.marker,
                                                              **fields), done=run_is(status))
                    except (ClaimLost, ClaimConflict, RunFinal):
                        raise
                    except BoarddError as e2:  # filed all the same: the card is not stranded
                        log.error('card %s: the run\'s error write refused too: %s', job.id,
                                  e2)
            except RunFinal:  # an operator cancelled the run: parked, as boardctl does
                job.parked = True
                with self._cv:
                    self._held.pop(job.id, None)
                self._count('parked')
                return
            if stopping or status == 'failed_resumable':
                err = self._release(job, retry=not stopping)
                if err is not None:  # counted lost or an error, not stopped or retried
                    raise err
            else:
                to = self.on_success if outcome == 'ok' else self.on_failure
                reason = 'run_finished' if outcome == 'ok' else 'run_failed'

                def filed():  # the card is in `to`, no longer held by this claim
                    card = c.get_card(job.id)
                    cl = card.get('claim') or {}
                    return (card.get('state') == to and not (
                        cl.get('marker') == job.marker and cl.get('epoch') == job.epoch)
                        and c.get_run(job.run_id).get('status') == status)
                job.releasing = True
                try:
                    self._write(job, lambda: c.set_state(job.id, to, reason=reason,
                                                         marker=job.marker, epoch=job.epoch,
                                                         release=True), done=filed)
                    with self._cv:
                        if self._held.get(job.id) is job:
                            del self._held[job.id]
                except (ClaimLost, ClaimConflict):
                    raise
                except BoarddError as e:  # the column refused (gone, renamed): give it back
                    if _again(e):  # no answer for WRITE_RETRY_S: not a refusal
                        raise
                    # with an attempt counted (§17): back in the pool after a backoff, and at
                    # max_attempts filed into the failed column by the server, never claimed
                    # again at once for ever
                    log.error('card %s: filing into %s refused: %s', job.id, to, e)
                    self._release(job, retry=True)
                    key = 'errors'
        except (ClaimLost, ClaimConflict):
            self._count('lost')
            return
        except BoarddError as e:  # no answer (or 5xx) for WRITE_RETRY_S: the lease will lapse
            log.error('card %s: its final write failed: %s; the claim is given up', job.id, e)
            self._count('errors')
            return
        self._count(key)

    def _release(self, job, retry=False):
        """The fenced release (with retry when asked and the server takes it). None when done,
        else the error (logged): ClaimLost or ClaimConflict when the claim was gone."""
        c = self.client
        job.releasing = True

        def released():  # a lost answer's retry refused 409: did the lost try release it?
            cl = c.get_card(job.id).get('claim') or {}
            return not (cl.get('marker') == job.marker and cl.get('epoch') == job.epoch)
        try:
            if retry and self._has['retry'] is not False:
                try:
                    self._write(job, lambda: c.release(job.id, job.marker, job.epoch, retry=True),
                                done=released)
                    self._has['retry'] = True
                    return None
                except BadRequest as e:
                    if self._has['retry'] is True or 'retry' not in e.detail:
                        raise
                    self._has['retry'] = False  # a server before §17: a plain release
            self._write(job, lambda: c.release(job.id, job.marker, job.epoch), done=released)
            return None
        except BoarddError as e:
            log.warning('card %s: release: %s', job.id, e)
            return e
        finally:
            with self._cv:
                if self._held.get(job.id) is job:
                    del self._held[job.id]

    # ---- keeping claims alive ----

    def _refused(self, job, reason):
        """A renew or heartbeat refused: the claim is lost, unless the job has let the card go
        itself (its release sent): the refusal is then that release's doing, not a loss (the
        release's own answer, or its read-back, says how it went)."""
        if job.releasing or job.abandoned:
            log.debug('card %s: %s after its own release', job.id, reason)
            return
        self._lose(job, reason)

    def _lose(self, job, reason):
        with job._mu:
            first, job.lost = not job.lost, True
        job._cancel(reason)
        if first:
            log.warning('card %s: claim lost (%s); its handler is cancelled', job.id, reason)
        with self._cv:
            if self._held.get(job.id) is job:
                del self._held[job.id]
            self._cv.notify_all()

    def _live(self):
        with self._cv:
            return [j for j in self._held.values() if not j._lost() and not j.parked]

    def _renew_loop(self):
        """Renews every held claim when the first of them is due: renew_after_ms after its
        claim-next (or its last acknowledged renew) was sent, so at once for a claim whose
        answer came late in a long-poll or after retries."""
        retry_at = 0.0  # after a tick without an answer: not before this
        delay = 0.2
        while not self._finished.is_set():
            held = self._live()
            due = max(min(j.renew_at for j in held), retry_at) if held else None
            if due is None or _now() < due:
                if due is None:
                    retry_at = 0.0
                with self._cv:  # notified when a claim arrives
                    if not self._finished.is_set():
                        self._cv.wait(0.25 if due is None else
                                      min(max(0.001, due - _now()), 0.25))
                continue
            answered, retry_after = self._renew(held)
            if answered:
                delay, retry_at = 0.2, 0.0
            else:  # no answer: again soon (or after Retry-After), never past the lease end
                left = min(j.lease_end for j in held) - _now()
                retry_at = _now() + max(0.05, min(max(delay, retry_after), left / 2))
                delay = min(delay * 2, 5.0)

    def _renew(self, held):
        """One renew of every held claim, then a heartbeat of each run whose claim it renewed.
        (answered, retry_after): answered False when a claim got no answer at all, retry_after
        the longest Retry-After of a 429/503 answer (seconds; 0 when none)."""
        c = self.client
        sent = _now()
        timeout = max(0.5, min(c.timeout, min(j.lease_end for j in held) - sent))
        results = None
        retry_after = 0.0
        if self._has['renew_many'] is not False:
            results = {}
            # at most RENEW_MANY_MAX tokens a request (the server refuses more, 400)
            for i in range(0, len(held), RENEW_MANY_MAX):
                chunk = held[i:i + RENEW_MANY_MAX]
                toks = [{'card': j.id, 'marker': j.marker, 'epoch': j.epoch} for j in chunk]
                try:
                    st, body, hdrs = c.raw('POST', '/v1/claims/renew', {'tokens': toks},
                                           timeout=timeout)
                except TransportError as e:
                    log.warning('renew: %s', e)
                    continue  # these claims: no answer
                if st in (404, 405) and self._has['renew_many'] is None:
                    self._has['renew_many'] = False
                    log.info('renew: no POST /v1/claims/renew on this server; one by one')
                    results = None
                    break
                elif st == 200 and isinstance(body, dict):
                    self._has['renew_many'] = True
                    for r in body.get('results', []):
                        results[r.get('card')] = r
                elif st in (401, 403):
                    # the token itself refused (removed, or no longer a worker's): every
                    # claim of the request is refused, its handler cancelled now
                    log.warning('renew: %d %s', st, body)
                    for j in chunk:
                        results[j.id] = {'card': j.id, 'status': st}
                else:  # 5xx, or another refusal of the whole request: no answer
                    log.warning('renew: %d %s', st, body)
                    retry_after = max(retry_after, _pause(0.0, error_for(st, body, hdrs)))
        answered = True
        beat = []  # renewed, with a run: their heartbeats go out together below
        for j in held:
            if results is not None:
                r = results.get(j.id) or {'status': 0}
                st = r.get('status', 0)
                lease = r.get('lease_ms', j.lease_ms)
            else:
                try:
                    ans = c.renew(j.id, j.marker, j.epoch)
                    st, lease = 200, ans.get('lease_ms', j.lease_ms)
                except BoarddError as e:
                    st = 0 if _again(e) else e.status
                    retry_after = max(retry_after, _pause(0.0, e))
            if st == 200:
                j.lease_end = sent + lease / 1000.0
                j.renew_at = sent + j.renew_after_ms / 1000.0
            elif 400 <= st < 500:
                self._refused(j, 'renew refused (%d)' % st)
                continue
            else:
                answered = False
                continue
            if j.run_id:
                beat.append(j)
        if beat:  # within the tick's time, as the renew (at least as long as its floor)
            self._heartbeat_all(beat, max(0.5, sent + timeout - _now()))
        with self._cv:
            self._cv.notify_all()
        return answered, retry_after

    def _heartbeat_pool(self):
        """The heartbeat threads, started as heartbeats need them: at most one per slot, up to
        HEARTBEATS_MAX. They last as long as run(), so each keeps its keep-alive connection (the
        client holds one per thread; a thread per heartbeat would connect anew each tick).
        None once run() has ended."""
        with self._cv:
            if self._beats is None and not self._finished.is_set():
                self._beats = concurrent.futures.ThreadPoolExecutor(
                    max_workers=min(self.concurrency, HEARTBEATS_MAX),
                    thread_name_prefix='boardd-heartbeat')
            return self._beats

    def _heartbeat_all(self, jobs, timeout):
        """The run heartbeats of one tick, sent together and waited for at most `timeout`
        seconds. One after another, N slow heartbeats would hold the renew thread N times as
        long, and the next renew could come after the leases end (the watch then cancels jobs
        whose claims were fine). A job whose previous heartbeat is still out (queued behind
        others, or slower than its tick) gets none more this tick: they would only pile up."""
        pool = self._heartbeat_pool()
        if pool is None:  # run() has ended
            return
        sent = []
        for j in jobs:
            if j._beat is not None and not j._beat.done():
                continue
            try:
                j._beat = pool.submit(self._heartbeat, j, timeout)
            except RuntimeError:  # shut down meanwhile: run() has ended
                break
            sent.append(j._beat)
        concurrent.futures.wait(sent, timeout)

    def _heartbeat(self, j, timeout):
        """One heartbeat of the job's run, on a heartbeat thread."""
        try:
            self.client.heartbeat_run(j.run_id, j.marker, timeout=timeout)
        except RunFinal:
            if j.final:  # this worker's own final write: the card is being filed
                return
            j.parked = True  # an operator cancelled the run: stop, keep the claim parked
            j._cancel('run_cancelled')
        except ClaimConflict:
            self._refused(j, 'claim_conflict')
        except BoarddError:
            pass  # no answer, or refused otherwise: the renew, not the heartbeat, keeps the claim
        except Exception:  # noqa: BLE001 - said, not kept silently in the Future
            log.exception('card %s: heartbeat', j.id)

    def _watch_loop(self):
        """Cancels a job the moment its lease ends without an acknowledged renew."""
        while not self._finished.is_set():
            held = self._live()
            now = _now()
            for j in held:
                if now >= j.lease_end:
                    self._lose(j, 'lease ended without an acknowledged renew')
            ends = [j.lease_end for j in held if j.lease_end > now]
            with self._cv:
                self._cv.wait(min(0.5, max(0.01, min(ends) - now)) if ends else 0.5)

    # ---- stopping ----

    def _drain(self, stopped_at):
        """After stop: running jobs finish within the grace, then are cancelled; a handler
        still running a grace later has its claim released for it."""
        end = stopped_at + self.grace
        with self._cv:
            while self._free < self.concurrency and _now() < end:
                self._cv.wait(min(0.1, max(0.0, end - _now())))
        for j in self._live():
            j._cancel('stopping')
        end = _now() + self.grace
        with self._cv:
            while self._free < self.concurrency and _now() < end:
                self._cv.wait(min(0.1, max(0.0, end - _now())))
        for j in self._live():
            j.abandoned = True
            self._release_for(j)

    def _release_for(self, job):
        job.releasing = True
        try:
            self.client.release(job.id, job.marker, job.epoch)
        except BoarddError as e:
            log.warning('card %s: release after the grace: %s', job.id, e)
        with self._cv:
            self._held.pop(job.id, None)
        self._count('stopped')
