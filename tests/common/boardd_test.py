"""Shared plumbing of boardd's Python tests and benchmarks, written once (standard library
only): the pass/fail tally every test prints, a boardd process on 127.0.0.1 (a temporary
store, a free port, tokens made with `boardd token add`, ready once /readyz answers 200), a
small JSON HTTP client, problem+json checks, a database of its own on the Mongo test server,
an event-stream (SSE) reader, self-signed TLS pairs and the metrics table of metrics/metrics.h.

A test imports it from this directory:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
    import boardd_test as bt  # noqa: E402

Nothing here decides what a test asserts: check() only counts, the helpers raise on broken
plumbing (a server that does not start, a token that cannot be made).
"""
import atexit
import http.client
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

PORT_RE = re.compile(r'listening on .* \(port (\d+)\)')
CI = os.environ.get('CI') == 'true'


# ---- the tally ------------------------------------------------------------------------------

_tally = {'passed': 0, 'failed': 0, 'verbose': False}


def verbose(on=True):
    """check() also prints a line for every check that passes ('ok   what')."""
    _tally['verbose'] = on


def check(cond, what):
    """Counts one check; prints 'FAIL: what' when cond is false. Returns cond."""
    if cond:
        _tally['passed'] += 1
        if _tally['verbose']:
            print('ok   ' + what, flush=True)
    else:
        _tally['failed'] += 1
        print('FAIL: ' + what, flush=True)
    return cond


def passed():
    return _tally['passed']


def failed():
    return _tally['failed']


def summary(label=None):
    """Prints '[label: ]N passed, M failed'; returns the exit status (1 when any failed)."""
    print('%s%d passed, %d failed' % (label + ': ' if label else '', _tally['passed'],
                                      _tally['failed']), flush=True)
    return 1 if _tally['failed'] else 0


def skip_or_fail(why):
    """A test that cannot run here: exit 77 (skipped) on a developer's machine, 1 in CI where
    everything must run."""
    print(('FAIL: ' if CI else 'SKIP: ') + why, flush=True)
    sys.exit(1 if CI else 77)


