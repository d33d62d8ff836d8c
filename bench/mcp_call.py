#!/usr/bin/env python3
"""What an MCP tool call costs next to the REST route it maps onto: N sequential get_card
tools/call (2025-11-25, no headers) and N GET /v1/cards/{id} on one keep-alive connection
each, against a boardd started here on a temporary FS store. Prints the mean and p99 per call.

usage: bench/mcp_call.py path/to/boardd [N]
"""
import http.client
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests',
                                'common'))
import boardd_test as bt  # noqa: E402

boardd, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2000
with tempfile.TemporaryDirectory() as tmp:
    tok = bt.token_add(boardd, tmp + '/t.json', 'b', ['bot'])
    srv = bt.Server(boardd, tmp + '/d', tmp + '/t.json', tmp, threads=2).started()
    port = srv.port
    h = {'Authorization': 'Bearer ' + tok, 'Content-Type': 'application/json'}
    c = http.client.HTTPConnection('127.0.0.1', port)
    c.request('POST', '/v1/cards', json.dumps({'id': 'c1', 'title': 't'}), h)
    c.getresponse().read()

    def run(fn):
        ts = []
        for _ in range(n):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
        ts.sort()
        return sum(ts) / n * 1e6, ts[int(n * 0.99)] * 1e6

    body = json.dumps({'jsonrpc': '2.0', 'id': 1, 'method': 'tools/call',
                       'params': {'name': 'get_card', 'arguments': {'id': 'c1'}}})

    def mcp():
        c.request('POST', '/mcp', body, h)
        r = c.getresponse()
        assert r.status == 200 and b'"isError":false' in r.read()

    def rest():
        c.request('GET', '/v1/cards/c1', headers=h)
        r = c.getresponse()
        assert r.status == 200 and r.read()

    for name, fn in (('REST GET /v1/cards/{id}', rest), ('MCP tools/call get_card', mcp)):
        mean, p99 = run(fn)
        print('%-26s n=%d  mean %.0f us  p99 %.0f us' % (name, n, mean, p99))
    srv.stop()
