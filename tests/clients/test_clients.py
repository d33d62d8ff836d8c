#!/usr/bin/env python3
"""The worker SDKs against a real boardd (DESIGN §19, issue 29): clients/python installed with
`pip install --no-index` into a virtualenv of its own, clients/go built into tests/clients/
gocheck (a module that requires it with a `replace`, as a user would). Each language's worker
(check.py / gocheck, the same scenarios, driven here through JSON lines):

- drain: results, errors and retry land on the runs and the cards are filed and released;
- loss by revoke: an operator revokes the claim; the handler's context is cancelled within one
  renew interval, its later write is refused, and nothing of it lands on the card or the run;
- loss by lapse: the server is stopped past the lease; the handler is cancelled when the lease
  ends (not before the last acknowledged renew's lease), and after the server is back its
  write is refused before it is sent: the card and the run are as the loss left them;
- SIGTERM: a job that finishes within the grace is filed; one that does not is cancelled, its
  run marked failed_resumable and its claim released;
- a column of on_success / OnSuccess that the board does not have: the worker does not start
  (an error naming the column), nothing is claimed;
- the completed column renamed while a job runs, so its filing is refused 422: the card is
  released with an attempt counted each time, and at the board's max_attempts filed into the
  failed column by the server (not claimed again at once for ever); so is a card whose run's
  create is refused (a fault proxy answers POST /v1/runs 422);
- claim-next answered 200 with an HTML page, then with JSON that is not claims (a proxy's):
  taken as no answer, tried again; the card is worked and the worker ends well;
- the run pruned by an operator while its job runs: the card is filed into on_failure and
  released, not left claimed.

With --mongo only the two losses run, on a fresh database of BOARDD_TEST_MONGO_URI (tests/
run.sh points it at mongo-java-server for its second pass).

usage: test_clients.py BOARDD REPO_ROOT [--mongo]
"""
import datetime
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
import boardd_test as bt  # noqa: E402
from boardd_test import check  # noqa: E402
from fault_proxy import Proxy  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
# (test_contract.py imports this module for build() and Proc, and sets ROOT)
BOARDD = sys.argv[1] if __name__ == '__main__' else None
ROOT = os.path.abspath(sys.argv[2] if __name__ == '__main__' else os.path.join(HERE, '..', '..'))
MONGO = '--mongo' in sys.argv[3:]
LEASE_MS = 3000            # renew_after_ms = 1000
RENEW_S = LEASE_MS / 3000.0
SLACK_S = 1.0              # scheduling on a shared 2-core machine
# a board's retry policy (§17) that runs out fast: the third retry release files the card
FAST_RETRY = {'max_attempts': 3, 'backoff_ms': 1, 'max_backoff_ms': 1}


def go_binary():
    return shutil.which('go') or ('/usr/local/go/bin/go'
                                  if os.path.exists('/usr/local/go/bin/go') else None)


def go_env(tmp):
    # BOARDD_TEST_GO_RACE=1: the Go worker built with the race detector (needs cgo)
    race = os.environ.get('BOARDD_TEST_GO_RACE') == '1'
    e = dict(os.environ, GOFLAGS='-mod=mod', GOTOOLCHAIN='local', CGO_ENABLED=str(int(race)))
    e.setdefault('GOCACHE', os.path.join(os.path.expanduser('~'), '.cache', 'go-build'))
    e.setdefault('GOPATH', os.path.join(tmp, 'gopath'))
    return e


