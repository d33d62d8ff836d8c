#!/usr/bin/env python3
"""/metrics of a live boardd: clean under `promtool check metrics`, every family of the one
table (metrics/metrics.h) served, and the counters moved by a scripted claim cycle: claim
outcomes, fence refusals by reason, the reaper's pass, cards by board and state, claims held.
Runs on the FS twin, and on the Mongo twin too when BOARDD_TEST_MONGO_URI is set.

usage: test_scrape.py path/to/boardd path/to/metrics.h
"""
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
import boardd_test as bt  # noqa: E402
from boardd_test import check  # noqa: E402

BOARDD, TABLE = sys.argv[1], sys.argv[2]
bt.verbose()


def table_families():
    """{name: type} of METRICS_TABLE, read from the header as the server is built from it."""
    return {name: kind for name, (kind, _) in bt.metrics_table(TABLE).items()}


def value(text, series):
    """The value of one exact series line (name{labels}), or None."""
    m = re.search(r'^' + re.escape(series) + r' (\S+)$', text, re.M)
    return float(m.group(1)) if m else None


def promtool(text):
    r = subprocess.run(['promtool', 'check', 'metrics'], input=text, capture_output=True,
                       text=True, timeout=60)
    return r.returncode, (r.stdout + r.stderr).strip()


