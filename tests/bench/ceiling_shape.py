#!/usr/bin/env python3
"""bench/ceiling answers the claim cycle as boardd does on the wire (bench/README.md, "The
ceiling"): the same status, the same headers (Date aside) in the same order, bodies with the
same members in the same order and of the same JSON types, and the same Content-Length, for
each request of bench/loadgen's cycle (create, claim, renew, the two owned state writes with
If-Match, release); the status alone for a stale epoch and a missing token. The ceiling is only a
ceiling while it does what boardd must: a header or a card member boardd gained and the
ceiling lacks makes it faster for nothing (it lacked X-Content-Type-Options, and a card's
claim "from", not_before and attempts, until stop 34).

    ceiling_shape.py BOARDD CEILING

Both listen on unix sockets in a temp dir; the ceiling runs once with its own loops and once
on libmicrohttpd (-m)."""
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time


def wait_socket(path, proc):
    for _ in range(200):
        if os.path.exists(path):
            return
        if proc.poll() is not None:
            sys.exit('ceiling_shape: a server exited before listening')
        time.sleep(0.05)
    sys.exit('ceiling_shape: no socket at %s' % path)


def shape(v):
    """The members in order with their JSON types, recursively; values aside."""
    if isinstance(v, dict):
        return [(k, shape(x)) for k, x in v.items()]
    if isinstance(v, list):
        return [shape(x) for x in v]
    return type(v).__name__


# Refusals the ceiling makes so that a cycle gone wrong is counted, never timed: their problem
# bodies are shorter than boardd's, and only their status is compared.
REFUSALS = ('stale epoch', 'no token')


def cycle(sock_path, worker, bot):
    """loadgen's requests, in its order; each answer as (status, header names, length, body).
    A connection each: boardd closes one after a refusal."""
    out = []

    def ask(name, method, path, tok, body, extra=None):
        data = json.dumps(body, separators=(',', ':')).encode()
        head = ['%s %s HTTP/1.1' % (method, path), 'Host: localhost',
                'Content-Type: application/json', 'Content-Length: %d' % len(data)]
        if tok:
            head.append('Authorization: Bearer ' + tok)
        head += ['%s: %s' % kv for kv in (extra or {}).items()]
        # The head and the body in one write: boardd refuses a missing token at the head and
        # closes, so a body written after it (as http.client does) may meet a closed socket.
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(10)
        sock.connect(sock_path)
        sock.sendall(('\r\n'.join(head) + '\r\n\r\n').encode() + data)
        r = http.client.HTTPResponse(sock)
        r.begin()
        raw = r.read()
        sock.close()
        names = [k for k, _ in r.getheaders() if k.lower() != 'date']
        out.append((name, r.status, names, r.getheader('Content-Length'), json.loads(raw)))
        return out[-1][4]

    card = '/v1/cards/shape-0'
    ask('create', 'POST', '/v1/cards', bot, {'id': 'shape-0', 'state': 'in_progress', 'title': 'bench'})
    epoch = ask('claim', 'POST', card + '/claim', worker, {'marker': 'bench-w0', 'lease_ms': 30000})['epoch']
    for k in range(3):
        ask('renew %d' % k, 'POST', card + '/renew', worker,
            {'marker': 'bench-w0', 'epoch': epoch, 'lease_ms': 30000})
    im = {'If-Match': '"%d"' % epoch}
    ask('to review', 'PATCH', card + '/state', worker, {'marker': 'bench-w0', 'to': 'review'}, im)
    ask('to in_progress', 'PATCH', card + '/state', worker, {'marker': 'bench-w0', 'to': 'in_progress'}, im)
    ask('release', 'POST', card + '/release', worker, {'marker': 'bench-w0', 'epoch': epoch})
    ask('stale epoch', 'POST', card + '/renew', worker, {'marker': 'bench-w0', 'epoch': 999})
    ask('no token', 'POST', card + '/claim', None, {})
    return out


def main():
    boardd, ceiling = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix='ceiling-shape.')
    procs = []
    try:
        toks = {}
        for role in ('worker', 'bot'):
            p = subprocess.run([boardd, 'token', 'add', '--tokens', tmp + '/tokens.json', '--name',
                                'bench-' + role, '--role', role], capture_output=True, text=True, check=True)
            toks[role] = p.stdout.strip().splitlines()[-1]
        servers = {'boardd': [boardd, '--store', 'fs:' + tmp + '/data', '--tokens', tmp + '/tokens.json',
                              '--listen', 'unix:' + tmp + '/boardd.sock']}
        for mode, flags in (('ceiling', []), ('ceiling-mhd', ['-m'])):
            os.mkdir(tmp + '/' + mode)
            servers[mode] = [ceiling, '-l', 'unix:%s/%s.sock' % (tmp, mode), '-D', tmp + '/' + mode] + flags
        answers = {}
        for name, argv in servers.items():
            log = open('%s/%s.log' % (tmp, name), 'w')
            proc = subprocess.Popen(argv, stdout=log, stderr=log)
            procs.append(proc)
            wait_socket('%s/%s.sock' % (tmp, name), proc)
            answers[name] = cycle('%s/%s.sock' % (tmp, name), toks['worker'], toks['bot'])
        bad = 0
        for mode in ('ceiling', 'ceiling-mhd'):
            for want, got in zip(answers['boardd'], answers[mode]):
                step = want[0]
                checks = (('status', 1, None), ('headers', 2, None),
                          ('Content-Length', 3, None), ('body', 4, shape))
                if step in REFUSALS:
                    checks = checks[:1]  # not in the measured cycle: the status alone
                for what, i, f in checks:
                    w, g = (f(want[i]), f(got[i])) if f else (want[i], got[i])
                    if w != g:
                        bad += 1
                        print('%s, %s: %s differs\n  boardd: %r\n  %s: %r' % (mode, step, what, w, mode, g))
        if bad:
            sys.exit('ceiling_shape: %d difference(s) from boardd' % bad)
        print('ceiling_shape: ok (%d answers each, both ceiling modes)' % len(answers['boardd']))
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__':
    main()