def wait_for(pred, timeout=10.0, step=0.05, final=True):
    """Polls pred() until it is truthy (returns that value) or `timeout` seconds pass; then
    returns one last pred() (final=True) or None."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return pred() if final else None


# ---- processes ------------------------------------------------------------------------------

def clean_env(extra=None):
    """The environment without any BOARDD_* or reaper gate from the caller, plus `extra`."""
    e = {k: v for k, v in os.environ.items()
         if not k.startswith('BOARDD_') and k != 'ITERION_BOARD_CLAIM_REAPER'}
    e.update(extra or {})
    return e


def free_port(host='127.0.0.1'):
    s = socket.socket()
    s.bind((host, 0))
    port = s.getsockname()[1]
    s.close()
    return port


def token_add(boardd, tokens, name, roles, boards=(), caps=()):
    """Adds a token to the tokens file; returns its plain text (printed once on stdout)."""
    args = [boardd, 'token', 'add', '--tokens', tokens, '--name', name]
    for r in roles:
        args += ['--role', r]
    for b in boards:
        args += ['--board', b]
    for c in caps:
        args += ['--cap', c]
    out = subprocess.run(args, capture_output=True, text=True, timeout=30, env=clean_env())
    if out.returncode != 0 or not out.stdout.strip():
        raise SystemExit('boardd token add %s failed (%d): %s%s' % (
            name, out.returncode, out.stdout, out.stderr))
    return out.stdout.strip().splitlines()[-1].strip()


def make_pair(d, name, cn):
    """A self-signed P-256 certificate for 127.0.0.1 (its own CA) and its key, made with the
    openssl CLI in directory d: (cert path, key path)."""
    cert, key = os.path.join(d, name + '.crt'), os.path.join(d, name + '.key')
    subprocess.run(['openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt',
                    'ec_paramgen_curve:P-256', '-nodes', '-keyout', key, '-out', cert,
                    '-subj', '/CN=' + cn, '-addext', 'subjectAltName=IP:127.0.0.1',
                    '-days', '2'], check=True, capture_output=True, timeout=60)
    return cert, key


class Server:
    """One boardd process on 127.0.0.1, its stdout and stderr in a log file of its own per
    start (logdir/boardd.NNN.log). start() waits (bounded) for the port line and, unless told
    not to, for /readyz 200."""

    def __init__(self, boardd, datadir=None, tokens=None, logdir=None, extra=(), store=None,
                 cafile=None, env=None, threads=4, argv=None, keep_port=False, name='boardd'):
        """datadir: the FS data directory; store: another store spec (mongodb://...) used
        instead when given; tokens: the tokens file (None: boardd bootstraps one in the data
        directory and prints the dev tokens); logdir: where the logs go (default: a temporary
        directory removed at exit); cafile: the server speaks HTTPS (extra has --tls-cert
        and --tls-key) with a certificate this CA file verifies; env: variables added to the
        clean environment; argv: the whole command line after the binary, as given (then
        store, tokens, threads and extra are not used); keep_port: a restart listens on the
        port of the first start; name: the logs' (name.NNN.log)."""
        self.boardd = boardd
        self.cafile = cafile
        self.datadir = datadir
        self.store = store or ('fs:' + datadir if datadir else None)
        self.tokens_file = tokens
        if logdir is None:
            logdir = tempfile.mkdtemp(prefix='boardd-log-')
            atexit.register(shutil.rmtree, logdir, True)
        self.logdir = logdir
        self.extra = list(extra)
        self.env = dict(env or {})
        self.threads = threads
        self.argv = list(argv) if argv is not None else None
        self.keep_port = keep_port
        self.name = name
        self.proc = None
        self.port = None
        self.log_path = None
        self.starts = 0

    def command(self):
        if self.argv is not None:
            return [self.boardd] + self.argv
        listen = '127.0.0.1:%d' % (self.port if self.keep_port and self.port else 0)
        args = [self.boardd, '--store', self.store, '--listen', listen,
                '--threads', str(self.threads)]
        if self.tokens_file:
            args += ['--tokens', self.tokens_file]
        return args + self.extra

    def start(self, timeout=60.0, readyz=True):
        """Returns (ok, detail). On failure the process is gone and detail says why."""
        self.starts += 1
        self.log_path = os.path.join(self.logdir, '%s.%03d.log' % (self.name, self.starts))
        log = open(self.log_path, 'w')
        args = self.command()
        if not self.keep_port:
            self.port = None
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                     env=clean_env(self.env))
        log.close()
        deadline = time.monotonic() + timeout
        port = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False, 'boardd exited with %s at start:\n%s' % (
                    self.proc.returncode, self.log_tail())
            m = PORT_RE.search(self.log_text())
            if m:
                port = int(m.group(1))
                break
            time.sleep(0.02)
        if port is None:
            self.kill()
            return False, 'boardd printed no port within %.0f s:\n%s' % (timeout,
                                                                          self.log_tail())
        self.port = port
        while readyz and time.monotonic() < deadline:
            try:
                st, body = Client(self.port, None, timeout=5,
                                  cafile=self.cafile).call('GET', '/readyz')
                if st == 200:
                    return True, ''
            except OSError:
                pass
            time.sleep(0.05)
        if not readyz:
            return True, ''
        self.kill()
        return False, '/readyz did not answer 200 within %.0f s' % timeout

    def started(self, timeout=60.0, readyz=True):
        """start(), raising SystemExit (with the log) when boardd does not come up."""
        ok, detail = Server.start(self, timeout, readyz)  # a subclass may wrap start()
        if not ok:
            raise SystemExit('boardd did not start (%s): %s' % (' '.join(self.command()),
                                                                detail))
        return self

    @property
    def url(self):
        return '%s://127.0.0.1:%d' % ('https' if self.cafile else 'http', self.port)

    def send_signal(self, sig):
        self.proc.send_signal(sig)

    def kill(self):
        """SIGKILL and reap; returns the exit status (negative signal number)."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        return self.proc.wait(timeout=30) if self.proc else None

    def stop(self, timeout=30.0, sig=signal.SIGTERM):
        """`sig` (SIGTERM), bounded wait (then SIGKILL); returns the exit status."""
        if not self.proc:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait(timeout=30)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def log_bytes(self):
        try:
            with open(self.log_path, 'rb') as f:
                return f.read()
        except (OSError, TypeError):
            return b''

    def log_text(self):
        return self.log_bytes().decode(errors='replace')

    def log_tail(self, n=30):
        return ''.join(self.log_text().splitlines(True)[-n:])

    def wait_log(self, pattern, timeout=5.0):
        """The first match of `pattern` (bytes: in the raw log; str: in its text) within
        `timeout` seconds, or None."""
        def find():
            return re.search(pattern, self.log_bytes() if isinstance(pattern, bytes)
                             else self.log_text())
        return wait_for(find, timeout, step=0.05, final=True)

    def dev_tokens(self):
        """{dev-worker|dev-bot|dev-operator: token} printed by a bootstrap start."""
        return dict(re.findall(r'boardd:\s+(dev-\w+)\s+([0-9a-f]{64})', self.log_text()))


# ---- HTTP -----------------------------------------------------------------------------------

def decode_body(raw):
    """A response body: its JSON, None when empty, else its text."""
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors='replace')


def request(port, method, path, token=None, body=None, headers=None, timeout=10.0,
            cafile=None, raw=False):
    """One request on a connection of its own: (status, body, headers). The body is the
    decoded JSON (None when empty, the text when it is not JSON), or the text with raw=True;
    header names are lower case. Raises OSError on a transport failure."""
    c = Client(port, token, timeout=timeout, cafile=cafile)
    try:
        st, data, hdrs = c.call_full(method, path, body, headers, keep_alive=False)
    finally:
        c.close()
    if raw:
        return st, data.decode(errors='replace'), hdrs
    return st, decode_body(data), hdrs


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
        """Returns (status, parsed JSON body or None); a body that is not JSON comes back
        as {'_raw': text}."""
        status, raw = self.call_raw(method, path, body, headers)
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, {'_raw': raw.decode(errors='replace')}

    def must(self, want, method, path, body=None, headers=None):
        """call(), raising RuntimeError unless the status is `want`; returns the body."""
        st, out = self.call(method, path, body, headers)
        if st != want:
            raise RuntimeError('%s %s: want %s, got %s %s' % (method, path, want, st, out))
        return out

    def call_raw(self, method, path, body=None, headers=None):
        """Returns (status, the body's bytes)."""
        status, raw, _ = self.call_full(method, path, body, headers)
        return status, raw

    def call_full(self, method, path, body=None, headers=None, keep_alive=True):
        """Returns (status, the body's bytes, {lower-case header: value})."""
        h = {'Connection': 'keep-alive' if keep_alive else 'close'}
        if self.token:
            h['Authorization'] = 'Bearer ' + self.token
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
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
            hdrs = {k.lower(): v for k, v in r.getheaders()}
            if not keep_alive or r.getheader('Connection', '').lower() == 'close':
                self.close()
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise OSError('%s %s: %s: %s' % (method, path, type(e).__name__, e)) from None
        return status, raw, hdrs


def is_problem(hdrs, body, status=None):
    """An RFC 9457 answer: application/problem+json, a JSON body with a non-empty detail and,
    when given, that status. body: bytes, text or the parsed JSON."""
    if isinstance(body, (bytes, str)):
        try:
            body = json.loads(body)
        except ValueError:
            return False
    if not isinstance(body, dict):
        return False
    return (hdrs.get('content-type', '').startswith('application/problem+json') and
            (status is None or body.get('status') == status) and bool(body.get('detail')))


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


class Stream:
    """One GET /v1/events/stream (Server-Sent Events), read frame by frame."""

    def __init__(self, port, token, query='', last_id=None, timeout=20):
        self.c = http.client.HTTPConnection('127.0.0.1', port, timeout=timeout)
        h = {'Authorization': 'Bearer ' + token, 'Accept': 'text/event-stream'}
        if last_id is not None:
            h['Last-Event-ID'] = str(last_id)
        self.c.request('GET', '/v1/events/stream' + query, headers=h)
        self.r = self.c.getresponse()
        self.status = self.r.status
        self.headers = {k.lower(): v for k, v in self.r.getheaders()}
        self.body = self.r.read().decode() if self.status != 200 else None

    def frame(self, seconds=20):
        """The next frame as a dict {id, event, data, comments, retry}; None at the end or
        after `seconds`."""
        self.c.sock.settimeout(seconds)
        f = {'id': None, 'event': None, 'data': None, 'comments': [], 'retry': None}
        try:
            while True:
                line = self.r.readline().decode()
                if not line:
                    return None
                line = line.rstrip('\n')
                if line == '':
                    if f['data'] is not None or f['comments'] or f['retry']:
                        return f
                    continue
                if line.startswith(':'):
                    f['comments'].append(line[1:].strip())
                    continue
                k, _, v = line.partition(':')
                v = v[1:] if v.startswith(' ') else v
                if k == 'data':
                    f['data'] = json.loads(v)
                else:
                    f[k] = v
        except (socket.timeout, TimeoutError):
            return None

    def event(self, seconds=20):
        """The next frame that carries an event."""
        deadline = time.time() + seconds
        while time.time() < deadline:
            f = self.frame(max(0.1, deadline - time.time()))
            if f is None:
                return None
            if f['data'] is not None:
                return f
        return None

    def close(self):
        self.c.close()


# ---- the Mongo test server ------------------------------------------------------------------

def mongo_uri():
    """BOARDD_TEST_MONGO_URI; without it the test is skipped (exit 77), or fails in CI."""
    uri = os.environ.get('BOARDD_TEST_MONGO_URI')
    if not uri:
        skip_or_fail('BOARDD_TEST_MONGO_URI is not set (tests/run.sh sets it); the Mongo '
                     'suite must run in CI')
    return uri


def mongo_is_ferretdb():
    return os.environ.get('BOARDD_TEST_MONGO_IS_FERRETDB') == '1'


def mongo_database(uri, tag):
    """The URI's server with a fresh database of this test's own (boardd_<tag>_<pid>_<time>),
    its query kept."""
    parts = urllib.parse.urlsplit(uri)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, '/boardd_%s_%d_%d' %
                                    (tag, os.getpid(), int(time.time())), parts.query, ''))


