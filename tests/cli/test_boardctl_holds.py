#!/usr/bin/env python3
"""boardctl keeps each claim's fate its own, against a real boardd (reaper on, a pass every
300 ms) with real processes:

- work --concurrency N: an operator revokes one card's claim and an idle slot claims the card
  again (epoch 2) before the next renew tick: the old hold is superseded at once (its command
  stopped as lost), the tick never names the card twice (which the server refuses whole, 400),
  and every other job finishes;
- a renew many refused as a whole for another reason than the token (here an injected 400):
  that tick renews each claim on its own, and the jobs finish;
- boardctl told to stop (SIGTERM) with a grace longer than the lease: the claim is still
  renewed while the command runs out its grace, so the reaper never hands the card on; the
  claim is given back once the command has exited;
- an operator files the card into another terminal column mid-job: the failure outcome is
  refused (422 terminal_state_exit) for that card only, and `work` goes on with its queue;
- an operator moves the card elsewhere (review) mid-job: --retry's give-back, and the
  give-back of boardctl told to stop, release it where it is instead of dragging it back;
- malformed flags are boardctl's own error (125), nothing sent.

Nothing waits on luck: leases are seconds long, commands end when the test says so (a file),
and each step waits on state the server or the command shows, with a deadline.

usage: test_boardctl_holds.py path/to/boardd path/to/boardctl
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
import boardd_test as bt  # noqa: E402
from boardd_test import check, wait_for  # noqa: E402
from fault_proxy import Proxy  # noqa: E402
import test_boardctl as tb  # noqa: E402  (its Server, boardctl(), finish())

BOARDCTL = tb.BOARDCTL = os.path.abspath(sys.argv[2])
Server, boardctl, finish = tb.Server, tb.boardctl, tb.finish


def wait_file(tmp, name):
    """A job's command: touches tmp/term.<card>.<epoch> on SIGTERM (then exits 143), and runs
    until tmp/<name> exists; then exits 0, or 1 for the cards listed in tmp/<name>.fail."""
    return ['sh', '-c',
            'trap \'touch "%(t)s/term.$BOARDD_CARD.$BOARDD_EPOCH"; exit 143\' TERM; '
            'while [ ! -e "%(t)s/%(n)s" ]; do sleep 0.05; done; '
            'if grep -qx "$BOARDD_CARD" "%(t)s/%(n)s.fail" 2>/dev/null; then exit 1; fi; '
            'exit 0' % {'t': tmp, 'n': name}]


def touch(path, text=''):
    with open(path, 'w') as f:
        f.write(text)


def json_lines(out):
    return [json.loads(line) for line in out.splitlines() if line.strip().startswith('{')]


def requests(srv):
    """The access log's request lines so far ("METHOD PATH STATUS")."""
    return re.findall(r'^\S+ ([A-Z]+ \S+ \d{3}) ', srv.log_text(), re.M)


def claim_of(srv, cid):
    return srv.card(cid)['claim'] or {}


# ---- issue 1: a card claimed again while boardctl still held its older claim ----------------

def renew_many(srv):
    return [r for r in requests(srv) if r.startswith('POST /v1/claims/renew ')]


