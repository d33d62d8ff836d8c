#!/usr/bin/env python3
"""What an MCP tool call costs next to the REST route it maps onto: N sequential get_card
tools/call (2025-11-25, no headers) and N GET /v1/cards/{id} on one keep-alive connection
each, against a boardd started here on a temporary FS store. Prints the mean and p99 per call.

usage: bench/mcp_call.py path/to/boardd [N]
"""
import http.client
import json
import re
import subprocess
import sys
import tempfile
import threading
import time

boardd, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2000
with tempfile.TemporaryDirectory() as tmp:
    tok = subprocess.run([boardd, 'token', 'add', '--tokens', tmp + '/t.json', '--name', 'b',
                          '--role', 'bot'], capture_output=True, text=True,
                         check=True).stdout.strip()
    p = subprocess.Popen([boardd, '--listen', '127.0.0.1:0', '--store', 'fs:' + tmp + '/d',
                          '--tokens', tmp + '/t.json', '--threads', '2'],
                         stderr=subprocess.PIPE, text=True)
    port = None
    while port is None:
        line = p.stderr.readline()
        if not line:
            raise SystemExit('boardd did not start')
        m = re.search(r'\(port (\d+)\)', line)
        port = int(m.group(1)) if m else None
    threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
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
    p.terminate()
    p.wait()
