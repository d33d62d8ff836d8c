#!/usr/bin/env python3
"""boardctl as a worker a newcomer can trust (issue 26, DESIGN §20), against a real boardd
with real processes:

- a command that cannot be started (not found, not executable, a missing #! interpreter) is
  not a job failure: nothing is filed, the claim is released (or nothing is claimed at all),
  boardctl exits 127/126 with a message naming the command and the error, `work` stops;
- no process of a job outlives boardctl (kill -9, a double-forked grandchild, a setsid one),
  nor the job itself (what it left running is killed when it ends);
- a renew that gets no answer is retried so that a last try lands in the lease's last part
  (a proxy answers 503 to renews until 2 s before the lease ends: the old backoff made no try
  there);
- --running-column checked before claiming; the card enters the board's running column when
  its job starts (and stays where it is with --running-column none);
- the job's stdout and stderr go through to boardctl's own, and their tail (at most 64 KiB,
  valid UTF-8) becomes the run's output, when the server has the route
  (POST /v1/runs/{id}/output); without it boardctl works all the same and says nothing;
  `boardctl runs CARD` lists the card's runs, or says the server keeps no run history;
- exit statuses: a job a signal ended is reported "killed by signal N (exit 128+N)" and
  `run` exits 128+N; boardctl's own usage error is 125; `boardctl --version`.

usage: test_boardctl_trust.py path/to/boardd path/to/boardctl
"""
import http.client
import http.server
import json
import os
import re
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
import boardd_test as bt  # noqa: E402
from boardd_test import check, wait_for  # noqa: E402
import test_boardctl as tb  # noqa: E402  (its Server, boardctl(), finish(), read_pid(), alive())

BOARDCTL = tb.BOARDCTL = os.path.abspath(sys.argv[2])  # some cases run from elsewhere
Server, boardctl, finish, read_pid, alive = (tb.Server, tb.boardctl, tb.finish, tb.read_pid,
                                             tb.alive)


def script(tmp, name, text, mode=0o755):
    path = os.path.join(tmp, name)
    with open(path, 'w') as f:
        f.write(text)
    os.chmod(path, mode)
    return path


def untouched(srv, cid):
    c = srv.card(cid)
    return c['claim'] is None and c['state'] == 'ready' and c['claim_epoch'] == 0, c


# ---------------------------------------------------------------------------------------

def case_cannot_start(srv, tmp):
    # The typo: `work --concurrency 2 -- ./no-such-script.sh` filed every ready card
    # into blocked, ~3 ms each. Now nothing is claimed: the command is looked up first.
    for i in range(3):
        srv.new_card('typo%d' % i, 'typo')
    p = boardctl(srv, ['work', '--board', 'default', '--label', 'typo', '--concurrency', '2',
                       '--wait-ms', '0', '--', './no-such-script.sh'], cwd=tmp)
    rc, out, err = finish(p, 15)
    check(rc == 127 and './no-such-script.sh' in err and 'No such file or directory' in err,
          'work with a command not found exits 127 naming it and the error: %d %s' % (rc, err))
    for i in range(3):
        ok, c = untouched(srv, 'typo%d' % i)
        check(ok, 'a command not found claims nothing: %s' % c)
    srv.new_card('typo-run', 'typo-run')
    p = boardctl(srv, ['run', '--card', 'typo-run', '--', 'no-such-command-anywhere'])
    rc, out, err = finish(p, 15)
    ok, c = untouched(srv, 'typo-run')
    check(rc == 127 and 'no-such-command-anywhere' in err and 'not found' in err and ok,
          'run with a command not in PATH: 127, nothing claimed: %d %s %s' % (rc, err, c))

    # Found but not executable: 126.
    noexec = script(tmp, 'noexec.sh', '#!/bin/sh\nexit 0\n', mode=0o644)
    p = boardctl(srv, ['run', '--card', 'typo-run', '--', noexec])
    rc, out, err = finish(p, 15)
    ok, c = untouched(srv, 'typo-run')
    check(rc == 126 and noexec in err and 'Permission denied' in err and ok,
          'run with a command not executable: 126, nothing claimed: %d %s %s' % (rc, err, c))

    # Looks executable, but its exec fails (the #! interpreter is missing): the exec's own
    # errno comes back from the supervisor over a close-on-exec pipe. The card was claimed
    # and its run made; nothing is filed, the claim is released, `work` stops at 127.
    badint = script(tmp, 'badint.sh', '#!/no/such/interpreter\nexit 0\n')
    for i in range(2):
        srv.new_card('badint%d' % i, 'badint', priority=2 - i)
    seq = srv.last_seq()
    p = boardctl(srv, ['--json', 'work', '--board', 'default', '--label', 'badint',
                       '--wait-ms', '0', '--', badint])
    rc, out, err = finish(p, 15)
    c = srv.card('badint0')
    check(rc == 127 and badint in err and 'No such file or directory' in err and
          'interpreter' in err,
          'an exec that fails: work exits 127 naming the command and the error: %d %s'
          % (rc, err))
    check(c['claim'] is None and c['state'] == 'ready' and c['claim_epoch'] == 1,
          'an exec that fails files nothing; the claim is released: %s' % c)
    ev = [e['type'] for e in srv.events_after(seq) if e.get('card_id') == 'badint0']
    check('card_released' in ev and 'card_state_changed' not in ev,
          'released, never moved: %s' % ev)
    if c.get('last_run_id'):
        st, run = srv.api('GET', '/v1/runs/' + c['last_run_id'])
        check(run.get('status') == 'failed_resumable' and badint in (run.get('error') or ''),
              'the run says why it never started: %s' % run)
    lines = [json.loads(l) for l in out.splitlines() if l.strip()]
    check([l['outcome'] for l in lines] == ['not_started'] and lines[0]['exit_code'] == 127,
          'one job line, not_started, exit 127: %s' % out)
    ok, c = untouched(srv, 'badint1')
    check(ok, 'work stopped: the next card is not taken: %s' % c)


