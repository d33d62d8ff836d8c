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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
import boardd_test as bt  # noqa: E402
from boardd_test import check  # noqa: E402

BOARDD = sys.argv[1]


def run(args, env=None, timeout=10):
    return subprocess.run([BOARDD] + args, capture_output=True, text=True, timeout=timeout,
                          env=bt.clean_env(env))


def start(tmp, extra=(), env=None):
    """boardd on the data dir tmp/data (no --tokens: the bootstrap), started."""
    return bt.Server(BOARDD, tmp + '/data', extra=extra, env=env, threads=2).started(10)


def get(port, path, token=None, method='GET'):
    """(status, body text) of one request."""
    return bt.request(port, method, path, token, timeout=5, raw=True)[:2]


def main():
    with tempfile.TemporaryDirectory() as tmp:
        # flags
        r = run(['--help'])
        check(r.returncode == 0 and '--lease-default-ms' in r.stdout, '--help')
        r = run(['--version'])
        check(r.returncode == 0 and r.stdout.startswith('boardd '), '--version')
        for bad in (['--threads', '0'], ['--max-body', 'lots'], ['--log-format', 'xml'],
                    ['--reaper=maybe'], ['--nope'], ['--listen'],
                    ['--lease-min-ms', '5000', '--lease-default-ms', '10'],
                    ['--delivery-lease-ms', '1000', '--delivery-timeout-ms', '5000'],
                    ['--delivery-lease-ms', '5000', '--delivery-timeout-ms', '5000']):
            r = run(bad + ['--store', 'fs:' + tmp + '/never'])
            check(r.returncode == 2 and r.stderr.strip(), 'exit 2 for %s' % bad)
        # a listen address or a store spec that cannot work: refused before the store opens
        for bad in (['--listen', 'foo'], ['--listen', '127.0.0.1:99999'],
                    ['--listen', '999.1.1.1:80'], ['--listen', 'unix:/' + 'a' * 120]):
            r = run(bad + ['--store', 'fs:' + tmp + '/never'])
            check(r.returncode == 2 and 'listen address' in r.stderr,
                  'exit 2 for %s: %s' % (bad, r.stderr.strip()))
        for spec in ('bogus:' + tmp + '/never', tmp + '/never', 'fs:', 'mongdb://x/y'):
            r = run(['--store', spec])
            check(r.returncode == 2 and '--store' in r.stderr,
                  'exit 2 for --store %s: %s' % (spec, r.stderr.strip()))
        r = run(['--store', 'fs:' + tmp + '/never'], env={'ITERION_BOARD_CLAIM_REAPER': 'yes'})
        check(r.returncode == 2 and 'ITERION_BOARD_CLAIM_REAPER' in r.stderr,
              'exit 2 for ITERION_BOARD_CLAIM_REAPER=yes: %s' % r.stderr.strip())
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
        r2 = run(['token', 'add', '--tokens', tf, '--name', 'op-reader', '--role', 'operator',
                  '--cap', 'board.read'])
        op_reader = r2.stdout.strip()
        r2 = run(['token', 'add', '--tokens', tf, '--name', 'creator', '--role', 'bot',
                  '--cap', 'board.create', '--cap', 'board.read'])
        creator = r2.stdout.strip()
        ents = {e['name']: e for e in json.load(open(tf))['tokens']}
        check(r.returncode == 0 and ents['reader'].get('caps') == ['board.read', 'board.comment']
              and 'caps' not in ents['ci'], 'token add --cap writes caps: %s' % ents)
        r = run(['token', 'add', '--tokens', tf, '--name', 'y', '--role', 'bot', '--cap', 'fly'])
        check(r.returncode == 2 and 'capability' in r.stderr, 'unknown capability refused')

        # a server with that tokens file: the token works, roles apply
        srv = start(tmp, ['--tokens', tf])
        port = srv.port
        check(get(port, '/healthz')[0] == 200, 'healthz')
        check(get(port, '/v1/cards')[0] == 401, 'no token 401')
        check(get(port, '/v1/cards', plain)[0] == 200, 'token add token works')
        check(get(port, '/v1/boards/other', plain)[0] == 403, 'board scope from the file')
        check(get(port, '/v1/cards', reader)[0] == 200, 'a board.read token reads')
        st, body = get(port, '/v1/cards/x/labels', reader, method='PUT')
        check(st == 403 and 'board.label' in body, 'a token without board.label: 403 %s' % body)
        # board.create creates and edits; it moves nothing and closes nothing
        st, body = bt.request(port, 'POST', '/v1/cards', creator, {'id': 'cr1', 'title': 't'},
                              timeout=5, raw=True)[:2]
        check(st == 201, 'a board.create token creates: %s %s' % (st, body))
        st, body = bt.request(port, 'POST', '/v1/cards', creator,
                              {'id': 'cr2', 'title': 't', 'state': 'done'}, timeout=5,
                              raw=True)[:2]
        check(st == 403 and 'board.close' in body,
              'created straight into a terminal column needs board.close: %s %s' % (st, body))
        st, body = bt.request(port, 'PATCH', '/v1/cards/cr1', creator, {'blockers': ['cr9']},
                              timeout=5, raw=True)[:2]
        check(st == 403 and 'board.move' in body,
              'blockers move the card: a PATCH of them needs board.move: %s %s' % (st, body))
        st, body = bt.request(port, 'PATCH', '/v1/cards/cr1', creator, {'title': 'new'},
                              timeout=5, raw=True)[:2]
        check(st == 200, 'its title it may change: %s %s' % (st, body))
        # the operator's label sweeps are label routes too
        for method, path in (('POST', '/v1/labels/rename'), ('POST', '/v1/labels/merge'),
                             ('DELETE', '/v1/labels/x')):
            st, body = get(port, path, op_reader, method=method)
            check(st == 403 and 'board.label' in body,
                  'an operator without board.label: %s %s 403 %s' % (method, path, body))
        # the access log: a lone request's line shows up at once, not at the next flush
        check(srv.wait_log(r'(?m) GET /v1/boards/other 403 [0-9.]+ms ci$', 5) is not None,
              'access log line of a lone request written at once')
        # a burst over one keep-alive connection: every line is written, none lost
        conn = http.client.HTTPConnection('127.0.0.1', port, timeout=5)
        for i in range(300):
            conn.request('GET', '/v1/cards/burst-%d' % i, headers={'Authorization': 'Bearer ' + plain})
            r = conn.getresponse()
            r.read()
        conn.close()
        check(srv.stop(timeout=15) == 0, 'SIGTERM exits 0')
        rest = srv.log_text()
        burst = re.findall(r' GET /v1/cards/burst-(\d+) 404 ', rest)
        check(sorted(int(b) for b in burst) == list(range(300)),
              'access log: 300 burst lines, each once (%d seen)' % len(burst))

        # bootstrap: no --tokens creates DATADIR/tokens.json and prints the dev tokens once
        srv = start(tmp, env={'ITERION_BOARD_CLAIM_REAPER': 'ON'})
        port, text = srv.port, srv.log_text()
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
        check(srv.stop(timeout=15, sig=signal.SIGINT) == 0, 'SIGINT exits 0')
        srv = start(tmp, ['--reaper', 'off'])
        port, text = srv.port, srv.log_text()
        check(not re.search(r'[0-9a-f]{64}', text) and 'tokens.json' in text,
              'restart reuses the file and prints no token')
        check('reaper gate off' in text, '--reaper off')
        if len(toks) == 3:
            check(get(port, '/v1/cards', toks['dev-bot'])[0] == 200, 'dev token survives restart')
        check(srv.stop(timeout=15) == 0, 'SIGTERM exits 0 again')
    return bt.summary()


if __name__ == '__main__':
    sys.exit(main())