def mongo_atomic_database(tag):
    """For a race test: a fresh database (mongo_database) on a server whose single-document
    updates are atomic -- BOARDD_TEST_MONGO_URI unless it is FerretDB, else
    BOARDD_TEST_MONGO_URI_MJS (mongo-java-server) -- or exits 77 saying why not (or fails
    in CI without a server: mongo_uri)."""
    uri = os.environ.get('BOARDD_TEST_MONGO_URI')
    mjs = os.environ.get('BOARDD_TEST_MONGO_URI_MJS')
    if uri and not mongo_is_ferretdb():
        return mongo_database(uri, tag)
    if mjs:
        return mongo_database(mjs, tag)
    if uri:
        print('SKIP: this race needs atomic single-document updates; FerretDB\'s are not '
              'atomic under concurrency (run it on mongo-java-server: tests/run.sh does, or '
              'set BOARDD_TEST_MONGO_URI_MJS)', flush=True)
        sys.exit(77)
    mongo_uri()  # skips (77), or fails in CI
    return None


def start_replicas(boardd, uri, tmp, tokens, extra=(), threads=4):
    """One boardd on the FS twin in tmp/data (uri None), or two (a, b) on database uri;
    started, or RuntimeError. The caller stops them."""
    servers = []
    try:
        for name in (('a', 'b') if uri else ('a',)):
            s = Server(boardd, None if uri else os.path.join(tmp, 'data'), tokens, tmp, extra,
                       store=uri, threads=threads, name=name)
            started, why = s.start()
            if not started:
                raise RuntimeError('boardd %s did not start: %s' % (name, why))
            servers.append(s)
    except BaseException:
        for s in servers:
            s.stop()
        raise
    return servers


