"""The Python worker under test (test_clients.py drives it; gocheck/main.go is its Go twin,
speaking the same lines). Run with a Python where the boardd package is installed. Configured
by the environment: BOARDD_URL, BOARDD_TOKEN, SCEN (drain | hold | stop | gate | bench | policy),
BOARD, LABEL, CONC, MAXJOBS, LEASE_MS, GRACE_MS, WAIT_MS, ON_SUCCESS, ON_FAILURE, ASYNC=1 (the
AsyncWorker). One JSON object per line: {"ev":"started",...}, {"ev":"cancelled",...},
{"ev":"write",...}, last {"ev":"stats"} (its error and detail: what run() raised)."""
import asyncio
import json
import logging
import os
import sys
import threading
import time

import boardd

logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
_out = threading.Lock()
_stdin = threading.Lock()  # one reader at a time: TextIOWrapper is not thread-safe
_gated = threading.Event()  # SCEN=gate: the first job has waited for its line
SCEN = os.environ.get('SCEN', 'drain')
ASYNC = os.environ.get('ASYNC') == '1'


def emit(**kw):
    with _out:
        print(json.dumps(kw), flush=True)


def code(e):
    return getattr(e, 'code', None) or type(e).__name__


def drain(job):
    job.output('out:' + job.card['title'])
    if 'fail' in job.card['title']:
        raise ValueError('boom')
    if 'retry' in job.card['title']:
        raise boardd.Retry('later')
    return {'title': job.card['title']}


def gate(job):
    """SCEN=gate: says it started (with its run); the first job then waits for a line on
    stdin (the test changes the board or the run meanwhile); each returns its title."""
    emit(ev='started', card=job.id, title=job.card['title'], epoch=job.epoch, marker=job.marker,
         run=job.run_id)
    with _stdin:
        if not _gated.is_set():
            sys.stdin.readline()
            _gated.set()
    return {'title': job.card['title']}


def hold(job):
    emit(ev='started', card=job.id, title=job.card['title'], epoch=job.epoch, marker=job.marker,
         run=job.run_id)
    if SCEN == 'stop' and 'quick' in job.card['title']:
        time.sleep(1)
        return 'quick'
    job.wait()
    emit(ev='cancelled', card=job.id, reason=job.cancel_reason)
    if SCEN == 'hold':
        with _stdin:
            sys.stdin.readline()
        try:
            job.comment('late write')
            emit(ev='write', card=job.id, error='')
        except boardd.BoarddError as e:
            emit(ev='write', card=job.id, error=code(e))
    raise RuntimeError(job.cancel_reason)


async def hold_async(job):
    emit(ev='started', card=job.id, title=job.card['title'], epoch=job.epoch, marker=job.marker,
         run=job.run_id)
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        emit(ev='cancelled', card=job.id, reason=job.cancel_reason)
        await asyncio.to_thread(sys.stdin.readline)
        try:
            await asyncio.to_thread(job.comment, 'late write')
            emit(ev='write', card=job.id, error='')
        except boardd.BoarddError as e:
            emit(ev='write', card=job.id, error=code(e))
        raise


def policy(c):
    """SCEN=policy (DESIGN §17): the client's side of the dispatch policy on board BOARD
    (the test set it up: ready has limit 1). OP_TOKEN creates the cards; one line per step."""
    op = boardd.Client(os.environ['BOARDD_URL'], os.environ['OP_TOKEN'])
    board, p = os.environ['BOARD'], os.environ['BOARD'] + '-'

    def attempt(ev, fn):
        try:
            fn()
            emit(ev=ev, cls='', code='', detail='')
        except boardd.BoarddError as e:
            emit(ev=ev, cls=type(e).__name__, code=e.code, detail=e.detail,
                 status=e.status)

    s = op.create_card({'id': p + 's', 'board': board, 'state': 'ready', 'title': 's'},
                       not_before=3600)
    emit(ev='created', not_before=s.get('not_before'))
    attempt('notyet', lambda: c.claim(p + 's', 'm0'))
    for x in ('a', 'b'):
        op.create_card({'id': p + x, 'board': board, 'state': 'ready', 'title': x})
    tok = c.claim(p + 'a', 'm1')
    attempt('capacity', lambda: c.claim(p + 'b', 'm2'))
    b = op.get_board(board)
    ready = [col for col in b['columns'] if col['name'] == 'ready'][0]
    emit(ev='board', limit=ready.get('limit'), col_claimed=ready.get('claimed'),
         max_claims=b.get('max_claims'), claimed=b.get('claimed'), retry=b.get('retry'),
         retry_effective=b.get('retry_effective'))
    card = c.release(p + 'a', 'm1', tok['epoch'], retry=True)
    emit(ev='retry', attempts=card.get('attempts'), not_before=card.get('not_before'),
         claim=card.get('claim'))
    emit(ev='stats', error='')
    return 0


def main():
    c = boardd.Client(os.environ['BOARDD_URL'], os.environ['BOARDD_TOKEN'])
    env = os.environ.get
    if SCEN == 'policy':
        return policy(c)
    handler = {'drain': drain, 'hold': hold, 'stop': hold, 'gate': gate,
               'bench': lambda job: None}[SCEN]
    kw = dict(concurrency=int(env('CONC', '2')), lease_ms=int(env('LEASE_MS', '0')) or None,
              grace=int(env('GRACE_MS', '10000')) / 1000.0, wait_ms=int(env('WAIT_MS', '1000')),
              labels=[env('LABEL')] if env('LABEL') else None)
    for k in ('on_success', 'on_failure'):
        if env(k.upper()):
            kw[k] = env(k.upper())
    if SCEN == 'bench':
        logging.getLogger('boardd').setLevel(logging.ERROR)
    t0 = time.monotonic()
    err = detail = ''
    max_jobs = int(env('MAXJOBS', '0')) or None
    try:
        if ASYNC and SCEN == 'hold':
            w = boardd.AsyncWorker(c, env('BOARD', 'default'), hold_async, **kw)
            stats = asyncio.run(w.run(max_jobs=max_jobs))
        else:
            w = boardd.Worker(c, env('BOARD', 'default'), handler, **kw)
            stats = w.run(max_jobs=max_jobs)
    except (boardd.BoarddError, ValueError) as e:  # ValueError: a column not on the board
        err, detail, stats = code(e), str(e), dict(w.stats)
    emit(ev='stats', seconds=time.monotonic() - t0, cpu=time.process_time(), error=err,
         detail=detail, **stats)
    return 1 if err else 0


if __name__ == '__main__':
    sys.exit(main())
