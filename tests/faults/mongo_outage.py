#!/usr/bin/env python3
"""boardd on the Mongo twin while its database is down, and after it is back.

The test starts a database server of its own (the kind the Mongo suite runs on: FerretDB when
BOARDD_TEST_MONGO_IS_FERRETDB=1, else mongo-java-server) and a boardd with 2 HTTP threads on
it whose URI sets serverSelectionTimeoutMS=30000, so that a request that waits for a server
takes 30 s. It writes a card, stops the database, then checks that:

- several card requests at once each answer 503 store_unavailable (problem+json, Retry-After)
  in well under those 30 s (one may wait: its thread passed the breaker just before the
  database was found gone), and /healthz, /openapi.json and /metrics answer meanwhile (before
  the breaker, two card requests held both threads and the whole server for 30 s each);
- /readyz answers 503 at once; /metrics says boardd_mongo_unreachable 1 and counts the outage;
- the log says the database is unreachable once, not once per request;
- once the database is back on the same port, /readyz is 200 again and requests succeed; on
  FerretDB (which keeps its data) the card written before the outage is there unchanged, the
  card whose create was refused during the outage is not, and the first card has exactly one
  card_created event. mongo-java-server keeps nothing: the board is put back and used.

The bounds (10 s for an answer, 20 s to recover) are far from both outcomes: a request that
waits for a server takes 30 s, one that does not takes milliseconds.

usage: mongo_outage.py BOARDD_BINARY   (needs BOARDD_TEST_MONGO_URI for the kind of server;
                                        skips with 77 without it, unless CI=true)
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'common'))
import boardd_test as bt  # noqa: E402
from boardd_test import check  # noqa: E402

TOOLS = os.path.join(HERE, '..', 'tools')
SELECTION_MS = 30000  # what a request that waits for a server waits
BOUND = 10.0          # s: an answer that did not wait for a server
RECOVER = 20.0        # s: from the database's restart to /readyz 200
THREADS = 2           # boardd's HTTP threads
OPENED = 'boardd: mongo: the database is unreachable'
CLOSED = 'boardd: mongo: the database is reachable again'


class Database:
    """A database server of this test's own, stopped and started on one port."""

    def __init__(self, ferretdb):
        self.tool = os.path.join(TOOLS, 'ferretdb.sh' if ferretdb else 'mongo-java-server.sh')
        self.name = 'FerretDB' if ferretdb else 'mongo-java-server'
        self.dir = tempfile.mkdtemp(prefix='boardd-outage-db-')
        self.port = bt.free_port()
        self.up = False

    def start(self):
        r = subprocess.run([self.tool, 'start', self.dir, str(self.port)], capture_output=True,
                           text=True, timeout=300)
        if r.returncode != 0:
            raise SystemExit('%s did not start: %s%s' % (self.name, r.stdout, r.stderr))
        self.up = True

    def stop(self):
        subprocess.run([self.tool, 'stop', self.dir], capture_output=True, timeout=60)
        self.up = False

    def remove(self):
        if self.up:
            self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def timed(fn, *args, **kw):
    """(seconds, fn's result or the OSError it raised)."""
    t0 = time.monotonic()
    try:
        out = fn(*args, **kw)
    except OSError as e:
        out = e
    return time.monotonic() - t0, out


def value(text, series):
    m = re.search(r'^' + re.escape(series) + r' (\S+)$', text, re.M)
    return float(m.group(1)) if m else None


def scrape(srv):
    st, raw, _ = bt.request(srv.port, 'GET', '/metrics', timeout=60, raw=True)
    return st, raw