# ---- the metrics table ----------------------------------------------------------------------

def metrics_table(path):
    """{name: (type, {labels})} of METRICS_TABLE in metrics/metrics.h, read as the server is
    built from it."""
    text = open(path).read()
    # The table's own lines only (the header's comment shows an example row).
    text = text[text.index('#define METRICS_TABLE(X)'):text.index('enum metrics_id')]
    text = text.replace('\\\n', ' ')  # joined continuation lines
    rows = re.findall(r'X\(METRICS_\w+,\s*METRICS_(COUNTER|GAUGE|HISTOGRAM),\s*"(\w+)",'
                      r'\s*"([^"]*)"', text)
    return {name: (kind.lower(), {x for x in labels.split(',') if x})
            for kind, name, labels in rows}


def need_promtool():
    if not shutil.which('promtool'):
        print('promtool not found (Debian: apt-get install prometheus; deploy/deps.sh --test)')
        sys.exit(1 if CI else 77)


# ---- a board with one token per role (the UI, stream and attention tests) --------------------

class Board:
    """A boardd on a temp data dir (or a fresh database of the Mongo test server), a tokens
    file with one token per role (and 'scoped': an operator+bot scoped to board `other`;
    'scoped2': a bot scoped to boards `other` and `third`), and
    requests made as one of them by name."""
    ROLES = {'op': ['operator'], 'bot': ['bot'], 'worker': ['worker'], 'worker2': ['worker']}

    def __init__(self, binary, extra=(), mongo_uri=None, threads=2, db_tag='ui'):
        """mongo_uri: run on the Mongo twin, in a fresh database of that server (named after
        db_tag: two boards of one test in one second need two tags)."""
        self.binary = binary
        self.dir = tempfile.mkdtemp(prefix='boardd-ui-')
        store = mongo_database(mongo_uri, db_tag) if mongo_uri else None
        self.tokens_file = os.path.join(self.dir, 'tokens.json')
        self.tok = {name: token_add(binary, self.tokens_file, name, roles)
                    for name, roles in self.ROLES.items()}
        self.tok['scoped'] = token_add(binary, self.tokens_file, 'scoped', ['operator', 'bot'],
                                       ['other'])
        self.tok['scoped2'] = token_add(binary, self.tokens_file, 'scoped2', ['bot'],
                                        ['other', 'third'])
        self.srv = Server(binary, os.path.join(self.dir, 'data'), self.tokens_file, self.dir,
                          store=store, threads=threads,
                          extra=['--log-format', 'text'] + list(extra))
        ok, detail = self.srv.start()
        if not ok:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise SystemExit('boardd did not start: ' + detail)
        self.port = self.srv.port
        self.proc = self.srv.proc
        self.url = self.srv.url

    def stop(self):
        """SIGTERM; returns the exit status (0: a clean shutdown, and under ASan no leak)."""
        rc = self.srv.stop(timeout=15)
        if rc != 0:
            print(self.srv.log_tail(40), file=sys.stderr)
        shutil.rmtree(self.dir, ignore_errors=True)
        return rc

    def call(self, method, path, who='op', body=None, headers=None):
        """(status, parsed JSON or text, headers dict) of one request."""
        return request(self.port, method, path, self.tok[who] if who else None, body,
                       headers, timeout=15)

    def ok(self, method, path, who='op', body=None, headers=None, want=(200, 201, 204)):
        st, j, _ = self.call(method, path, who, body, headers)
        if st not in want:
            raise AssertionError('%s %s as %s: %s %s' % (method, path, who, st, j))
        return j

    def stream(self, who='op', query='', last_id=None):
        return Stream(self.port, self.tok[who], query, last_id)

    # ---- worker flows ----

    def claim(self, cid, marker='w1', lease_ms=60000, who='worker'):
        return self.ok('POST', '/v1/cards/%s/claim' % cid, who,
                       {'marker': marker, 'lease_ms': lease_ms})

    def owned(self, method, path, epoch, body, who='worker'):
        return self.ok(method, path, who, body, {'If-Match': '"%d"' % epoch})

    def run_with_status(self, cid, epoch, rid, status, marker='w1', who='worker'):
        self.ok('POST', '/v1/runs', who,
                {'card_id': cid, 'marker': marker, 'status': 'running', 'id': rid})
        self.owned('PUT', '/v1/cards/%s/last-run' % cid, epoch,
                   {'marker': marker, 'run_id': rid}, who)
        if status != 'running':
            self.ok('PATCH', '/v1/runs/' + rid, who, {'marker': marker, 'status': status})

    def give_up(self, cid, title, state='in_progress', to='blocked'):
        """A card stamped gave_up and filed into `to` by its (worker) holder."""
        self.ok('POST', '/v1/cards', 'bot', {'id': cid, 'title': title, 'state': state})
        epoch = self.claim(cid)['epoch']
        self.owned('PUT', '/v1/cards/%s/gave-up' % cid, epoch,
                   {'marker': 'w1', 'gave_up': {'reason': 'run_pruned', 'run_id': 'r-gone'}})
        self.owned('PATCH', '/v1/cards/%s/state' % cid, epoch,
                   {'marker': 'w1', 'to': to, 'reason': 'test'})
        self.ok('POST', '/v1/cards/%s/release' % cid, 'worker', {'marker': 'w1', 'epoch': epoch})
