#!/usr/bin/env python3
"""boardctl against a real boardd, with real processes (DESIGN §12): success and failure
outcomes, the command's environment, the result file, run --card and its exit code, SIGTERM
forwarded then release, --concurrency, kill -9 of boardctl mid-job (the command dies with it,
the reaper reclaims after the lease), SIGSTOP past the lease then SIGCONT (the command is
killed, no late write lands), the server restarted under it (ridden when the lease allows,
given up cleanly when not), an operator's revoke, an operator's run cancel (the command
stopped, the card kept claimed and not filed) and the race of that cancel with the command's
own end (made to coincide through a FIFO the test writes), and --help on every verb.

usage: test_boardctl.py path/to/boardd path/to/boardctl
Stdlib only. Each case takes its cards by a label of its own, so cases never steal work.
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
import boardd_test as bt  # noqa: E402
from boardd_test import check, wait_for  # noqa: E402

BOARDD, BOARDCTL = sys.argv[1], sys.argv[2]


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purpose
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().split(') ')[1][0] != 'Z'
    except OSError:
        return False


class Server(bt.Server):
    """boardd with its reaper on (a pass every 300 ms) on tmp/<data>, tokens 'worker'
    (worker+bot) and 'ops' (operator+bot) in tmp/tokens.json (or those of tokens_from); a
    restart listens on the same port. Logs: tmp/<data>.NNN.log."""

    def __init__(self, tmp, extra=(), data='data', tokens_from=None, cafile=None):
        tokens = tmp + '/tokens.json'
        super().__init__(BOARDD, tmp + '/' + data, tokens, tmp, threads=2, cafile=cafile,
                         extra=['--reaper', 'on', '--reaper-interval-ms', '300'] + list(extra),
                         keep_port=True, name=data)
        if tokens_from:
            self.worker, self.op = tokens_from.worker, tokens_from.op
        else:
            self.worker = bt.token_add(BOARDD, tokens, 'worker', ['worker', 'bot'])
            self.op = bt.token_add(BOARDD, tokens, 'ops', ['operator', 'bot'])

    def start(self):
        return self.started(timeout=10)

    def stop(self, sig=signal.SIGTERM):
        return super().stop(timeout=20, sig=sig)

    def api(self, method, path, body=None, token=None, if_match=None):
        headers = {'If-Match': '"%d"' % if_match} if if_match is not None else None
        return bt.request(self.port, method, path, token or self.op, body, headers,
                          cafile=self.cafile)[:2]

    def card(self, cid):
        st, c = self.api('GET', '/v1/cards/' + cid)
        assert st == 200, (st, c)
        return c

    def new_card(self, cid, label, priority=0, state='ready'):
        st, c = self.api('POST', '/v1/cards', {'id': cid, 'state': state, 'labels': [label],
                                               'priority': priority, 'title': cid})
        assert st == 201, (st, c)

    def events_after(self, seq):
        st, ev = self.api('GET', '/v1/events?after=%d&limit=1000' % seq)
        assert st == 200
        return ev['events']

    def last_seq(self):
        seq = 0
        while True:
            ev = self.events_after(seq)
            if not ev:
                return seq
            seq = ev[-1]['seq']


def boardctl(srv, args, **kw):
    env = dict(os.environ)
    env.update({'BOARDD_URL': srv.url, 'BOARDD_TOKEN': srv.worker})
    env.update(kw.pop('env', {}))
    return subprocess.Popen([BOARDCTL] + args, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def finish(p, timeout=30):
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        check(False, 'boardctl did not finish in %ds: %s' % (timeout, err))
    return p.returncode, out, err


def read_pid(path, timeout=10):
    def get():
        try:
            with open(path) as f:
                s = f.read().strip()
                return int(s) if s else None
        except (OSError, ValueError):
            return None
    return wait_for(get, timeout)


# ---------------------------------------------------------------------------------------

def case_outcomes_and_env(srv, tmp):
    srv.new_card('ok1', 'oe', priority=2)
    srv.new_card('bad1', 'oe', priority=1)
    script = ('env | grep ^BOARDD_ > %s/$BOARDD_CARD.env; '
              'echo \'{"card":"\'$BOARDD_CARD\'"}\' > $BOARDD_RESULT; '
              'test "$BOARDD_CARD" = ok1' % tmp)
    p = boardctl(srv, ['--json', 'work', '--board', 'default', '--label', 'oe',
                       '--max-jobs', '2', '--lease-ms', '5000', '--', 'sh', '-c', script])
    rc, out, err = finish(p)
    check(rc == 0, 'work exits 0: %d %s' % (rc, err))
    lines = [json.loads(l) for l in out.splitlines() if l.strip()]
    check([l['card'] for l in lines] == ['ok1', 'bad1'], 'priority order: %s' % out)
    check([l['outcome'] for l in lines] == ['succeeded', 'failed'], 'outcomes: %s' % out)
    check(all(l['written'] for l in lines), 'outcomes written: %s' % out)
    check(len(re.findall(r'^boardctl: card \S+ epoch \d+ run \S+: (succeeded|failed) in ',
                         err, re.M)) == 2, 'one progress line per job: %s' % err)
    ok, bad = srv.card('ok1'), srv.card('bad1')
    check(ok['state'] == 'done' and ok['claim'] is None, 'success -> done, released: %s' % ok)
    check(bad['state'] == 'blocked' and bad['claim'] is None,
          'failure -> blocked, released: %s' % bad)
    env = dict(l.split('=', 1) for l in open(tmp + '/ok1.env').read().splitlines())
    check(env.get('BOARDD_URL') == srv.url, 'BOARDD_URL: %s' % env)
    check(env.get('BOARDD_CARD') == 'ok1', 'BOARDD_CARD')
    check(env.get('BOARDD_EPOCH') == str(ok['claim_epoch']), 'BOARDD_EPOCH is the fence')
    check(env.get('BOARDD_RUN') == ok['last_run_id'], 'BOARDD_RUN is the recorded run')
    check(env.get('BOARDD_MARKER', '').startswith('boardctl-'), 'BOARDD_MARKER')
    check(env.get('BOARDD_BOARD') == 'default', 'BOARDD_BOARD')
    st, run = srv.api('GET', '/v1/runs/' + ok['last_run_id'])
    check(run['status'] == 'finished' and run['result'] == {'card': 'ok1'},
          'run finished with the result file: %s' % run)
    st, run = srv.api('GET', '/v1/runs/' + bad['last_run_id'])
    check(run['status'] == 'failed' and run['error'] == 'exit status 1',
          'run failed with its error: %s' % run)

    # the failed job needs an operator: the attention lane says so, and why
    env = dict(os.environ, BOARDD_URL=srv.url, BOARDD_TOKEN=srv.op)
    r = subprocess.run([BOARDCTL, '--json', 'attention'], capture_output=True, text=True,
                       env=env)
    lane = {c['card']['id']: c['reasons'] for c in json.loads(r.stdout)['cards']} \
        if r.returncode == 0 else {}
    check('run_failed' in lane.get('bad1', []), 'attention lists the failed job: %s %s'
          % (r.stdout[:300], r.stderr))
    r = subprocess.run([BOARDCTL, 'attention'], capture_output=True, text=True, env=env)
    check(r.returncode == 0 and re.search(r'bad1.*\n\s+why: .*run_failed', r.stdout),
          'attention as a table: %s' % r.stdout)

    # run --card: the command's exit code; --on-success to any column, or release
    srv.new_card('one', 'rc')
    p = boardctl(srv, ['run', '--card', 'one', '--on-success', 'review', '--', 'true'])
    rc, out, err = finish(p)
    c = srv.card('one')
    check(rc == 0 and c['state'] == 'review' and c['claim'] is None,
          'run --card --on-success review: %d %s %s' % (rc, c['state'], err))
    srv.new_card('seven', 'rc')
    p = boardctl(srv, ['run', '--card', 'seven', '--on-failure', 'release', '--', 'sh', '-c',
                       'exit 7'])
    rc, out, err = finish(p)
    c = srv.card('seven')
    check(rc == 7, 'run exits with the command\'s status: %d' % rc)
    check(c['state'] == 'ready' and c['claim'] is None, '--on-failure release: %s' % c)


def case_outcome_refused(srv, tmp):
    # An outcome column the board lacks (--on-success into a column that is not there) is
    # refused before anything is claimed (DESIGN §20): boardctl's own error (125), the card
    # never claimed, no run made, the command never run; `work` takes no card either.
    srv.new_card('badcol1', 'oref')
    flag = tmp + '/oref.ran'
    p = boardctl(srv, ['run', '--card', 'badcol1', '--on-success', 'no_such_col', '--',
                       'sh', '-c', 'touch %s' % flag])
    rc, out, err = finish(p)
    c = srv.card('badcol1')
    check(rc == 125 and 'no_such_col' in err and 'nothing claimed' in err,
          'run: an unknown outcome column is boardctl\'s error (125): %d %s' % (rc, err))
    check(c['claim'] is None and c['state'] == 'ready' and c['claim_epoch'] == 0 and
          not c.get('last_run_id') and not os.path.exists(flag),
          'run: nothing claimed, no run, the command not run: %s' % c)
    for i in range(3):
        srv.new_card('badcol-w%d' % i, 'orefw')
    p = boardctl(srv, ['work', '--board', 'default', '--label', 'orefw', '--on-failure',
                       'no_such_col', '--wait-ms', '0', '--', 'sh', '-c',
                       'touch %s; exit 1' % flag])
    rc, out, err = finish(p)
    cards = [srv.card('badcol-w%d' % i) for i in range(3)]
    check(rc == 125 and not os.path.exists(flag) and '--on-failure no_such_col' in err,
          'work: an unknown outcome column stops it before any job: rc %d, %s' % (rc, err))
    check(all(x['claim'] is None and x['state'] == 'ready' and x['claim_epoch'] == 0
              for x in cards),
          'work: nothing claimed: %s' % [(x['id'], x['claim_epoch']) for x in cards])


def case_concurrency(srv, tmp):
    for i in range(6):
        srv.new_card('cc%d' % i, 'cc')
    t0 = time.time()
    p = boardctl(srv, ['--json', 'work', '--board', 'default', '--label', 'cc',
                       '--concurrency', '3', '--max-jobs', '6', '--', 'sleep', '0.4'])
    rc, out, err = finish(p)
    cards = sorted(json.loads(l)['card'] for l in out.splitlines() if l.strip())
    check(rc == 0 and cards == ['cc%d' % i for i in range(6)], 'concurrency 3 did all 6: %s %s'
          % (cards, err))
    check(all(srv.card('cc%d' % i)['state'] == 'done' for i in range(6)), 'all done')


def case_sigterm_forwarded(srv, tmp):
    srv.new_card('term', 'st')
    script = ('trap "echo got-term > %s/term.flag; exit 0" TERM; echo $$ > %s/term.pid; '
              'while true; do sleep 0.1; done' % (tmp, tmp))
    p = boardctl(srv, ['work', '--board', 'default', '--label', 'st', '--grace', '5s', '--',
                       'sh', '-c', script])
    pid = read_pid(tmp + '/term.pid')
    check(pid is not None, 'command started')
    run_id = srv.card('term')['last_run_id']
    p.send_signal(signal.SIGTERM)
    rc, out, err = finish(p)
    check(os.path.exists(tmp + '/term.flag'), 'SIGTERM reached the command')
    c = srv.card('term')
    check(c['claim'] is None and c['state'] == 'ready', 'released, state untouched: %s' % c)
    st, run = srv.api('GET', '/v1/runs/' + run_id)
    check(run['status'] == 'failed_resumable', 'run marked resumable: %s' % run)
    check('stopped' in err, 'reported as stopped: %s' % err)
    check(rc == 0, 'work told to stop exits 0: %d' % rc)

    # `run` told to stop: 128+N like any process a signal N ended (the man page's EXIT
    # STATUS), whatever the command made of the forwarded signal; never 2, the error code.
    for sig, name in ((signal.SIGTERM, 'term2'), (signal.SIGINT, 'int2')):
        srv.new_card(name, 'st2')
        pidf = '%s/%s.pid' % (tmp, name)
        p = boardctl(srv, ['run', '--card', name, '--grace', '5s', '--', 'sh', '-c',
                           'trap "exit 0" TERM INT; echo $$ > %s; '
                           'while true; do sleep 0.1; done' % pidf])
        check(read_pid(pidf) is not None, '%s: command started' % name)
        p.send_signal(sig)
        rc, out, err = finish(p)
        c = srv.card(name)
        check(rc == 128 + sig and c['claim'] is None,
              'run stopped by signal %d exits %d: %d %s' % (sig, 128 + sig, rc, err))
    # ... also while it is still retrying its claim (no server there).
    port = bt.free_port()
    p = boardctl(srv, ['--url', 'http://127.0.0.1:%d' % port, 'run', '--card', 'x', '--',
                       'true'])
    time.sleep(1.0)
    p.send_signal(signal.SIGTERM)
    rc, out, err = finish(p)
    check(rc == 128 + signal.SIGTERM and 'retrying' in err,
          'run stopped while retrying its claim exits 143: %d %s' % (rc, err))


def sleeper(srv, tmp, cid, label, *flags):
    """Card `cid` labelled `label`, taken by `boardctl work --label label flags...` whose
    command writes its pid to tmp/<label>.pid and sleeps 60 s: (boardctl, the command's pid),
    once the card is in the running column."""
    srv.new_card(cid, label)
    p = boardctl(srv, ['work', '--board', 'default', '--label', label] + list(flags) +
                 ['--', 'sh', '-c', 'echo $$ > %s/%s.pid; exec sleep 60' % (tmp, label)])
    pid = read_pid('%s/%s.pid' % (tmp, label))
    check(pid is not None, 'command started')
    # the card enters the running column as its job starts (DESIGN §20)
    check(wait_for(lambda: srv.card(cid)['state'] == 'in_progress', 10),
          'the card entered in_progress')
    return p, pid


def case_kill9(srv, tmp):
    p, pid = sleeper(srv, tmp, 'k9', 'k9', '--lease-ms', '1500')
    c = srv.card('k9')
    epoch, marker = c['claim_epoch'], c['claim']['marker']
    p.kill()
    p.wait()
    check(wait_for(lambda: not alive(pid), 10), 'the command died with boardctl (pdeathsig)')
    # The reaper (pass every 300 ms) reclaims once the 1.5 s lease is over: the run's lock
    # expired, it is promoted to failed_resumable and the card goes back to the pool.
    def reclaimed():
        c = srv.card('k9')
        return c if c['claim'] is None and c['claim_epoch'] > epoch else None
    c = wait_for(reclaimed, 20)
    check(c is not None, 'the reaper reclaimed the card after the lease: %s' % srv.card('k9'))
    if c:
        st, run = srv.api('GET', '/v1/runs/' + c['last_run_id'])
        check(run['status'] == 'failed_resumable', 'orphaned run promoted: %s' % run)
    check(srv.card('k9')['state'] == 'in_progress', 'back in the pool (in_progress is eligible)')
    del marker


def case_sigstop(srv, tmp):
    p, pid = sleeper(srv, tmp, 'stop', 'ss', '--lease-ms', '1500', '--grace', '1s',
                     '--max-jobs', '1')
    c = srv.card('stop')
    epoch, marker = c['claim_epoch'], c['claim']['marker']
    os.kill(p.pid, signal.SIGSTOP)
    ok = wait_for(lambda: srv.card('stop')['claim_epoch'] > epoch, 20)
    check(ok, 'the reaper took the claim while boardctl was stopped')
    # the card may now be claimed by the reaper or released; take another worker's view of it
    seq = srv.last_seq()
    os.kill(p.pid, signal.SIGCONT)
    rc, out, err = finish(p)
    check(wait_for(lambda: not alive(pid), 5), 'the command was killed after SIGCONT')
    check('lost' in err, 'reported lost: %s' % err)
    # (the reaper's own writes, machine events, may still land: they are not boardctl's)
    late = [e for e in srv.events_after(seq)
            if e.get('card_id') == 'stop' and e['type'] != 'card_claimed'
            and not e.get('machine') and (e.get('payload') or {}).get('marker') == marker]
    check(not late, 'no late write landed: %s' % late)
    c = srv.card('stop')
    check(c['state'] == 'in_progress', 'state (the running column) untouched by the stale holder: %s' % c['state'])

    # The sharper shape: the command ENDS while boardctl sleeps past its lease. On waking it
    # must not write that outcome (the server would refuse it; boardctl does not even try).
    srv.new_card('stop2', 'ss2')
    p = boardctl(srv, ['work', '--board', 'default', '--label', 'ss2', '--lease-ms', '1500',
                       '--max-jobs', '1', '--', 'sh', '-c',
                       'echo $$ > %s/ss2.pid; sleep 2' % tmp])
    pid = read_pid(tmp + '/ss2.pid')
    check(wait_for(lambda: srv.card('stop2')['state'] == 'in_progress', 10),
          'the card entered in_progress')
    epoch = srv.card('stop2')['claim_epoch']
    os.kill(p.pid, signal.SIGSTOP)
    wait_for(lambda: not alive(pid), 10)
    wait_for(lambda: srv.card('stop2')['claim_epoch'] > epoch, 20)
    seq = srv.last_seq()
    os.kill(p.pid, signal.SIGCONT)
    rc, out, err = finish(p)
    check('lost' in err and 'after the lease' in err, 'late exit reported lost: %s' % err)
    check(not [e for e in srv.events_after(seq) if e.get('card_id') == 'stop2'],
          'nothing written for it after waking')
    check(srv.card('stop2')['state'] == 'in_progress', 'not filed done by the stale holder')


def case_revoke(srv, tmp):
    p, pid = sleeper(srv, tmp, 'rev', 'rv', '--lease-ms', '1500', '--grace', '1s',
                     '--max-jobs', '1')
    st, c = srv.api('POST', '/v1/cards/rev/claim/revoke')
    if st == 404 and c and c.get('code') != 'not_found':
        print('SKIP: revoke route absent', flush=True)
        p.kill()
        return
    check(st == 200, 'revoke answered %d %s' % (st, c))
    t0 = time.time()
    # renew period (500 ms) + grace (1 s), with slack for a busy machine
    check(wait_for(lambda: not alive(pid), 15), 'command killed after the revoke')
    rc, out, err = finish(p)
    check('lost' in err and 'renew refused' in err, 'revoke seen as a refused renew: %s' % err)
    c = srv.card('rev')
    check(c['claim'] is None and c['state'] == 'in_progress', 'nothing written after: %s' % c)
    del t0


def case_token_removed(srv, tmp):
    # The worker's token removed from the tokens file (SIGHUP) while a job runs: the renew
    # answered 401 is a refusal like any other, the claim is lost at once; boardctl does not
    # keep the command running while it retries until the lease would end.
    tokens = tmp + '/tokens.json'
    gone = bt.token_add(BOARDD, tokens, 'worker-gone', ['worker', 'bot'])
    srv.proc.send_signal(signal.SIGHUP)
    check(wait_for(lambda: srv.api('GET', '/v1/cards', token=gone)[0] == 200, 10),
          'the new token works after SIGHUP')
    srv.new_card('tokgone', 'tg')
    pidf = tmp + '/tokgone.pid'
    p = boardctl(srv, ['run', '--card', 'tokgone', '--lease-ms', '6000', '--grace', '1s', '--',
                       'sh', '-c', 'echo $$ > %s; exec sleep 60' % pidf],
                 env={'BOARDD_TOKEN': gone})
    check(read_pid(pidf) is not None, 'command started')
    check(wait_for(lambda: srv.card('tokgone')['state'] == 'in_progress', 10),
          'the card entered in_progress')
    with open(tokens) as f:
        doc = json.load(f)
    doc['tokens'] = [t for t in doc['tokens'] if t['name'] != 'worker-gone']
    with open(tokens + '.tmp', 'w') as f:
        json.dump(doc, f)
    os.rename(tokens + '.tmp', tokens)
    srv.proc.send_signal(signal.SIGHUP)
    check(wait_for(lambda: srv.api('GET', '/v1/cards', token=gone)[0] == 401, 10),
          'the removed token is refused after SIGHUP')
    rc, out, err = finish(p, 30)
    check(rc == 123 and 'renew refused' in err and '401' in err,
          'a renew answered 401 is a loss at once: %d %s' % (rc, err))


def moved_in(srv, card):
    """The card is in in_progress and the event of that move is in the events listing (a
    later listing must not see it as new)."""
    if srv.card(card)['state'] != 'in_progress':
        return False
    seq = 0
    while True:
        ev = srv.events_after(seq)
        if not ev:
            return False
        if any(e['type'] == 'card_state_changed' and e.get('card_id') == card for e in ev):
            return True
        seq = ev[-1]['seq']


def case_operator_cancel(srv, tmp):
    # An operator cancels the run mid-job (POST /v1/runs/{id}/cancel): the next run heartbeat
    # is refused 409 run_final and the run reads cancelled. An operator cancel is never
    # auto-routed (DESIGN §6 "cancelled | keep", ADR-096 point 4): the command gets SIGTERM,
    # nothing is filed and nothing released (the card stays claimed in its column, parked for
    # the operator), `run` exits 124, and `work` goes on with its next card. The command would
    # end by itself after ~10 s and boardctl without the fix would then file it done.
    def job(card):
        return ('[ "$BOARDD_CARD" = %s ] || exit 0; '
                'trap "echo got-term > %s/%s.flag; exit 0" TERM; echo $$ > %s/%s.pid; '
                'i=0; while [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done'
                % (card, tmp, card, tmp, card))

    def cancel_and_check(p, card, what):
        check(read_pid('%s/%s.pid' % (tmp, card)) is not None, '%s: command started' % what)
        check(wait_for(lambda: moved_in(srv, card), 10),
              "%s: the card entered in_progress" % what)
        run_id = srv.card(card)['last_run_id']
        seq = srv.last_seq()
        st, run = srv.api('POST', '/v1/runs/%s/cancel' % run_id)
        check(st == 200 and run['status'] == 'cancelled', '%s: cancel: %d %s' % (what, st, run))
        return run_id, seq

    def kept(card, run_id, seq, err, what):
        check(os.path.exists('%s/%s.flag' % (tmp, card)), '%s: SIGTERM reached the command'
              % what)
        check('cancelled by an operator' in err and card in err and run_id in err,
              '%s: reported on stderr: %s' % (what, err))
        c = srv.card(card)
        check(c['claim'] is not None and c['state'] == 'in_progress' and c['last_run_id'] == run_id,
              '%s: still claimed in its column, not filed: %s' % (what, c))
        st, run = srv.api('GET', '/v1/runs/' + run_id)
        check(run['status'] == 'cancelled', '%s: run stays cancelled: %s' % (what, run))
        evs = [e for e in srv.events_after(seq) if e.get('card_id') == card]
        ev = [e['type'] for e in evs]
        check('card_released' not in ev and 'card_state_changed' not in ev,
              '%s: no release, no filing: %s' % (what, [(e['type'], e.get('actor'),
                                                          e.get('reason'), e.get('payload'))
                                                         for e in evs]))

    srv.new_card('cxl1', 'cxl')
    p = boardctl(srv, ['run', '--card', 'cxl1', '--lease-ms', '1500', '--grace', '5s', '--',
                       'sh', '-c', job('cxl1')])
    run_id, seq = cancel_and_check(p, 'cxl1', 'run')
    rc, out, err = finish(p)
    check(rc == 124, 'run: an operator cancel exits 124: %d %s' % (rc, err))
    kept('cxl1', run_id, seq, err, 'run')

    # `work`: the cancel is about that one job; the loop takes the next card.
    srv.new_card('cxlw1', 'cxlw', priority=2)
    srv.new_card('cxlw2', 'cxlw', priority=1)
    p = boardctl(srv, ['--json', 'work', '--board', 'default', '--label', 'cxlw', '--lease-ms',
                       '1500', '--grace', '5s', '--max-jobs', '2', '--wait-ms', '0', '--',
                       'sh', '-c', job('cxlw1')])
    run_id, seq = cancel_and_check(p, 'cxlw1', 'work')
    rc, out, err = finish(p)
    outcomes = [json.loads(l)['outcome'] for l in out.splitlines() if l.strip()]
    check(rc == 0 and outcomes == ['cancelled', 'succeeded'],
          'work goes on after a cancel: rc %d %s %s' % (rc, outcomes, err))
    kept('cxlw1', run_id, seq, err, 'work')
    check(srv.card('cxlw2')['state'] == 'done', 'work: the next card was done')


def case_cancel_race(srv, tmp):
    # The command ends on its own just as an operator's cancel lands. The test holds both
    # ends: the command blocks reading a FIFO, the test cancels the run (200), then writes the
    # FIFO, and the command exits 0 with a result. The lease is 60 s, so boardctl's first renew
    # and heartbeat are 20 s away: it learns of the cancel only from its own run PATCH
    # (refused 409 run_final, the run reads cancelled). The job completed, but the server
    # took the cancel first: the operator was answered 200 and owns the card's fate (an
    # operator cancel is never auto-routed, DESIGN §6 "cancelled | keep"). So, as the man
    # page promises: nothing filed, nothing released, the run stays cancelled without the
    # result, `run` exits 124, and boardctl says the command had ended by itself (exit 0).
    def job(card, trap=''):
        fifo = '%s/%s.fifo' % (tmp, card)
        os.mkfifo(fifo)
        return fifo, ('%s echo $$ > %s/%s.pid; echo \'{"done":1}\' > "$BOARDD_RESULT"; '
                      'read x < %s; exit 0' % (trap, tmp, card, fifo))

    def race(card, script, fifo, stop=None):
        srv.new_card(card, 'race')
        p = boardctl(srv, ['--json', 'run', '--card', card, '--lease-ms', '60000', '--grace',
                           '5s', '--', 'sh', '-c', script])
        check(read_pid('%s/%s.pid' % (tmp, card)) is not None, '%s: command started' % card)
        check(wait_for(lambda: moved_in(srv, card), 10),
              "%s: the card entered in_progress" % card)
        run_id = srv.card(card)['last_run_id']
        st, run = srv.api('POST', '/v1/runs/%s/cancel' % run_id)
        check(st == 200 and run['status'] == 'cancelled', '%s: cancel: %d %s' % (card, st, run))
        seq = srv.last_seq()  # after the cancel's own run_updated
        if stop:
            p.send_signal(stop)  # boardctl told to stop as well; the command ends on it
        # The command ends now. O_RDWR never blocks on a FIFO; held open until boardctl is
        # done, so the line waits for the command's read whenever it comes.
        fd = os.open(fifo, os.O_RDWR)
        try:
            os.write(fd, b'go\n')
            rc, out, err = finish(p)
        finally:
            os.close(fd)
        lines = [json.loads(l) for l in out.splitlines() if l.strip()]
        c = srv.card(card)
        st, run = srv.api('GET', '/v1/runs/' + run_id)
        ev = [e['type'] for e in srv.events_after(seq) if e.get('card_id') == card]
        return rc, lines, err, c, run, ev, run_id

    fifo, script = job('race1')
    rc, lines, err, c, run, ev, run_id = race('race1', script, fifo)
    check(rc == 124, 'race: a job ending as it is cancelled exits 124: %d %s' % (rc, err))
    check(len(lines) == 1 and lines[0]['outcome'] == 'cancelled' and
          lines[0]['exit_code'] == 0 and not lines[0]['written'],
          'race: reported cancelled, the command\'s own exit 0, nothing written: %s' % lines)
    check('cancelled by an operator' in err and 'ended by itself' in err and run_id in err,
          'race: stderr says the command had ended by itself: %s' % err)
    check('stopping the command' not in err, 'race: no signal sent to an ended command: %s'
          % err)
    check(c['claim'] is not None and c['state'] == 'in_progress' and c['last_run_id'] == run_id,
          'race: still claimed in its column, not filed: %s' % c)
    check(run['status'] == 'cancelled' and run['result'] is None,
          'race: the run stays cancelled, its result not written: %s' % run)
    check('card_released' not in ev and 'card_state_changed' not in ev and
          'run_updated' not in ev, 'race: no release, no filing, no run write: %s' % ev)

    # boardctl told to stop (SIGTERM) just as the run is cancelled: the same (man page).
    fifo, script = job('race2', 'trap "exit 0" TERM;')
    rc, lines, err, c, run, ev, run_id = race('race2', script, fifo, stop=signal.SIGTERM)
    check(rc == 124 and lines and lines[0]['outcome'] == 'cancelled',
          'race+stop: exits 124, cancelled: %d %s %s' % (rc, lines, err))
    check(c['claim'] is not None and c['state'] == 'in_progress' and run['status'] == 'cancelled'
          and 'card_released' not in ev and 'card_state_changed' not in ev,
          'race+stop: not filed, not released: %s %s %s' % (c, run, ev))

    # The other side of the race: the job's run was written first; the cancel comes late and
    # is refused (409 run_final); the card was filed and released as usual.
    srv.new_card('race3', 'race')
    p = boardctl(srv, ['run', '--card', 'race3', '--lease-ms', '60000', '--', 'true'])
    rc, out, err = finish(p)
    c = srv.card('race3')
    st, body = srv.api('POST', '/v1/runs/%s/cancel' % c['last_run_id'])
    check(rc == 0 and c['state'] == 'done' and c['claim'] is None and st == 409 and
          body.get('code') == 'run_final',
          'race, job first: filed and released, the late cancel refused: %d %s %d %s'
          % (rc, c, st, body))


def case_server_restart(srv, tmp):
    # Ridden: the server is away for less than the lease; renews retry and the job finishes.
    srv.new_card('ride', 'rs')
    p = boardctl(srv, ['work', '--board', 'default', '--label', 'rs', '--lease-ms', '6000',
                       '--max-jobs', '1', '--', 'sh', '-c',
                       'echo $$ > %s/rs.pid; sleep 4' % tmp])
    check(read_pid(tmp + '/rs.pid') is not None, 'command started')
    srv.stop()
    time.sleep(1.5)
    srv.start()
    rc, out, err = finish(p)
    c = srv.card('ride')
    check(rc == 0 and c['state'] == 'done' and c['claim'] is None,
          'rode the restart: %d %s %s' % (rc, c, err))

    # Given up: away longer than the lease; boardctl declares the claim lost when the lease
    # would end, kills the command and writes nothing.
    srv.new_card('away', 'ra')
    p = boardctl(srv, ['work', '--board', 'default', '--label', 'ra', '--lease-ms', '2000',
                       '--grace', '1s', '--max-jobs', '1', '--',
                       'sh', '-c', 'echo $$ > %s/ra.pid; exec sleep 60' % tmp])
    pid = read_pid(tmp + '/ra.pid')
    check(wait_for(lambda: srv.card('away')['state'] == 'in_progress', 10),
          'the card entered in_progress')
    epoch = srv.card('away')['claim_epoch']
    srv.stop()
    rc, out, err = finish(p, timeout=30)
    check('lost' in err, 'gave up when the lease ended: %s' % err)
    check(not alive(pid), 'command killed')
    srv.start()
    c = srv.card('away')
    check(c['state'] == 'in_progress' and c['claim_epoch'] == epoch,
          'nothing written while away: %s' % c)


def case_tls(srv, tmp):
    cert, key = bt.make_pair(tmp, 'tls', 'boardctl-test')
    tls = Server(tmp, extra=['--tls-cert', cert, '--tls-key', key], cafile=cert,
                 data='data-tls', tokens_from=srv)
    tls.start()
    try:
        env = dict(os.environ, BOARDD_URL=tls.url, BOARDD_TOKEN=srv.op)
        r = subprocess.run([BOARDCTL, 'cards', 'create', '--id', 'tls1', '--state', 'ready'],
                           capture_output=True, text=True, env=env)
        check(r.returncode == 1 and 'certificate' in r.stderr.lower(),
              'an unknown CA is refused: %s' % r.stderr)
        r = subprocess.run([BOARDCTL, '--cacert', cert, 'cards', 'create', '--id', 'tls1',
                            '--state', 'ready'], capture_output=True, text=True, env=env)
        check(r.returncode == 0, 'cards create over TLS with --cacert: %s' % r.stderr)
        env['BOARDD_TOKEN'] = srv.worker
        r = subprocess.run([BOARDCTL, '--cacert', cert, 'run', '--card', 'tls1', '--', 'sh',
                            '-c', 'case "$BOARDD_URL" in https://*) exit 0;; esac; exit 1'],
                           capture_output=True, text=True, env=env, timeout=30)
        check(r.returncode == 0 and 'succeeded' in r.stderr,
              'a job over TLS, BOARDD_URL handed on: %d %s' % (r.returncode, r.stderr))
    finally:
        tls.stop()


def case_unix(srv, tmp):
    """boardd --listen unix:PATH and boardctl --url / BOARDD_URL unix:PATH: verbs and a job
    (its BOARDD_URL handed on as given), SIGHUP keeps the socket, SIGTERM removes it."""
    sock = os.path.join(tmp, 'b.sock')
    log = open(os.path.join(tmp, 'unix.log'), 'w')
    p = subprocess.Popen([BOARDD, '--store', 'fs:' + os.path.join(tmp, 'data-unix'),
                          '--listen', 'unix:' + sock, '--threads', '2',
                          '--tokens', os.path.join(tmp, 'tokens.json')],
                         stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=bt.clean_env())
    log.close()

    def banner():
        with open(os.path.join(tmp, 'unix.log')) as f:
            return 'listening on unix:%s over http' % sock in f.read()
    try:
        check(wait_for(banner, 10) and os.path.exists(sock), 'boardd listens on unix:%s' % sock)
        env = dict(bt.clean_env(), BOARDD_URL='unix:' + sock, BOARDD_TOKEN=srv.op)
        r = subprocess.run([BOARDCTL, 'cards', 'create', '--id', 'u1', '--state', 'ready',
                            '--label', 'ux'], capture_output=True, text=True, env=env)
        check(r.returncode == 0 and r.stdout.strip() == 'u1',
              'cards create over BOARDD_URL=unix:: %s' % r.stderr)
        env['BOARDD_TOKEN'] = srv.worker
        r = subprocess.run([BOARDCTL, 'run', '--card', 'u1', '--on-success', 'done', '--',
                            'sh', '-c', 'test "$BOARDD_URL" = "unix:%s"' % sock],
                           capture_output=True, text=True, env=env, timeout=30)
        check(r.returncode == 0 and 'succeeded' in r.stderr,
              'a job over the socket, BOARDD_URL handed on: %d %s' % (r.returncode, r.stderr))
        p.send_signal(signal.SIGHUP)
        check(wait_for(lambda: 'SIGHUP: tokens' in open(os.path.join(tmp, 'unix.log')).read(),
                       10), 'SIGHUP reloaded')
        env = bt.clean_env()
        tf = os.path.join(tmp, 'token-unix')
        with open(tf, 'w') as f:
            f.write(srv.op + '\n')
        r = subprocess.run([BOARDCTL, '--url', 'unix:' + sock, '--token-file', tf, '--json',
                            'cards', 'show', 'u1'], capture_output=True, text=True, env=env)
        check(r.returncode == 0 and json.loads(r.stdout)['state'] == 'done',
              '--url unix: after SIGHUP: the outcome of the job is there: %s %s' % (r.stdout,
                                                                                r.stderr))
        r = subprocess.run([BOARDCTL, '--url', 'unix:' + sock, '--token-file', tf, 'cards',
                            'show', 'nope'], capture_output=True, text=True, env=env)
        check(r.returncode == 1 and '404' in r.stderr, 'a 404 over the socket: %s' % r.stderr)
        p.send_signal(signal.SIGTERM)
        check(p.wait(timeout=20) == 0, 'boardd stops cleanly')
        check(not os.path.exists(sock), 'the socket file is removed at a clean stop')
        r = subprocess.run([BOARDCTL, '--url', 'unix:' + sock, '--token-file', tf, 'cards',
                            'ls'], capture_output=True, text=True, env=env)
        check(r.returncode == 1 and ('unix:' + sock) in r.stderr,
              'no server: the error names the socket: %s' % r.stderr)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def case_help():
    for verb in ([], ['work'], ['run'], ['cards'], ['cards', 'ls'], ['cards', 'create'],
                 ['cards', 'move'], ['reopen'], ['events'], ['attention'], ['runs']):
        r = subprocess.run([BOARDCTL] + verb + ['--help'], capture_output=True, text=True)
        check(r.returncode == 0 and 'usage: boardctl' in r.stdout,
              '--help on %s: %d %s' % (verb, r.returncode, r.stderr))
    # A bad value is named before the usage.
    for flag, val in (('--wait-ms', '30001'), ('--grace', '-1'), ('--concurrency', '0'),
                      ('--on-success', 'bad/col')):
        r = subprocess.run([BOARDCTL, 'work', '--board', 'b', flag, val, '--', 'true'],
                           capture_output=True, text=True)
        first = r.stderr.splitlines()[0] if r.stderr else ''
        check(r.returncode == 125 and flag in first and val in first,
              'work %s %s says what was wrong: %d %r' % (flag, val, r.returncode, first))


def case_verbs(srv, tmp):
    env = dict(os.environ, BOARDD_URL=srv.url, BOARDD_TOKEN=srv.op)
    r = subprocess.run([BOARDCTL, 'cards', 'create', '--id', 'v1', '--title', 'verb card',
                        '--label', 'vv', '--priority', '4', '--state', 'backlog'],
                       capture_output=True, text=True, env=env)
    check(r.returncode == 0 and r.stdout.strip() == 'v1', 'cards create: %s' % r.stderr)
    r = subprocess.run([BOARDCTL, '--json', 'cards', 'ls', '--label', 'vv'],
                       capture_output=True, text=True, env=env)
    check(r.returncode == 0 and [c['id'] for c in json.loads(r.stdout)['cards']] == ['v1'],
          'cards ls --json')
    r = subprocess.run([BOARDCTL, 'cards', 'move', 'v1', '--from', 'backlog', '--to', 'done'],
                       capture_output=True, text=True, env=env)
    check(r.returncode == 0 and srv.card('v1')['state'] == 'done', 'cards move')
    r = subprocess.run([BOARDCTL, 'reopen', 'v1', '--to', 'ready'],
                       capture_output=True, text=True, env=env)
    check(r.returncode == 0 and srv.card('v1')['state'] == 'ready', 'reopen: %s' % r.stderr)
    r = subprocess.run([BOARDCTL, '--json', 'cards', 'show', 'v1'],
                       capture_output=True, text=True, env=env)
    check(r.returncode == 0 and json.loads(r.stdout)['priority'] == 4, 'cards show')
    r = subprocess.run([BOARDCTL, 'cards', 'move', 'nope', '--to', 'done'],
                       capture_output=True, text=True, env=env)
    check(r.returncode == 1 and '404' in r.stderr, 'errors say what was wrong: %s' % r.stderr)
    r = subprocess.run([BOARDCTL, '--json', 'events'], capture_output=True, text=True, env=env)
    check(r.returncode == 0 and any(json.loads(l).get('card_id') == 'v1'
                                    for l in r.stdout.splitlines()), 'events')
    total = len(r.stdout.splitlines())
    r = subprocess.run([BOARDCTL, '--json', 'events', '--limit', '3'], capture_output=True,
                       text=True, env=env)
    lines = r.stdout.splitlines()
    check(r.returncode == 0 and total > 3 and len(lines) == 3 and
          [json.loads(l)['seq'] for l in lines] == [json.loads(l)['seq'] for l in
                                                     subprocess.run([BOARDCTL, '--json', 'events'],
                                                                    capture_output=True, text=True,
                                                                    env=env).stdout.splitlines()[:3]],
          'events --limit 3: the first 3 of %d events (%d printed)' % (total, len(lines)))
    r = subprocess.run([BOARDCTL, 'events', '--limit', '0'], capture_output=True, text=True,
                       env=env)
    check(r.returncode == 125 and '--limit' in r.stderr, 'events --limit 0 refused: %s' % r.stderr)
    p = subprocess.Popen([BOARDCTL, '--json', 'events', '--follow', '--after',
                          str(srv.last_seq())], env=env, stdout=subprocess.PIPE, text=True)
    srv.api('PATCH', '/v1/cards/v1', {'title': 'followed'})
    line = p.stdout.readline()
    p.terminate()
    p.wait()
    check('"card_updated"' in line, 'events --follow sees a new event: %s' % line)
    tf = os.path.join(tmp, 'token')
    with open(tf, 'w') as f:
        f.write(srv.op + '\n')
    r = subprocess.run([BOARDCTL, '--url', srv.url, '--token-file', tf, 'cards', 'ls'],
                       capture_output=True, text=True,
                       env={k: v for k, v in os.environ.items() if not k.startswith('BOARDD_')})
    check(r.returncode == 0 and 'v1' in r.stdout, '--url and --token-file')


def case_agent_caps(srv, tmp):
    """--agent-caps: the command gets BOARDD_AGENT_TOKEN, a token bound to its claim (DESIGN
    §13) holding those capabilities; it works while the job runs and is refused once the
    claim is released."""
    agent_py = os.path.join(tmp, 'agent.py')
    with open(agent_py, 'w') as f:
        f.write(
            'import json, os, sys, urllib.request, urllib.error\n'
            'tok = os.environ["BOARDD_AGENT_TOKEN"]\n'
            'url = os.environ["BOARDD_URL"] + "/v1/cards/" + os.environ["BOARDD_CARD"]\n'
            'def call(method, path, body):\n'
            '    req = urllib.request.Request(url + path, method=method,\n'
            '        data=json.dumps(body).encode() if body is not None else None,\n'
            '        headers={"Authorization": "Bearer " + tok,\n'
            '                 "Content-Type": "application/json"})\n'
            '    try:\n'
            '        return urllib.request.urlopen(req, timeout=10).status\n'
            '    except urllib.error.HTTPError as e:\n'
            '        return e.code\n'
            'out = {"token": tok, "label": call("PATCH", "/labels", {"add": ["by-agent"]}),\n'
            '       "comment": call("POST", "/comments", {"body": "no"})}\n'
            'open(sys.argv[1], "w").write(json.dumps(out))\n')
    srv.new_card('ag1', 'ag')
    p = boardctl(srv, ['run', '--card', 'ag1', '--agent-caps', 'board.read,board.label', '--',
                       sys.executable, agent_py, os.path.join(tmp, 'ag1.agent')])
    rc, out, err = finish(p)
    check(rc == 0, 'run --agent-caps exits 0: %d %s' % (rc, err))
    seen = json.load(open(os.path.join(tmp, 'ag1.agent')))
    check(seen['label'] == 200, 'the agent token labels the card: %s' % seen)
    check(seen['comment'] == 403, 'a capability not granted is refused: %s' % seen)
    c = srv.card('ag1')
    check('by-agent' in c['labels'] and c['claim'] is None, 'labelled, then released: %s' % c)
    ev = [e for e in srv.events_after(0) if e['card_id'] == 'ag1'
          and e['type'] == 'card_labels_changed']
    check(ev and ev[-1]['actor'] == 'worker/agent', 'actor <worker>/agent: %s' % ev)
    st, _ = srv.api('GET', '/v1/cards/ag1', token=seen['token'])
    check(st == 401, 'the agent token dies with the claim: %d' % st)
    # a mint the server refuses fails the job before the command runs; the claim is released
    srv.new_card('ag2', 'ag')
    p = boardctl(srv, ['run', '--card', 'ag2', '--agent-caps', 'board.fly', '--', 'true'])
    rc, out, err = finish(p)
    c = srv.card('ag2')
    check(rc != 0 and 'agent token' in err and c['claim'] is None,
          'a refused mint: %d %s %s' % (rc, err.strip()[-200:], c['claim']))
    # `work` stops at such a refusal (a configuration error, exit 125): it does not claim the
    # card again and again, minting a failed run each time.
    srv.new_card('ag3', 'ag3')
    p = boardctl(srv, ['work', '--board', 'default', '--label', 'ag3', '--wait-ms', '0',
                       '--agent-caps', 'board.fly', '--', 'true'])
    rc, out, err = finish(p, 15)
    c = srv.card('ag3')
    check(rc == 125 and c['claim'] is None and c['claim_epoch'] == 1,
          'work stops at a refused mint: rc %d, claimed %d times' % (rc, c['claim_epoch']))


def main():
    tmp = tempfile.mkdtemp(prefix='boardctl-test-')
    srv = Server(tmp)
    srv.start()
    try:
        case_help()
        case_unix(srv, tmp)
        case_verbs(srv, tmp)
        case_outcomes_and_env(srv, tmp)
        case_outcome_refused(srv, tmp)
        case_agent_caps(srv, tmp)
        case_concurrency(srv, tmp)
        case_sigterm_forwarded(srv, tmp)
        case_kill9(srv, tmp)
        case_sigstop(srv, tmp)
        case_revoke(srv, tmp)
        case_token_removed(srv, tmp)
        case_operator_cancel(srv, tmp)
        case_cancel_race(srv, tmp)
        case_server_restart(srv, tmp)
        if shutil.which('openssl'):
            case_tls(srv, tmp)
        else:
            print('SKIP: TLS case: no openssl CLI to make a certificate', flush=True)
    finally:
        srv.stop()
    if bt.summary('boardctl'):
        print('server logs: ' + tmp + '/data.NNN.log')
        return 1
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