def scenario(tmp, store, name):
    tokens = os.path.join(tmp, 'tokens.json')
    if not os.path.exists(tokens):
        bt.token_add(BOARDD, tokens, 'w', ['worker', 'bot', 'operator'])
    srv = bt.Server(BOARDD, os.path.join(tmp, 'data-' + name), tokens, tmp,
                             store=store, extra=('--lease-min-ms', '100', '--reaper', 'on',
                                                    '--reaper-interval-ms', '3600000'))
    plain = bt.token_add(BOARDD, tokens, 'w-' + name, ['worker', 'bot', 'operator'])
    ok, detail = srv.start()
    check(ok, name + ': boardd starts ' + detail)
    if not ok:
        return
    try:
        c = bt.Client(srv.port, plain)
        card = 'm-' + name
        board = 'default'
        st, _ = c.call('POST', '/v1/cards', {'id': card, 'board': board, 'state': 'ready'})
        check(st == 201, name + ': card created')
        st, t = c.call('POST', '/v1/cards/%s/claim' % card, {'marker': 'w1'})
        check(st == 200 and t['fresh'], name + ': fresh claim')
        st, _ = c.call('POST', '/v1/cards/%s/claim' % card, {'marker': 'w1'})
        check(st == 200, name + ': idempotent claim')
        st, _ = c.call('POST', '/v1/cards/%s/claim' % card, {'marker': 'w2'})
        check(st == 409, name + ': conflicting claim')
        epoch = t['epoch']
        st, _ = c.call('POST', '/v1/cards/%s/renew' % card, {'marker': 'w2', 'epoch': epoch})
        check(st == 409, name + ': renew by another marker refused')
        st, _ = c.call('POST', '/v1/cards/%s/release' % card,
                       {'marker': 'w1', 'epoch': epoch - 1})
        check(st == 409, name + ': release with an older epoch refused')
        st, _ = c.call('PATCH', '/v1/cards/%s/state' % card, {'marker': 'w2', 'to': 'done'},
                       headers={'If-Match': '"%d"' % epoch})
        check(st == 409, name + ': owned write by another marker refused')
        st, _ = c.call('POST', '/v1/cards/%s/release' % card, {'marker': 'w1', 'epoch': epoch})
        check(st == 200, name + ': release')
        st, _ = c.call('POST', '/v1/cards/%s/release' % card, {'marker': 'w1', 'epoch': epoch})
        check(st == 409, name + ': release of an unclaimed card refused')
        st, _ = c.call('POST', '/v1/cards/%s/claim' % card, {'marker': 'w3'})
        check(st == 200, name + ': claimed again (held at the scrape)')
        st, _ = c.call('POST', '/v1/cards', {'id': card + '-b', 'board': board,
                                             'blockers': [card]})
        check(st == 201, name + ': a card blocked by the first')
        st, body = c.call('POST', '/v1/cards/%s-b/claim' % card, {'marker': 'w4'})
        check(st == 409 and body.get('code') == 'blockers_pending',
              name + ': claim of a blocked card refused (%s %s)' % (st, body))
        # A scheduled card (DESIGN §17): its claim is refused not_yet, and counted so.
        st, _ = c.call('POST', '/v1/cards', {'id': card + '-s', 'board': board,
                                             'state': 'backlog',
                                             'not_before': '2999-01-01T00:00:00Z'})
        check(st == 201, name + ': a scheduled card')
        st, body = c.call('POST', '/v1/cards/%s-s/claim' % card, {'marker': 'w4'})
        check(st == 409 and body.get('code') == 'not_yet',
              name + ': claim of a scheduled card refused (%s %s)' % (st, body))
        # claim-next counts as a claim (fresh), and so does one that finds nothing (empty).
        st, _ = c.call('POST', '/v1/cards', {'id': card + '-n', 'board': board,
                                             'state': 'ready', 'priority': 9})
        check(st == 201, name + ': a card for claim-next')
        st, nx = c.call('POST', '/v1/boards/%s/claim-next' % board, {'marker': 'w5'})
        check(st == 200 and nx['card']['id'] == card + '-n', name + ': claim-next (%s)' % st)
        # Runs by final status: one failed, one cancelled by an operator; and the card
        # waits for input (the attention lane).
        for rid in ('r-failed', 'r-cancelled'):
            st, _ = c.call('POST', '/v1/runs', {'card_id': card + '-n', 'marker': 'w5',
                                                'status': 'running', 'id': rid + '-' + name})
            check(st == 201, name + ': run created')
        st, _ = c.call('PATCH', '/v1/runs/r-failed-' + name,
                       {'marker': 'w5', 'status': 'failed', 'error': 'exit status 3'})
        check(st == 200, name + ': run failed')
        st, _ = c.call('POST', '/v1/runs/r-cancelled-%s/cancel' % name)
        check(st == 200, name + ': run cancelled')
        # A run created in a final status (a job recorded after it ran) reached it too.
        st, _ = c.call('POST', '/v1/runs', {'card_id': card + '-n', 'marker': 'w5',
                                            'status': 'finished', 'id': 'r-done-' + name})
        check(st == 201, name + ': run created finished')
        st, _ = c.call('PUT', '/v1/cards/%s-n/awaiting-input' % card,
                       {'marker': 'w5', 'awaiting_input': True},
                       headers={'If-Match': '"%d"' % nx['token']['epoch']})
        check(st == 200, name + ': awaiting input')
        # A claim whose lease runs out: the reaper's transfer is a recovery claim.
        st, _ = c.call('POST', '/v1/cards', {'id': card + '-x', 'board': board,
                                             'state': 'ready'})
        st, _ = c.call('POST', '/v1/cards/%s-x/claim' % card, {'marker': 'w6', 'lease_ms': 100})
        check(st == 200, name + ': a short claim')
        st, _ = c.call('POST', '/v1/boards/%s/claim-next' % board, {'marker': 'w7'})
        check(st == 204, name + ': claim-next finds nothing (%s)' % st)
        time.sleep(0.3)
        st, _ = c.call('POST', '/v1/reaper/pass')
        check(st == 200, name + ': one reaper pass')
        st, held = c.call('GET', '/v1/cards?claimed=true&limit=1000')
        st, lane = c.call('GET', '/v1/attention')
        st, ready = c.call('GET', '/v1/cards?state=ready&limit=1000')
        c.call('GET', '/v1/cards/nope/x/y')  # an unmatched route

        st, raw = c.call_raw('GET', '/metrics')
        text = raw.decode()
        check(st == 200, name + ': /metrics answers 200')
        rc, out = promtool(text)
        check(rc == 0 and not out, name + ': promtool check metrics is clean (%d) %s' %
              (rc, out[:500]))

        fams = table_families()
        served = set(re.findall(r'^# TYPE (\w+) (\w+)$', text, re.M))
        other = 'mongo' if name == 'fs' else 'fs'
        for fam, kind in sorted(fams.items()):
            if fam.startswith('boardd_%s_' % other) or fam.startswith('boardd_tls_cert'):
                check((fam, kind) not in served, '%s: %s not served here' % (name, fam))
            else:
                check((fam, kind) in served, '%s: %s served as a %s' % (name, fam, kind))
        check(all(f in fams for f, _ in served), name + ': nothing served outside the table')
        # The OpenAPI's /metrics description names every family (README points there).
        spec = open(os.path.join(os.path.dirname(TABLE), '..', 'openapi',
                                 'openapi.yaml')).read()
        desc = spec[spec.index('  /metrics:'):spec.index('  /openapi.json:')]
        unnamed = sorted(f for f in fams if f not in desc)
        check(not unnamed, name + ': openapi.yaml /metrics names every family (not: %s)'
              % unnamed)

        for outcome, want in (('fresh', 4), ('idempotent', 1), ('conflict', 1),
                              ('blockers_pending', 1), ('empty', 1), ('recovery', 1),
                              ('not_yet', 1), ('capacity_reached', 0)):
            check(value(text, 'boardd_claims_total{outcome="%s"}' % outcome) == want,
                  '%s: boardd_claims_total{outcome="%s"} == %d' % (name, outcome, want))
        for reason, want in (('unclaimed', 1), ('marker', 2), ('epoch', 1)):
            got = value(text, 'boardd_fenced_writes_refused_total{reason="%s"}' % reason)
            check(got == want, '%s: fenced refusals, reason %s == %d (got %s)' %
                  (name, reason, want, got))
        for status, want in (('finished', 1), ('failed', 1), ('cancelled', 1)):
            check(value(text, 'boardd_runs_finished_total{status="%s"}' % status) == want,
                  '%s: boardd_runs_finished_total{status="%s"} == %d' % (name, status, want))
        for reason in ('gave_up', 'run_failed', 'recovery_hold', 'lease_expired_kept',
                       'awaiting_input', 'run_paused'):
            want = sum(reason in x['reasons'] for x in lane['cards'])
            check(value(text, 'boardd_attention_cards{reason="%s"}' % reason) == want,
                  '%s: boardd_attention_cards{reason="%s"} == %d, as GET /v1/attention' %
                  (name, reason, want))
        check(value(text, 'boardd_attention_cards{reason="awaiting_input"}') == 1,
              name + ': the card waiting for input is in the lane')
        check(value(text, 'boardd_reaper_pass_duration_seconds_count') == 1,
              name + ': one reaper pass observed')
        check(value(text, 'boardd_cards{board="%s",state="ready"}' % board) ==
              len(ready['cards']) and
              value(text, 'boardd_cards{board="%s",state="waiting_deps"}' % board) == 1 and
              value(text, 'boardd_cards{board="%s",state="done"}' % board) == 0,
              name + ': cards by board and state (zeros for empty columns)')
        check(value(text, 'boardd_claims_held') == len(held['cards']), name + ': claims held')
        check(value(text, 'boardd_claims_expired') == 0, name + ': no claim expired')
        check(value(text, 'boardd_store_stats_up') == 1, name + ': the store answered')
        check(value(text, 'boardd_http_request_duration_seconds_count{route="/v1/cards/{id}/'
                    'claim",method="POST",code="409"}') == 3,
              name + ': latency series by route template, method and code')
        check(value(text, 'boardd_http_request_duration_seconds_count{route="unmatched",'
                    'method="GET",code="404"}') == 1, name + ': unmatched routes are one series')
        check(value(text, 'boardd_build_info{version="%s"}' % boardd_version()) == 1,
              name + ': build info')
        check((value(text, 'process_open_fds') or 0) > 3 and
              (value(text, 'process_resident_memory_bytes') or 0) > 1e6 and
              (value(text, 'process_start_time_seconds') or 0) > 1.5e9,
              name + ': process metrics')
        # The board's activity series (DESIGN §21) count the same events, card by card with
        # the card's board (every event here is on one board): the reaper's recovery claim
        # and its actions included.
        st, act = c.call('GET', '/v1/boards/%s/activity' % board)
        check(st == 200, name + ': activity answers 200')
        series = act.get('series', {}) if st == 200 else {}
        actions = sum(float(v) for a, v in re.findall(
            r'^boardd_reaper_actions_total\{action="(\w+)"\} (\S+)$', text, re.M)
            if a != 'keep')
        for key, want in (
                ('claims', value(text, 'boardd_claims_total{outcome="fresh"}') +
                 value(text, 'boardd_claims_total{outcome="recovery"}')),
                ('completions', value(text, 'boardd_runs_finished_total{status="finished"}')),
                ('failures', value(text, 'boardd_runs_finished_total{status="failed"}')),
                ('reaper_actions', actions)):
            got = sum(series.get(key) or [])
            check(got == want, '%s: activity %s over the hour == /metrics (%s, got %s)' %
                  (name, key, want, got))
        if name == 'fs':
            check(value(text, 'boardd_fs_journal_syncs_total') >= 1 and
                  value(text, 'boardd_fs_journal_group_width_count') ==
                  value(text, 'boardd_fs_journal_syncs_total'),
                  'fs: one group width observed per sync')
        else:
            check(value(text, 'boardd_mongo_round_trips_total') > 10,
                  'mongo: round trips counted')
            check(value(text, 'boardd_mongo_command_duration_seconds_count') > 10,
                  'mongo: command durations observed')
    finally:
        code = srv.stop()
        check(code == 0, name + ': clean exit (%s)' % code)
        if bt.failed():
            print(srv.log_tail(30))


def boardd_version():
    out = subprocess.run([BOARDD, '--version'], capture_output=True, text=True, timeout=10)
    return out.stdout.split()[1]  # "boardd 0.1.0 (stores: ...)"


def main():
    with tempfile.TemporaryDirectory(prefix='boardd-metrics-') as tmp:
        scenario(tmp, None, 'fs')
        uri = os.environ.get('BOARDD_TEST_MONGO_URI')
        if uri:
            # A database of its own, so the counts are this test's.
            scenario(tmp, bt.mongo_database(uri, 'metrics'), 'mongo')
        else:
            print('skip mongo: BOARDD_TEST_MONGO_URI is not set')


if __name__ == '__main__':
    bt.need_promtool()
    main()
    sys.exit(bt.summary('metrics scrape'))
