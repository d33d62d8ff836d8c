#!/usr/bin/env python3
"""The HTTP edge of the boardd binary (DESIGN §11), from outside, over raw sockets:

  slow         thousands of slow and idle connections from 127.0.0.1 do not keep a client
               from 127.0.0.2 from being served; the slow ones are cut at the headers deadline
  framing      disagreeing Content-Length (400, closed, nothing smuggled), unsupported
               Transfer-Encoding (501 at once), HEAD on every GET route, ~250 query
               parameters, over-long targets, libmicrohttpd's own answers logged and counted
  bytes        a NUL (raw or %00) or a control byte in the target or a header value: 400 and
               nothing changes; two Transfer-Encoding lines: 400, closed
  log          control bytes and non-UTF-8 in a path are escaped, text and json
  sighup       tokens re-read on SIGHUP; a bad file keeps the old ones and says why
  drain        SIGTERM: a connected client is served through the grace period, a new
               connection is closed at once

usage: test_edge.py path/to/boardd [case ...]
"""
import json
import os
import re
import resource
import signal
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
import boardd_test as bt  # noqa: E402
from boardd_test import check, is_problem  # noqa: E402

BOARDD = sys.argv[1]
ONLY = set(sys.argv[2:])


class Server(bt.Server):
    """boardd on 127.0.0.1:PORT over a temporary FS store (dev tokens bootstrapped unless a
    tokens file is given), its log in a directory of its own."""

    def __init__(self, tmp, extra=(), tokens=None):
        super().__init__(BOARDD, tmp + '/data', tokens, extra=extra, threads=2)
        self.started(timeout=15)
        self.tokens = self.dev_tokens()

    def log(self):
        return self.log_bytes()

    def stop(self):
        return super().stop(timeout=15)


def raw(port, data, timeout=5.0, src='127.0.0.1'):
    """Sends bytes, reads until the server closes (or timeout): (bytes, closed_by_server)."""
    s = socket.socket()
    s.settimeout(timeout)
    s.bind((src, 0))
    s.connect(('127.0.0.1', port))
    s.sendall(data)
    out = b''
    closed = False
    deadline = time.time() + timeout
    try:
        while time.time() < deadline:
            b = s.recv(65536)
            if not b:
                closed = True
                break
            out += b
    except socket.timeout:
        pass
    except ConnectionResetError:
        closed = True
    s.close()
    return out, closed


def request(port, method, path, token=None, body=None, headers=(), timeout=5.0,
            src='127.0.0.1'):
    """One request on its own connection: (status, headers dict, body bytes); status 0 when
    no answer came."""
    h = ['%s %s HTTP/1.1' % (method, path), 'Host: t', 'Connection: close']
    if token:
        h.append('Authorization: Bearer ' + token)
    data = b''
    if body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        h += ['Content-Type: application/json', 'Content-Length: %d' % len(data)]
    h += list(headers)
    out, _ = raw(port, ('\r\n'.join(h) + '\r\n\r\n').encode() + data, timeout, src)
    return parse(out)


def parse(out):
    m = re.match(rb'HTTP/1\.1 (\d{3})[^\r]*\r\n', out)
    if not m:
        return 0, {}, out
    head, _, body = out.partition(b'\r\n\r\n')
    hdrs = {}
    for line in head.split(b'\r\n')[1:]:
        k, _, v = line.partition(b':')
        hdrs[k.strip().lower().decode()] = v.strip().decode('latin-1')
    return int(m.group(1)), hdrs, body


def responses(out):
    return len(re.findall(rb'(?:^|\r\n\r\n|})HTTP/1\.1 \d{3} ', out))


def metric(port, name, src='127.0.0.1'):
    st, _, body = request(port, 'GET', '/metrics', src=src)
    m = re.search(rb'^' + re.escape(name.encode()) + rb' (\S+)$', body, re.M)
    return float(m.group(1)) if m else None


# ---- slow and idle clients ---------------------------------------------------------------

