"""Shared plumbing of the fault harnesses: a boardd process on 127.0.0.1 over an FS data
directory, tokens made with `boardd token add`, a small keep-alive JSON client, and the
events log read page by page. Standard library only.

Nothing here asserts: the harnesses decide what is a failure.
"""
import http.client
import json
import os
import re
import signal
import ssl
import subprocess
import time
import urllib.parse

PORT_RE = re.compile(r'listening on .* \(port (\d+)\)')


def clean_env():
    """The environment without any BOARDD_* or reaper gate from the caller."""
    e = dict(os.environ)
    for k in list(e):
        if k.startswith('BOARDD_') or k == 'ITERION_BOARD_CLAIM_REAPER':
            del e[k]
    return e


def token_add(boardd, tokens, name, roles):
    """Adds a token to the tokens file; returns its plain text (printed once on stdout)."""
    args = [boardd, 'token', 'add', '--tokens', tokens, '--name', name]
    for r in roles:
        args += ['--role', r]
    out = subprocess.run(args, capture_output=True, text=True, timeout=30, env=clean_env(),
                         check=True)
    return out.stdout.strip().splitlines()[-1].strip()


class Server:
    """One boardd process. start() waits (bounded) for the port line and /readyz 200."""

    def __init__(self, boardd, datadir, tokens, logdir, extra=(), store=None, cafile=None,
                 env=None):
        """datadir: the FS data directory; store: another store spec (mongodb://...)
        used instead when given; cafile: the server speaks HTTPS (extra has --tls-cert and
        --tls-key) with a certificate this CA file verifies; env: variables added to the
        clean environment."""
        self.boardd = boardd
        self.cafile = cafile
        self.datadir = datadir
        self.store = store or 'fs:' + datadir
        self.tokens = tokens
        self.logdir = logdir
        self.extra = list(extra)
        self.env = dict(env or {})
        self.proc = None
        self.port = None
        self.log_path = None
        self.starts = 0

    def start(self, timeout=60.0):
        """Returns (ok, detail). On failure the process is gone and detail says why."""
        self.starts += 1
        self.log_path = os.path.join(self.logdir, 'boardd.%03d.log' % self.starts)
        log = open(self.log_path, 'w')
        args = [self.boardd, '--store', self.store, '--listen', '127.0.0.1:0',
                '--tokens', self.tokens, '--threads', '4'] + self.extra
        env = clean_env()
        env.update(self.env)
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                     env=env)
        log.close()
        deadline = time.monotonic() + timeout
        self.port = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False, 'boardd exited with %s at start:\n%s' % (
                    self.proc.returncode, self.log_tail())
            with open(self.log_path, errors='replace') as f:
                m = PORT_RE.search(f.read())
            if m:
                self.port = int(m.group(1))
                break
            time.sleep(0.02)
        if self.port is None:
            self.kill()
            return False, 'boardd printed no port within %.0f s:\n%s' % (timeout,
                                                                          self.log_tail())
        while time.monotonic() < deadline:
            try:
                st, body = Client(self.port, None, timeout=5,
                                  cafile=self.cafile).call('GET', '/readyz')
                if st == 200:
                    return True, ''
            except OSError:
                pass
            time.sleep(0.05)
        self.kill()
        return False, '/readyz did not answer 200 within %.0f s' % timeout

    def kill(self):
        """SIGKILL and reap; returns the exit status (negative signal number)."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        return self.proc.wait(timeout=30) if self.proc else None

    def stop(self, timeout=30.0):
        """SIGTERM, bounded wait (then SIGKILL); returns the exit status."""
        if not self.proc:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait(timeout=30)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def log_text(self):
        try:
            with open(self.log_path, errors='replace') as f:
                return f.read()
        except OSError:
            return ''

    def log_tail(self, n=30):
        return ''.join(self.log_text().splitlines(True)[-n:])


class Client:
    """A keep-alive JSON client. call() raises OSError (or http.client errors, which are
    mapped to OSError here) on any transport failure: the caller cannot know whether a write
    that failed that way was applied."""

    def __init__(self, port, token, timeout=10.0, cafile=None):
        """cafile: speak HTTPS, verifying the server's certificate with it."""
        self.port = port
        self.token = token
        self.timeout = timeout
        self.cafile = cafile
        self.conn = None

    def close(self):
        if self.conn:
            self.conn.close()
            self.conn = None

    def call(self, method, path, body=None, headers=None):
        """Returns (status, parsed JSON body or None)."""
        status, raw = self.call_raw(method, path, body, headers)
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, {'_raw': raw.decode(errors='replace')}

    def call_raw(self, method, path, body=None, headers=None):
        """Returns (status, the body's bytes)."""
        h = {'Connection': 'keep-alive'}
        if self.token:
            h['Authorization'] = 'Bearer ' + self.token
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h['Content-Type'] = 'application/json'
        h.update(headers or {})
        try:
            if self.conn is None and self.cafile:
                self.conn = http.client.HTTPSConnection(
                    '127.0.0.1', self.port, timeout=self.timeout,
                    context=ssl.create_default_context(cafile=self.cafile))
            elif self.conn is None:
                self.conn = http.client.HTTPConnection('127.0.0.1', self.port,
                                                       timeout=self.timeout)
            self.conn.request(method, path, body=data, headers=h)
            r = self.conn.getresponse()
            raw = r.read()
            status = r.status
            if r.getheader('Connection', '').lower() == 'close':
                self.close()
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise OSError('%s %s: %s: %s' % (method, path, type(e).__name__, e)) from None
        return status, raw


def events_since(client, after, board='default', limit=1000):
    """Every event after seq `after`, oldest first, and the last seq seen. Raises OSError or
    RuntimeError (a non-200 page)."""
    out = []
    while True:
        st, body = client.call('GET', '/v1/events?board=%s&after=%d&limit=%d' %
                               (board, after, limit))
        if st != 200:
            raise RuntimeError('GET /v1/events answered %s: %s' % (st, body))
        evs = body['events']
        out.extend(evs)
        if not evs:
            return out, after
        after = evs[-1]['seq']


def cards_all(client, board='default', limit=1000):
    """{id: card} of the board, every page. Raises RuntimeError on a repeated card."""
    out = {}
    after = None
    while True:
        path = '/v1/cards?board=%s&limit=%d' % (board, limit)
        if after:
            path += '&after=' + urllib.parse.quote(after, safe='')
        st, body = client.call('GET', path)
        if st != 200:
            raise RuntimeError('GET /v1/cards answered %s: %s' % (st, body))
        for c in body['cards']:
            if c['id'] in out:
                raise RuntimeError('card %s listed twice' % c['id'])
            out[c['id']] = c
        after = body.get('next')
        if not after:
            return out
