#!/usr/bin/env python3
"""The curl examples a user copies from README.md and docs/http.md do what the text says, on
today's server: each listed section's ```sh blocks are run literally, in order, in bash, on a
fresh boardd started the README's way (an FS store, no --tokens: the first start writes
DATADIR/tokens.json and prints one token per role, which become $WORKER_TOKEN, $BOT_TOKEN and
$OPERATOR_TOKEN). Only the address changes (127.0.0.1:8080 becomes the test server's).

Each curl command must answer 2xx, or the status its answer comment shows. An answer comment
is the `#` lines right after a command that show a status and/or JSON
(`#  -> {"epoch":1,...}`, `# 201 {"id":"r1",...}`, `# 200 {...}   or 204: none`): every
`"key":value` pair it shows with a literal value (number, string, true, false, null) must be
in the answer as shown, every `"key":...` (or an example time) must be there with some value,
and `"key":"whsec_..."` with a value that starts so. A command the
section's entry lists in `skip` is not run (the reason is printed).

Setups make what the text presumes (a card in some column) through the API, before a block.
The README's by-hand webhook verification (Python) is run as written on a delivery boardd
made to a receiver here, and its retry command on that delivery.

usage: check_examples.py path/to/boardd REPO_ROOT
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

BOARDD, ROOT = sys.argv[1], sys.argv[2]


def scratch():
    """A temporary directory (data, logs, .curlrc), removed at exit unless a check failed
    (then its logs say what the server did)."""
    d = tempfile.mkdtemp(prefix='boardd-examples-')
    atexit.register(lambda: bt.failed() or shutil.rmtree(d, ignore_errors=True))
    return d


def card(srv, tok, cid, state, **kw):
    body = dict({'id': cid, 'title': cid, 'state': state}, **kw)
    st, b = bt.request(srv.port, 'POST', '/v1/cards', tok['dev-operator'], body)[:2]
    assert st == 201, (st, b)


def claim(srv, tok, cid, marker):
    st, b = bt.request(srv.port, 'POST', '/v1/cards/%s/claim' % cid, tok['dev-worker'],
                       {'marker': marker})[:2]
    assert st == 200, (st, b)


def move(srv, tok, cid, frm, to):
    st, b = bt.request(srv.port, 'PATCH', '/v1/cards/%s/state' % cid, tok['dev-operator'],
                       {'from': frm, 'to': to})[:2]
    assert st == 200, (st, b)


# (file, section heading, {block index: setup(srv, tokens)}, {substring of a command: why
# it is not run}). A file's later sections use the variables (B, J, the token headers) its
# first example sets: that block's preamble comes first.
VARS = {'README.md': "A card's life over HTTP", 'docs/http.md': "A worker's loop"}
SECTIONS = [
    ('README.md', "A card's life over HTTP", {}, {}),
    ('README.md', 'Subscriptions and webhooks', {}, {
        'curl -N': 'an event stream never ends (tests/ui follows it)',
        '$DELIVERY': 'needs a delivery that is done: run by webhooks() below'}),
    ('docs/http.md', "A worker's loop", {
        0: lambda s, t: (card(s, t, 'c1', 'ready'),
                         card(s, t, 'c2', 'ready', labels=['gpu'])),
        2: lambda s, t: (card(s, t, 'c3', 'ready'), card(s, t, 'c4', 'ready'))}, {}),
    ('docs/http.md', 'Capacity, schedules and retries', {
        1: lambda s, t: (card(s, t, 'c9', 'ready', board='gpu'),
                         claim(s, t, 'c9', 'worker-7'))}, {}),
    ('docs/http.md', 'Bots and operators', {
        0: lambda s, t: card(s, t, 'c1', 'backlog'),
        1: lambda s, t: move(s, t, 'c1', 'ready', 'done')}, {}),
]

PAIR = re.compile(r'"([A-Za-z_]+)":\s*(-?\d+|"[^"]*"|true|false|null|\.\.\.)')
TIME = re.compile(r'"\d{4}-\d\d-\d\dT[\d:.]+Z"')  # an example time: only its key is compared
ANSWER = re.compile(r'^#\s*(->\s*)?(\d{3}\b|\{|")')


def section(text, heading):
    m = re.search(r'^#+ %s\n(.*?)(?=^## |\Z)' % re.escape(heading), text, re.M | re.S)
    return m.group(1) if m else None


def blocks(sec):
    return re.findall(r'^```sh\n(.*?)^```', sec, re.M | re.S)


def commands(block):
    """[(preamble lines, command, answer comment text)] of one block: the lines before the
    first curl are its preamble (variables); a command's backslash continuations are joined."""
    lines, out, pre, i = block.splitlines(), [], [], 0
    while i < len(lines):
        line = lines[i]
        if not line.lstrip().startswith('curl '):
            if not out and line.strip() and not line.startswith('#'):
                pre.append(line)
            i += 1
            continue
        cmd = line
        while cmd.rstrip().endswith('\\') and i + 1 < len(lines):
            i += 1
            cmd += '\n' + lines[i]
        # a multi-line quoted body: continue until the quotes balance
        while cmd.count("'") % 2 and i + 1 < len(lines):
            i += 1
            cmd += '\n' + lines[i]
        i += 1
        answer = []
        while i < len(lines) and lines[i].startswith('#') and (answer or ANSWER.match(lines[i])):
            answer.append(lines[i].lstrip('#').strip())
            i += 1
        out.append((cmd, ' '.join(answer)))
    return pre, out


