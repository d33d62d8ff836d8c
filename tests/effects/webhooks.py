#!/usr/bin/env python3
"""End-to-end webhooks (DESIGN §14): boardd delivers to a local receiver, and every signature
is checked by the `standardwebhooks` library. One boardd, one receiver, a subscription per
behaviour, run side by side so the whole test stays short:

  ok        delivered once, signature verified, webhook-id = the delivery id, body
            {type: board.event, event, card}; the secret is shown once, never served back
  fail      500 seven times: the schedule (test-scaled: BOARDD_TEST_DELIVERY_TIME_SCALE) and
            the dead letter; then the receiver heals and the operator retry delivers it
  slow      the receiver outlives --delivery-timeout-ms: no answer, retried
  gone      410: the delivery is dead, the subscription disabled, later events enqueue nothing
  limit     429 + Retry-After: 2 s: the next attempt waits at least that, then done
  redirect  302 to another host: never followed, retried
  big       a 1 MiB answer: read up to 64 KiB, its 200 stands
  watchdog  the reaper's run_finished filing is delivered, and its dependent's unblocked
            promotion; the column rename that follows fires nothing

usage: webhooks.py path/to/boardd [--mongo]
  --mongo: on a fresh database of BOARDD_TEST_MONGO_URI (skips, exit 77, when unset outside CI)
"""
import json
import os
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import boardd_test as bt  # noqa: E402
from boardd_test import check  # noqa: E402
from receiver import Receiver  # noqa: E402

SCALE = 40000  # 5 s, 5 min, 30 min, 2 h, 5 h, 10 h -> 0.125 ms ... 0.9 s


# a token scoped to another board than the subscriptions' (added in main)
SCOPED = []

def deliveries(ops, status=None):
    q = '/v1/deliveries?board=default&limit=1000'
    if status:
        q += '&status=' + status
    return ops.must(200, 'GET', q)['deliveries']


