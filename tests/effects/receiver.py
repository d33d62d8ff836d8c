"""A webhook receiver for the effects tests: an HTTP server on 127.0.0.x whose behaviour is
chosen per path, that records every request it gets (time, path, headers, body) and, when
given the subscription's secret, checks each signature with the `standardwebhooks` library
(the reference verifier, nobody here wrote it).

Paths (the last segment picks the behaviour; anything before it names the hook):
  .../ok        200
  .../fail      500 while `fail_until_ok` is set for the hook, else 200
  .../slow      sleeps `slow_s`, then 200
  .../gone      410
  .../limit     429 with Retry-After: `retry_after` on the first request, then 200
  .../redirect  302 to `redirect_to`
  .../big       200 with a 1 MiB body
"""
import http.server
import json
import threading
import time


class Receiver:
    def __init__(self, host='127.0.0.1', secrets=None):
        self.lock = threading.Lock()
        self.hits = []             # dicts: t, path, headers, body, verified (None: no secret)
        self.secrets = secrets or {}  # hook path prefix -> whsec_ secret
        self.fail_until_ok = set()
        self.slow_s = 3.0
        self.retry_after = '2'
        self.redirect_to = 'http://127.0.0.2:9/elsewhere/ok'
        self.limited = set()
        self.delay_s = 0.0         # every request waits this long first (slow receiver)
        self.in_flight = {}        # webhook-id -> requests being answered now
        self.overlaps = []         # webhook-ids seen twice at the same time
        recv = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = 'HTTP/1.1'

            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get('Content-Length') or 0)
                body = self.rfile.read(n)
                recv._handle(self, body)

        class Server(http.server.ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                pass  # a sender that gave up (timeout) resets the connection: expected

        self.httpd = Server((host, 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.base = 'http://%s:%d' % (host, self.port)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def _verify(self, path, body, headers):
        for prefix, secret in self.secrets.items():
            if path.startswith(prefix):
                from standardwebhooks.webhooks import Webhook
                try:
                    Webhook(secret).verify(body, {k.lower(): v for k, v in headers.items()})
                    return True
                except Exception as e:  # a wrong signature, or a stale timestamp
                    return 'verify failed: %s' % e
        return None

    def _handle(self, h, body):
        path = h.path
        hid = h.headers.get('webhook-id')
        t = time.time()
        with self.lock:
            if self.in_flight.get(hid):
                self.overlaps.append(hid)
            self.in_flight[hid] = self.in_flight.get(hid, 0) + 1
        try:
            rec = {'t': t, 'path': path, 'headers': dict(h.headers.items()), 'body': body,
                   'verified': self._verify(path, body, dict(h.headers.items()))}
            with self.lock:
                self.hits.append(rec)  # on arrival: a test sees requests in flight
            if self.delay_s:
                time.sleep(self.delay_s)
            kind = path.rstrip('/').rsplit('/', 1)[-1]
            hook = path.rstrip('/').rsplit('/', 1)[0]
            status, extra, payload = 200, {}, b'{}'
            if kind == 'fail' and hook in self.fail_until_ok:
                status = 500
            elif kind == 'slow':
                time.sleep(self.slow_s)
            elif kind == 'gone':
                status = 410
            elif kind == 'limit':
                with self.lock:
                    first = hook not in self.limited
                    self.limited.add(hook)
                if first:
                    status, extra = 429, {'Retry-After': self.retry_after}
            elif kind == 'redirect':
                status, extra = 302, {'Location': self.redirect_to}
            elif kind == 'big':
                payload = b'x' * (1 << 20)
            try:
                h.send_response(status)
                for k, v in extra.items():
                    h.send_header(k, v)
                h.send_header('Content-Type', 'application/json')
                h.send_header('Content-Length', str(len(payload)))
                h.end_headers()
                h.wfile.write(payload)
            except OSError:
                pass  # the sender gave up (timeout, or cut a big body): fine
        finally:
            with self.lock:
                self.in_flight[hid] -= 1

    def hits_for(self, prefix):
        with self.lock:
            return [r for r in self.hits if r['path'].startswith(prefix)]

    def wait_for(self, prefix, n, timeout):
        """Waits (bounded) until `prefix` got at least n requests; returns them."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.hits_for(prefix)
            if len(got) >= n:
                return got
            time.sleep(0.02)
        return self.hits_for(prefix)

    def events(self, prefix):
        """The parsed bodies of the requests `prefix` got."""
        return [json.loads(r['body']) for r in self.hits_for(prefix)]
