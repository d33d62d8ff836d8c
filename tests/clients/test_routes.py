#!/usr/bin/env python3
"""Every route of openapi/openapi.yaml is callable from the Python client (issue 29): for each
path and method, boardd.Client has a method marked with that route, and calling it (arguments
made up from its signature) sends exactly that method to a path the template matches — seen by
a local HTTP server that records what arrives. A route of the document no method calls fails.
Routes the client has ahead of today's server (DESIGN §18, §20) are listed, not failed. The
Go client's twin of this walk is clients/go/routes_test.go.

usage: test_routes.py REPO_ROOT
"""
import http.server
import inspect
import os
import re
import sys
import threading

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
import boardd_test as bt  # noqa: E402
from boardd_test import check  # noqa: E402

ROOT = os.path.abspath(sys.argv[1])
sys.path.insert(0, os.path.join(ROOT, 'clients', 'python'))
import boardd  # noqa: E402

METHODS = ('get', 'put', 'post', 'patch', 'delete')
seen = []


class Recorder(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def _any(self):
        n = int(self.headers.get('Content-Length') or 0)
        if n:
            self.rfile.read(n)
        seen.append((self.command, self.path.split('?')[0]))
        stream = self.path.startswith('/v1/events/stream')
        body = b'' if stream else b'{}'
        self.send_response(200)
        self.send_header('Content-Type', 'text/event-stream' if stream else 'application/json')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PUT = do_POST = do_PATCH = do_DELETE = _any

    def log_message(self, *a):
        pass


def args_for(fn):
    """Positional arguments for each required parameter: an int for an epoch, else 'x1'."""
    out = []
    for name, p in inspect.signature(fn).parameters.items():
        if p.default is not inspect.Parameter.empty or p.kind in (p.VAR_KEYWORD,
                                                                   p.VAR_POSITIONAL):
            continue
        out.append(1 if name == 'epoch' else 'x1')
    return out


def template_re(path):
    return re.compile('^' + re.sub(r'\\\{[^/]+?\\\}', '[^/]+', re.escape(path)) + '$')


def main():
    doc = yaml.safe_load(open(os.path.join(ROOT, 'openapi', 'openapi.yaml')))
    routes = {(m.upper(), p) for p, item in doc['paths'].items() for m in item
              if m in METHODS}
    have = boardd.Client.routes()
    srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Recorder)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    c = boardd.Client('http://127.0.0.1:%d' % srv.server_address[1], 'tok', timeout=10)
    for method, path in sorted(routes):
        name = have.get((method, path))
        if not check(name is not None, '%s %s: a method of boardd.Client calls it' % (method,
                                                                                      path)):
            continue
        fn = getattr(c, name)
        del seen[:]
        try:
            res = fn(*args_for(fn))
            if inspect.isgenerator(res):
                list(res)
        except Exception as e:  # noqa: BLE001 - reported as the failure
            check(False, '%s %s: Client.%s raised %r' % (method, path, name, e))
            continue
        check(len(seen) == 1 and seen[0][0] == method and template_re(path).match(seen[0][1]),
              '%s %s: Client.%s sends it (%s)' % (method, path, name, seen))
    ahead = sorted(set(have) - routes)
    print('routes the client has ahead of this openapi.yaml: %s' % (
        ', '.join('%s %s' % r for r in ahead) or 'none'))
    srv.shutdown()
    sys.exit(bt.summary('client routes'))


if __name__ == '__main__':
    main()