def wait_delivery(ops, pred, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = [d for d in deliveries(ops) if pred(d)]
        if got:
            return got[0]
        time.sleep(0.05)
    return None


def main():
    boardd = sys.argv[1]
    store = bt.mongo_database(bt.mongo_uri(), 'webhooks') if '--mongo' in sys.argv else None
    recv = Receiver()
    other = Receiver(host='127.0.0.2')  # the redirect target: must never be reached
    recv.redirect_to = other.base + '/elsewhere/ok'
    with tempfile.TemporaryDirectory() as tmp:
        tokens = os.path.join(tmp, 'tokens.json')
        ops_t = bt.token_add(boardd, tokens, 'ops', ['operator', 'bot'])
        wrk_t = bt.token_add(boardd, tokens, 'wrk', ['worker'])
        SCOPED.append(bt.token_add(boardd, tokens, 'scoped-ops', ['operator'],
                                   boards=['other']))
        srv = bt.Server(boardd, os.path.join(tmp, 'data'), tokens, tmp, store=store,
                                 extra=['--deliverers', '6', '--delivery-timeout-ms', '1000',
                                        '--delivery-lease-ms', '5000', '--reaper=on',
                                        '--reaper-interval-ms', '3600000'],
                                 env={'BOARDD_TEST_DELIVERY_TIME_SCALE': str(SCALE)})
        ok, detail = srv.start()
        if not ok:
            print('FAIL: boardd did not start:', detail)
            return 1
        print('store:', store or 'fs', flush=True)
        ops = bt.Client(srv.port, ops_t)
        wrk = bt.Client(srv.port, wrk_t)
        try:
            run(srv, ops, wrk, recv, other)
        except Exception as e:  # a harness error is a failure, with the log
            check(False, 'harness: %r\n%s' % (e, srv.log_tail()))
        finally:
            code = srv.stop()
            log = srv.log_text()
            check(code == 0 and 'Sanitizer' not in log and 'runtime error' not in log,
                  'boardd stopped cleanly (exit %s)%s' % (code, '' if code == 0 else
                                                          '\n' + srv.log_tail(40)))
            recv.stop()
            other.stop()
    return bt.summary()


def put_sub(ops, name, path, labels, want=201, **extra):
    body = {'url': path, 'on': {'all_labels': labels}}
    body.update(extra)
    return ops.must(want, 'PUT', '/v1/boards/default/subscriptions/' + name, body)


def run(srv, ops, wrk, recv, other):
    # ---- the subscription routes ----
    kinds = ['ok', 'fail', 'slow', 'gone', 'limit', 'redirect', 'big']
    secrets = {}
    for k in kinds:
        s = put_sub(ops, 'h-' + k, recv.base + '/h-%s/%s' % (k, k), ['to-' + k])
        check(s.get('secret', '').startswith('whsec_'), '%s: generated secret shown' % k)
        secrets['/h-%s/' % k] = s['secret']
    recv.secrets = secrets
    recv.fail_until_ok.add('/h-fail')
    one = ops.must(200, 'GET', '/v1/boards/default/subscriptions/h-ok')
    check('secret' not in one, 'GET never shows the secret')
    check(one['on']['all_labels'] == ['to-ok'] and one['enabled'] is True, 'GET: %s' % one)
    lst = ops.must(200, 'GET', '/v1/boards/default/subscriptions')['subscriptions']
    check(sorted(x['name'] for x in lst) == sorted('h-' + k for k in kinds), 'list: %s' % lst)
    check(all('secret' not in x for x in lst), 'the list never shows a secret')
    again = put_sub(ops, 'h-ok', recv.base + '/h-ok/ok', ['to-ok'], want=200)
    check('secret' not in again, 'a replacement keeps the secret and does not show it')
    for bad in ('ftp://x/y', 'http://[::1', 'http://[::1]x/', 'http://[]/', 'http://[g::1]/',
                'http://x:99999/', 'http://x:0/', 'http://x:/', 'http://x:8a/', 'http://:80/',
                'http:///y', 'http://u:p@x/', 'http://a b/', 'https://x\x01/', 'http://x]/',
                'http://x:080/'):
        st, err = ops.call('PUT', '/v1/boards/default/subscriptions/x', {'url': bad})
        check(st == 400 and 'url' in err.get('detail', ''), 'bad url %r: %s %s' % (bad, st, err))
    for good in ('http://[::1]:8080/h', 'https://hooks.example-1.test/a?b#c', 'http://x:65535',
                 'http://x.y_z~%41'):
        ops.must(201, 'PUT', '/v1/boards/default/subscriptions/good', {'url': good})
        ops.must(204, 'DELETE', '/v1/boards/default/subscriptions/good')
    st, err = ops.call('PUT', '/v1/boards/default/subscriptions/x',
                       {'url': 'http://x/y', 'on': {'types': ['run_created']}})
    check(st == 400 and 'run_created' in err.get('detail', ''), 'non-card type: %s' % err)
    st, err = ops.call('PUT', '/v1/boards/default/subscriptions/x',
                       {'url': 'http://x/y', 'colour': 1})
    check(st == 400 and 'colour' in err.get('detail', ''), 'unknown field: %s' % err)
    st, err = ops.call('PUT', '/v1/boards/default/subscriptions/x',
                       {'url': 'http://x/y', 'secret': 'whsec_c2hvcnQ='})
    check(st == 400 and 'secret' in err.get('detail', ''), 'short secret: %s' % err)
    st, _ = ops.call('PUT', '/v1/boards/nope/subscriptions/x', {'url': 'http://x/y'})
    check(st == 404, 'unknown board: %s' % st)
    st, err = ops.call('GET', '/v1/boards/nope/subscriptions')
    check(st == 404 and 'nope' in err.get('detail', ''), 'list of an unknown board: %s' % st)
    st, _ = ops.call('GET', '/v1/boards/default/subscriptions/x')
    check(st == 404, 'unknown subscription: %s' % st)
    st, _ = ops.call('DELETE', '/v1/boards/default/subscriptions/x')
    check(st == 404, 'delete of an unknown subscription: %s' % st)
    st, _ = wrk.call('GET', '/v1/boards/default/subscriptions')
    check(st == 403, 'a worker may not read subscriptions: %s' % st)
    st, _ = ops.call('GET', '/v1/deliveries?status=later')
    check(st == 400, 'bad status filter: %s' % st)

    # ---- the answers are what openapi.yaml says (served as /openapi.json) ----
    spec = ops.must(200, 'GET', '/openapi.json')['components']['schemas']

    def conforms(obj, name):
        sch = spec[name]
        keys = set(obj)
        return (set(sch.get('required', [])) <= keys and keys <= set(sch['properties']),
                'served %s keys %s vs schema required %s, properties %s' % (
                    name, sorted(keys), sorted(sch.get('required', [])),
                    sorted(sch['properties'])))

    # The types a subscription may name are core's (core/core.h: card events, not deleted).
    core_h = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'core',
                               'core.h')).read()
    core_types = [t for t in re.findall(r'X\(CORE_EV_\w+, "(\w+)"\)', core_h)
                  if t.startswith('card_') and t != 'card_deleted']
    check(sorted(spec['SubscriptionOn']['properties']['types']['items']['enum']) ==
          sorted(core_types), 'openapi: on.types is core\'s subscribable set %s' % core_types)
    for what, obj in (('PUT 201', s), ('GET', one), ('PUT 200', again)):
        good, why = conforms(obj, 'Subscription')
        check(good, 'openapi: %s: %s' % (what, why))
    good, why = conforms(one['on'], 'SubscriptionOn')
    check(good, 'openapi: on: %s' % why)

    # ---- one card per behaviour ----
    t0 = time.time()
    for k in kinds:
        ops.must(201, 'POST', '/v1/cards', {'id': 'card-' + k, 'labels': ['to-' + k]})

    got = recv.wait_for('/h-ok/', 1, 10)
    check(len(got) == 1, 'ok: delivered once: %s' % [(round(x['t'], 3), x['headers'].get(
        'webhook-id')) for x in got])
    if got:
        h, body = got[0], json.loads(got[0]['body'])
        check(h['verified'] is True, 'ok: standardwebhooks verifies it: %s' % h['verified'])
        check(body['type'] == 'board.event' and body['event']['type'] == 'card_created' and
              body['card']['id'] == 'card-ok', 'ok: body %s' % body)
        d = wait_delivery(ops, lambda d: d['subscription'] == 'h-ok' and
                          d['status'] == 'done', 5)
        check(d is not None and d['id'] == h['headers'].get('webhook-id') and
              d['event_seq'] == body['event']['seq'] and d['attempts'] == 1,
              'ok: webhook-id is the delivery id: %s %s' % (d, h['headers']))

    big = recv.wait_for('/h-big/', 1, 10)
    d = wait_delivery(ops, lambda d: d['subscription'] == 'h-big' and d['status'] == 'done', 5)
    check(len(big) == 1 and d is not None, 'big: a 1 MiB answer is cut, its 200 stands')

    red = recv.wait_for('/h-redirect/', 2, 10)
    check(len(red) >= 2, 'redirect: retried (%d attempts)' % len(red))
    check(not other.hits, 'redirect: never followed to another host')
    d = wait_delivery(ops, lambda d: d['subscription'] == 'h-redirect', 1)
    check(d is not None and d['last_status'] == 302, 'redirect: last_status 302: %s' % d)

    lim = recv.wait_for('/h-limit/', 2, 15)
    check(len(lim) == 2 and lim[1]['t'] - lim[0]['t'] >= 1.9,
          'limit: Retry-After honoured (%s)' % [round(x['t'] - t0, 3) for x in lim])
    d = wait_delivery(ops, lambda d: d['subscription'] == 'h-limit' and d['status'] == 'done',
                      5)
    check(d is not None and d['attempts'] == 2, 'limit: done on the second attempt: %s' % d)

    gone = recv.wait_for('/h-gone/', 1, 10)
    d = wait_delivery(ops, lambda d: d['subscription'] == 'h-gone' and d['status'] == 'dead',
                      5)
    check(len(gone) == 1 and d is not None and d['last_status'] == 410, 'gone: dead: %s' % d)
    s = ops.must(200, 'GET', '/v1/boards/default/subscriptions/h-gone')
    check(s['enabled'] is False and s['disabled_reason'] == 'gone', 'gone: disabled: %s' % s)
    ops.must(201, 'POST', '/v1/cards', {'id': 'card-gone-2', 'labels': ['to-gone']})
    check(not [x for x in deliveries(ops) if x['card_id'] == 'card-gone-2'],
          'gone: a disabled subscription enqueues nothing')

    slow = recv.wait_for('/h-slow/', 2, 15)
    d = wait_delivery(ops, lambda d: d['subscription'] == 'h-slow' and d['attempts'] >= 1, 5)
    check(len(slow) >= 2 and d is not None and d['last_status'] is None and
          'timed out' in (d['last_error'] or ''), 'slow: timed out and retried: %s' % d)

    fail = recv.wait_for('/h-fail/', 7, 30)
    d = wait_delivery(ops, lambda d: d['subscription'] == 'h-fail' and d['status'] == 'dead',
                      5)
    times = [x['t'] for x in fail]
    gaps = [b - a for a, b in zip(times, times[1:])]
    check(len(fail) == 7 and d is not None and d['attempts'] == 7 and d['last_status'] == 500,
          'fail: dead after 7 attempts: %d %s' % (len(fail), d))
    # The schedule scaled by SCALE: each gap at least 0.9 x its delay (jitter), lower bounds
    # only: a busy machine makes gaps longer, never shorter.
    want = [5, 300, 1800, 7200, 18000, 36000]
    check(len(gaps) == 6 and all(g >= 0.9 * w / SCALE - 0.005 for g, w in zip(gaps, want)),
          'fail: the schedule: %s' % [round(g, 3) for g in gaps])
    check(all(x['verified'] is True for x in fail), 'fail: every attempt signed')
    check(len({x['headers'].get('webhook-id') for x in fail}) == 1,
          'fail: one webhook-id across attempts')
    dead = deliveries(ops, 'dead')
    check(any(x['id'] == d['id'] for x in dead) if d else False, 'GET ?status=dead lists it')
    recv.fail_until_ok.discard('/h-fail')
    if d:
        r = ops.must(200, 'POST', '/v1/deliveries/%s/retry' % d['id'])
        check(r['status'] == 'pending' and r['attempts'] == 0, 'retry: pending: %s' % r)
        st, _ = ops.call('POST', '/v1/deliveries/%s/retry' % d['id'])
        check(st in (409, 200), 'retry again: %s' % st)
        done = wait_delivery(ops, lambda x: x['id'] == d['id'] and x['status'] == 'done', 10)
        check(done is not None, 'retry: delivered once the receiver heals')
    for x in deliveries(ops):
        good, why = conforms(x, 'Delivery')
        if not good:
            break
    check(good, 'openapi: deliveries: %s' % why)
    st, _ = ops.call('POST', '/v1/deliveries/nope.x/retry')
    check(st == 404, 'retry of an unknown delivery: %s' % st)
    # a token scoped to another board learns nothing: the same 403 whether it exists or not
    if d:
        scoped = bt.Client(ops.port, SCOPED[0])
        for did in (d['id'], 'default:999999.h-fail', d['id'] + 'x'):
            st, err = scoped.call('POST', '/v1/deliveries/%s/retry' % did)
            check(st == 403, 'retry of %s by a token scoped to another board: %s %s'
                  % (did, st, err))

    recreated(ops, recv)
    watchdog(ops, wrk, recv, secrets)

    st, body = ops.call('GET', '/metrics')
    text = body.get('_raw', '') if isinstance(body, dict) else ''
    check('boardd_webhook_attempts_total' in text and
          'boardd_webhook_outcomes_total{outcome="done"}' in text and
          'boardd_webhook_attempt_duration_seconds_bucket' in text, 'metrics: %s' % text[-400:])


