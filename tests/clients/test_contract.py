#!/usr/bin/env python3
"""The workers' batched paths, checked against DESIGN's contract itself: claim-next with
`count` and POST /v1/claims/renew (DESIGN §18), release with `retry` (§17), run output (§20),
which boardd serves now (issue 29 wrote the SDKs before it did). A small in-process fake of
those routes (and of the few others a worker calls), written from DESIGN's contract, stands
in for boardd; the Python and Go check programs (check.py,
gocheck) run against it. Asserted: the worker asks for several cards in one claim-next,
renews all its claims in one request per tick and never one by one, sends `retry: true` on a
retry, appends output to the run, and is cancelled within one renew interval when the batched
renew refuses its token. tests/clients/test_clients.py covers the fallbacks on a real boardd.

usage: test_contract.py REPO_ROOT
"""
import http.server
import json
import os
import re
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
import boardd_test as bt  # noqa: E402
from boardd_test import check  # noqa: E402
import test_clients as tc  # noqa: E402  (build, Proc: the same check programs)

LEASE_MS = 3000


class Fake:
    def __init__(self):
        self.lock = threading.Lock()
        self.cards, self.runs = {}, {}
        self.counts, self.batch_renews, self.single_renews, self.releases = [], [], 0, []
        self.n = 0

    def card(self, title, label):
        with self.lock:
            self.n += 1
            cid = 'f%d' % self.n
            self.cards[cid] = {'id': cid, 'board': 'default', 'title': title, 'state': 'ready',
                               'labels': [label], 'claim': None, 'claim_epoch': 0,
                               'comments': [], 'last_run_id': None, 'attempts': 0}
            return cid

    def revoke(self, cid):
        with self.lock:
            self.cards[cid]['claim'] = None

    def held(self, cid, marker, epoch):
        c = self.cards.get(cid)
        return c is not None and c['claim'] is not None and \
            c['claim']['marker'] == marker and c['claim']['epoch'] == epoch

    def token(self, c, marker):
        c['claim_epoch'] += 1
        c['claim'] = {'marker': marker, 'epoch': c['claim_epoch']}
        return {'marker': marker, 'epoch': c['claim_epoch'], 'claimed_at': '2026-12-06T00:00:00Z',
                'lease_until': '2026-12-06T00:00:03Z', 'lease_ms': LEASE_MS,
                'renew_after_ms': LEASE_MS // 3, 'fresh': True}

    # (status, body) per route
    def handle(self, method, path, h, b):
        if method == 'GET' and path == '/v1/boards/default':  # the workers' column check
            return 200, {'name': 'default', 'running': 'in_progress', 'completed': 'done',
                         'failed': 'blocked', 'waiting': 'waiting_deps',
                         'columns': [{'name': n, 'terminal': n in ('done', 'blocked'),
                                      'eligible': n == 'ready'}
                                     for n in ('ready', 'in_progress', 'waiting_deps', 'done',
                                               'blocked')]}
        m = re.match(r'^/v1/boards/([^/]+)/claim-next$', path)
        if method == 'POST' and m:
            self.counts.append(b.get('count'))
            want = set(b.get('labels') or [])
            free = [c for c in self.cards.values() if c['claim'] is None and
                    c['state'] == 'ready' and want <= set(c['labels'])]
            free = free[:b.get('count') or 1]
            if not free:  # the long-poll, shortened (the handler sleeps, not under the lock)
                return 204, min(b.get('wait_ms', 0), 200) / 1000.0
            pairs = [{'card': dict(c), 'token': self.token(c, b['marker'])} for c in free]
            return 200, ({'claims': pairs} if 'count' in b else pairs[0])
        if method == 'POST' and path == '/v1/claims/renew':
            self.batch_renews.append(len(b['tokens']))
            res = []
            for t in b['tokens']:
                if self.held(t['card'], t['marker'], t['epoch']):
                    res.append({'card': t['card'], 'status': 200,
                                'lease_until': '2026-12-06T00:00:06Z'})
                else:
                    res.append({'card': t['card'], 'status': 409, 'code': 'claim_conflict'})
            return 200, {'results': res}
        if method == 'POST' and path == '/v1/runs':
            c = self.cards.get(b['card_id'])
            if not c or not c['claim'] or c['claim']['marker'] != b['marker']:
                return 409, 'claim_conflict'
            rid = 'r%d' % (len(self.runs) + 1)
            self.runs[rid] = {'id': rid, 'card_id': c['id'], 'status': b['status'],
                              'epoch': c['claim']['epoch'], 'marker': b['marker'],
                              'result': None, 'error': None, 'output': ''}
            return 201, self.runs[rid]
        m = re.match(r'^/v1/runs/([^/]+)(/heartbeat|/output)?$', path)
        if m and method in ('PATCH', 'POST'):
            r = self.runs.get(m.group(1))
            if not r or not self.held(r['card_id'], b['marker'], r['epoch']):
                return 409, 'claim_conflict'
            if m.group(2) == '/output':
                r['output'] = (r['output'] + b['text'])[-65536:]
            elif m.group(2) is None:
                r.update({k: b[k] for k in ('status', 'result', 'error') if k in b})
            return 200, r
        m = re.match(r'^/v1/cards/([^/]+)/(last-run|state|release|comments|renew)$', path)
        if m:
            cid, what = m.groups()
            if what == 'renew':
                self.single_renews += 1
            epoch = b.get('epoch')
            if epoch is None:
                epoch = int((h.get('If-Match') or '"-1"').strip('"'))
            if not self.held(cid, b.get('marker'), epoch):
                return 409, 'claim_conflict'
            c = self.cards[cid]
            if what == 'last-run':
                c['last_run_id'] = b['run_id']
            elif what == 'state':
                c['state'] = b['to']
                if b.get('release'):
                    c['claim'] = None
            elif what == 'release':
                self.releases.append((cid, b.get('retry')))
                c['claim'] = None
                c['attempts'] += 1 if b.get('retry') else 0
            elif what == 'comments':
                c['comments'].append({'body': b['body']})
            return 200, c
        return 404, 'not_found'


def serve(fake):
    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = 'HTTP/1.1'

        def _any(self):
            n = int(self.headers.get('Content-Length') or 0)
            body = json.loads(self.rfile.read(n)) if n else {}
            with fake.lock:
                st, out = fake.handle(self.command, self.path.split('?')[0], self.headers, body)
            if st == 204:
                time.sleep(out)
            if isinstance(out, str):  # a problem code
                out = {'type': '/problems/' + out, 'title': out, 'status': st, 'code': out,
                       'detail': 'fake'}
            data = b'' if st == 204 else json.dumps(out).encode()
            self.send_response(st)
            self.send_header('Content-Type', 'application/problem+json' if st >= 400
                             else 'application/json')
            self.send_header('Content-Length', str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PUT = do_POST = do_PATCH = do_DELETE = _any

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), H)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def spawn(progs, tmp, url, lang, scen, label, **kw):
    env = dict(bt.clean_env(), BOARDD_URL=url, BOARDD_TOKEN='fake', SCEN=scen, LABEL=label,
               WAIT_MS='200', LEASE_MS=str(LEASE_MS))
    env.update({k.upper(): str(v) for k, v in kw.items()})
    return tc.Proc(progs[lang], env, os.path.join(tmp, 'fake-%s-%s.log' % (lang, scen)))