def case_tree_dies(srv, tmp):
    # kill -9 of boardctl while the job runs `sleep 45` in a double-forked grandchild (and in
    # a setsid() one, out of the job's session): nothing of the job survives.
    srv.new_card('tree', 'tree')
    job = script(tmp, 'tree.sh',
                 '#!/bin/sh\n'
                 '( sleep 45 & echo $! > %(t)s/tree.gc.pid )\n'
                 'setsid sh -c \'echo $$ > %(t)s/tree.sid.pid; exec sleep 45\' &\n'
                 'echo $$ > %(t)s/tree.pid\n'
                 'exec sleep 60\n' % {'t': tmp})
    p = boardctl(srv, ['work', '--board', 'default', '--label', 'tree', '--lease-ms', '60000',
                       '--', job])
    pids = [read_pid('%s/tree%s.pid' % (tmp, s)) for s in ('', '.gc', '.sid')]
    check(all(pids), 'the job and its grandchildren started: %s' % pids)
    pids = [x for x in pids if x]
    p.kill()
    p.wait()
    check(wait_for(lambda: not any(alive(x) for x in pids), 10),
          'kill -9 of boardctl: nothing of the job survives: %s' %
          [x for x in pids if alive(x)])
    for x in pids:  # whatever the outcome, leave nothing behind
        try:
            os.kill(x, signal.SIGKILL)
        except OSError:
            pass

    # The job ends and leaves a child behind: it is killed before the outcome is written.
    srv.new_card('left', 'left')
    p = boardctl(srv, ['run', '--card', 'left', '--', 'sh', '-c',
                       '( sleep 45 & echo $! > %s/left.pid ); exit 0' % tmp])
    rc, out, err = finish(p, 20)
    left = read_pid(tmp + '/left.pid', 2)
    check(rc == 0 and left and not alive(left),
          'what a job leaves running dies with it: rc %d, pid %s alive %s' %
          (rc, left, left and alive(left)))
    if left and alive(left):
        os.kill(left, signal.SIGKILL)