def case_reclaimed_while_held(srv, tmp):
    for cid in ('rh0', 'rh1'):
        srv.new_card(cid, 'rh')
    # lease 60 s: the first renew tick comes 20 s after the claims, long after the revoke
    # and the re-claim below, so what stops the old command is no tick's answer
    p = boardctl(srv, ['--json', 'work', '--board', 'default', '--label', 'rh',
                       '--concurrency', '3', '--max-jobs', '3', '--lease-ms', '60000',
                       '--wait-ms', '2000', '--grace', '5s', '--'] + wait_file(tmp, 'rh.go'))
    try:
        check(wait_for(lambda: all(claim_of(srv, c) and srv.card(c)['state'] == 'in_progress'
                                   for c in ('rh0', 'rh1')), 15),
              'reclaimed: both cards taken and running')
        e1 = claim_of(srv, 'rh0').get('epoch')
        e_other = claim_of(srv, 'rh1').get('epoch')
        ticks = len(renew_many(srv))
        st, _ = srv.api('POST', '/v1/cards/rh0/claim/revoke')
        check(st == 200, 'reclaimed: the operator revoked rh0 (%d)' % st)
        # the third slot, idle on claim-next, takes the card again at once
        check(wait_for(lambda: claim_of(srv, 'rh0').get('epoch') == e1 + 1, 10),
              'reclaimed: an idle slot claimed rh0 again (epoch %s): %s'
              % (e1 + 1, srv.card('rh0')['claim']))
        check(wait_for(lambda: os.path.exists('%s/term.rh0.%d' % (tmp, e1)), 10) and
              len(renew_many(srv)) == ticks,
              'reclaimed: the command under the superseded claim (epoch %d) was stopped at '
              'once, before any renew tick (%d since)' % (e1, len(renew_many(srv)) - ticks))
        # the next tick holds both live claims: each card named once, answered 200
        check(wait_for(lambda: len(renew_many(srv)) > ticks, 30),
              'reclaimed: a renew tick came')
        check(not any(r.endswith(' 400') for r in renew_many(srv)[ticks:]),
              'reclaimed: no renew tick was refused whole: %s' % renew_many(srv)[ticks:])
        stopped = sorted(f for f in os.listdir(tmp) if f.startswith('term.rh'))
        check(stopped == ['term.rh0.%d' % e1],
              'reclaimed: no other command was stopped: %s' % stopped)
        check(claim_of(srv, 'rh0').get('epoch') == e1 + 1 and
              claim_of(srv, 'rh1').get('epoch') == e_other,
              'reclaimed: both live claims are still held: %s %s'
              % (srv.card('rh0')['claim'], srv.card('rh1')['claim']))
    finally:
        touch(tmp + '/rh.go')
    rc, out, err = finish(p, 60)
    jobs = {(j['card'], j['epoch']): j for j in json_lines(out)}
    check(rc == 0 and len(jobs) == 3, 'reclaimed: work ran 3 jobs: rc %d %s %s' % (rc, out, err))
    check(jobs.get(('rh0', e1), {}).get('outcome') == 'lost' and
          not jobs[('rh0', e1)]['written'],
          'reclaimed: the superseded job is lost, nothing written: %s' % jobs.get(('rh0', e1)))
    check(jobs.get(('rh0', e1 + 1), {}).get('outcome') == 'succeeded' and
          jobs.get(('rh1', e_other), {}).get('outcome') == 'succeeded',
          'reclaimed: the new claim\'s job and the other card\'s job succeeded: %s' % jobs)
    check(srv.card('rh0')['state'] == 'done' and srv.card('rh1')['state'] == 'done' and
          srv.card('rh0')['claim'] is None and srv.card('rh1')['claim'] is None,
          'reclaimed: both cards done and released')


def case_renew_many_refused_whole(srv, tmp):
    for cid in ('rw0', 'rw1'):
        srv.new_card(cid, 'rw')
    px = Proxy(srv.port)
    px.set([{'method': 'POST', 'path': r'^/v1/claims/renew$', 'nth': 'all',
             'action': 'status', 'status': 400, 'code': 'bad_request'}])
    try:
        env = {'BOARDD_URL': 'http://127.0.0.1:%d' % px.port}
        p = boardctl(srv, ['--json', 'work', '--board', 'default', '--label', 'rw',
                           '--concurrency', '2', '--max-jobs', '2', '--lease-ms', '6000',
                           '--wait-ms', '1000', '--grace', '5s', '--'] +
                     wait_file(tmp, 'rw.go'), env=env)
        try:
            check(wait_for(lambda: all(claim_of(srv, c) for c in ('rw0', 'rw1')), 15),
                  'refused whole: both cards taken')
            # two ticks refused whole, each followed by a single renew of each claim
            ok = wait_for(lambda: sum(1 for r in requests(srv)
                                      if re.fullmatch(r'POST /v1/cards/rw\d/renew 200', r))
                          >= 4, 20)
            many = sum(1 for m in px.log if m[0] == 'POST' and m[1] == '/v1/claims/renew')
            check(ok and many >= 2,
                  'refused whole: each claim renewed on its own after %d refused renew '
                  'many' % many)
            check(not [f for f in os.listdir(tmp) if f.startswith('term.rw')],
                  'refused whole: no command was stopped')
        finally:
            touch(tmp + '/rw.go')
        rc, out, err = finish(p, 60)
    finally:
        px.close()
    jobs = json_lines(out)
    check(rc == 0 and sorted(j['card'] for j in jobs) == ['rw0', 'rw1'] and
          all(j['outcome'] == 'succeeded' for j in jobs),
          'refused whole: both jobs succeeded: rc %d %s %s' % (rc, out, err))
    check(all(srv.card(c)['state'] == 'done' for c in ('rw0', 'rw1')),
          'refused whole: both cards done')