def build(tmp):
    """{lang: argv} of the two check programs (the Python one in a venv of its own)."""
    venv = os.path.join(tmp, 'venv')
    subprocess.run([sys.executable, '-m', 'venv', venv], check=True, capture_output=True)
    py = os.path.join(venv, 'bin', 'python')
    r = subprocess.run([py, '-m', 'pip', 'install', '-q', '--no-index',
                        os.path.join(ROOT, 'clients', 'python')], capture_output=True,
                       text=True, cwd=tmp)
    check(r.returncode == 0, 'pip install --no-index ./clients/python: %s' % r.stderr[-800:])
    r = subprocess.run([py, '-c', 'import boardd, sys; print(boardd.__file__)'],
                       capture_output=True, text=True, cwd=tmp)
    check(r.returncode == 0 and r.stdout.startswith(venv),
          'boardd imports from the venv, not the tree: %r %r' % (r.stdout, r.stderr))
    out = {'python': [py, os.path.join(HERE, 'check.py')]}
    go = go_binary()
    if not go:
        bt.skip_or_fail('no Go toolchain (/usr/local/go/bin/go): the Go client is not tested')
    exe = os.path.join(tmp, 'gocheck')
    race = ['-race'] if os.environ.get('BOARDD_TEST_GO_RACE') == '1' else []
    r = subprocess.run([go, 'build'] + race + ['-o', exe, '.'], cwd=os.path.join(HERE, 'gocheck'),
                       env=go_env(tmp), capture_output=True, text=True, timeout=600)
    check(r.returncode == 0, 'go build of tests/clients/gocheck: %s' % r.stderr[-800:])
    out['go'] = [exe]
    return out