class Proxy:
    """An HTTP proxy to boardd. With fail_s, it answers 503 to every renew of the claim until
    fail_s seconds after it passed on the claim's answer, and records when each renew came.
    With output (a status), it answers POST /v1/runs/{id}/output itself with that status and
    records each body, as a server with (200) or without (404, 405) the route would. canned:
    (method, path pattern, status, body) answered as given."""

    def __init__(self, srv, fail_s=None, output=None, canned=()):
        self.srv, self.fail_s, self.t0, self.renews = srv, fail_s, None, []
        self.output, self.outputs, self.canned = output, [], list(canned)
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = 'HTTP/1.1'

            def log_message(self, *a):
                pass

            def relay(self):
                body = self.rfile.read(int(self.headers.get('Content-Length') or 0))
                if (proxy.fail_s is not None and self.path.endswith('/renew') and
                        proxy.t0 is not None):
                    t = time.monotonic() - proxy.t0
                    proxy.renews.append(t)
                    if t < proxy.fail_s:
                        return self.answer(503, b'{"code":"store_unavailable"}')
                for method, pattern, status, data in proxy.canned:
                    if self.command == method and re.match(pattern, self.path):
                        return self.answer(status, data)
                if (proxy.output is not None and self.command == 'POST' and
                        re.match(r'^/v1/runs/[^/]+/output$', self.path)):
                    proxy.outputs.append(body)
                    return self.answer(proxy.output, b'{}' if proxy.output == 200 else
                                       b'{"code":"not_found","detail":"no such route"}')
                conn = http.client.HTTPConnection('127.0.0.1', proxy.srv.port, timeout=30)
                hdrs = {k: v for k, v in self.headers.items()
                        if k.lower() in ('authorization', 'content-type', 'if-match', 'accept')}
                conn.request(self.command, self.path, body or None, hdrs)
                r = conn.getresponse()
                data = r.read()
                conn.close()
                if self.path.endswith('/claim') and r.status == 200:
                    proxy.t0 = time.monotonic()
                self.answer(r.status, data)

            def answer(self, status, data):
                self.send_response(status)
                self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = relay

        self.httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = 'http://127.0.0.1:%d' % self.httpd.server_address[1]

    def close(self):
        self.httpd.shutdown()


def case_output_sent(srv, tmp):
    # What boardctl sends as the run's output, seen by a proxy answering the route the way a
    # server with it (200) does: the job's last bytes, at most 64 KiB a request, valid UTF-8
    # (an invalid byte as U+FFFD, a character never split between two requests), each under
    # the claim's marker, all before the run's final write; and the way a server without it
    # does (404, 405): one try, then never again, and nothing said.
    job = script(tmp, 'sent.sh',
                 '#!/bin/sh\n'
                 'echo "first"\n'
                 'i=0; while [ $i -lt 2000 ]; do echo "line $i: caf\u00e9 \u00e9t\u00e9 '
                 'na\u00efve, sixty-odd bytes"; i=$((i+1)); '
                 '[ $i -eq 1000 ] && sleep 6; done\n'
                 'printf \'bad \\377 byte\\n\'\n'
                 'echo "the last line" >&2\n')
    proxy = Proxy(srv, output=200)
    try:
        srv.new_card('sent', 'sent')
        rc, out, err = finish(boardctl(srv, ['--url', proxy.url, 'run', '--card', 'sent', '--',
                                             job], errors='replace'))
        c = srv.card('sent')
        bodies = [json.loads(b) for b in proxy.outputs]
        texts = [b.get('text', '') for b in bodies]
        check(rc == 0 and c['state'] == 'done' and bodies,
              'output sent with a 200 route: rc %d, %d requests, %s' % (rc, len(bodies),
                                                                       err[-200:]))
        check(all(b.get('marker', '').startswith('boardctl-') for b in bodies),
              'each under the claim\'s marker')
        check(len(texts) >= 2 and all(len(t.encode()) <= 65536 for t in texts),
              'sent while the job runs and at its end, at most 64 KiB a request: %s'
              % [len(t.encode()) for t in texts])
        check(texts and texts[0].startswith('first\nline 0: '),
              'the first request starts with the job\'s first line: %r' % texts[0][:40])
        whole = ''.join(texts)
        # stdout and stderr are two pipes: their lines interleave as boardctl reads them
        check('the last line\n' in whole and
              whole.replace('the last line\n', '').endswith(
                  'line 1999: caf\u00e9 \u00e9t\u00e9 na\u00efve, sixty-odd bytes\n'
                  'bad \ufffd byte\n'),
              'the tail is the job\'s last output, as UTF-8: %r' % whole[-120:])
        check('\ufffd' not in whole.replace('bad \ufffd byte', ''),
              'no character split between requests')
    finally:
        proxy.close()
    for status in (404, 405):
        proxy = Proxy(srv, output=status)
        try:
            cid = 'nosent%d' % status
            srv.new_card(cid, cid)
            rc, out, err = finish(boardctl(srv, ['--url', proxy.url, 'run', '--card', cid, '--',
                                                 job], errors='replace'))
            check(rc == 0 and srv.card(cid)['state'] == 'done' and len(proxy.outputs) <= 1 and
                  'output' not in err.replace('the last line', ''),
                  'a server answering %d to the output route: the job is done, one try at '
                  'most, nothing said: rc %d, %d tries, %s' % (status, rc, len(proxy.outputs),
                                                               err[-200:]))
        finally:
            proxy.close()


