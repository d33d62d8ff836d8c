#!/usr/bin/env python3
"""boardctl work --concurrency N against a real boardd (DESIGN §18): the slots take their cards
with one claim-next {count} and their claims are renewed with one POST /v1/claims/renew per
tick (counted in the server's access log: no single renew at all); one claim lost among them (revoked by an operator) stops its command only, the
others finish and are filed.

usage: test_boardctl_batch.py path/to/boardd path/to/boardctl
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
import boardd_test as bt  # noqa: E402
from boardd_test import check, wait_for  # noqa: E402
from fault_proxy import Proxy  # noqa: E402

BOARDD, BOARDCTL = sys.argv[1], sys.argv[2]


class Server(bt.Server):
    def __init__(self, tmp):
        tokens = tmp + '/tokens.json'
        super().__init__(BOARDD, tmp + '/data', tokens, tmp, threads=2)
        self.worker = bt.token_add(BOARDD, tokens, 'worker', ['worker', 'bot'])
        self.op = bt.token_add(BOARDD, tokens, 'ops', ['operator', 'bot'])

    def api(self, method, path, body=None, token=None):
        return bt.request(self.port, method, path, token or self.op, body)[:2]

    def card(self, cid):
        st, c = self.api('GET', '/v1/cards/' + cid)
        assert st == 200, (st, c)
        return c

    def new_card(self, cid, label):
        st, c = self.api('POST', '/v1/cards', {'id': cid, 'state': 'ready', 'labels': [label]})
        assert st == 201, (st, c)

    def requests(self):
        """The access log's request lines so far ("METHOD PATH STATUS")."""
        return re.findall(r'^\S+ ([A-Z]+ \S+ \d{3}) ', self.log_text(), re.M)