class Proc:
    """A check program: its JSON lines, each with the monotonic time it arrived."""

    def __init__(self, argv, env, log):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=open(log, 'ab'), env=env, cwd=os.path.dirname(log))
        self.q = queue.Queue()
        self.all = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            try:
                m = json.loads(line)
            except ValueError:
                continue
            m['_t'] = time.monotonic()
            self.all.append(m)
            self.q.put(m)

    def expect(self, ev, timeout=20.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                m = self.q.get(timeout=max(0.01, end - time.monotonic()))
            except queue.Empty:
                break
            if m.get('ev') == ev:
                return m
        return None

    def say(self, line='go'):
        self.p.stdin.write((line + '\n').encode())
        self.p.stdin.flush()

    def finish(self, timeout=30.0):
        try:
            self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        return self.p.returncode


class Env:
    def __init__(self, tmp, progs):
        self.tmp = tmp
        self.progs = progs
        tokens = os.path.join(tmp, 'tokens.json')
        self.worker = bt.token_add(BOARDD, tokens, 'sdk-worker', ['worker'])
        self.op = bt.token_add(BOARDD, tokens, 'sdk-op', ['operator', 'bot'])
        store = bt.mongo_database(bt.mongo_uri(), 'sdk') if MONGO else None
        self.srv = bt.Server(BOARDD, os.path.join(tmp, 'data'), tokens, tmp, store=store,
                             threads=4, keep_port=True, extra=['--log-format', 'text'])
        self.srv.started()
        self.n = 0

    def call(self, method, path, body=None):
        return bt.request(self.srv.port, method, path, self.op, body, timeout=15)

    def card(self, title, label):
        self.n += 1
        st, b, _ = self.call('POST', '/v1/cards', {'id': 'k%d-%s' % (self.n, title),
                                                   'title': title, 'state': 'ready',
                                                   'labels': [label]})
        assert st == 201, (st, b)
        return b['id']

    def get(self, cid):
        return self.call('GET', '/v1/cards/' + cid)[1]

    def board(self, name, retry=None):
        """A board named `name` with the default board's columns (and `retry`, if given)."""
        st, b, _ = self.call('GET', '/v1/boards/default')
        assert st == 200, (st, b)
        cfg = {'columns': [{'name': c['name'], 'terminal': c['terminal'],
                            'eligible': c['eligible']} for c in b['columns']]}
        cfg.update({k: b[k] for k in ('running', 'completed', 'failed', 'waiting')})
        if retry:
            cfg['retry'] = retry
        st, ans, _ = self.call('PUT', '/v1/boards/' + name, cfg)
        assert st in (200, 201), (st, ans)

    def card_on(self, board, title):
        self.n += 1
        st, b, _ = self.call('POST', '/v1/cards', {'id': 'k%d-%s' % (self.n, title),
                                                   'board': board, 'title': title,
                                                   'state': 'ready'})
        assert st == 201, (st, b)
        return b['id']

    def runs_of(self, cid):
        st, b, _ = self.call('GET', '/v1/cards/%s/runs' % cid)
        return (b or {}).get('runs', []) if st == 200 else []

    def run(self, rid):
        return self.call('GET', '/v1/runs/' + rid)[1]

    def spawn(self, lang, scen, label, **kw):
        env = dict(bt.clean_env(), BOARDD_URL=self.srv.url, BOARDD_TOKEN=self.worker, SCEN=scen,
                   LABEL=label, CONC=str(kw.pop('conc', 2)), WAIT_MS='1000')
        env.update({k.upper(): str(v) for k, v in kw.items()})
        return Proc(self.progs[lang], env, os.path.join(self.tmp, '%s-%s-%s.log' % (lang, scen,
                                                                                    label)))


def comments(card):
    return [c.get('body') for c in card.get('comments') or []]


def t_drain(e, lang):
    lab = 'drain-' + lang
    ok = [e.card('ok%d' % i, lab) for i in range(4)]
    fail = e.card('fail', lab)
    retry = e.card('retry', lab)  # last: claimed once before it comes back
    p = e.spawn(lang, 'drain', lab, conc=3, maxjobs=6)
    st = p.expect('stats', 60)
    check(p.finish() == 0 and st is not None, '%s drain: the worker ends after 6 jobs' % lang)
    st = st or {}
    check((st.get('succeeded'), st.get('failed'), st.get('retried'), st.get('lost'),
           st.get('errors')) == (4, 1, 1, 0, 0), '%s drain: stats %s' % (lang, st))
    for cid in ok:
        c = e.get(cid)
        r = e.run(c.get('last_run_id') or 'none')
        check(c['state'] == 'done' and c['claim'] is None and r.get('status') == 'finished' and
              r.get('result') == {'title': c['title']} and
              r.get('output', 'out:' + c['title']) == 'out:' + c['title'],
              '%s drain: %s done, released, run finished with its result and output (%s, %s)' % (
                  lang, cid, c['state'], r))
    c = e.get(fail)
    r = e.run(c.get('last_run_id') or 'none')
    check(c['state'] == 'blocked' and c['claim'] is None and r.get('status') == 'failed' and
          'boom' in (r.get('error') or ''),
          '%s drain: the failure is filed into blocked, the run failed with its error (%s)' % (
              lang, r))
    c = e.get(retry)
    r = e.run(c.get('last_run_id') or 'none')
    check(c['state'] == 'ready' and c['claim'] is None and r.get('status') == 'failed_resumable',
          '%s drain: retry gives the card back to the pool, run failed_resumable (%s, %s)' % (
              lang, c['state'], r.get('status')))
    check(c.get('attempts') == 1 and c.get('not_before'),
          '%s drain: the retry release counted an attempt and set not_before (%s, %s)' % (
              lang, c.get('attempts'), c.get('not_before')))


def t_policy(e, lang):
    """DESIGN §17 through each client: a card created with not_before is refused NotYet; a
    column's limit refuses CapacityReached (typed errors carrying status, code, detail); the
    board reads back its limit, claimed counts, max_claims and retry policy; a release with
    retry counts an attempt and sets not_before."""
    board = 'pol-' + lang
    st, b, _ = e.call('GET', '/v1/boards/default')
    cols = [{'name': c['name'], 'terminal': c['terminal'], 'eligible': c['eligible']}
            for c in b['columns']]
    for c in cols:
        if c['name'] == 'ready':
            c['limit'] = 1
    st, ans, _ = e.call('PUT', '/v1/boards/' + board, {
        'columns': cols, 'running': b['running'], 'completed': b['completed'],
        'failed': b['failed'], 'waiting': b['waiting'], 'max_claims': 3,
        'retry': {'max_attempts': 3, 'backoff_ms': 60000, 'max_backoff_ms': 60000}})
    check(st in (200, 201), '%s policy: PUT board: %d %s' % (lang, st, ans))
    t0 = time.time()
    p = e.spawn(lang, 'policy', board, board=board, op_token=e.op)
    ev = {}
    for name in ('created', 'notyet', 'capacity', 'board', 'retry', 'stats'):
        ev[name] = p.expect(name, 30) or {}
    check(p.finish() == 0, '%s policy: the program ends well' % lang)
    nb = ev['created'].get('not_before') or ''
    ahead = (datetime.datetime.strptime(nb[:19], '%Y-%m-%dT%H:%M:%S').replace(
        tzinfo=datetime.timezone.utc).timestamp() - t0) if len(nb) >= 19 else 0
    check(3590 <= ahead <= 3610,
          '%s policy: create_card(not_before=) an hour ahead: %s' % (lang, ev['created']))
    n = ev['notyet']
    check(n.get('cls') == 'NotYet' and n.get('code') == 'not_yet' and n.get('status') == 409
          and n.get('detail'), '%s policy: a claim before not_before raises NotYet: %s' % (
              lang, n))
    c = ev['capacity']
    check(c.get('cls') == 'CapacityReached' and c.get('code') == 'capacity_reached' and
          c.get('status') == 409 and 'ready' in (c.get('detail') or ''),
          '%s policy: a claim past the limit raises CapacityReached naming the column: %s' % (
              lang, c))
    bd = ev['board']
    pol = {'max_attempts': 3, 'backoff_ms': 60000, 'max_backoff_ms': 60000}
    check((bd.get('limit'), bd.get('col_claimed'), bd.get('max_claims'), bd.get('claimed'),
           bd.get('retry'), bd.get('retry_effective')) == (1, 1, 3, 1, pol, pol),
          '%s policy: the board\'s limit, counts, max_claims and retry: %s' % (lang, bd))
    r = ev['retry']
    check(r.get('attempts') == 1 and r.get('not_before') and r.get('claim') is None,
          '%s policy: release(retry) counts an attempt, sets not_before, releases: %s' % (
              lang, r))


def hold(e, lang, lab, **kw):
    cid = e.card('hold', lab)
    p = e.spawn(lang, 'hold', lab, conc=2, maxjobs=1, lease_ms=LEASE_MS, **kw)
    s = p.expect('started', 30)
    check(s is not None and s.get('card') == cid, '%s %s: the handler started' % (lang, lab))
    return cid, p, s or {}


def after_loss(e, lang, lab, cid, p, s, want_state):
    p.say()
    w = p.expect('write', 20)
    check(w is not None and w.get('error') == 'claim_lost',
          "%s %s: the handler's write after the loss is refused before it is sent (%s)" % (
              lang, lab, w))
    st = p.expect('stats', 30)
    check(p.finish() == 0 and st is not None and st.get('lost') == 1 and
          st.get('succeeded') == 0, '%s %s: the worker counts one loss (%s)' % (lang, lab, st))
    c = e.get(cid)
    r = e.run(s.get('run') or 'none')
    check('late write' not in comments(c) and c['state'] == want_state,
          '%s %s: nothing of the handler landed on the card (%s, %s)' % (
              lang, lab, c['state'], comments(c)))
    check(r.get('status') == 'running' and r.get('result') is None and r.get('error') is None,
          '%s %s: no outcome was written on the run after the loss (%s)' % (lang, lab, r))
    return c


def t_revoke(e, lang, **kw):
    lab = 'revoke-%s%s' % (lang, '-async' if kw else '')
    cid, p, s = hold(e, lang, lab, **kw)
    time.sleep(0.3)
    t0 = time.monotonic()
    st, b, _ = e.call('POST', '/v1/cards/%s/claim/revoke' % cid)
    check(st == 200, '%s: revoke answered %s %s' % (lab, st, b))
    cz = p.expect('cancelled', 10)
    dt = cz['_t'] - t0 if cz else None
    check(cz is not None and dt <= RENEW_S + SLACK_S,
          '%s: the handler is cancelled within one renew interval of the revoke (%s s, %s)' % (
              lab, None if dt is None else round(dt, 3), cz and cz.get('reason')))
    # the stale token is refused by the server too
    st, b, _ = bt.request(e.srv.port, 'POST', '/v1/cards/%s/comments' % cid, e.worker,
                          {'marker': s.get('marker'), 'body': 'late write'},
                          {'If-Match': '"%d"' % s.get('epoch', 0)})
    check(st == 409 and (b or {}).get('code') == 'claim_conflict',
          '%s: a write with the revoked token is 409 claim_conflict (%s)' % (lab, st))
    c = after_loss(e, lang, lab, cid, p, s, 'ready')
    check(c['claim'] is None, '%s: the card is left unclaimed' % lab)


def t_lapse(e, lang):
    lab = 'lapse-' + lang
    cid, p, s = hold(e, lang, lab)
    time.sleep(0.3)
    t_sig = time.monotonic()
    e.srv.stop(timeout=20)
    t_down = time.monotonic()
    cz = p.expect('cancelled', LEASE_MS / 1000.0 + 10)
    check(cz is not None, '%s: the handler is cancelled while the server is down' % lab)
    if cz:
        lo = t_sig + LEASE_MS / 1000.0 - RENEW_S - 0.3
        hi = t_down + LEASE_MS / 1000.0 + SLACK_S
        check(lo <= cz['_t'] <= hi,
              '%s: cancelled when the lease ends (%.2f s after the stop; lease %.1f s, renew '
              'every %.1f s): %s' % (lab, cz['_t'] - t_sig, LEASE_MS / 1000.0, RENEW_S,
                                     cz.get('reason')))
    e.srv.started()
    c = after_loss(e, lang, lab, cid, p, s, 'ready')
    check(c['claim'] is not None and c['claim'].get('epoch') == s.get('epoch') and
          c.get('last_run_id') == s.get('run'),
          '%s: the card still shows the lapsed claim and its run, nothing newer' % lab)


def t_stop(e, lang):
    lab = 'stop-' + lang
    quick, slow = e.card('quick', lab), e.card('slow', lab)
    p = e.spawn(lang, 'stop', lab, conc=2, grace_ms=1500, lease_ms=LEASE_MS)
    started = [p.expect('started', 30), p.expect('started', 30)]
    check(all(started), '%s: both handlers started' % lab)
    p.p.send_signal(signal.SIGTERM)
    st = p.expect('stats', 30)
    check(p.finish() == 0 and st is not None,
          '%s: the worker exits 0 after SIGTERM (%s)' % (lab, p.p.returncode))
    st = st or {}
    check(st.get('succeeded') == 1 and st.get('stopped') == 1,
          '%s: one finished within the grace, one stopped (%s)' % (lab, st))
    c = e.get(quick)
    check(c['state'] == 'done' and c['claim'] is None,
          '%s: the quick job is filed done (%s)' % (lab, c['state']))
    c = e.get(slow)
    r = e.run(c.get('last_run_id') or 'none')
    check(c['state'] == 'ready' and c['claim'] is None and r.get('status') == 'failed_resumable',
          '%s: the slow job is released, its run failed_resumable (%s, %s)' % (
              lab, c['state'], r.get('status')))


def wait_for(fn, timeout):
    """fn()'s first true value within timeout seconds (polled), else its last."""
    end = time.monotonic() + timeout
    v = fn()
    while not v and time.monotonic() < end:
        time.sleep(0.05)
        v = fn()
    return v


def stop(p):
    """SIGTERM to a check program; its stats (or {})."""
    p.p.send_signal(signal.SIGTERM)
    st = p.expect('stats', 30)
    p.finish()
    return st or {}


class PageProxy(Proxy):
    """The fault proxy that answers the first claim-next requests itself, 200 with each of
    `pages` in turn (what a captive portal or a misrouted proxy answers), and forwards the
    rest; claim_nexts: how many it saw."""

    def __init__(self, target, pages):
        super().__init__(target)
        self.pages = list(pages)
        self.claim_nexts = 0
        proxy = self
        base = self.srv.RequestHandlerClass

        class H(base):
            def do_POST(self):
                page = None
                if self.path.endswith('/claim-next'):
                    with proxy.lock:
                        proxy.claim_nexts += 1
                        page = proxy.pages.pop(0) if proxy.pages else None
                if page is None:
                    return base._any(self)
                self.rfile.read(int(self.headers.get('Content-Length') or 0))
                ctype, body = page
                self.send_response(200)
                self.send_header('Content-Type', ctype)
                self.send_header('Content-Length', str(len(body)))
                self.end_headers()
                self.wfile.write(body)
        self.srv.RequestHandlerClass = H


def t_no_column(e, lang):
    """on_success names a column the board does not have: the worker does not start."""
    name = '%s no column' % lang
    board = 'nocol-' + lang
    e.board(board)
    cid = e.card_on(board, 'nocol')
    p = e.spawn(lang, 'drain', '', board=board, on_success='shipped', conc=1, maxjobs=1)
    st = p.expect('stats', 30) or {}
    rc = p.finish()
    detail = st.get('detail') or ''
    check(rc != 0 and st.get('error') and 'no column' in detail and 'shipped' in detail,
          '%s: the worker fails to start, naming the column (exit %s, %s)' % (name, rc, st))
    c = e.get(cid)
    runs = e.runs_of(cid)
    check(c['state'] == 'ready' and c['claim'] is None and not runs and not st.get('claimed'),
          '%s: nothing was claimed (%s, %s, %d runs)' % (name, c['state'], c['claim'],
                                                         len(runs)))


def gave_up(c):
    return (c.get('gave_up') or {}).get('reason') == 'attempts_exhausted'


def t_filing_refused(e, lang):
    """The completed column renamed while a job runs: each filing into it is refused (422);
    each time the card is released with an attempt counted, and at max_attempts (3) the
    server files it into the failed column. Not claimed again at once for ever."""
    name = '%s filing refused' % lang
    board = 'refile-' + lang
    e.board(board, FAST_RETRY)
    cid = e.card_on(board, 'refile')
    p = e.spawn(lang, 'gate', '', board=board, conc=1)
    s = p.expect('started', 30)
    check(s is not None and s.get('card') == cid, '%s: the handler started' % name)
    st, b, _ = e.call('POST', '/v1/boards/%s/columns/done/rename' % board, {'to': 'shipped'})
    check(st == 200, '%s: done renamed shipped: %s %s' % (name, st, b))
    p.say()
    c = wait_for(lambda: (lambda c: c if c['state'] == 'blocked' else None)(e.get(cid)), 20)
    stats = stop(p)
    c = c or e.get(cid)
    runs = e.runs_of(cid)
    check(c['state'] == 'blocked' and c['claim'] is None and gave_up(c),
          '%s: after max_attempts the card is filed into the failed column, gave_up '
          'attempts_exhausted (%s, attempts %s, gave_up %s, %d runs)' % (
              name, c['state'], c.get('attempts'), c.get('gave_up'), len(runs)))
    check(len(runs) == 3 and stats.get('errors') == 3 and not stats.get('succeeded'),
          '%s: three claims, three runs, each counted an error (%d runs, %s)' % (
              name, len(runs), stats))


def t_run_refused(e, lang):
    """Every POST /v1/runs answered 422 (a fault proxy): the card is released with an
    attempt counted each time, and filed into the failed column at max_attempts."""
    name = '%s run refused' % lang
    board = 'norun-' + lang
    e.board(board, FAST_RETRY)
    cid = e.card_on(board, 'norun')
    px = Proxy(e.srv.port)
    px.set([{'method': 'POST', 'path': r'^/v1/runs$', 'action': 'status', 'status': 422,
             'code': 'transition_rejected'}])
    try:
        p = e.spawn(lang, 'drain', '', board=board, conc=1, boardd_url=px.url)
        c = wait_for(lambda: (lambda c: c if c['state'] == 'blocked' else None)(e.get(cid)), 20)
        stats = stop(p)
        sent = len([1 for m, path, h, b in px.log if m == 'POST' and path == '/v1/runs'])
    finally:
        px.close()
    c = c or e.get(cid)
    check(c['state'] == 'blocked' and c['claim'] is None and gave_up(c),
          '%s: after max_attempts the card is filed into the failed column (%s, attempts %s, '
          'gave_up %s, %d runs refused)' % (name, c['state'], c.get('attempts'),
                                            c.get('gave_up'), sent))
    check(sent == 3 and stats.get('errors') == 3,
          '%s: three claims, each run refused, counted errors (%d, %s)' % (name, sent, stats))


def t_claim_page(e, lang):
    """claim-next answered 200 by something else: an HTML page, then JSON that is not claims.
    Each is taken as no answer and tried again; the card is worked, the worker ends well."""
    name = '%s claim-next answered a page' % lang
    lab = 'page-' + lang
    cid = e.card('page', lab)
    px = PageProxy(e.srv.port, [('text/html', b'<html><body>sign in</body></html>'),
                                ('application/json', b'{"portal": true}')])
    try:
        p = e.spawn(lang, 'drain', lab, conc=1, maxjobs=1, boardd_url=px.url)
        st = p.expect('stats', 30)
        rc = p.finish()
    finally:
        px.close()
    check(st is not None and rc == 0 and not st.get('error') and st.get('succeeded') == 1,
          '%s: the worker goes on and ends well (exit %s, %s)' % (name, rc, st))
    c = e.get(cid)
    check(c['state'] == 'done' and c['claim'] is None and px.claim_nexts >= 3,
          '%s: the card is done (%s; %d claim-next requests)' % (name, c['state'],
                                                                 px.claim_nexts))


def t_run_pruned(e, lang):
    """An operator prunes the job's run while it runs: the run's final PATCH is 404; the card
    is filed into on_failure and released, not left claimed."""
    name = '%s run pruned' % lang
    lab = 'prune-' + lang
    cid = e.card('prune', lab)
    p = e.spawn(lang, 'gate', lab, conc=1, maxjobs=1)
    s = p.expect('started', 30) or {}
    check(s.get('card') == cid and s.get('run'), '%s: the handler started: %s' % (name, s))
    st, b, _ = e.call('DELETE', '/v1/runs/%s' % s.get('run'))
    check(st == 204, '%s: the run pruned: %s %s' % (name, st, b))
    p.say()
    stats = p.expect('stats', 30) or {}
    p.finish()
    c = e.get(cid)
    check(c['state'] == 'blocked' and c['claim'] is None,
          '%s: the card is filed into blocked and released (%s, %s)' % (name, c['state'],
                                                                        c['claim']))
    check(stats.get('failed') == 1 and not stats.get('errors'),
          '%s: counted failed (%s)' % (name, stats))


def main():
    tmp = tempfile.mkdtemp(prefix='boardd-clients-')
    import atexit
    atexit.register(lambda: bt.failed() or shutil.rmtree(tmp, ignore_errors=True))
    progs = build(tmp)
    e = Env(tmp, progs)
    try:
        for lang in ('python', 'go'):
            if not MONGO:
                t_drain(e, lang)
                t_policy(e, lang)
                t_stop(e, lang)
                t_no_column(e, lang)
                t_filing_refused(e, lang)
                t_run_refused(e, lang)
                t_claim_page(e, lang)
                t_run_pruned(e, lang)
            t_revoke(e, lang)
            t_lapse(e, lang)
        if not MONGO:
            t_revoke(e, 'python', **{'async': 1})
    finally:
        e.srv.stop(timeout=20)
        if bt.failed():
            print('logs kept in', tmp)
    sys.exit(bt.summary('clients' + (' (mongo)' if MONGO else '')))


if __name__ == '__main__':
    main()