def case_runs_listing(srv, tmp):
    # `boardctl runs CARD` on a server with run history (DESIGN §20), as a proxy serves it:
    # a table, newest first as served, and --output with each run's output (from the listing,
    # or GET /v1/runs/{id} when the listing leaves it out).
    listing = {'runs': [
        {'id': 'r-2', 'card_id': 'lst', 'status': 'failed', 'claim_epoch': 2,
         'created_at': '2026-12-06T10:00:02.000Z', 'updated_at': '2026-12-06T10:00:03.000Z',
         'error': 'exit status 3', 'output': 'second run says hi\n'},
        {'id': 'r-1', 'card_id': 'lst', 'status': 'failed_resumable', 'claim_epoch': 1,
         'created_at': '2026-12-06T10:00:00.000Z', 'updated_at': '2026-12-06T10:00:01.000Z',
         'error': None}], 'next': None}
    one = {'id': 'r-1', 'status': 'failed_resumable', 'output': 'first run output\n'}
    proxy = Proxy(srv, canned=[('GET', r'^/v1/cards/lst/runs', 200, json.dumps(listing).encode()),
                               ('GET', r'^/v1/runs/r-1$', 200, json.dumps(one).encode())])
    try:
        env = dict(os.environ, BOARDD_URL=proxy.url, BOARDD_TOKEN=srv.op)
        r = subprocess.run([BOARDCTL, 'runs', 'lst'], capture_output=True, text=True, env=env)
        rows = [l.split() for l in r.stdout.splitlines()]
        check(r.returncode == 0 and [x[:3] for x in rows[1:]] ==
              [['r-2', 'failed', '2'], ['r-1', 'failed_resumable', '1']] and
              'exit status 3' in r.stdout, 'boardctl runs: a table: %d %r %s'
              % (r.returncode, r.stdout, r.stderr))
        r = subprocess.run([BOARDCTL, 'runs', 'lst', '--output'], capture_output=True,
                           text=True, env=env)
        check(r.returncode == 0 and '--- run r-2 output:\nsecond run says hi\n' in r.stdout and
              '--- run r-1 output:\nfirst run output\n' in r.stdout,
              'boardctl runs --output: each run\'s output: %r' % r.stdout)
        r = subprocess.run([BOARDCTL, '--json', 'runs', 'lst'], capture_output=True, text=True,
                           env=env)
        check(r.returncode == 0 and json.loads(r.stdout) == listing, 'boardctl --json runs')
    finally:
        proxy.close()


def case_renew_last_try(srv, tmp):
    # Lease 9 s, renews every 3 s; from the first renew on the server answers 503 until 7 s
    # in. The old backoff tried at 3.0, 3.2, 3.6, 4.4, 6.0 and next at 9.2: past the lease
    # end (9.0), so the job was killed with the server back for 2 s. Now the waits never
    # exceed half the time left: a try lands between 7 s and 9 s and the job finishes.
    proxy = Proxy(srv, fail_s=7.0)
    try:
        srv.new_card('renew', 'renew')
        p = boardctl(srv, ['--url', proxy.url, 'run', '--card', 'renew', '--lease-ms', '9000',
                           '--grace', '1s', '--', 'sleep', '11'])
        rc, out, err = finish(p, 40)
        c = srv.card('renew')
        last = [t for t in proxy.renews if 7.0 <= t < 9.0]
        check(last, 'a renew try landed in the lease\'s last 2 s: %s'
              % ['%.2f' % t for t in proxy.renews])
        check(rc == 0 and c['state'] == 'done' and c['claim'] is None,
              'the job rode the outage to its end: rc %d %s %s' % (rc, c, err[-300:]))
    finally:
        proxy.close()