def outage(srv, tok, card):
    """Card requests at once with the database down; /healthz and the rest meanwhile."""
    base = [('GET', '/v1/cards/' + card, None),
            ('PATCH', '/v1/cards/' + card, {'title': 'during the outage'}),
            ('POST', '/v1/cards', {'id': 'refused-1', 'title': 'never stored'}),
            ('GET', '/v1/cards?limit=5', None),
            ('POST', '/v1/cards/%s/claim' % card, {'marker': 'w-outage'}),
            ('GET', '/v1/labels', None)]
    results = [None] * len(base) * 2
    def one(i, method, path, body):
        results[i] = timed(bt.request, srv.port, method, path, tok, body,
                           timeout=SELECTION_MS / 1000 * 3)
    threads = [threading.Thread(target=one, args=(i,) + base[i % len(base)])
               for i in range(len(results))]
    for t in threads:
        t.start()
    # while they are in flight (or answered already): what needs no database
    for path in ('/healthz', '/openapi.json'):
        secs, out = timed(bt.request, srv.port, 'GET', path, timeout=SELECTION_MS / 1000 * 3)
        check(not isinstance(out, OSError) and out[0] == 200 and secs < BOUND,
              'GET %s answers 200 with the database down, card requests at once (%.2f s, %s)'
              % (path, secs, out if isinstance(out, OSError) else out[0]))
    for t in threads:
        t.join(timeout=SELECTION_MS / 1000 * 4)
    slow = []
    for i, r in enumerate(results):
        method, path, _ = base[i % len(base)]
        if r is None or isinstance(r[1], OSError):
            check(False, '%s %s answered (%s)' % (method, path, r))
            continue
        secs, (st, body, hdrs) = r
        check(st == 503 and bt.is_problem(hdrs, body, 503) and
              body.get('code') == 'store_unavailable' and hdrs.get('retry-after') == '1',
              '%s %s: 503 store_unavailable with Retry-After, in %.2f s (%s %s)' %
              (method, path, secs, st, body))
        if secs >= BOUND:
            slow.append('%s %s %.1f s' % (method, path, secs))
    # A request whose thread passed the breaker a moment before another op found the
    # database gone may wait out one server selection (store/mongo/README.md): at most one
    # per HTTP thread but the one that found it. Before the breaker, every one waited.
    check(len(slow) <= THREADS - 1, 'the card requests answer in < %.0f s (waiting for a '
          'server takes %d s): %d of %d did not (at most %d may) %s' % (
              BOUND, SELECTION_MS // 1000, len(slow), len(results), THREADS - 1, slow))
    # the next ones find the breaker open
    secs, out = timed(bt.request, srv.port, 'GET', '/readyz', timeout=60)
    check(not isinstance(out, OSError) and out[0] == 503 and bt.is_problem(out[2], out[1], 503)
          and secs < BOUND, '/readyz 503 problem+json with the database down (%.3f s, %s)'
          % (secs, out if isinstance(out, OSError) else out[:2]))
    for k in range(20):
        secs, out = timed(bt.request, srv.port, 'GET', '/v1/cards/' + card, tok, timeout=60)
        if isinstance(out, OSError) or out[0] != 503 or secs > BOUND:
            check(False, 'card read %d while down: 503 at once (%.2f s, %s)' % (k, secs, out))
            break
    else:
        check(True, '20 more card reads while down: each 503 at once')
    secs, (st, text) = timed(scrape, srv)
    check(st == 200 and secs < BOUND, '/metrics answers while down (%.2f s)' % secs)
    check(value(text, 'boardd_mongo_unreachable') == 1, 'boardd_mongo_unreachable 1 while down')
    check((value(text, 'boardd_mongo_outages_total') or 0) >= 1, 'the outage is counted')
    check(value(text, 'boardd_store_stats_up') == 0, 'boardd_store_stats_up 0 while down')
    if shutil.which('promtool'):
        r = subprocess.run(['promtool', 'check', 'metrics'], input=text, capture_output=True,
                           text=True, timeout=60)
        check(r.returncode == 0 and not (r.stdout + r.stderr).strip(),
              'promtool check metrics is clean while down: %s' % (r.stdout + r.stderr)[:300])
    log = srv.log_text()
    check(log.count(OPENED) == 1, 'the log says "unreachable" once for %d refused requests '
          '(%d times)' % (len(results) + 21, log.count(OPENED)))
    per_op = len(re.findall(r'^boardd: mongo: (?!the database)', log, re.M))
    check(per_op <= 4, 'refused requests log nothing of their own (%d driver error lines)'
          % per_op)


def main():
    uri = bt.mongo_uri()
    ferretdb = bt.mongo_is_ferretdb()
    if not ferretdb and not shutil.which('javac'):
        bt.skip_or_fail('mongo-java-server needs a JDK (deploy/deps.sh --test)')
    boardd = sys.argv[1]
    del uri  # only says which kind of server the suite runs on: this test has its own
    db = Database(ferretdb)
    tmp = tempfile.mkdtemp(prefix='boardd-outage-')
    srv = None
    try:
        db.start()
        tokens = os.path.join(tmp, 'tokens.json')
        tok = bt.token_add(boardd, tokens, 'all', ['operator', 'bot', 'worker'])
        store = 'mongodb://127.0.0.1:%d/boardd_outage?serverSelectionTimeoutMS=%d' % (
            db.port, SELECTION_MS)
        srv = bt.Server(boardd, store=store, tokens=tokens, logdir=tmp, threads=THREADS,
                        extra=['--log-format', 'text']).started()
        c = bt.Client(srv.port, tok, timeout=60)
        board = c.must(200, 'GET', '/v1/boards/default')
        card = c.must(201, 'POST', '/v1/cards', {'id': 'before', 'title': 'written before'})
        c.must(200, 'PATCH', '/v1/cards/before', {'title': 'patched before'})
        c.close()
        st, text = scrape(srv)
        check(st == 200 and value(text, 'boardd_mongo_unreachable') == 0 and
              value(text, 'boardd_mongo_outages_total') == 0, 'reachable at start: 0 and 0')

        print('stopping %s' % db.name, flush=True)
        db.stop()
        outage(srv, tok, card['id'])

        print('starting %s again' % db.name, flush=True)
        db.start()
        t0 = time.monotonic()
        back = bt.wait_for(lambda: bt.request(srv.port, 'GET', '/readyz', timeout=30)[0] == 200,
                           timeout=RECOVER, step=0.05)
        took = time.monotonic() - t0
        check(back, '/readyz 200 again %.2f s after the database came back' % took)
        check(srv.wait_log(CLOSED, 5) is not None and srv.log_text().count(CLOSED) == 1,
              'the log says "reachable again" once')
        c = bt.Client(srv.port, tok, timeout=60)
        if ferretdb:
            st, got = c.call('GET', '/v1/cards/before')
            check(st == 200 and got['title'] == 'patched before' and not got.get('claim'),
                  'the card written before the outage is there as written (%s %s)' % (st, got))
            st, _ = c.call('GET', '/v1/cards/refused-1')
            check(st == 404, 'the create refused during the outage did not happen (%s)' % st)
            evs, _ = bt.events_since(c, 0)
            created = [e for e in evs if e.get('type') == 'card_created' and
                       e.get('card_id') == 'before']
            check(len(created) == 1, 'one card_created event for it (%d)' % len(created))
        else:
            st, _ = c.call('GET', '/v1/cards/before')
            check(st == 404, 'mongo-java-server came back empty: the card is not found (%s)'
                  % st)
            put = {k: board[k] for k in ('columns', 'running', 'completed', 'failed',
                                         'waiting')}
            st, out = c.call('PUT', '/v1/boards/default', put)
            check(st in (200, 201), 'the board put back (%s %s)' % (st, out))
        st, out = c.call('POST', '/v1/cards', {'id': 'after', 'title': 'written after'})
        check(st == 201, 'a write after the outage (%s %s)' % (st, out))
        st, out = c.call('GET', '/v1/cards/after')
        check(st == 200 and out['title'] == 'written after', 'and it reads back (%s)' % st)
        c.close()
        st, text = scrape(srv)
        check(value(text, 'boardd_mongo_unreachable') == 0 and
              value(text, 'boardd_mongo_outages_total') == 1,
              'after: boardd_mongo_unreachable 0, one outage counted (%s)' %
              value(text, 'boardd_mongo_outages_total'))
        check(value(text, 'boardd_store_stats_up') == 1, 'boardd_store_stats_up 1 again')
        code = srv.stop()
        check(code == 0, 'clean exit (%s)' % code)
    finally:
        if srv and srv.alive():
            srv.kill()
        if bt.failed() and srv:
            print(srv.log_tail(60))
        db.remove()
        shutil.rmtree(tmp, ignore_errors=True)
    return bt.summary('mongo-outage on ' + db.name)


if __name__ == '__main__':
    sys.exit(main())
