#!/usr/bin/env python3
"""The worker examples of clients/python/README.md ("A worker in ten lines") and
clients/go/README.md ("A worker in twenty lines") run as written (issue 29): each block is
extracted, checked for its length, run against a fresh boardd (FS store) with BOARDD_URL and a
worker's BOARDD_TOKEN in its environment (the Go one built in a module of its own that requires
clients/go with a `replace`, as the README says); every card put on the board ends in `done`
with the run's result the example returns; SIGTERM then stops it with status 0. Also: the
package, the module and the server carry one version.

usage: test_readme.py BOARDD REPO_ROOT
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
import boardd_test as bt  # noqa: E402
from boardd_test import check  # noqa: E402

BOARDD, ROOT = sys.argv[1], os.path.abspath(sys.argv[2])


def block(readme, heading, lang):
    text = open(os.path.join(ROOT, readme)).read()
    m = re.search(r'^## %s\n(.*?)(?=^## |\Z)' % re.escape(heading), text, re.M | re.S)
    assert m, '%s: no section %r' % (readme, heading)
    b = re.search(r'```%s\n(.*?)```' % lang, m.group(1), re.S)
    assert b, '%s: no ```%s block under %r' % (readme, lang, heading)
    return b.group(1)


def versions():
    meson = re.search(r"version\s*:\s*'([^']+)'", open(os.path.join(ROOT, 'meson.build')).read())
    py = re.search(r'^version = "([^"]+)"', open(os.path.join(
        ROOT, 'clients/python/pyproject.toml')).read(), re.M)
    pyinit = re.search(r"__version__ = '([^']+)'", open(os.path.join(
        ROOT, 'clients/python/boardd/__init__.py')).read())
    go = re.search(r'const Version = "([^"]+)"', open(os.path.join(
        ROOT, 'clients/go/client.go')).read())
    got = [x and x.group(1) for x in (meson, py, pyinit, go)]
    check(len(set(got)) == 1 and None not in got,
          'boardd, pyproject.toml, boardd.__version__ and the Go Version agree: %s' % got)


def run_example(tmp, name, argv, cwd, env, srv, op):
    ids = []
    for i in range(5):
        st, b, _ = bt.request(srv.port, 'POST', '/v1/cards', op,
                              {'title': '%s-%d' % (name, i), 'state': 'ready'})
        assert st == 201, (st, b)
        ids.append(b['id'])
    log = open(os.path.join(tmp, name + '.log'), 'wb')
    p = subprocess.Popen(argv, cwd=cwd, env=env, stdout=log, stderr=log)

    def all_done():
        cards = [bt.request(srv.port, 'GET', '/v1/cards/' + i, op)[1] for i in ids]
        return all(c['state'] == 'done' and c['claim'] is None for c in cards) and cards
    cards = bt.wait_for(all_done, timeout=60)
    check(bool(cards), '%s: the example worker files every card into done' % name)
    for c in cards or []:
        r = bt.request(srv.port, 'GET', '/v1/runs/' + (c['last_run_id'] or 'none'), op)[1]
        check(r.get('status') == 'finished' and r.get('result') == {'echo': c['title']},
              '%s: the run of %s is finished with the result the example returns (%s)' % (
                  name, c['id'], r.get('result')))
    alive = p.poll() is None
    p.send_signal(signal.SIGTERM)
    try:
        rc = p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = p.wait()
    check(alive and rc == 0, '%s: still working until SIGTERM, then exits 0 (%s)' % (name, rc))


def main():
    tmp = tempfile.mkdtemp(prefix='boardd-readme-')
    import atexit
    atexit.register(lambda: bt.failed() or shutil.rmtree(tmp, ignore_errors=True))
    versions()
    tokens = os.path.join(tmp, 'tokens.json')
    worker = bt.token_add(BOARDD, tokens, 'readme-worker', ['worker'])
    op = bt.token_add(BOARDD, tokens, 'readme-op', ['operator', 'bot'])
    srv = bt.Server(BOARDD, os.path.join(tmp, 'data'), tokens, tmp).started()
    env = dict(bt.clean_env(), BOARDD_URL=srv.url, BOARDD_TOKEN=worker)
    try:
        py = block('clients/python/README.md', 'A worker in ten lines', 'python')
        check(len(py.strip().splitlines()) <= 10, 'the Python worker is at most ten lines')
        open(os.path.join(tmp, 'worker.py'), 'w').write(py)
        run_example(tmp, 'python', [sys.executable, 'worker.py'], tmp,
                    dict(env, PYTHONPATH=os.path.join(ROOT, 'clients', 'python')), srv, op)

        go = block('clients/go/README.md', 'A worker in twenty lines', 'go')
        check(len(go.strip().splitlines()) <= 20, 'the Go worker is at most twenty lines')
        gobin = shutil.which('go') or '/usr/local/go/bin/go'
        if not os.path.exists(gobin):
            bt.skip_or_fail('no Go toolchain: the Go example is not run')
        mod = os.path.join(tmp, 'gomod')
        os.makedirs(mod)
        open(os.path.join(mod, 'main.go'), 'w').write(go)
        open(os.path.join(mod, 'go.mod'), 'w').write(
            'module example.com/worker\n\ngo 1.21\n\n'
            'require github.com/boardd/boardd/clients/go v0.0.0\n\n'
            'replace github.com/boardd/boardd/clients/go => %s\n' % os.path.join(
                ROOT, 'clients', 'go'))
        genv = dict(os.environ, GOFLAGS='-mod=mod', GOTOOLCHAIN='local', CGO_ENABLED='0')
        genv.setdefault('GOPATH', os.path.join(tmp, 'gopath'))
        r = subprocess.run([gobin, 'build', '-o', 'worker', '.'], cwd=mod, env=genv,
                           capture_output=True, text=True, timeout=600)
        if check(r.returncode == 0, 'the Go example builds: %s' % r.stderr[-800:]):
            run_example(tmp, 'go', [os.path.join(mod, 'worker')], mod, env, srv, op)
    finally:
        srv.stop(timeout=20)
    sys.exit(bt.summary('client READMEs'))


if __name__ == '__main__':
    main()