def case_running_column(srv, tmp):
    srv.new_card('rcol0', 'rcol0')
    p = boardctl(srv, ['run', '--card', 'rcol0', '--running-column', 'no_such_col', '--',
                       'true'])
    rc, out, err = finish(p)
    ok, c = untouched(srv, 'rcol0')
    check(rc == 125 and 'no_such_col' in err and ok,
          '--running-column naming no column: 125, nothing claimed: %d %s %s' % (rc, err, c))

    # The card enters the board's running column (in_progress) as its job starts, an owned
    # write under the claim; the outcome files it from there.
    fifo = os.path.join(tmp, 'rcol.fifo')
    os.mkfifo(fifo)
    srv.new_card('rcol', 'rcol')
    seq = srv.last_seq()
    p = boardctl(srv, ['run', '--card', 'rcol', '--', 'sh', '-c',
                       'echo $$ > %s/rcol.pid; read x < %s' % (tmp, fifo)])
    check(read_pid(tmp + '/rcol.pid') is not None, 'the job started')
    c = wait_for(lambda: srv.card('rcol')['state'] == 'in_progress' and srv.card('rcol'), 10)
    check(c and c['claim'] is not None, 'the card is in in_progress while its job runs: %s'
          % srv.card('rcol'))
    fd = os.open(fifo, os.O_RDWR)
    os.write(fd, b'go\n')
    rc, out, err = finish(p)
    os.close(fd)
    ev = [(e['type'], (e.get('payload') or {}).get('to'), (e.get('payload') or {}).get('reason'))
          for e in srv.events_after(seq) if e.get('card_id') == 'rcol' and
          e['type'] == 'card_state_changed']
    check(rc == 0 and srv.card('rcol')['state'] == 'done', 'then done: %d %s' % (rc, err))
    check(ev and ev[0][1] == 'in_progress', 'ready -> in_progress -> done: %s' % ev)

    # --running-column none: the card stays where it was while the job runs.
    srv.new_card('rcoln', 'rcoln')
    p = boardctl(srv, ['run', '--card', 'rcoln', '--running-column', 'none', '--', 'sh', '-c',
                       'echo $$ > %s/rcoln.pid; sleep 1' % tmp])
    check(read_pid(tmp + '/rcoln.pid') is not None, 'the job started')
    state = srv.card('rcoln')['state']
    rc, out, err = finish(p)
    check(rc == 0 and state == 'ready', '--running-column none: stays in ready: %s' % state)


def output_route(srv):
    """Whether the server has POST /v1/runs/{id}/output (another part of issue 26)."""
    st, body = srv.api('POST', '/v1/runs/none-such/output', {'marker': 'm', 'text': 'x'},
                       token=srv.worker)
    return not (st == 405 or (st == 404 and body and body.get('detail') == 'no such route'))


def case_output(srv, tmp):
    routed = output_route(srv)
    print('the output route is %s' % ('there' if routed else 'absent: only what boardctl '
                                      'does without it is checked'), flush=True)
    srv.new_card('out', 'out')
    job = script(tmp, 'out.sh',
                 '#!/bin/sh\n'
                 'echo "to stdout"\n'
                 'echo "to stderr" >&2\n'
                 'i=0; while [ $i -lt 1500 ]; do echo "line $i of a long output, padded to '
                 'sixty bytes"; i=$((i+1)); done\n'
                 'printf \'bad \\377 byte, caf\\303\\251\\n\'\n'
                 'echo "the last line" >&2\n'
                 'exit 3\n')
    p = boardctl(srv, ['run', '--card', 'out', '--', job], errors='replace')
    rc, out, err = finish(p)
    check(rc == 3, 'run exits with the job\'s status: %d' % rc)
    check('to stdout' in out and 'line 1499 of a long' in out,
          'the job\'s stdout goes through to boardctl\'s: %s' % out[:100])
    check('to stderr' in err and 'the last line' in err,
          'the job\'s stderr goes through to boardctl\'s: %s' % err[-300:])
    check('output not kept' not in err and 'renew failed' not in err,
          'boardctl warns of nothing: %s' % err[-300:])
    c = srv.card('out')
    check(c['state'] == 'blocked', 'filed as a failure: %s' % c['state'])
    st, run = srv.api('GET', '/v1/runs/' + c['last_run_id'])
    if routed:
        o = run.get('output') or ''
        # stdout and stderr are two pipes: nothing orders the stderr line before or after
        # stdout's last ones, so each stream's tail is checked on its own.
        check('the last line\n' in o and
              o.replace('the last line\n', '').endswith('bad \ufffd byte, caf\u00e9\n'),
              'the run\'s output ends with the job\'s last lines, as UTF-8: %r' % o[-80:])
        check(0 < len(o.encode()) <= 65536 and 'to stdout' not in o,
              'the run keeps the tail, at most 64 KiB: %d bytes' % len(o.encode()))
    env = dict(os.environ, BOARDD_URL=srv.url, BOARDD_TOKEN=srv.op)
    r = subprocess.run([BOARDCTL, 'runs', 'out'], capture_output=True, text=True, env=env)
    if routed:
        check(r.returncode == 0 and c['last_run_id'] in r.stdout and 'failed' in r.stdout,
              'boardctl runs lists the run: %d %s %s' % (r.returncode, r.stdout, r.stderr))
        r = subprocess.run([BOARDCTL, 'runs', 'out', '--output'], capture_output=True,
                           text=True, env=env)
        check(r.returncode == 0 and 'the last line' in r.stdout,
              'boardctl runs --output shows it: %s' % r.stdout[-200:])
    else:
        check(r.returncode == 1 and 'no run history' in r.stderr,
              'boardctl runs on a server without the route says so: %d %s'
              % (r.returncode, r.stderr))
    r = subprocess.run([BOARDCTL, 'runs', 'no-such-card'], capture_output=True, text=True,
                       env=env)
    check(r.returncode == 1 and 'no-such-card' in r.stderr,
          'boardctl runs of an unknown card: %d %s' % (r.returncode, r.stderr))


