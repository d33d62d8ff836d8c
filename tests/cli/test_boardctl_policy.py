#!/usr/bin/env python3
"""boardctl and the dispatch policy of DESIGN §17 (issue 27), against a real boardd with real
processes:

- `work --retry`: a failing command's card goes back to the column it was taken from (out of
  the running column), released with retry: one attempt counted and a backoff (not_before);
  the progress line and the --json line say so; at the board's retry.max_attempts the server
  files it into the failed column with gave_up attempts_exhausted; a success after a failure
  files the card as usual and resets the attempts; --retry wins over --on-failure for a
  failing exit; a command that cannot start counts no attempt (nothing is claimed);
- `cards create --not-before TIME`: RFC 3339 as given, "+1h" from now; a claim before it is
  refused 409 not_yet; a malformed TIME is boardctl's own error (125), nothing created;
- `boards show B`: each column's limit beside its claimed count, max_claims and the board's
  claimed total, the retry policy in force; `boards ls`; --json is the answer as is.

usage: test_boardctl_policy.py path/to/boardd path/to/boardctl
"""
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
import boardd_test as bt  # noqa: E402
from boardd_test import check  # noqa: E402
import test_boardctl as tb  # noqa: E402  (its Server, boardctl(), finish())

BOARDCTL = tb.BOARDCTL = os.path.abspath(sys.argv[2])
Server, boardctl, finish = tb.Server, tb.boardctl, tb.finish


def parse_time(s):
    return datetime.datetime.strptime(s.replace('Z', '+0000')[:19] + '+0000',
                                      '%Y-%m-%dT%H:%M:%S%z')


def put_board(srv, name, limits=None, max_claims=None, retry=None):
    """Board `name` with the default board's columns; limits {column: n}."""
    st, b = srv.api('GET', '/v1/boards/default')
    assert st == 200, (st, b)
    cols = []
    for c in b['columns']:
        col = {'name': c['name'], 'terminal': c['terminal'], 'eligible': c['eligible']}
        if limits and c['name'] in limits:
            col['limit'] = limits[c['name']]
        cols.append(col)
    body = {'columns': cols, 'running': b['running'], 'completed': b['completed'],
            'failed': b['failed'], 'waiting': b['waiting']}
    if max_claims is not None:
        body['max_claims'] = max_claims
    if retry is not None:
        body['retry'] = retry
    st, ans = srv.api('PUT', '/v1/boards/' + name, body)
    check(st in (200, 201), 'PUT board %s: %d %s' % (name, st, ans))


def new_card(srv, cid, board, label, state='ready'):
    st, c = srv.api('POST', '/v1/cards', {'id': cid, 'board': board, 'state': state,
                                           'labels': [label], 'title': cid})
    assert st == 201, (st, c)


def json_lines(out):
    return [json.loads(line) for line in out.splitlines() if line.strip().startswith('{')]


# ---------------------------------------------------------------------------------------

def case_retry_backoff(srv, tmp):
    """One failure with --retry: back to ready (the running column undone) with an attempt
    and a backoff, the run failed; --on-failure given too is not used."""
    put_board(srv, 'rt1', retry={'max_attempts': 5, 'backoff_ms': 600000,
                                 'max_backoff_ms': 600000})
    new_card(srv, 'rb1', 'rt1', 'rb')
    t0 = time.time()
    p = boardctl(srv, ['--json', 'work', '--board', 'rt1', '--label', 'rb', '--max-jobs', '1',
                       '--retry', '--on-failure', 'review', '--', 'sh', '-c', 'exit 3'])
    rc, out, err = finish(p)
    check(rc == 0, 'work --retry exits 0: %d %s' % (rc, err))
    lines = json_lines(out)
    check(len(lines) == 1 and lines[0]['outcome'] == 'failed' and lines[0]['written'],
          'one failed job, written: %s' % out)
    r = lines[0].get('retry') if lines else None
    check(isinstance(r, dict) and r.get('attempts') == 1 and r.get('exhausted') is False and
          r.get('not_before'), 'the --json line carries the retry: %s' % out)
    check(re.search(r'card rb1 epoch \d+ run \S+: failed in .*retry: attempt 1, not before \S+',
                    err) is not None, 'the progress line says attempt 1 and when: %s' % err)
    c = srv.card('rb1')
    check(c['state'] == 'ready' and c['claim'] is None,
          'back where it was taken from (not review, not in_progress), released: %s %s' % (
              c['state'], c['claim']))
    check(c.get('attempts') == 1, 'one attempt counted: %s' % c.get('attempts'))
    nb = c.get('not_before')
    check(nb and 500 <= parse_time(nb).timestamp() - t0 <= 700,
          'not_before about backoff_ms (600 s +-10 %%) ahead: %s' % nb)
    st, run = srv.api('GET', '/v1/runs/' + (c.get('last_run_id') or 'none'))
    check(st == 200 and run['status'] == 'failed' and 'exit status 3' in (run['error'] or ''),
          'the run is failed with its exit status: %s' % run)
    # scheduled: nobody may claim it before the backoff
    st, ans = srv.api('POST', '/v1/cards/rb1/claim', {'marker': 'x'}, token=srv.worker)
    check(st == 409 and ans.get('code') == 'not_yet', 'claim before the backoff: %d %s' % (
        st, ans))


