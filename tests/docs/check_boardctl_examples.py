#!/usr/bin/env python3
"""The boardctl examples a user copies from README.md ("Workers: claim-next and boardctl")
and boardctl(1) (EXAMPLES) run as written, on a fresh boardd started the README's way (an FS
store, no --tokens: its first start prints one token per role, which become $WORKER_TOKEN,
$BOT_TOKEN and $OPERATOR_TOKEN), from the repository's root, with the boardctl under test
first in PATH. Only the address changes (127.0.0.1:8080 becomes the test server's, and so does
boardctl's default BOARDD_URL).

Each line of an example runs in bash after the example's earlier `export` lines, and must exit
0 — but `boardctl runs`, which may exit 1 saying the server keeps no run history while the
server lacks GET /v1/cards/{id}/runs (printed as a note). Then what the example did is
checked: the cards it worked are where the text says. A man page line ending in a backslash
continues on the next.

usage: check_boardctl_examples.py path/to/boardd path/to/boardctl REPO_ROOT
"""
import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
import boardd_test as bt  # noqa: E402
from boardd_test import check  # noqa: E402

BOARDD, BOARDCTL, ROOT = (os.path.abspath(a) for a in sys.argv[1:4])


def readme_example():
    text = open(os.path.join(ROOT, 'README.md'), encoding='utf-8').read()
    m = re.search(r'^## Workers: claim-next and boardctl\n(.*?)(?=^## )', text, re.M | re.S)
    sec = m.group(1) if m else ''
    blocks = [b for b in re.findall(r'^```sh\n(.*?)^```', sec, re.M | re.S) if 'boardctl ' in b]
    return blocks[0] if len(blocks) == 1 else None


def man_example():
    text = open(os.path.join(ROOT, 'docs', 'man', 'boardctl.1'), encoding='utf-8').read()
    m = re.search(r'^\.SH EXAMPLES\n.*?^\.nf\n(.*?)^\.fi', text, re.M | re.S)
    if not m:
        return None
    return m.group(1).replace('\\-', '-').replace('\\\\', '\\')


def lines_of(block):
    out, cur = [], ''
    for line in block.splitlines():
        cur += line
        if cur.endswith('\\'):
            cur = cur[:-1] + ' '
            continue
        if cur.strip() and not cur.lstrip().startswith('#'):
            out.append(cur)
        cur = ''
    return out


def run_example(name, block, setup, after):
    if not check(block is not None, '%s: one boardctl example' % name):
        return
    tmp = tempfile.mkdtemp(prefix='boardctl-examples-')
    atexit.register(lambda: bt.failed() or shutil.rmtree(tmp, ignore_errors=True))
    srv = bt.Server(BOARDD, tmp + '/data', None, tmp, threads=2)
    srv.started(timeout=20)
    try:
        tok = srv.dev_tokens()
        op = tok['dev-operator']
        setup(srv, op)
        env = dict(bt.clean_env(), WORKER_TOKEN=tok['dev-worker'], BOT_TOKEN=tok['dev-bot'],
                   OPERATOR_TOKEN=op, BOARDD_URL=srv.url,  # boardctl's default address
                   PATH=os.path.dirname(BOARDCTL) + os.pathsep + os.environ.get('PATH', ''))
        exports, n = [], 0
        for line in lines_of(block.replace('127.0.0.1:8080', '127.0.0.1:%d' % srv.port)):
            if line.startswith('export '):
                exports.append(line)
            n += 1
            try:
                r = subprocess.run(['bash', '-euc', '\n'.join(exports + [line])], env=env,
                                   cwd=ROOT, capture_output=True, text=True, timeout=60)
            except subprocess.TimeoutExpired:
                check(False, '%s: `%s` ends within 60 s' % (name, line))
                continue
            if (r.returncode == 1 and re.match(r'boardctl runs ', line) and
                    'no run history' in r.stderr):
                print('note: %s: %s: the server keeps no run history yet' % (name, line))
                continue
            check(r.returncode == 0, '%s: `%s` exits 0: %d %s %s'
                  % (name, line, r.returncode, r.stdout[-300:], r.stderr[-300:]))
        check(n > 0, '%s: lines run: %d' % (name, n))
        for cid, state in after:
            st, c = bt.request(srv.port, 'GET', '/v1/cards/' + cid, op)[:2]
            check(st == 200 and c.get('state') == state and c.get('claim') is None,
                  '%s: card %s ends in %s, released: %s' % (name, cid, state, c))
    finally:
        srv.stop()


def readme_setup(srv, op):
    # The text presumes c1 from "A card's life over HTTP", reopened to ready.
    st, b = bt.request(srv.port, 'POST', '/v1/cards', op,
                       {'id': 'c1', 'title': 'build it', 'state': 'ready'})[:2]
    assert st == 201, (st, b)


def main():
    script = os.path.join(ROOT, 'docs', 'examples', 'job.sh')
    check(os.access(script, os.X_OK), 'docs/examples/job.sh is there and executable')
    run_example('README', readme_example(), readme_setup,
                [('c1', 'review'), ('c2', 'done'), ('c3', 'done')])
    run_example('boardctl(1)', man_example(), lambda srv, op: None,
                [('c-42', 'done'), ('c-43', 'done')])
    return bt.summary('boardctl examples')


if __name__ == '__main__':
    sys.exit(main())