def main():
    tc.ROOT = os.path.abspath(sys.argv[1])
    tmp = tempfile.mkdtemp(prefix='boardd-contract-')
    import atexit
    import shutil
    atexit.register(lambda: bt.failed() or shutil.rmtree(tmp, ignore_errors=True))
    progs = tc.build(tmp)
    fake = Fake()
    srv = serve(fake)
    url = 'http://127.0.0.1:%d' % srv.server_address[1]
    for lang in ('python', 'go'):
        lab = 'drain-' + lang
        ids = {t: fake.card(t, lab) for t in ('ok1', 'ok2', 'ok3', 'fail', 'retry')}
        del fake.counts[:]
        p = spawn(progs, tmp, url, lang, 'drain', lab, conc=4, maxjobs=5)
        st = p.expect('stats', 60)
        check(p.finish() == 0 and st is not None and (st.get('succeeded'), st.get('failed'),
                                                      st.get('retried')) == (3, 1, 1),
              '%s against §17/§18/§20: the drain ends with 3 done, 1 failed, 1 retried (%s)' % (
                  lang, st))
        check(any((n or 0) > 1 for n in fake.counts),
              '%s: claim-next asks for several cards at once (counts sent: %s)' % (
                  lang, sorted(set(map(str, fake.counts)))))
        check((ids['retry'], True) in fake.releases,
              '%s: the retry is a release with retry: true' % lang)
        outs = {fake.runs[r]['output'] for r in fake.runs
                if fake.runs[r]['card_id'] in ids.values()}
        check(outs == {'out:' + t for t in ids},
              "%s: each job's output is appended to its run (%s)" % (lang, sorted(outs)))

        lab = 'hold-' + lang
        cid = fake.card('hold', lab)
        other = fake.card('hold2', lab)
        b0, s0 = len(fake.batch_renews), fake.single_renews
        p = spawn(progs, tmp, url, lang, 'hold', lab, conc=2, maxjobs=2)
        started = [p.expect('started', 30), p.expect('started', 30)]
        check(all(started), '%s: two handlers hold two claims' % lang)
        time.sleep(LEASE_MS / 3000.0 * 1.5)  # at least one tick with both claims
        t0 = time.monotonic()
        fake.revoke(cid)
        cz = p.expect('cancelled', 10)
        dt = cz['_t'] - t0 if cz else None
        check(cz is not None and cz.get('card') == cid and dt <= LEASE_MS / 3000.0 + tc.SLACK_S,
              '%s: the token the batched renew refuses cancels its handler within one renew '
              'interval (%s s)' % (lang, None if dt is None else round(dt, 3)))
        check(len(fake.batch_renews) > b0 and max(fake.batch_renews[b0:]) == 2 and
              fake.single_renews == s0,
              '%s: one POST /v1/claims/renew per tick for both claims, none one by one '
              '(batches %s, single %d)' % (lang, fake.batch_renews[b0:], fake.single_renews - s0))
        # the other claim is still live: revoke it too so its handler ends
        fake.revoke(other)
        check(p.expect('cancelled', 10) is not None, '%s: the second claim lost too' % lang)
        p.say()
        p.say()
        st = p.expect('stats', 30)
        check(p.finish() == 0 and st is not None and st.get('lost') == 2,
              '%s: both losses counted (%s)' % (lang, st))
        check(not fake.cards[cid]['comments'],
              '%s: nothing the handler wrote after the loss landed' % lang)
    srv.shutdown()
    sys.exit(bt.summary('clients against the §17/§18/§20 contract'))


if __name__ == '__main__':
    main()
