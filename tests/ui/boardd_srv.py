"""A boardd process for the UI and stream tests: a temp data dir, a tokens file with one token
per role (an operator scoped to board `other`, a bot scoped to `other` and `third`), 127.0.0.1 on a free port, and a small JSON
client. Standard library only.
"""
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time


class Boardd:
    ROLES = {'op': ['operator'], 'bot': ['bot'], 'worker': ['worker'], 'worker2': ['worker']}

    def __init__(self, binary, extra=(), mongo_uri=None):
        """mongo_uri: run on the Mongo twin, in a fresh database named after the URI's."""
        self.binary = binary
        self.dir = tempfile.mkdtemp(prefix='boardd-ui-')
        store = 'fs:' + self.dir + '/data'
        if mongo_uri:
            base, _, query = mongo_uri.partition('?')
            head, _, db = base.rstrip('/').rpartition('/')
            store = '%s/%s_ui%d%s' % (head, db or 'boardd', os.getpid(),
                                      '?' + query if query else '')
        self.tokens_file = os.path.join(self.dir, 'tokens.json')
        self.tok = {}
        for name, roles in self.ROLES.items():
            self.tok[name] = self._token_add(name, roles, [])
        self.tok['scoped'] = self._token_add('scoped', ['operator', 'bot'], ['other'])
        self.tok['scoped2'] = self._token_add('scoped2', ['bot'], ['other', 'third'])
        env = {k: v for k, v in os.environ.items()
               if not k.startswith('BOARDD_') and k != 'ITERION_BOARD_CLAIM_REAPER'}
        self.proc = subprocess.Popen(
            [binary, '--listen', '127.0.0.1:0', '--store', store,
             '--tokens', self.tokens_file, '--threads', '2', '--log-format', 'text'] + list(extra),
            stderr=subprocess.PIPE, text=True, env=env)
        self.lines = []
        self.port = None
        deadline = time.time() + 15
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.lines.append(line)
            m = re.search(r'listening on .* \(port (\d+)\)', line)
            if m:
                self.port = int(m.group(1))
                break
        if not self.port:
            self.stop()
            raise SystemExit('boardd did not start: ' + ''.join(self.lines))
        threading.Thread(target=self._drain, daemon=True).start()
        self.url = 'http://127.0.0.1:%d' % self.port

    def _token_add(self, name, roles, boards):
        args = [self.binary, 'token', 'add', '--tokens', self.tokens_file, '--name', name]
        for r in roles:
            args += ['--role', r]
        for b in boards:
            args += ['--board', b]
        out = subprocess.run(args, capture_output=True, text=True, check=True)
        return out.stdout.strip().splitlines()[-1].strip()

    def _drain(self):
        for line in self.proc.stderr:
            self.lines.append(line)

    def stop(self):
        """SIGTERM; returns the exit status (0: a clean shutdown, and under ASan no leak)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
        if self.proc.returncode != 0:
            time.sleep(0.2)  # the drain thread collects the last lines
            print(''.join(self.lines[-40:]), file=sys.stderr)
        return self.proc.returncode

    def call(self, method, path, who='op', body=None, headers=None):
        """(status, parsed JSON or text, headers dict) of one request."""
        c = http.client.HTTPConnection('127.0.0.1', self.port, timeout=15)
        h = {'Authorization': 'Bearer ' + self.tok[who]} if who else {}
        h.update(headers or {})
        data = None
        if body is not None:
            data = json.dumps(body)
            h['Content-Type'] = 'application/json'
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        raw = r.read().decode()
        hdrs = {k.lower(): v for k, v in r.getheaders()}
        c.close()
        try:
            return r.status, json.loads(raw) if raw else None, hdrs
        except ValueError:
            return r.status, raw, hdrs

    def ok(self, method, path, who='op', body=None, headers=None, want=(200, 201, 204)):
        st, j, _ = self.call(method, path, who, body, headers)
        if st not in want:
            raise AssertionError('%s %s as %s: %s %s' % (method, path, who, st, j))
        return j

    # ---- worker flows ----

    def claim(self, cid, marker='w1', lease_ms=60000, who='worker'):
        return self.ok('POST', '/v1/cards/%s/claim' % cid, who, {'marker': marker, 'lease_ms': lease_ms})

    def owned(self, method, path, epoch, body, who='worker'):
        return self.ok(method, path, who, body, {'If-Match': '"%d"' % epoch})

    def run_with_status(self, cid, epoch, rid, status, marker='w1', who='worker'):
        self.ok('POST', '/v1/runs', who, {'card_id': cid, 'marker': marker, 'status': 'running', 'id': rid})
        self.owned('PUT', '/v1/cards/%s/last-run' % cid, epoch, {'marker': marker, 'run_id': rid}, who)
        if status != 'running':
            self.ok('PATCH', '/v1/runs/' + rid, who, {'marker': marker, 'status': status})

    def give_up(self, cid, title, state='in_progress', to='blocked'):
        """A card stamped gave_up and filed into `to` by its (worker) holder."""
        self.ok('POST', '/v1/cards', 'bot', {'id': cid, 'title': title, 'state': state})
        epoch = self.claim(cid)['epoch']
        self.owned('PUT', '/v1/cards/%s/gave-up' % cid, epoch,
                   {'marker': 'w1', 'gave_up': {'reason': 'run_pruned', 'run_id': 'r-gone'}})
        self.owned('PATCH', '/v1/cards/%s/state' % cid, epoch, {'marker': 'w1', 'to': to, 'reason': 'test'})
        self.ok('POST', '/v1/cards/%s/release' % cid, 'worker', {'marker': 'w1', 'epoch': epoch})