def case_retry_exhausted(srv, tmp):
    """max_attempts 2, backoff 1 ms: the second failure files the card into blocked with
    gave_up attempts_exhausted, released; the job line says so."""
    put_board(srv, 'rt2', retry={'max_attempts': 2, 'backoff_ms': 1, 'max_backoff_ms': 1})
    new_card(srv, 'rx1', 'rt2', 'rx')
    p = boardctl(srv, ['--json', 'work', '--board', 'rt2', '--label', 'rx', '--max-jobs', '2',
                       '--wait-ms', '1000', '--retry', '--', 'sh', '-c', 'exit 1'])
    rc, out, err = finish(p)
    lines = json_lines(out)
    check(rc == 0 and [line['card'] for line in lines] == ['rx1', 'rx1'],
          'the card is taken twice: %d %s %s' % (rc, out, err))
    r = [line.get('retry') or {} for line in lines]
    check(len(r) == 2 and r[0].get('attempts') == 1 and not r[0].get('exhausted') and
          r[1].get('attempts') == 2 and r[1].get('exhausted') is True,
          'attempt 1, then exhausted at 2: %s' % out)
    check('retry: attempts exhausted after 2: filed into blocked' in err,
          'the progress line says it was filed: %s' % err)
    c = srv.card('rx1')
    gu = c.get('gave_up') or {}
    check(c['state'] == 'blocked' and c['claim'] is None and c.get('attempts') == 2 and
          gu.get('reason') == 'attempts_exhausted' and gu.get('run_id') == c['last_run_id'],
          'filed into blocked with gave_up attempts_exhausted: %s' % c)


def case_retry_then_success(srv, tmp):
    """A failure then a success: the card is filed into done and its attempts start again."""
    put_board(srv, 'rt3', retry={'max_attempts': 5, 'backoff_ms': 1, 'max_backoff_ms': 1})
    new_card(srv, 'rs1', 'rt3', 'rs')
    flag = os.path.join(tmp, 'rs1.flag')
    p = boardctl(srv, ['--json', 'work', '--board', 'rt3', '--label', 'rs', '--max-jobs', '2',
                       '--wait-ms', '1000', '--retry', '--', 'sh', '-c',
                       'test -e %s || { touch %s; exit 7; }' % (flag, flag)])
    rc, out, err = finish(p)
    lines = json_lines(out)
    check(rc == 0 and [line['outcome'] for line in lines] == ['failed', 'succeeded'],
          'failed, then succeeded: %d %s %s' % (rc, out, err))
    c = srv.card('rs1')
    check(c['state'] == 'done' and c['claim'] is None and c.get('attempts') == 0 and
          not c.get('not_before'), 'done, attempts reset: %s' % c)


def case_retry_no_attempt(srv, tmp):
    """A command that cannot be started: nothing claimed, no attempt (DESIGN §20)."""
    new_card(srv, 'rn1', 'default', 'rn')
    p = boardctl(srv, ['work', '--board', 'default', '--label', 'rn', '--retry', '--',
                       os.path.join(tmp, 'no-such-command')])
    rc, out, err = finish(p)
    c = srv.card('rn1')
    check(rc == 127 and c['claim_epoch'] == 0 and c.get('attempts', 0) == 0 and
          not c.get('not_before'), 'cannot start: 127, untouched: %d %s' % (rc, c))


def case_not_before(srv, tmp):
    env = dict(os.environ, BOARDD_URL=srv.url, BOARDD_TOKEN=srv.op)
    t0 = time.time()
    r = subprocess.run([BOARDCTL, 'cards', 'create', '--id', 'nb1', '--label', 'nb',
                        '--state', 'ready', '--not-before', '+1h'],
                       capture_output=True, text=True, env=env)
    check(r.returncode == 0 and r.stdout.strip() == 'nb1', 'create --not-before +1h: %s' %
          r.stderr)
    c = srv.card('nb1')
    nb = c.get('not_before')
    check(nb and 3590 <= parse_time(nb).timestamp() - t0 <= 3610,
          'not_before an hour ahead: %s' % nb)
    st, ans = srv.api('POST', '/v1/cards/nb1/claim', {'marker': 'x'}, token=srv.worker)
    check(st == 409 and ans.get('code') == 'not_yet', 'claimed before: %d %s' % (st, ans))
    r = subprocess.run([BOARDCTL, '--json', 'cards', 'create', '--id', 'nb2', '--state',
                        'ready', '--not-before', '2031-01-02T03:04:05Z'],
                       capture_output=True, text=True, env=env)
    check(r.returncode == 0 and json.loads(r.stdout or '{}').get('not_before', '')
          .startswith('2031-01-02T03:04:05'), 'an RFC 3339 time as given: %s %s' % (
              r.stdout, r.stderr))
    for bad in ('tomorrow', '+5x', '+', '2031-01-02'):
        r = subprocess.run([BOARDCTL, 'cards', 'create', '--id', 'nb3', '--not-before', bad],
                           capture_output=True, text=True, env=env)
        check(r.returncode == 125 and '--not-before' in r.stderr and bad in r.stderr,
              'a malformed TIME %r: 125 and why: %d %s' % (bad, r.returncode, r.stderr))
    st, _ = srv.api('GET', '/v1/cards/nb3')
    check(st == 404, 'nothing created by a malformed TIME: %d' % st)


