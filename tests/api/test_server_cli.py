#!/usr/bin/env python3
"""End-to-end checks of the boardd binary: flags and exit codes, `boardd token add`, the
tokens bootstrap, a request with a printed dev token, and a clean SIGTERM shutdown.

usage: test_server_cli.py path/to/boardd
"""
import http.client
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
import urllib.error
import urllib.request

BOARDD = sys.argv[1]
passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print('FAIL:', what)


def run(args, env=None, timeout=10):
    e = dict(os.environ)
    for k in list(e):
        if k.startswith('BOARDD_') or k == 'ITERION_BOARD_CLAIM_REAPER':
            del e[k]
    e.update(env or {})
    return subprocess.run([BOARDD] + args, capture_output=True, text=True, timeout=timeout, env=e)


def start(tmp, extra=(), env=None):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.Popen([BOARDD, '--listen', '127.0.0.1:0', '--store', 'fs:' + tmp + '/data',
                          '--threads', '2'] + list(extra),
                         stderr=subprocess.PIPE, text=True, env=e)
    lines = []
    deadline = time.time() + 10
    while time.time() < deadline:
        line = p.stderr.readline()
        if not line:
            break
        lines.append(line)
        m = re.search(r'listening on .* \(port (\d+)\)', line)
        if m:
            return p, int(m.group(1)), lines
    p.kill()
    raise SystemExit('server did not start: ' + ''.join(lines))


def get(port, path, token=None, method='GET'):
    req = urllib.request.Request('http://127.0.0.1:%d%s' % (port, path), method=method)
    if token:
        req.add_header('Authorization', 'Bearer ' + token)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