# ---- issue 2: the claim renewed through the grace -------------------------------------------

def case_grace_renews(srv, tmp):
    srv.new_card('gr0', 'gr')
    lease = 3000
    # the command traps SIGTERM and keeps running until the test lets it end
    cmd = ['sh', '-c', 'trap \'touch "%(t)s/gr.term"\' TERM; '
           'while [ ! -e "%(t)s/gr.go" ]; do sleep 0.05; done; exit 0' % {'t': tmp}]
    p = boardctl(srv, ['--json', 'work', '--board', 'default', '--label', 'gr',
                       '--lease-ms', str(lease), '--grace', '60s', '--'] + cmd)
    try:
        check(wait_for(lambda: claim_of(srv, 'gr0') and
                       srv.card('gr0')['state'] == 'in_progress', 15),
              'grace: the card is taken and running')
        held = claim_of(srv, 'gr0')
        p.send_signal(signal.SIGTERM)
        check(wait_for(lambda: os.path.exists(tmp + '/gr.term'), 10),
              'grace: SIGTERM reached the command')
        first = claim_of(srv, 'gr0').get('lease_until')
        # Two leases and more pass, the reaper passing every 300 ms: without a renew the
        # lease would end and the reaper would take the claim and hand the card on.
        deadline = time.monotonic() + 2.5 * lease / 1000.0
        changed = None
        while time.monotonic() < deadline and not changed:
            c = claim_of(srv, 'gr0')
            if (c.get('marker'), c.get('epoch')) != (held['marker'], held['epoch']):
                changed = srv.card('gr0')
            time.sleep(0.1)
        check(changed is None, 'grace: the claim stayed boardctl\'s while the command ran '
              'out its grace: %s' % (changed and changed['claim']))
        last = claim_of(srv, 'gr0').get('lease_until')
        check(last and first and last > first,
              'grace: the claim was renewed during the grace (%s -> %s)' % (first, last))
        check(p.poll() is None, 'grace: boardctl still waits for its command')
    finally:
        touch(tmp + '/gr.go')
    rc, out, err = finish(p, 60)
    jobs = json_lines(out)
    c = srv.card('gr0')
    check(rc == 0 and len(jobs) == 1 and jobs[0]['outcome'] == 'stopped' and
          jobs[0]['epoch'] == held['epoch'],
          'grace: the job ended stopped, under its own claim: rc %d %s %s' % (rc, out, err))
    check(c['claim'] is None and c['state'] == 'ready' and c['claim_epoch'] == held['epoch'],
          'grace: then the claim was given back, the card back in ready: %s %s'
          % (c['state'], c['claim']))


# ---- issue 3: a refusal about one card stops that job only ----------------------------------

def case_refiled_terminal(srv, tmp):
    srv.new_card('tf0', 'tf', priority=2)
    srv.new_card('tf1', 'tf', priority=1)
    touch(tmp + '/tf.go.fail', 'tf0\n')
    p = boardctl(srv, ['--json', 'work', '--board', 'default', '--label', 'tf',
                       '--max-jobs', '2', '--lease-ms', '6000', '--wait-ms', '1000',
                       '--grace', '5s', '--'] + wait_file(tmp, 'tf.go'))
    try:
        check(wait_for(lambda: claim_of(srv, 'tf0') and
                       srv.card('tf0')['state'] == 'in_progress', 15),
              'refiled: tf0 taken and running')
        # the operator files it into a terminal column while the job runs
        st, c = srv.api('PATCH', '/v1/cards/tf0/state', {'to': 'done'})
        check(st == 200 and c['state'] == 'done', 'refiled: the operator filed tf0 into done')
    finally:
        touch(tmp + '/tf.go')
    rc, out, err = finish(p, 60)
    jobs = {j['card']: j for j in json_lines(out)}
    check(rc == 0, 'refiled: work went on and ended by --max-jobs (rc %d): %s' % (rc, err))
    j0 = jobs.get('tf0', {})
    check(j0.get('outcome') == 'error' and 'terminal' in (j0.get('detail') or ''),
          'refiled: tf0\'s outcome was refused for that card: %s' % j0)
    check(jobs.get('tf1', {}).get('outcome') == 'succeeded' and
          srv.card('tf1')['state'] == 'done',
          'refiled: the next card was worked: %s' % jobs.get('tf1'))
    c = srv.card('tf0')
    check(c['state'] == 'done' and c['claim'] is None,
          'refiled: tf0 stays where the operator filed it, released: %s %s'
          % (c['state'], c['claim']))