def recreated(ops, recv):
    """A subscription deleted while its delivery is pending, then created again under the
    same name (another url, a filter the event does not match): the pending delivery was the
    deleted one's and goes dead; the new receiver never gets it."""
    recv.fail_until_ok.add('/h-rec-old')
    put_sub(ops, 'h-rec', recv.base + '/h-rec-old/fail', ['to-rec'])
    ops.must(201, 'POST', '/v1/cards', {'id': 'card-rec', 'labels': ['to-rec']})
    check(len(recv.wait_for('/h-rec-old/', 1, 10)) >= 1, 'recreated: the first attempt failed')
    ops.must(204, 'DELETE', '/v1/boards/default/subscriptions/h-rec')
    time.sleep(0.01)  # another millisecond of the store's clock: the new one is later
    put_sub(ops, 'h-rec', recv.base + '/h-rec-new/ok', ['public'])
    d = [x for x in deliveries(ops) if x['card_id'] == 'card-rec']
    check(len(d) == 1 and d[0]['status'] == 'pending',
          'recreated: the delivery is still pending when the name is taken again: %s' % d)
    d = wait_delivery(ops, lambda x: x['card_id'] == 'card-rec' and x['status'] == 'dead', 10)
    check(d is not None and 'deleted' in (d['last_error'] or ''),
          'recreated: the deleted subscription\'s delivery goes dead: %s' % d)
    check(not recv.wait_for('/h-rec-new/', 1, 0.5), 'recreated: never sent to the new one')
    ops.must(204, 'DELETE', '/v1/boards/default/subscriptions/h-rec')