def statuses(answer):
    m = re.match(r'(?:->\s*)?(\d{3})\b', answer)
    return ({int(m.group(1))} | {int(x) for x in re.findall(r'\bor (\d{3})\b', answer)}
            if m else None)


def run_section(path, heading, setups, skips):
    text = open(os.path.join(ROOT, path), encoding='utf-8').read()
    sec = section(text, heading)
    if not check(sec is not None, '%s: a section "%s"' % (path, heading)):
        return
    tmp = scratch()
    srv = bt.Server(BOARDD, tmp + '/data', None, tmp, threads=2)
    srv.started(timeout=20)
    try:
        tok = srv.dev_tokens()
        check(sorted(tok) == ['dev-bot', 'dev-operator', 'dev-worker'] and
              os.path.exists(tmp + '/data/tokens.json') and
              not any(t in open(tmp + '/data/tokens.json').read() for t in tok.values()),
              'first start: one token per role printed, DATADIR/tokens.json holds none '
              'of them: %s' % sorted(tok))
        env = dict(bt.clean_env(), WORKER_TOKEN=tok.get('dev-worker', ''),
                   BOT_TOKEN=tok.get('dev-bot', ''), OPERATOR_TOKEN=tok.get('dev-operator', ''),
                   CURL_HOME=tmp)
        # curl reads $CURL_HOME/.curlrc: the status after the body, the command untouched
        with open(tmp + '/.curlrc', 'w') as f:
            f.write('write-out = "\\n%{http_code}"\nmax-time = 10\n')
        preamble = []
        if path in VARS and VARS[path] != heading:
            preamble = commands(blocks(section(text, VARS[path]))[0])[0]
        preamble = [p.replace('127.0.0.1:8080', '127.0.0.1:%d' % srv.port) for p in preamble]
        n = 0
        for bi, block in enumerate(blocks(sec)):
            if bi in setups:
                setups[bi](srv, tok)
            block = block.replace('127.0.0.1:8080', '127.0.0.1:%d' % srv.port)
            pre, cmds = commands(block)
            preamble += pre
            for cmd, answer in cmds:
                what = '%s "%s": %s' % (path, heading, cmd.splitlines()[0][:90])
                why = next((w for s, w in skips.items() if s in cmd), None)
                if why:
                    print('skip: %s (%s)' % (what, why))
                    continue
                n += 1
                r = subprocess.run(['bash', '-uc', '\n'.join(preamble + [cmd])], env=env,
                                   capture_output=True, text=True, timeout=30)
                if os.environ.get('DEBUG'):
                    print(repr(cmd), r)
                body, _, code = r.stdout.rpartition('\n')
                st = int(code) if code.isdigit() else 0
                want = statuses(answer)
                if not check(r.returncode == 0 and (st in want if want else 200 <= st < 300),
                             '%s -> %d (want %s; bash exit %d) %s %s'
                             % (what, st, sorted(want) if want else '2xx', r.returncode,
                                body[:300], r.stderr)):
                    continue
                for k, v in PAIR.findall(answer):
                    if v.startswith('"') and '...' in v:  # "whsec_...": a prefix
                        check('"%s":%s' % (k, v[:v.index('...')]) in body, '%s: the answer '
                              'has "%s":%s as the comment shows: %s' % (what, k, v, body[:400]))
                    elif v == '...' or TIME.fullmatch(v):
                        check('"%s":' % k in body, '%s: the answer has "%s" as the comment '
                              'shows: %s' % (what, k, body[:400]))
                    else:
                        check('"%s":%s' % (k, v) in body, '%s: the answer has "%s":%s as the '
                              'comment shows: %s' % (what, k, v, body[:400]))
        check(n > 0, '%s "%s": commands run: %d' % (path, heading, n))
    finally:
        srv.stop()