def case_boards_show(srv, tmp):
    env = dict(os.environ, BOARDD_URL=srv.url, BOARDD_TOKEN=srv.op)
    put_board(srv, 'cap', limits={'ready': 2}, max_claims=5,
              retry={'max_attempts': 4, 'backoff_ms': 2000, 'max_backoff_ms': 8000})
    new_card(srv, 'bs1', 'cap', 'bs')
    new_card(srv, 'bs2', 'cap', 'bs')
    st, _ = srv.api('POST', '/v1/cards/bs1/claim', {'marker': 'holder'}, token=srv.worker)
    check(st == 200, 'claim bs1: %d' % st)
    r = subprocess.run([BOARDCTL, 'boards', 'show', 'cap'], capture_output=True, text=True,
                       env=env)
    check(r.returncode == 0, 'boards show: %d %s' % (r.returncode, r.stderr))
    rows = {line.split()[0]: line.split() for line in r.stdout.splitlines() if line.strip()}
    check(rows.get('ready', [])[-2:] == ['1', '2'], 'ready: claimed 1, limit 2: %s' % r.stdout)
    check(rows.get('backlog', [])[-2:] == ['0', '-'], 'backlog: no limit: %s' % r.stdout)
    check('in_progress' in rows and 'running' in rows['in_progress'],
          'the running column is named: %s' % r.stdout)
    check('max_claims 5, claimed 1' in r.stdout, 'max_claims and the total: %s' % r.stdout)
    check("retry: max_attempts 4, backoff_ms 2000, max_backoff_ms 8000 (the board's)" in r.stdout,
          'the retry policy: %s' % r.stdout)
    r = subprocess.run([BOARDCTL, '--json', 'boards', 'show', 'cap'], capture_output=True,
                       text=True, env=env)
    b = json.loads(r.stdout) if r.returncode == 0 else {}
    ready = [c for c in b.get('columns', []) if c['name'] == 'ready']
    check(ready and ready[0].get('limit') == 2 and ready[0].get('claimed') == 1 and
          b.get('max_claims') == 5 and b.get('claimed') == 1,
          '--json: the answer as is: %s' % r.stdout)
    # the default board: no limits, the server's default retry (--run-ceiling 20)
    r = subprocess.run([BOARDCTL, 'boards', 'show', 'default'], capture_output=True, text=True,
                       env=env)
    check(r.returncode == 0 and 'retry: max_attempts 20, backoff_ms 1000, '
          "max_backoff_ms 300000 (the server's defaults)" in r.stdout,
          'default retry policy: %s' % r.stdout)
    r = subprocess.run([BOARDCTL, 'boards', 'ls'], capture_output=True, text=True, env=env)
    names = [line.split()[0] for line in r.stdout.splitlines()[1:] if line.strip()]
    check(r.returncode == 0 and 'cap' in names and 'default' in names,
          'boards ls: %s %s' % (r.stdout, r.stderr))
    r = subprocess.run([BOARDCTL, 'boards', 'show', 'nope'], capture_output=True, text=True,
                       env=env)
    check(r.returncode == 1 and '404' in r.stderr, 'an unknown board: %d %s' % (
        r.returncode, r.stderr))
    r = subprocess.run([BOARDCTL, 'boards'], capture_output=True, text=True, env=env)
    check(r.returncode == 125 and 'usage: boardctl boards' in r.stderr, 'boards alone: usage')


def case_help():
    for verb in (['boards'], ['boards', 'show']):
        r = subprocess.run([BOARDCTL] + verb + ['--help'], capture_output=True, text=True)
        check(r.returncode == 0 and 'usage: boardctl boards' in r.stdout,
              '--help on %s: %d %s' % (verb, r.returncode, r.stderr))
    r = subprocess.run([BOARDCTL, 'work', '--help'], capture_output=True, text=True)
    check('--retry' in r.stdout and 'attempts_exhausted' in r.stdout,
          'work --help describes --retry')
    r = subprocess.run([BOARDCTL, 'cards', 'create', '--help'], capture_output=True, text=True)
    check('--not-before TIME' in r.stdout, 'cards create --help describes --not-before')


def main():
    tmp = tempfile.mkdtemp(prefix='boardctl-policy-')
    srv = Server(tmp)
    srv.start()
    try:
        case_help()
        case_not_before(srv, tmp)
        case_boards_show(srv, tmp)
        case_retry_backoff(srv, tmp)
        case_retry_exhausted(srv, tmp)
        case_retry_then_success(srv, tmp)
        case_retry_no_attempt(srv, tmp)
    finally:
        srv.stop()
    if bt.summary('boardctl policy'):
        print('server logs: ' + tmp + '/data.NNN.log')
        return 1
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
