#!/usr/bin/env python3
"""/metrics of a live boardd: clean under `promtool check metrics`, every family of the one
table (metrics/metrics.h) served, and the counters moved by a scripted claim cycle: claim
outcomes, fence refusals by reason, the reaper's pass, cards by board and state, claims held.
Runs on the FS twin, and on the Mongo twin too when BOARDD_TEST_MONGO_URI is set.

usage: test_scrape.py path/to/boardd path/to/metrics.h
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'faults'))
import boardd_proc  # noqa: E402

BOARDD, TABLE = sys.argv[1], sys.argv[2]
failed = 0


def check(cond, what):
    global failed
    print(('ok   ' if cond else 'FAIL ') + what)
    if not cond:
        failed += 1


def table_families():
    """{name: type} of METRICS_TABLE, read from the header as the server is built from it."""
    text = open(TABLE).read()
    # The table's own lines only (the header's comment shows an example row).
    text = text[text.index('#define METRICS_TABLE(X)'):text.index('enum metrics_id')]
    text = text.replace('\\\n', ' ')  # joined continuation lines
    rows = re.findall(r'X\(METRICS_\w+,\s*METRICS_(COUNTER|GAUGE|HISTOGRAM),\s*"(\w+)"', text)
    return {name: kind.lower() for kind, name in rows}


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
        boardd_proc.token_add(BOARDD, tokens, 'w', ['worker', 'bot', 'operator'])
    srv = boardd_proc.Server(BOARDD, os.path.join(tmp, 'data-' + name), tokens, tmp,
                             store=store)
    plain = boardd_proc.token_add(BOARDD, tokens, 'w-' + name, ['worker', 'bot', 'operator'])
    ok, detail = srv.start()
    check(ok, name + ': boardd starts ' + detail)
    if not ok:
        return
    try:
        c = boardd_proc.Client(srv.port, plain)
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
        st, _ = c.call('POST', '/v1/reaper/pass')
        check(st == 200, name + ': one reaper pass')
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

        for outcome, want in (('fresh', 2), ('idempotent', 1), ('conflict', 1),
                              ('blockers_pending', 1)):
            check(value(text, 'boardd_claims_total{outcome="%s"}' % outcome) == want,
                  '%s: boardd_claims_total{outcome="%s"} == %d' % (name, outcome, want))
        for reason, want in (('unclaimed', 1), ('marker', 2), ('epoch', 1)):
            got = value(text, 'boardd_fenced_writes_refused_total{reason="%s"}' % reason)
            check(got == want, '%s: fenced refusals, reason %s == %d (got %s)' %
                  (name, reason, want, got))
        check(value(text, 'boardd_reaper_pass_duration_seconds_count') == 1,
              name + ': one reaper pass observed')
        check(value(text, 'boardd_cards{board="%s",state="ready"}' % board) == 1 and
              value(text, 'boardd_cards{board="%s",state="waiting_deps"}' % board) == 1 and
              value(text, 'boardd_cards{board="%s",state="done"}' % board) == 0,
              name + ': cards by board and state (zeros for empty columns)')
        check(value(text, 'boardd_claims_held') == 1, name + ': claims held')
        check(value(text, 'boardd_claims_expired') == 0, name + ': no claim expired')
        check(value(text, 'boardd_store_stats_up') == 1, name + ': the store answered')
        check(value(text, 'boardd_http_request_duration_seconds_count{route="/v1/cards/{id}/'
                    'claim",method="POST",code="409"}') == 2,
              name + ': latency series by route template, method and code')
        check(value(text, 'boardd_http_request_duration_seconds_count{route="unmatched",'
                    'method="GET",code="404"}') == 1, name + ': unmatched routes are one series')
        check(value(text, 'boardd_build_info{version="%s"}' % boardd_version()) == 1,
              name + ': build info')
        check((value(text, 'process_open_fds') or 0) > 3 and
              (value(text, 'process_resident_memory_bytes') or 0) > 1e6 and
              (value(text, 'process_start_time_seconds') or 0) > 1.5e9,
              name + ': process metrics')
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
        if failed:
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
            base, _, query = uri.partition('?')
            base = base.rsplit('/', 1)[0] + '/boardd_metrics_%d' % os.getpid()
            scenario(tmp, base + ('?' + query if query else ''), 'mongo')
        else:
            print('skip mongo: BOARDD_TEST_MONGO_URI is not set')


if __name__ == '__main__':
    if not shutil.which('promtool'):
        print('promtool not found (Debian: apt-get install prometheus; deploy/deps.sh --test)')
        sys.exit(1 if os.environ.get('CI') == 'true' else 77)
    main()
    print('metrics scrape: %s' % ('FAIL' if failed else 'ok'))
    sys.exit(1 if failed else 0)