def case_unknown_column_stops(srv, tmp):
    """The other side of the table: an outcome column the board lost after the preflight is a
    configuration error, and work stops (125)."""
    st, b = srv.api('GET', '/v1/boards/default')
    cols = [{'name': c['name'], 'terminal': c['terminal'], 'eligible': c['eligible']}
            for c in b['columns']]
    body = {'columns': cols + [{'name': 'parked', 'terminal': True, 'eligible': False}],
            'running': b['running'], 'completed': b['completed'], 'failed': b['failed'],
            'waiting': b['waiting']}
    st, _ = srv.api('PUT', '/v1/boards/uc', dict(body, name='uc'))
    check(st == 200, 'unknown column: board uc made (%d)' % st)
    for cid in ('uc0', 'uc1'):
        st, _ = srv.api('POST', '/v1/cards', {'id': cid, 'board': 'uc', 'state': 'ready',
                                              'priority': 2 if cid == 'uc0' else 1})
        check(st == 201, 'unknown column: card %s made' % cid)
    touch(tmp + '/uc.go.fail', 'uc0\n')
    p = boardctl(srv, ['--json', 'work', '--board', 'uc', '--on-failure', 'parked',
                       '--lease-ms', '6000', '--wait-ms', '1000', '--grace', '5s', '--'] +
                 wait_file(tmp, 'uc.go'))
    try:
        check(wait_for(lambda: claim_of(srv, 'uc0'), 15), 'unknown column: uc0 taken')
        st, _ = srv.api('PUT', '/v1/boards/uc', dict(body, name='uc', columns=cols))
        check(st == 200, 'unknown column: the operator dropped column parked (%d)' % st)
    finally:
        touch(tmp + '/uc.go')
    rc, out, err = finish(p, 60)
    jobs = json_lines(out)
    check(rc == 125 and [j['card'] for j in jobs] == ['uc0'] and
          jobs[0]['outcome'] == 'error',
          'unknown column: work stopped with 125 after that job: rc %d %s %s' % (rc, out, err))
    check(srv.card('uc1')['claim'] is None and srv.card('uc1')['state'] == 'ready',
          'unknown column: nothing more was claimed')


# ---- issue 4: a card somebody moved is released where it is ---------------------------------

def case_retry_moved(srv, tmp):
    srv.new_card('rm0', 'rm')
    touch(tmp + '/rm.go.fail', 'rm0\n')
    p = boardctl(srv, ['--json', 'work', '--board', 'default', '--label', 'rm', '--retry',
                       '--max-jobs', '1', '--lease-ms', '6000', '--grace', '5s', '--'] +
                 wait_file(tmp, 'rm.go'))
    try:
        check(wait_for(lambda: claim_of(srv, 'rm0') and
                       srv.card('rm0')['state'] == 'in_progress', 15),
              'retry moved: rm0 taken and running')
        st, c = srv.api('PATCH', '/v1/cards/rm0/state', {'from': 'in_progress', 'to': 'review'})
        check(st == 200 and c['state'] == 'review', 'retry moved: the operator moved it to review')
    finally:
        touch(tmp + '/rm.go')
    rc, out, err = finish(p, 60)
    jobs = json_lines(out)
    c = srv.card('rm0')
    check(rc == 0 and len(jobs) == 1 and jobs[0]['outcome'] == 'failed' and
          jobs[0]['written'], 'retry moved: the job failed, its end written: rc %d %s %s'
          % (rc, out, err))
    check(c['state'] == 'review' and c['claim'] is None,
          'retry moved: the card released where the operator put it (review), not dragged '
          'back: %s %s' % (c['state'], c['claim']))
    check(not c.get('attempts') and not c.get('not_before'),
          'retry moved: no attempt counted for a card somebody took over: attempts %s, '
          'not_before %s' % (c.get('attempts'), c.get('not_before')))