def watchdog(ops, wrk, recv, secrets):
    """The reaper files a dead worker's finished run: delivered, dependent promoted and
    delivered; a column rename afterwards fires nothing."""
    s = ops.must(201, 'PUT', '/v1/boards/default/subscriptions/wd',
             {'url': recv.base + '/wd/ok',
              'on': {'all_labels': ['wd'], 'to_states': ['done', 'ready']}})
    recv.secrets['/wd/'] = s['secret']
    ops.must(201, 'POST', '/v1/cards', {'id': 'wd-1', 'state': 'in_progress', 'labels': ['wd']})
    ops.must(201, 'POST', '/v1/cards', {'id': 'wd-2', 'blockers': ['wd-1'], 'labels': ['wd']})
    claim = wrk.must(200, 'POST', '/v1/cards/wd-1/claim', {'marker': 'w-1', 'lease_ms': 1000})
    wrk.must(201, 'POST', '/v1/runs', {'id': 'wd-run', 'card_id': 'wd-1', 'marker': 'w-1',
                                        'status': 'running', 'lease_ms': 1000})
    wrk.must(200, 'PUT', '/v1/cards/wd-1/last-run', {'marker': 'w-1', 'run_id': 'wd-run'},
         {'If-Match': '"%d"' % claim['epoch']})
    wrk.must(200, 'PATCH', '/v1/runs/wd-run', {'marker': 'w-1', 'status': 'finished',
                                                'lease_ms': 1000})
    base = len(recv.hits_for('/wd/'))
    time.sleep(2.5)  # the worker is dead: its lease runs out
    stats = ops.must(200, 'POST', '/v1/reaper/pass')
    check(stats['actions']['complete'] == 1, 'watchdog: completed: %s' % stats)
    got = recv.wait_for('/wd/', base + 2, 10)[base:]
    evs = [json.loads(x['body'])['event'] for x in got]
    kinds = sorted((e['card_id'], e['type'], e['reason']) for e in evs)
    check(('wd-1', 'card_state_changed', 'run_finished') in kinds and
          ('wd-2', 'card_unblocked', 'unblocked') in kinds,
          'watchdog: the run_finished filing and the promotion delivered: %s' % kinds)
    check(all(x['verified'] is True for x in got), 'watchdog: signed')
    check(ops.must(200, 'GET', '/v1/cards/wd-2')['state'] == 'ready', 'dependent promoted')
    n = len(recv.hits_for('/wd/'))
    ops.must(200, 'POST', '/v1/boards/default/columns/ready/rename', {'to': 'queued'})
    time.sleep(1.0)
    check(len(recv.hits_for('/wd/')) == n and
          not [d for d in deliveries(ops) if d['card_id'] == 'wd-2' and
               d['event_type'] == 'card_state_changed'],
          'column rename (machine): nothing delivered')
    # The rename carried the subscription along: it names the new column, not the old one.
    sub = ops.must(200, 'GET', '/v1/boards/default/subscriptions/wd')
    check(sub['on']['to_states'] == ['done', 'queued'],
          'the rename rewrote the subscription: %s' % sub['on'])


if __name__ == '__main__':
    sys.exit(main())