def case_exit_statuses(srv, tmp):
    srv.new_card('sig', 'sig')
    p = boardctl(srv, ['--json', 'run', '--card', 'sig', '--', 'sh', '-c', 'kill -TERM $$'])
    rc, out, err = finish(p)
    line = json.loads(out.splitlines()[-1]) if out.strip() else {}
    check(rc == 143 and 'killed by signal 15 (exit 143)' in err and '-15' not in err,
          'a job killed by signal 15: run exits 143, its line says so: %d %s' % (rc, err))
    check(line.get('exit_code') == 143 and line.get('signal') == 15,
          '--json: exit_code 143, signal 15: %s' % line)
    r = subprocess.run([BOARDCTL, '--version'], capture_output=True, text=True)
    check(r.returncode == 0 and re.fullmatch(r'boardctl \d+\.\d+\.\d+\n', r.stdout),
          'boardctl --version: %d %r' % (r.returncode, r.stdout))
    for args in (['--bogus', 'cards', 'ls'], ['run', '--card'], ['work', '--', 'true'],
                 ['cards', 'ls', '--bogus'], ['nosuchverb']):
        r = subprocess.run([BOARDCTL] + args, capture_output=True, text=True)
        check(r.returncode == 125, 'a usage error is boardctl\'s own (125): %s -> %d'
              % (args, r.returncode))
    # A job exiting 2 is told apart from boardctl's errors; `run` hands the job its board
    # too (a named card's claim answers the token only).
    srv.new_card('two', 'two')
    rc, out, err = finish(boardctl(srv, ['run', '--card', 'two', '--', 'sh', '-c',
                                         'echo "$BOARDD_BOARD" > %s/two.board; exit 2' % tmp]))
    check(rc == 2 and srv.card('two')['state'] == 'blocked', 'a job\'s exit 2 is its own: %d'
          % rc)
    check(open(tmp + '/two.board').read() == 'default\n', 'run: BOARDD_BOARD is the card\'s board')
    r = subprocess.run([BOARDCTL, 'runs', '--help'], capture_output=True, text=True)
    check(r.returncode == 0 and 'usage: boardctl runs' in r.stdout, 'runs --help')


def main():
    tmp = tempfile.mkdtemp(prefix='boardctl-trust-')
    srv = Server(tmp)
    srv.start()
    try:
        case_exit_statuses(srv, tmp)
        case_cannot_start(srv, tmp)
        case_tree_dies(srv, tmp)
        case_running_column(srv, tmp)
        case_output(srv, tmp)
        case_output_sent(srv, tmp)
        case_runs_listing(srv, tmp)
        case_renew_last_try(srv, tmp)
    finally:
        srv.stop()
    if bt.summary('boardctl trust'):
        print('server logs: ' + tmp + '/data.NNN.log')
        return 1
    import shutil
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