def webhooks():
    """README "Verifying a webhook": its by-hand check, run as written on a delivery boardd
    really made (to a receiver here), accepts it and refuses it with one byte changed; and
    its retry command (`$DELIVERY`, the id the delivery list shows) answers 200."""
    import http.server
    import threading
    text = open(os.path.join(ROOT, 'README.md'), encoding='utf-8').read()
    sec = section(text, 'Subscriptions and webhooks')
    by_hand = [b for b in re.findall(r'^```python\n(.*?)^```', sec, re.M | re.S)
               if 'compare_digest' in b]
    retry = [c for c, _ in commands(blocks(sec)[0])[1] if '$DELIVERY' in c]
    if not check(len(by_hand) == 1 and len(retry) == 1,
                 'README: one by-hand verification and one retry command'):
        return
    hits = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get('Content-Length') or 0))
            hits.append(({k.lower(): v for k, v in self.headers.items()}, body))
            self.send_response(200)
            self.send_header('Content-Length', '0')
            self.end_headers()

    recv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    threading.Thread(target=recv.serve_forever, daemon=True).start()
    tmp = scratch()
    srv = bt.Server(BOARDD, tmp + '/data', None, tmp, threads=2)
    srv.started(timeout=20)
    try:
        op = srv.dev_tokens()['dev-operator']
        st, sub = bt.request(srv.port, 'PUT', '/v1/boards/default/subscriptions/hook', op,
                             {'url': 'http://127.0.0.1:%d/hook' % recv.server_address[1],
                              'on': {'types': ['card_created']}})[:2]
        check(st == 201 and sub.get('secret', '').startswith('whsec_'),
              'subscription made: %d %s' % (st, sub))
        card(srv, {'dev-operator': op}, 'w1', 'ready')
        if not check(bt.wait_for(lambda: hits, 15), 'a delivery reached the receiver'):
            return
        headers, raw_body = hits[0]
        for body, want in ((raw_body, True), (raw_body.replace(b'w1', b'w2'), False)):
            g = {'secret': sub['secret'], 'headers': headers, 'raw_body': body}
            exec(by_hand[0], g)  # the README's code, as written
            check(g.get('ok') is want, 'README by-hand verification says %s for %s body'
                  % (g.get('ok'), 'the delivered' if want else 'a changed'))
        done = bt.wait_for(lambda: [d for d in bt.request(
            srv.port, 'GET', '/v1/deliveries?board=default&status=done', op)[1]['deliveries']],
            10)
        if check(done, 'the delivery reads done'):
            tok = srv.dev_tokens()
            env = dict(bt.clean_env(), WORKER_TOKEN=tok['dev-worker'],
                       BOT_TOKEN=tok['dev-bot'], OPERATOR_TOKEN=op, DELIVERY=done[0]['id'],
                       CURL_HOME=tmp)
            with open(tmp + '/.curlrc', 'w') as f:
                f.write('write-out = "\\n%{http_code}"\nmax-time = 10\n')
            pre = commands(blocks(section(text, VARS['README.md']))[0])[0]
            pre = [p.replace('127.0.0.1:8080', '127.0.0.1:%d' % srv.port) for p in pre]
            r = subprocess.run(['bash', '-uc', '\n'.join(pre + retry)], env=env,
                               capture_output=True, text=True, timeout=30)
            check(r.stdout.endswith('\n200') and '"status":"pending"' in r.stdout,
                  'README retry of a done delivery: %s %s' % (r.stdout, r.stderr))
    finally:
        srv.stop()
        recv.shutdown()


def two_commands():
    """README "Two commands": exactly the set-up command and the test command, both there and
    executable; CI (.ci/run) runs exactly the test command; the set-up command runs boardd on
    the FS store in ./data, as the README says."""
    text = open(os.path.join(ROOT, 'README.md'), encoding='utf-8').read()
    sec = section(text, 'Two commands') or ''
    cmds = [l.split('#')[0].strip() for b in blocks(sec) for l in b.splitlines() if l.strip()]
    check(cmds == ['./deploy/run.sh', './tests/run.sh'],
          'README "Two commands" are ./deploy/run.sh and ./tests/run.sh: %s' % cmds)
    for c in cmds:
        check(os.access(os.path.join(ROOT, c), os.X_OK), '%s is executable' % c)
    ci = open(os.path.join(ROOT, '.ci', 'run'), encoding='utf-8').read()
    runs = [l.strip() for l in ci.splitlines() if l.strip() and not l.startswith('#') and
            not l.startswith(('set ', 'cd '))]
    check(runs == ['exec ./tests/run.sh'], '.ci/run runs exactly the README\'s test command: %s'
          % runs)
    run = open(os.path.join(ROOT, 'deploy', 'run.sh'), encoding='utf-8').read()
    check(re.search(r'^exec \./build/server/boardd --store fs:\./data "\$@"$', run, re.M),
          'deploy/run.sh runs boardd on fs:./data with the extra arguments')
    check(re.search(r'^ninja -C build .*\bcli/boardctl\b', run, re.M),
          'deploy/run.sh builds boardctl too (the README says build/cli/boardctl)')


def main():
    two_commands()
    for path, heading, setups, skips in SECTIONS:
        run_section(path, heading, setups, skips)
    webhooks()
    return bt.summary('doc examples')


if __name__ == '__main__':
    sys.exit(main())