def case_slow(tmp):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 3000
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
        soft = min(want, hard)
    n_slow, n_idle = (1500, 500) if soft >= 2300 else (soft // 2 - 100, 100)
    deadline_ms = 3000
    srv = Server(tmp, ['--header-timeout-ms', str(deadline_ms)])
    port = srv.port
    try:
        slow, idle = [], []
        t0 = time.time()
        for i in range(n_slow + n_idle):
            s = socket.socket()
            s.setblocking(False)
            s.bind(('127.0.0.1', 0))
            try:
                s.connect(('127.0.0.1', port))
            except BlockingIOError:
                pass
            (slow if i < n_slow else idle).append(s)
        time.sleep(0.3)
        # The slow ones start a request and keep sending a header line every 500 ms.
        alive = list(slow)

        def trickle(conns, line):
            keep = []
            for s in conns:
                try:
                    s.send(line)
                    keep.append(s)
                except (BlockingIOError, InterruptedError):
                    keep.append(s)
                except OSError:
                    s.close()
            return keep

        alive = trickle(alive, b'GET /healthz HTTP/1.1\r\nHost: t\r\n')
        # While they are held: a client from another address is served (generous bound).
        served = None
        for _ in range(3):
            alive = trickle(alive, b'X-Slow: 1\r\n')
            st, _, body = request(port, 'GET', '/healthz', src='127.0.0.2', timeout=10)
            if st == 200:
                served = True
                break
            served = False
            time.sleep(0.5)
        check(served, 'a client from 127.0.0.2 is served while %d slow and %d idle '
              'connections from 127.0.0.1 are held' % (n_slow, n_idle))
        held = metric(port, 'boardd_http_connections_open', '127.0.0.3')
        check(held is not None and held <= 512 + 2,
              'at most --max-connections-per-ip (512) are held for one address: %s' % held)
        refused = metric(port, 'boardd_http_connections_refused_total', '127.0.0.3')
        check(refused is not None and refused >= n_slow + n_idle - 512 - 5,
              'the connections over the per-address limit were refused: %s' % refused)
        # Keep trickling past the deadline: the server must cut every slow one anyway.
        cut_by = time.time() + deadline_ms / 1000.0 + 8
        while time.time() < cut_by:
            alive = trickle(alive, b'X-Slow: 1\r\n')
            still = 0
            for s in alive:
                try:
                    if s.recv(1) == b'':
                        continue
                except BlockingIOError:
                    still += 1
                except OSError:
                    continue
            if still == 0:
                break
            time.sleep(0.5)
        check(still == 0, '%d slow connections still open %.1f s after the %d ms headers '
              'deadline' % (still, time.time() - t0, deadline_ms))
        timeouts = metric(port, 'boardd_http_header_timeouts_total', '127.0.0.3')
        check(timeouts is not None and timeouts >= 400,
              'the cuts are counted in boardd_http_header_timeouts_total: %s' % timeouts)
        # And a plain client from the first address is served again.
        for s in slow + idle:
            s.close()
        st = 0
        for _ in range(20):
            st, _, _ = request(port, 'GET', '/healthz')
            if st == 200:
                break
            time.sleep(0.25)
        check(st == 200, '127.0.0.1 is served again once its connections are gone: %d' % st)
    finally:
        srv.stop()


# ---- framing, HEAD, limits, libmicrohttpd's own answers ----------------------------------

def head_streamed(port, path, token):
    """HEAD on a streamed GET route: the GET's status and content type, and not one byte
    after the headers (libmicrohttpd 0.9.75 wrote the chunked terminator "0\\r\\n\\r\\n"
    as a body), whether the client asks to keep the connection or not."""
    for close in (False, True):
        req = 'HEAD %s HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer %s\r\n' % (path, token)
        if close:
            req += 'Connection: close\r\n'
        out, closed = raw(port, (req + '\r\n').encode(), timeout=3)
        hst, hhdrs, hbody = parse(out)
        check(hst == 200 and hhdrs.get('content-type') == 'text/event-stream' and
              b'\r\n\r\n' in out and hbody == b'',
              'HEAD %s%s: 200 text/event-stream, headers only: %r'
              % (path, ' (Connection: close)' if close else '', out))
        check(closed, 'HEAD %s: the server ends the headers-only answer by closing' % path)
    check(metric(port, 'boardd_event_streams_open') == 0,
          'HEAD %s leaves no stream open' % path)
    s = socket.create_connection(('127.0.0.1', port), timeout=5)
    s.sendall(('GET %s HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer %s\r\n\r\n'
               % (path, token)).encode())
    got = b''
    while b'\r\n\r\n' not in got:
        b = s.recv(4096)
        if not b:
            break
        got += b
    s.close()
    gst, ghdrs, _ = parse(got)
    check(gst == 200 and ghdrs.get('content-type') == 'text/event-stream' and
          ghdrs.get('transfer-encoding') == 'chunked',
          'GET %s streams (the same type), chunked: %r' % (path, got[:200]))


def case_framing(tmp):
    srv = Server(tmp)
    port = srv.port
    bot = srv.tokens['dev-bot']
    try:
        # Two Content-Length headers that disagree: 400, closed, the tail never runs.
        smuggled = b'GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n'
        body = b'{"title":"a"}' + smuggled
        out, closed = raw(port, b'POST /v1/cards HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer '
                          + bot.encode() + b'\r\nContent-Type: application/json\r\n'
                          b'Content-Length: 13\r\nContent-Length: %d\r\n\r\n' % len(body)
                          + body)
        st, hdrs, b = parse(out)
        check(st == 400 and is_problem(hdrs, b, 400), 'disagreeing Content-Length -> 400 '
              'problem+json: %r' % out[:200])
        check(b'Content-Length' in b, 'the detail names Content-Length: %r' % b)
        check(closed and responses(out) == 1, 'the connection is closed, no second answer: '
              '%r' % out)
        st, _, b = request(port, 'GET', '/v1/cards?limit=100', bot)
        check(st == 200 and json.loads(b)['cards'] == [], 'no card was created: %r' % b)

        # Host (RFC 9112 §3.2): two -> 400 and closed (the smuggled tail never runs); none
        # on HTTP/1.1 or one that is no host[:port] -> 400; none on HTTP/1.0, an empty one
        # and an IPv6 literal with a port are fine. Nothing is created.
        out, closed = raw(port, b'POST /v1/cards HTTP/1.1\r\nHost: a\r\nHost: b\r\n'
                          b'Authorization: Bearer ' + bot.encode() + b'\r\nContent-Type: '
                          b'application/json\r\nContent-Length: 13\r\n\r\n{"title":"a"}'
                          + smuggled)
        st, hdrs, b = parse(out)
        check(st == 400 and is_problem(hdrs, b, 400) and b'Host' in b and closed and
              responses(out) == 1, 'two Host headers -> 400 naming Host, closed: %r' % out[:300])
        for head, want in ((b'', 400), (b'Host: a b\r\n', 400), (b'Host: a/c\r\n', 400),
                           (b'Host: u@a\r\n', 400), (b'Host: \r\n', 200),
                           (b'Host: [::1]:8080\r\n', 200), (b'Host: boardd.example:443\r\n', 200)):
            out, _ = raw(port, b'GET /healthz HTTP/1.1\r\n' + head + b'Connection: close\r\n\r\n')
            st, hdrs, b = parse(out)
            check(st == want and (want == 200 or (is_problem(hdrs, b, 400) and b'Host' in b)),
                  '%r -> %d: %r' % (head, want, out[:300]))
        out, _ = raw(port, b'GET /healthz HTTP/1.0\r\n\r\n')
        check(parse(out)[0] == 200, 'HTTP/1.0 without Host -> 200: %r' % out[:200])
        out, _ = raw(port, b'POST /v1/cards HTTP/1.1\r\nAuthorization: Bearer ' + bot.encode() +
                     b'\r\nContent-Type: application/json\r\nContent-Length: 13\r\n'
                     b'Connection: close\r\n\r\n{"title":"a"}')
        check(parse(out)[0] == 400, 'a create without Host -> 400: %r' % out[:200])
        # Two Content-Type headers: 400 (which one says what the body is?); a charset other
        # than UTF-8 or a second media type in one: 415.
        st, hdrs, b = request(port, 'POST', '/v1/cards', bot, {'title': 'a'},
                              headers=('Content-Type: text/plain',))
        check(st == 400 and is_problem(hdrs, b, 400) and b'Content-Type' in b,
              'two Content-Type headers -> 400: %d %r' % (st, b))
        for ct in ('application/json; charset=latin1', 'application/json ,text/plain'):
            out, _ = raw(port, ('POST /v1/cards HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer %s'
                                '\r\nContent-Type: %s\r\nContent-Length: 13\r\nConnection: '
                                'close\r\n\r\n{"title":"a"}' % (bot, ct)).encode())
            st, hdrs, b = parse(out)
            check(st == 415 and is_problem(hdrs, b, 415), '%r -> 415: %r' % (ct, out[:300]))
        st, _, b = request(port, 'GET', '/v1/cards?limit=100', bot)
        check(st == 200 and json.loads(b)['cards'] == [], 'no card was created: %r' % b)

        # An unsupported transfer coding: a prompt 501 problem+json, never a hang.
        t = time.time()
        out, closed = raw(port, b'POST /v1/cards HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer '
                          + bot.encode() + b'\r\nContent-Type: application/json\r\n'
                          b'Transfer-Encoding: gzip\r\n\r\n{}', timeout=10)
        st, hdrs, b = parse(out)
        check(st == 501 and is_problem(hdrs, b, 501) and closed and time.time() - t < 5,
              'Transfer-Encoding: gzip -> prompt 501 problem+json: %r' % out[:300])

        # ~250 query parameters: an answer, never a closed connection without one.
        q = '&'.join('p%d=%d' % (i, i) for i in range(250))
        st, hdrs, b = request(port, 'GET', '/v1/cards?' + q, bot)
        check(400 <= st < 500 and is_problem(hdrs, b), '250 query parameters -> a 4xx '
              'problem+json: %d %r' % (st, b[:200]))
        st, _, _ = request(port, 'GET', '/v1/cards?limit=5&board=default', bot)
        check(st == 200, 'a few query parameters are fine: %d' % st)
        # A long target within libmicrohttpd's buffer: our 414, as problem+json, up to the
        # buffer's bound (docs/http.md: a request line of up to 15 000 bytes).
        for n in (9000, 15000):
            st, hdrs, b = request(port, 'GET', '/v1/cards?x=' + 'a' * (n - 12), bot)
            check(st == 414 and is_problem(hdrs, b, 414), 'a %d-byte target -> 414 '
                  'problem+json: %d %r' % (n, st, b[:200]))
        # Long and with many parameters: libmicrohttpd's pool overflows splitting the query
        # (its own 431 is announced); boardd's 414 goes out first and alone.
        q = '&'.join('p%d=%d' % (i, i) for i in range(100))
        out, closed = raw(port, ('GET /v1/cards?%s&x=%s HTTP/1.1\r\nHost: t\r\n\r\n'
                                 % (q, 'a' * 12000)).encode())
        st, hdrs, b = parse(out)
        check(st == 414 and is_problem(hdrs, b, 414) and responses(out) == 1 and closed,
              'a 13 kB target of 100 parameters -> one 414 problem+json: %r' % out[:300])
        check(metric(port, 'boardd_http_library_answers_total') == 0,
              'the library\'s answers to the refused targets are not counted (never sent)')

        # HEAD on every GET route of the contract: the GET's status, headers, no body.
        spec = json.loads(request(port, 'GET', '/openapi.json')[2])
        n_get = n_stream = 0
        for path, item in spec['paths'].items():
            if 'get' not in item:
                continue
            if path.endswith('/stream'):
                n_stream += 1
                head_streamed(port, re.sub(r'\{[^}]+\}', 'x', path), bot)
                continue
            n_get += 1
            p = re.sub(r'\{[^}]+\}', 'x', path)
            gst, ghdrs, _ = request(port, 'GET', p, bot)
            hst, hhdrs, hbody = request(port, 'HEAD', p, bot)
            check(hst == gst and hbody == b'' and
                  hhdrs.get('content-type') == ghdrs.get('content-type'),
                  'HEAD %s answers like GET (%d) without a body: %d %r' % (p, gst, hst, hbody))
        check(n_get >= 10 and n_stream >= 1, 'the spec lists the GET routes: %d, %d streamed'
              % (n_get, n_stream))
        st, hdrs, _ = request(port, 'PATCH', '/v1/boards', bot)
        check(st == 405 and 'HEAD' in hdrs.get('allow', ''), 'Allow lists HEAD: %r' % hdrs)

        # A literal route segment wins over a parameter: never the label named "merge".
        op = srv.tokens['dev-operator']
        for m in ('DELETE', 'OPTIONS'):
            st, hdrs, b = request(port, m, '/v1/labels/merge', op)
            check(st == 405 and hdrs.get('allow') == 'POST',
                  '%s /v1/labels/merge is the merge route\'s 405: %d %r' % (m, st, hdrs))

        # libmicrohttpd's own answers are logged and counted.
        before = metric(port, 'boardd_http_library_answers_total')
        out, _ = raw(port, b'GET /healthz HTTP/2.0\r\nHost: t\r\n\r\n')
        check(parse(out)[0] == 505, 'HTTP/2.0 request line -> 505: %r' % out[:100])
        out, _ = raw(port, b'GET /healthz HTTP/1.1\r\nHost: t\r\nX-Big: ' + b'a' * 20000 +
                     b'\r\n\r\n')
        check(parse(out)[0] == 431, 'a 20 kB header -> 431: %r' % out[:100])
        after = metric(port, 'boardd_http_library_answers_total')
        check(before is not None and after == before + 2,
              'boardd_http_library_answers_total counts them: %s -> %s' % (before, after))
        st, _, b = request(port, 'GET', '/metrics')
        check(re.search(rb'boardd_http_request_duration_seconds_count\{[^}]*code="505"[^}]*\} 1',
                        b) is not None and
              re.search(rb'boardd_http_request_duration_seconds_count\{[^}]*code="431"[^}]*\} 1',
                        b) is not None,
              'the request histogram counts them by code')
        check(srv.wait_log(rb' 505 [0-9.]+ms answered-by=libmicrohttpd') and
              srv.wait_log(rb' 431 [0-9.]+ms answered-by=libmicrohttpd'),
              'the access log has a line for each')
    finally:
        srv.stop()


# ---- the access log ----------------------------------------------------------------------

def case_log(tmp):
    srv = Server(tmp)
    try:
        out, _ = raw(srv.port, b'GET /v1/\x01\x1b[31mred\x7f\\ HTTP/1.1\r\nHost: t\r\n'
                     b'Connection: close\r\n\r\n')
        check(parse(out)[0] in (400, 401, 404), 'control bytes in the path: an answer: %r'
              % out[:80])
        check(srv.wait_log(rb'/v1/\\x01\\x1b\[31mred\\x7f\\x5c '),
              'the text log escapes the control bytes: %r' % srv.log()[-300:])
        check(b'\x1b' not in srv.log() and b'\x01' not in srv.log(),
              'no raw control byte reaches the text log')
    finally:
        srv.stop()
    srv = Server(tmp, ['--log-format', 'json'])
    try:
        out, _ = raw(srv.port, b'GET /v1/caf\xe9/\xff\xfe/\xc3\xa9 HTTP/1.1\r\nHost: t\r\n'
                     b'Connection: close\r\n\r\n')
        check(parse(out)[0] in (400, 401, 404), 'non-UTF-8 in the path: an answer')
        srv.wait_log(rb'"path":"/v1/caf')  # not the start-up probe's /readyz line
        paths = []
        for line in srv.log().splitlines():
            if line.startswith(b'{'):
                try:
                    paths.append(json.loads(line).get('path'))
                except ValueError:
                    check(False, 'a json log line that does not parse: %r' % line)
        check('/v1/caf\\xe9/\\xff\\xfe/\u00e9' in paths,
              'the json log keeps the path, escaped: %r' % paths)
        check(b'\n{}\n' not in srv.log(), 'never an empty {} line')
    finally:
        srv.stop()


# ---- SIGHUP ------------------------------------------------------------------------------

def token_add(path, name, *roles):
    return bt.token_add(BOARDD, path, name, roles)


def case_sighup(tmp):
    path = os.path.join(tmp, 'tokens.json')
    first = token_add(path, 'first', 'bot')
    srv = Server(tmp, tokens=path)
    try:
        second = token_add(path, 'second', 'operator')
        check(request(srv.port, 'GET', '/v1/boards', second)[0] == 401,
              'a token added to the file is unknown before SIGHUP')
        srv.send_signal(signal.SIGHUP)
        check(srv.wait_log(rb'SIGHUP: tokens: 2 from'), 'SIGHUP says what it loaded')
        check(request(srv.port, 'GET', '/v1/boards', second)[0] == 200,
              'the new token works after SIGHUP')
        check(request(srv.port, 'GET', '/v1/boards', first)[0] == 200,
              'the first one still works')
        good = open(path).read()
        with open(path, 'w') as f:
            f.write('{"tokens": [ this is not json')
        srv.send_signal(signal.SIGHUP)
        check(srv.wait_log(rb'SIGHUP: tokens: .*keeping the ones loaded before'),
              'a bad file is refused and the log says why: %r' % srv.log()[-300:])
        check(request(srv.port, 'GET', '/v1/boards', second)[0] == 200 and
              request(srv.port, 'GET', '/v1/boards', first)[0] == 200,
              'the old tokens are kept')
        # A removed token stops working, also on a keep-alive connection that used it.
        s = socket.create_connection(('127.0.0.1', srv.port), timeout=5)
        req = ('GET /v1/boards HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer %s\r\n\r\n'
               % first).encode()
        s.sendall(req)
        check(s.recv(65536).startswith(b'HTTP/1.1 200'), 'keep-alive: first request OK')
        j = json.loads(good)
        j['tokens'] = [t for t in j['tokens'] if t['name'] != 'first']
        with open(path, 'w') as f:
            json.dump(j, f)
        srv.send_signal(signal.SIGHUP)
        check(srv.wait_log(rb'SIGHUP: tokens: 1 from'), 'the smaller file is loaded')
        s.sendall(req)
        check(s.recv(65536).startswith(b'HTTP/1.1 401'),
              'a removed token is refused on the connection that cached it')
        s.close()
    finally:
        srv.stop()


# ---- stopping ----------------------------------------------------------------------------

def case_drain(tmp):
    """SIGTERM while a keep-alive client is connected: during the grace period that client
    is still served, a new connection is closed at once without an answer (never left
    hanging in the listen queue), and boardd then exits 0."""
    srv = Server(tmp)
    port = srv.port
    try:
        kept = socket.create_connection(('127.0.0.1', port), timeout=5)
        kept.sendall(b'GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n')
        check(kept.recv(65536).startswith(b'HTTP/1.1 200'), 'keep-alive: first request OK')
        srv.send_signal(signal.SIGTERM)
        check(srv.wait_log(rb'SIGTERM: stopping'), 'boardd says it is stopping')
        time.sleep(0.2)
        t = time.time()
        try:
            out, closed = raw(port, b'GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n', timeout=4)
        except ConnectionRefusedError:
            out, closed = b'', True
        check(out == b'' and closed and time.time() - t < 2,
              'a new connection while stopping: closed at once, no answer (%r, %.1f s)'
              % (out[:80], time.time() - t))
        kept.sendall(b'GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n')
        check(kept.recv(65536).startswith(b'HTTP/1.1 200'),
              'the connected keep-alive client is still served while stopping')
        kept.close()
        check(srv.proc.wait(timeout=15) == 0, 'boardd exits 0')
    finally:
        srv.stop()


# ---- NUL and control bytes, doubled framing (DESIGN §16) -----------------------------------

def case_bytes(tmp):
    srv = Server(tmp)
    port = srv.port
    op = srv.tokens['dev-operator']
    bot = srv.tokens['dev-bot']
    auth = b'Authorization: Bearer ' + op.encode() + b'\r\n'
    try:
        st, _, b = request(port, 'POST', '/v1/cards', bot, {'id': 'a', 'title': 'a'})
        check(st == 201, 'card a created: %d %r' % (st, b))

        def card_a():
            return request(port, 'GET', '/v1/cards/a', bot)[0]

        def n_cards():
            return len(json.loads(request(port, 'GET', '/v1/cards?limit=100', bot)[2])['cards'])

        # A NUL in the path, raw or escaped: 400, and card a is not deleted.
        for target in (b'/v1/cards/a\x00zzz', b'/v1/cards/a%00zzz', b'/v1/cards/a\x00'):
            out, _ = raw(port, b'DELETE ' + target + b' HTTP/1.1\r\nHost: t\r\n' + auth +
                         b'Connection: close\r\n\r\n')
            st, hdrs, b = parse(out)
            check(st == 400 and is_problem(hdrs, b, 400), 'DELETE %r -> 400 problem+json: %r'
                  % (target, out[:300]))
            check(card_a() == 200, 'card a is still there after DELETE %r' % target)
        # in the query, and a control byte in the target
        for target in (b'/v1/cards?limit=5\x00zzz', b'/v1/cards?limit=5%00', b'/v1/cards/a\x01',
                       b'/v1/cards?limit=5\x01'):
            out, _ = raw(port, b'GET ' + target + b' HTTP/1.1\r\nHost: t\r\n' + auth +
                         b'Connection: close\r\n\r\n')
            st, hdrs, b = parse(out)
            check(st == 400 and is_problem(hdrs, b, 400), 'GET %r -> 400 problem+json: %r'
                  % (target, out[:300]))

        # A token followed by NUL and garbage is not the token: 400, nothing created.
        before = n_cards()
        for hdr in (b'Authorization: Bearer ' + bot.encode() + b'\x00garbage',
                    b'X-Trace: a\x00b', b'X-Trace: a\x01b', b'X-Trace: a\x7fb'):
            body = b'{"title":"x"}'
            out, closed = raw(port, b'POST /v1/cards HTTP/1.1\r\nHost: t\r\n' + hdr + b'\r\n' +
                              (b'' if hdr.startswith(b'Authorization') else
                               b'Authorization: Bearer ' + bot.encode() + b'\r\n') +
                              b'Content-Type: application/json\r\nContent-Length: %d\r\n\r\n'
                              % len(body) + body)
            st, hdrs, b = parse(out)
            check(st == 400 and is_problem(hdrs, b, 400) and closed,
                  '%r -> 400 problem+json, closed: %r' % (hdr, out[:300]))
        check(n_cards() == before, 'no card was created by those requests')
        # the last header of the head too (its line ends where the head does), and a folded
        # line (obs-fold: RFC 7230 lets a server refuse it)
        for tail in (b'Authorization: Bearer ' + op.encode() + b'\x00garbage\r\n',
                     b'Authorization: Bearer ' + op.encode() + b'\x00\r\n',
                     b'Authorization: Bearer ' + op.encode() + b'\r\nX-A: b\r\n folded\r\n'):
            out, _ = raw(port, b'DELETE /v1/cards/a HTTP/1.1\r\nHost: t\r\n' + tail + b'\r\n')
            st, hdrs, b = parse(out)
            check(st == 400 and is_problem(hdrs, b, 400), '%r last -> 400: %r' % (tail, out[:200]))
        check(card_a() == 200, 'card a is still there')
        # A horizontal tab stays a value's own byte.
        st, _, b = request(port, 'GET', '/v1/cards/a', bot, headers=['X-Trace: a\tb'])
        check(st == 200, 'a tab in a header value is fine: %d %r' % (st, b[:200]))

        # Two Transfer-Encoding lines: 400 and closed, the body never read, nothing created.
        smuggled = b'GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n'
        out, closed = raw(port, b'POST /v1/cards HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer '
                          + bot.encode() + b'\r\nContent-Type: application/json\r\n'
                          b'Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n'
                          b'd\r\n{"title":"t"}\r\n0\r\n\r\n' + smuggled)
        st, hdrs, b = parse(out)
        check(st == 400 and is_problem(hdrs, b, 400) and closed and responses(out) == 1,
              'two Transfer-Encoding lines -> one 400 problem+json, closed: %r' % out[:300])
        check(b'Transfer-Encoding' in b, 'the detail names Transfer-Encoding: %r' % b)
        # one line "chunked, gzip" stays 501; beside Content-Length stays 400
        out, closed = raw(port, b'POST /v1/cards HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer '
                          + bot.encode() + b'\r\nContent-Type: application/json\r\n'
                          b'Transfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n')
        check(parse(out)[0] == 501, 'Transfer-Encoding: chunked, gzip -> 501: %r' % out[:200])
        out, closed = raw(port, b'POST /v1/cards HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer '
                          + bot.encode() + b'\r\nContent-Type: application/json\r\n'
                          b'Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n')
        check(parse(out)[0] == 400, 'Transfer-Encoding beside Content-Length -> 400: %r'
              % out[:200])
        check(n_cards() == before, 'no card was created by the framing requests')
    finally:
        srv.stop()


CASES = [('slow', case_slow), ('framing', case_framing), ('bytes', case_bytes), ('log', case_log),
         ('sighup', case_sighup), ('drain', case_drain)]

for name, fn in CASES:
    if ONLY and name not in ONLY:
        continue
    with tempfile.TemporaryDirectory(prefix='boardd-edge-') as tmp:
        t = time.time()
        fn(tmp)
        print('%s: done in %.1f s' % (name, time.time() - t), flush=True)
sys.exit(bt.summary())
