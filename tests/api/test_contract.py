#!/usr/bin/env python3
"""The contract, exactly: schemathesis against the running boardd's own /openapi.json.

Every operation the document lists (collected from it, so a route added to the spec is tested
without touching this file; only an endless text/event-stream answer is left to its own test),
positive and negative data, all of schemathesis's checks, once
with a token holding every role and again with each single role's token. Seeded, a bounded
number of examples per operation, no example database: the same run every time.

Positive data may also be answered 409/422/428: those depend on the board's state (a card
claimed by someone else, a column that does not exist, an owned write without If-Match), not
on the request's shape. Negative data must be refused with a 4xx.

usage: test_contract.py path/to/boardd      (run by tests/tools/vpython: meson test contract)
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
import boardd_test as bt  # noqa: E402

BOARDD = sys.argv[1]
SEED = os.environ.get('BOARDD_CONTRACT_SEED', '1')
# examples per operation: the all-roles run, then each single role's run
EXAMPLES_ALL = int(os.environ.get('BOARDD_CONTRACT_EXAMPLES', '10'))
EXAMPLES_ROLE = max(1, EXAMPLES_ALL // 3)
# Answers that never end by design cannot be a request/response contract case: the event
# stream (GET /v1/events/stream, Server-Sent Events) is checked by tests/ui/test_stream_api.py.
ENDLESS = ['/v1/events/stream']
ROLES = [('all', ['worker', 'bot', 'operator'], EXAMPLES_ALL),
         ('worker', ['worker'], EXAMPLES_ROLE),
         ('bot', ['bot'], EXAMPLES_ROLE),
         ('operator', ['operator'], EXAMPLES_ROLE)]


def main():
    with tempfile.TemporaryDirectory(prefix='boardd-contract-') as tmp:
        tokens = os.path.join(tmp, 'tokens.json')
        plain = {name: bt.token_add(BOARDD, tokens, name, roles) for name, roles, _ in ROLES}
        srv = bt.Server(BOARDD, tmp + '/data', tokens, tmp, threads=2,
                        extra=['--log-format', 'json', '--events-wait-max-ms', '200'])
        srv.started(timeout=15)
        port = srv.port
        failed = []
        try:
            url = 'http://127.0.0.1:%d/openapi.json' % port
            spec = json.load(urllib.request.urlopen(url, timeout=10))
            # An event stream (text/event-stream) never ends: it has its own test
            # (tests/ui/test_stream_api.py); every other operation is run.
            streams = sorted(set(ENDLESS) | set(
                path for path, item in spec['paths'].items()
                for m, op in item.items() if isinstance(op, dict) and
                'text/event-stream' in op.get('responses', {}).get('200', {})
                .get('content', {})))
            n_ops = sum(1 for path, item in spec['paths'].items() for m in item
                        if m in ('get', 'put', 'post', 'patch', 'delete')
                        and path not in streams)
            if streams:
                print('not run here (event streams): ' + ', '.join(streams))
            for name, _, examples in ROLES:
                t = time.time()
                cmd = [sys.executable, '-m', 'schemathesis.cli', 'run', url,
                       '--experimental=openapi-3.1',
                       '--experimental=positive_data_acceptance',
                       '--experimental-positive-data-acceptance-allowed-statuses',
                       '2xx,401,403,404,409,422,428',
                       '--checks', 'all', '--data-generation-method', 'all',
                       '--hypothesis-seed', SEED,
                       '--hypothesis-max-examples', str(examples),
                       '--hypothesis-phases', 'explicit,generate',
                       '--hypothesis-database', 'none',
                       '--generation-allow-x00', 'false', '--generation-codec', 'utf-8',
                       '--request-timeout', '10000', '--no-color',
                       '-H', 'Authorization: Bearer ' + plain[name]]
                for path in streams:
                    cmd += ['--exclude-path', path]
                # contract_hooks.py: what the schema cannot say (one card once per batch)
                env = dict(os.environ, SCHEMATHESIS_HOOKS='contract_hooks',
                           PYTHONPATH=os.pathsep.join(
                               [os.path.dirname(os.path.abspath(__file__))] +
                               [p for p in [os.environ.get('PYTHONPATH')] if p]))
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
                out = r.stdout + r.stderr
                m = re.search(r'Collected API operations: (\d+)', out)
                collected = int(m.group(1)) if m else -1
                summary = out.strip().splitlines()[-1] if out.strip() else ''
                print('%s token: %s (%.0f s, %d operations)' % (name, summary,
                                                                time.time() - t, collected),
                      flush=True)
                if collected != n_ops:
                    failed.append(name)
                    print('FAIL: schemathesis collected %d operations, the spec has %d'
                          % (collected, n_ops))
                if r.returncode != 0:
                    failed.append(name)
                    print(out[-20000:])
        finally:
            code = srv.stop(timeout=15)
            if code not in (0, -signal.SIGTERM):
                failed.append('boardd exit %s' % code)
                print(srv.log_text()[-5000:])
        if failed:
            print('FAIL:', ', '.join(failed))
            return 1
        print('the contract holds: %d operations, tokens %s, seed %s' %
              (n_ops, ', '.join(n for n, _, _ in ROLES), SEED))
        return 0


sys.exit(main())