def boardctl(srv, args, port=None):
    env = dict(os.environ, BOARDD_URL='http://127.0.0.1:%d' % (port or srv.port),
               BOARDD_TOKEN=srv.worker)
    return subprocess.Popen([BOARDCTL] + args, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(p, timeout=60):
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        check(False, 'boardctl did not finish in %ds: %s' % (timeout, err))
    return p.returncode, [json.loads(l) for l in out.splitlines() if l.strip()], err


def count(before, after, pattern):
    """Requests logged since `before` whose "METHOD PATH STATUS" matches pattern."""
    return sum(1 for r in after[len(before):] if re.fullmatch(pattern, r))


def case_batched(srv):
    for i in range(4):
        srv.new_card('bt%d' % i, 'bt')
    before = srv.requests()
    # lease 3 s: renew_after 1 s, so a 2.6 s job sees two ticks
    p = boardctl(srv, ['--json', 'work', '--board', 'default', '--label', 'bt',
                       '--concurrency', '4', '--max-jobs', '4', '--lease-ms', '3000',
                       '--', 'sleep', '2.6'])
    rc, jobs, err = finish(p)
    after = srv.requests()
    cards = sorted(j['card'] for j in jobs)
    check(rc == 0 and cards == ['bt0', 'bt1', 'bt2', 'bt3'] and
          all(j['outcome'] == 'succeeded' for j in jobs),
          'concurrency 4 ran the 4 cards: rc %d %s %s' % (rc, jobs, err))
    check(all(srv.card('bt%d' % i)['state'] == 'done' for i in range(4)), 'all 4 filed done')
    nxt = count(before, after, r'POST /v1/boards/default/claim-next 200')
    many = count(before, after, r'POST /v1/claims/renew 200')
    single = count(before, after, r'POST /v1/cards/\S+/renew \d+')
    check(nxt == 1, 'the 4 cards came with one claim-next {count}: %d claim-next' % nxt)
    check(single == 0 and 1 <= many <= 4,
          'the claims were renewed together: %d renew many, %d single renews' % (many, single))


def case_one_lost(srv):
    srv.new_card('bl0', 'bl')
    srv.new_card('bl1', 'bl')
    p = boardctl(srv, ['--json', 'work', '--board', 'default', '--label', 'bl',
                       '--concurrency', '2', '--max-jobs', '2', '--lease-ms', '3000',
                       '--grace', '1s', '--', 'sleep', '4'])
    check(wait_for(lambda: all(srv.card(c)['claim'] and srv.card(c)['state'] == 'in_progress'
                               for c in ('bl0', 'bl1')), 10),
          'both cards taken and running')
    st, _ = srv.api('POST', '/v1/cards/bl0/claim/revoke')
    check(st == 200, 'revoke: %d' % st)
    t0 = time.time()
    rc, jobs, err = finish(p)
    by = {j['card']: j for j in jobs}
    check(by.get('bl0', {}).get('outcome') == 'lost' and not by['bl0']['written'],
          'the revoked claim is lost, nothing written: %s' % by.get('bl0'))
    check(by.get('bl1', {}).get('outcome') == 'succeeded' and by['bl1']['written'],
          'the other one finished: %s %s' % (by.get('bl1'), err))
    check(srv.card('bl1')['state'] == 'done' and srv.card('bl0')['state'] == 'in_progress',
          'bl1 done, bl0 left where it was: %s %s' % (srv.card('bl1')['state'],
                                                     srv.card('bl0')['state']))
    check(time.time() - t0 < 30, 'finished in time')


def case_claim_next_answer_lost(srv):
    """The answer to claim-next lost after the server took a card: boardctl asks again with
    the same Idempotency-Key and gets that card, not a second one while the first stays
    held by its marker for good (the reaper is off by default)."""
    srv.new_card('lk0', 'lk')
    srv.new_card('lk1', 'lk')
    px = Proxy(srv.port)
    px.set([{'method': 'POST', 'path': r'/claim-next$', 'nth': [1], 'action': 'drop'}])
    try:
        p = boardctl(srv, ['--json', 'work', '--board', 'default', '--label', 'lk',
                           '--max-jobs', '1', '--lease-ms', '3000', '--wait-ms', '1000',
                           '--', 'true'], port=px.port)
        rc, jobs, err = finish(p)
    finally:
        px.close()
    check(rc == 0 and len(jobs) == 1 and jobs[0]['outcome'] == 'succeeded',
          'one job ran: rc %d %s %s' % (rc, jobs, err))
    done = jobs[0]['card'] if jobs else None
    other = 'lk1' if done == 'lk0' else 'lk0'
    check(done and srv.card(done)['state'] == 'done' and srv.card(done)['claim'] is None,
          'its card is filed and released')
    check(srv.card(other)['claim'] is None and srv.card(other)['state'] == 'ready',
          'the other card was never taken (no card stranded under boardctl\'s marker): %s'
          % srv.card(other))


def case_renew_answer_for_an_older_claim(srv):
    """A renew many sent for (card, epoch 1) answers 409 after the card was released and
    taken again by the other slot (epoch 2): that answer is the old claim's, and the new
    claim's command runs on (it was killed as lost, its claim left held)."""
    srv.new_card('rx', 'rx')
    px = Proxy(srv.port)
    px.set([{'method': 'POST', 'path': r'^/v1/claims/renew$', 'action': 'hold',
             'seconds': 1.5}])
    try:
        p = boardctl(srv, ['--json', 'work', '--board', 'default', '--label', 'rx',
                           '--concurrency', '2', '--max-jobs', '2', '--lease-ms', '3000',
                           '--wait-ms', '1000', '--on-success', 'release', '--',
                           'sleep', '1.3'], port=px.port)
        rc, jobs, err = finish(p)
    finally:
        px.close()
    check(rc == 0 and len(jobs) == 2 and all(j['outcome'] == 'succeeded' for j in jobs),
          'both jobs of the card succeeded: rc %d %s %s' % (rc, jobs, err))
    check(srv.card('rx')['claim'] is None, 'the card is released: %s' % srv.card('rx'))


def main():
    tmp = tempfile.mkdtemp(prefix='boardctl-batch-')
    srv = Server(tmp)
    srv.started(timeout=10)
    try:
        case_batched(srv)
        case_one_lost(srv)
        case_claim_next_answer_lost(srv)
        case_renew_answer_for_an_older_claim(srv)
    finally:
        srv.stop(timeout=20)
    if bt.summary('boardctl-batch'):
        print('server logs: ' + tmp)
        return 1
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
