"""A fault-injecting HTTP/1.1 proxy for client tests, in the test's own process, loopback
only: it forwards each request to boardd and, as the test's rules say, loses the answer
(the server did the work; the client sees its connection close), answers a chosen status
without forwarding, or holds the request a while first. Used by tests/clients/
test_faults_python.py and tests/cli/test_boardctl_batch.py."""
import http.client
import http.server
import json
import re
import socket
import threading
import time


class Proxy:
    """An HTTP/1.1 keep-alive proxy to 127.0.0.1:target. rules: [{method, path (regex),
    nth: [1, 2] or 'all', action: 'drop' (forward, then close without the answer) |
    'status' (answer `status` with problem `code` without forwarding) | 'hold' (wait
    `seconds`, then forward)}], counted per rule. log: every request as (method, path,
    headers, body)."""

    def __init__(self, target, port=0):
        self.target = target
        self.rules = []
        self.counts = {}
        self.log = []
        self.lock = threading.Lock()
        proxy = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = 'HTTP/1.1'

            def log_message(self, *a):
                pass

            def _any(self):
                n = int(self.headers.get('Content-Length') or 0)
                body = self.rfile.read(n) if n else None
                proxy.log.append((self.command, self.path, dict(self.headers), body))
                rule = proxy.rule_for(self.command, self.path)
                act = rule['action'] if rule else 'pass'
                if act == 'status':
                    b = json.dumps({'type': '/problems/x', 'title': 'injected',
                                    'status': rule['status'], 'code': rule['code'],
                                    'detail': 'injected by the test proxy'}).encode()
                    self.send_response(rule['status'])
                    self.send_header('Content-Type', 'application/problem+json')
                    self.send_header('Content-Length', str(len(b)))
                    self.end_headers()
                    self.wfile.write(b)
                    return
                if act == 'hold':
                    time.sleep(rule['seconds'])
                c = http.client.HTTPConnection('127.0.0.1', proxy.target, timeout=60)
                hdrs = {k: v for k, v in self.headers.items() if k.lower() != 'connection'}
                c.request(self.command, self.path, body=body, headers=hdrs)
                res = c.getresponse()
                data = res.read()
                c.close()
                if act == 'drop':
                    self.close_connection = True
                    try:
                        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                                   b'\x01\x00\x00\x00\x00\x00\x00\x00')
                    except OSError:
                        pass
                    self.connection.close()
                    return
                self.send_response(res.status)
                for k, v in res.getheaders():
                    if k.lower() not in ('connection', 'transfer-encoding', 'content-length',
                                         'date', 'server'):
                        self.send_header(k, v)
                self.send_header('Content-Length', str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = do_HEAD = _any

        class S(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                pass  # a client that closed first (a dropped answer): nothing to report

        self.srv = S(('127.0.0.1', port), H)
        self.port = self.srv.server_address[1]
        self.url = 'http://127.0.0.1:%d' % self.port
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def set(self, rules):
        with self.lock:
            self.rules = rules
            self.counts = {}
            self.log = []

    def rule_for(self, method, path):
        with self.lock:
            for i, r in enumerate(self.rules):
                if r.get('method', method) != method or not re.search(r['path'], path):
                    continue
                self.counts[i] = self.counts.get(i, 0) + 1
                nth = r.get('nth', 'all')
                if nth == 'all' or self.counts[i] in nth:
                    return r
        return None

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()