def case_stop_moved(srv, tmp):
    srv.new_card('sm0', 'sm')
    cmd = ['sh', '-c', 'trap \'exit 0\' TERM; while :; do sleep 0.05; done']
    p = boardctl(srv, ['--json', 'work', '--board', 'default', '--label', 'sm',
                       '--lease-ms', '6000', '--grace', '5s', '--'] + cmd)
    try:
        check(wait_for(lambda: claim_of(srv, 'sm0') and
                       srv.card('sm0')['state'] == 'in_progress', 15),
              'stop moved: sm0 taken and running')
        st, c = srv.api('PATCH', '/v1/cards/sm0/state', {'from': 'in_progress', 'to': 'review'})
        check(st == 200, 'stop moved: the operator moved it to review')
    finally:
        p.send_signal(signal.SIGTERM)
    rc, out, err = finish(p, 60)
    jobs = json_lines(out)
    c = srv.card('sm0')
    check(rc == 0 and len(jobs) == 1 and jobs[0]['outcome'] == 'stopped',
          'stop moved: the job stopped: rc %d %s %s' % (rc, out, err))
    check(c['state'] == 'review' and c['claim'] is None,
          'stop moved: the card released in review, not dragged back to ready: %s %s'
          % (c['state'], c['claim']))


# ---- issue 5: malformed flags ---------------------------------------------------------------

def case_flags(srv, tmp):
    env = dict(os.environ, BOARDD_URL=srv.url, BOARDD_TOKEN=srv.op)
    cases = [
        (['events', '--after', 'abc'], '--after'),
        (['events', '--after', '-3'], '--after'),
        (['events', '--limit', '2x'], '--limit'),
        (['--url'], 'missing'),
        (['--token-file'], 'missing'),
        (['cards', 'create', '--title', 'x', 'stray'], 'unexpected argument'),
        (['cards', 'create', '--priority', ''], '--priority'),
        (['cards', 'ls', '--limit', 'many'], '--limit'),
        (['work', '--board', 'default', '--wait-ms', '', '--', 'true'], '--wait-ms'),
        (['work', '--board', 'default', '--max-jobs', '', '--', 'true'], '--max-jobs'),
        (['work', '--board', 'default', '--grace', 'inf', '--', 'true'], '--grace'),
        (['work', '--board', 'default', '--lease-ms', '1e3', '--', 'true'], '--lease-ms'),
    ]
    def mark(name):
        """A request of the test's own, seen in the access log: what lies between two
        marks was sent by boardctl."""
        srv.api('GET', '/v1/cards/' + name)
        wait_for(lambda: any('/v1/cards/%s ' % name in r for r in requests(srv)), 10)
        return next(i for i, r in enumerate(requests(srv)) if '/v1/cards/%s ' % name in r)

    before = mark('flags-before')
    for args, want in cases:
        r = subprocess.run([BOARDCTL] + args, env=env, capture_output=True, text=True,
                           timeout=30)
        check(r.returncode == 125 and want in r.stderr,
              'flags: boardctl %s -> 125 naming %s: rc %d %s'
              % (' '.join(args), want, r.returncode, r.stderr.strip().splitlines()[:1]))
    sent = requests(srv)[before + 1:mark('flags-after')]
    check(not sent, 'flags: nothing was sent: %s' % sent)


def main():
    tmp = tempfile.mkdtemp(prefix='boardctl-holds-')
    srv = Server(tmp)
    srv.start()
    try:
        for case in (case_reclaimed_while_held, case_renew_many_refused_whole,
                     case_grace_renews, case_refiled_terminal, case_unknown_column_stops,
                     case_retry_moved, case_stop_moved, case_flags):
            d = os.path.join(tmp, case.__name__)
            os.mkdir(d)
            case(srv, d)
    finally:
        srv.stop()
    if bt.summary('boardctl-holds'):
        print('server logs: ' + tmp)
        return 1
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