class StderrLines:
    """Collects a process's stderr lines on a thread (select and a buffered pipe disagree)."""

    def __init__(self, p):
        self.lines, self.cv = [], threading.Condition()
        self.t = threading.Thread(target=self._run, args=(p,), daemon=True)
        self.t.start()

    def _run(self, p):
        for line in p.stderr:
            with self.cv:
                self.lines.append(line.rstrip('\n'))
                self.cv.notify_all()

    def wait_for(self, pattern, seconds):
        """The first line matching pattern, or None after `seconds`."""
        deadline = time.time() + seconds
        with self.cv:
            while True:
                for line in self.lines:
                    if re.search(pattern, line):
                        return line
                left = deadline - time.time()
                if left <= 0:
                    return None
                self.cv.wait(left)

    def text(self):
        self.t.join(timeout=15)
        with self.cv:
            return '\n'.join(self.lines)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        # flags
        r = run(['--help'])
        check(r.returncode == 0 and '--lease-default-ms' in r.stdout, '--help')
        r = run(['--version'])
        check(r.returncode == 0 and r.stdout.startswith('boardd '), '--version')
        for bad in (['--threads', '0'], ['--max-body', 'lots'], ['--log-format', 'xml'],
                    ['--reaper=maybe'], ['--nope'], ['--listen'],
                    ['--lease-min-ms', '5000', '--lease-default-ms', '10']):
            r = run(bad + ['--store', 'fs:' + tmp + '/never'])
            check(r.returncode == 2 and r.stderr.strip(), 'exit 2 for %s' % bad)
        r = run(['--store', 'fs:' + tmp + '/never'], env={'BOARDD_THREADS': '-1'})
        check(r.returncode == 2 and 'BOARDD_THREADS' in r.stderr, 'exit 2 for BOARDD_THREADS=-1')
        check(not os.path.exists(tmp + '/never'), 'no store opened on a bad flag')

        # token add
        tf = tmp + '/tokens.json'
        r = run(['token', 'add', '--tokens', tf, '--name', 'ci', '--role', 'bot',
                 '--role', 'worker', '--board', 'default'])
        check(r.returncode == 0 and re.fullmatch(r'[0-9a-f]{64}\n', r.stdout), 'token add prints it')
        plain = r.stdout.strip()
        check(stat.S_IMODE(os.stat(tf).st_mode) == 0o600, 'tokens file mode 0600')
        doc = json.load(open(tf))
        check(doc['tokens'][0]['roles'] == ['worker', 'bot'] and
              doc['tokens'][0]['boards'] == ['default'], 'token entry')
        check(plain not in open(tf).read(), 'plain token not stored')
        r = run(['token', 'add', '--tokens', tf, '--name', 'ci', '--role', 'bot'])
        check(r.returncode != 0, 'duplicate token name refused')
        r = run(['token', 'add', '--tokens', tf, '--name', 'x', '--role', 'king'])
        check(r.returncode == 2, 'unknown role refused')
        # capabilities (DESIGN §13): --cap narrows, absent means all six
        r = run(['token', 'add', '--tokens', tf, '--name', 'reader', '--role', 'bot',
                 '--cap', 'board.read', '--cap', 'board.comment'])
        reader = r.stdout.strip()
        ents = {e['name']: e for e in json.load(open(tf))['tokens']}
        check(r.returncode == 0 and ents['reader'].get('caps') == ['board.read', 'board.comment']
              and 'caps' not in ents['ci'], 'token add --cap writes caps: %s' % ents)
        r = run(['token', 'add', '--tokens', tf, '--name', 'y', '--role', 'bot', '--cap', 'fly'])
        check(r.returncode == 2 and 'capability' in r.stderr, 'unknown capability refused')

        # a server with that tokens file: the token works, roles apply
        p, port, _ = start(tmp, ['--tokens', tf])
        check(get(port, '/healthz')[0] == 200, 'healthz')
        check(get(port, '/v1/cards')[0] == 401, 'no token 401')
        check(get(port, '/v1/cards', plain)[0] == 200, 'token add token works')
        check(get(port, '/v1/boards/other', plain)[0] == 403, 'board scope from the file')
        check(get(port, '/v1/cards', reader)[0] == 200, 'a board.read token reads')
        st, body = get(port, '/v1/cards/x/labels', reader, method='PUT')
        check(st == 403 and 'board.label' in body, 'a token without board.label: 403 %s' % body)
        # the access log: a lone request's line shows up at once, not at the next flush
        log = StderrLines(p)
        check(log.wait_for(r' GET /v1/boards/other 403 [0-9.]+ms ci$', 5) is not None,
              'access log line of a lone request written at once')
        # a burst over one keep-alive connection: every line is written, none lost
        conn = http.client.HTTPConnection('127.0.0.1', port, timeout=5)
        for i in range(300):
            conn.request('GET', '/v1/cards/burst-%d' % i, headers={'Authorization': 'Bearer ' + plain})
            r = conn.getresponse()
            r.read()
        conn.close()
        p.send_signal(signal.SIGTERM)
        check(p.wait(timeout=15) == 0, 'SIGTERM exits 0')
        rest = log.text()
        burst = re.findall(r' GET /v1/cards/burst-(\d+) 404 ', rest)
        check(sorted(int(b) for b in burst) == list(range(300)),
              'access log: 300 burst lines, each once (%d seen)' % len(burst))

        # bootstrap: no --tokens creates DATADIR/tokens.json and prints the dev tokens once
        p, port, lines = start(tmp, env={'ITERION_BOARD_CLAIM_REAPER': 'ON'})
        text = ''.join(lines)
        toks = dict(re.findall(r'(dev-worker|dev-bot|dev-operator)\s+([0-9a-f]{64})', text))
        check(len(toks) == 3, 'three dev tokens printed')
        check(os.path.exists(tmp + '/data/tokens.json'), 'bootstrap file in the data dir')
        check('reaper gate on' in text, 'ITERION_BOARD_CLAIM_REAPER=ON turns the gate on')
        if len(toks) == 3:
            check(get(port, '/v1/cards', toks['dev-bot'])[0] == 200, 'dev token works')
            st, body = get(port, '/v1/reaper', toks['dev-worker'])
            check(st == 200 and json.loads(body).get('gate') in ('on', True), 'GET /v1/reaper')
            st, body = get(port, '/v1/reaper/pass', toks['dev-bot'], 'POST')
            check(st == 403, 'POST /v1/reaper/pass needs the operator role')
            st, body = get(port, '/v1/reaper/pass', toks['dev-operator'], 'POST')
            stats = json.loads(body) if st == 200 else {}
            check(st == 200 and 'actions' in stats and 'listed' in stats,
                  'POST /v1/reaper/pass returns the stats: %s' % body)
        p.send_signal(signal.SIGINT)
        check(p.wait(timeout=15) == 0, 'SIGINT exits 0')
        p, port, lines = start(tmp, ['--reaper', 'off'])
        text = ''.join(lines)
        check(not re.search(r'[0-9a-f]{64}', text) and 'tokens.json' in text,
              'restart reuses the file and prints no token')
        check('reaper gate off' in text, '--reaper off')
        if len(toks) == 3:
            check(get(port, '/v1/cards', toks['dev-bot'])[0] == 200, 'dev token survives restart')
        p.send_signal(signal.SIGTERM)
        check(p.wait(timeout=15) == 0, 'SIGTERM exits 0 again')
    print('%d passed, %d failed' % (passed, failed))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
