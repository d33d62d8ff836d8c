#!/usr/bin/env python3
"""HTTPS end to end: boardd with --tls-cert/--tls-key and a self-signed certificate made
here (the openssl CLI). Checks that curl --cacert gets answers, that TLS 1.1 is refused
(with a control proving the client speaks 1.1 to a server that allows it), that plain HTTP
on the TLS port is not served, and that SIGHUP serves a new pair on the same listener while
a bad new pair keeps the old one and says why.

Also a short run of the bench's claim cycle over HTTPS (loadgen -C): the bench client
verifies the certificate and every cycle succeeds.

And boardctl (cli/, when this tree builds it) with --cacert: its listing over HTTPS works,
and without the CA it is refused. Last, HTTPS and the event stream on --listen unix:PATH.

usage: test_tls.py path/to/boardd path/to/loadgen [path/to/boardctl]
"""
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'common'))
import boardd_test as bt  # noqa: E402
from boardd_test import check, free_port, make_pair, wait_for  # noqa: E402

BOARDD, LOADGEN = sys.argv[1], sys.argv[2]
BOARDCTL = sys.argv[3] if len(sys.argv) > 3 else ''
bt.verbose()


def served_cert(port):
    """The PEM certificate the server presents now (no verification)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(('127.0.0.1', port), timeout=10) as s:
        with ctx.wrap_socket(s) as t:
            return ssl.DER_cert_to_PEM_cert(t.getpeercert(binary_form=True))


def same_cert(pem_a, path_b):
    with open(path_b) as f:
        return ssl.PEM_cert_to_DER_cert(pem_a) == ssl.PEM_cert_to_DER_cert(f.read())


def curl(port, cafile, path, extra=()):
    return subprocess.run(['curl', '-sS', '--max-time', '10', '--cacert', cafile] +
                          list(extra) + ['https://127.0.0.1:%d%s' % (port, path)],
                          capture_output=True, text=True, timeout=30)


def gnutls_tls11(port, cafile, said=None):
    """True when a TLS 1.1-only handshake with 127.0.0.1:port completes; what gnutls-cli
    printed goes into `said` (a list) when given."""
    r = subprocess.run(['gnutls-cli', '--priority', 'NORMAL:-VERS-ALL:+VERS-TLS1.1',
                        '--x509cafile', cafile, '-p', str(port), '127.0.0.1'],
                       input='', capture_output=True, text=True, timeout=30)
    if said is not None:
        said[:] = [(r.stdout + r.stderr)[-600:]]
    return 'Handshake was completed' in r.stdout + r.stderr


def tls11_control(cert, key):
    """The control: gnutls-cli completes a TLS 1.1 handshake with a gnutls-serv that allows
    it. The port comes from free_port(), so another test starting at the same moment can
    take it before gnutls-serv binds (seen once in CI under ASan): then gnutls-serv exits and
    the control is tried again on a new port, up to three times. Returns (ok, detail)."""
    said = ['']
    for attempt in range(3):
        cport = free_port()
        ctl = subprocess.Popen(['gnutls-serv', '--priority', 'NORMAL:+VERS-TLS1.1',
                                '--x509certfile', cert, '--x509keyfile', key, '-p',
                                str(cport)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
        try:
            ok = wait_for(lambda: ctl.poll() is not None or gnutls_tls11(cport, cert, said),
                          20)
            if ok and ctl.poll() is None:
                return True, ''
        finally:
            if ctl.poll() is None:
                ctl.terminate()
            _, err = ctl.communicate(timeout=10)
        said.append('attempt %d: gnutls-serv rc=%s %s' % (attempt + 1, ctl.returncode,
                                                            (err or '')[-300:]))
    return False, ' | '.join(said)


def tls_raw(port, cafile, request, timeout=8.0):
    """Sends one raw request over TLS; the bytes read until the server closes (or timeout)."""
    ctx = ssl.create_default_context(cafile=cafile)
    got = b''
    with socket.create_connection(('127.0.0.1', port), timeout=timeout) as s:
        with ctx.wrap_socket(s, server_hostname='127.0.0.1') as t:
            t.sendall(request.encode())
            try:
                while True:
                    b = t.recv(65536)
                    if not b:
                        break
                    got += b
            except (socket.timeout, ssl.SSLError, ConnectionResetError):
                pass
    return got


def main():
    with tempfile.TemporaryDirectory(prefix='boardd-tls-') as tmp:
        cert1, key1 = make_pair(tmp, 'one', 'boardd-one')
        cert2, key2 = make_pair(tmp, 'two', 'boardd-two')
        live_cert, live_key = os.path.join(tmp, 'live.crt'), os.path.join(tmp, 'live.key')
        os.link(cert1, live_cert)
        os.link(key1, live_key)
        tokens = os.path.join(tmp, 'tokens.json')
        worker = bt.token_add(BOARDD, tokens, 'w', ['worker', 'bot'])
        lg_tokens = os.path.join(tmp, 'loadgen.tokens')
        with open(lg_tokens, 'w') as f:
            f.write('worker %s\nbot %s\n' % (worker, worker))

        # Control: this gnutls-cli does speak TLS 1.1 to a server that allows it, so its
        # refusal below is boardd's priority string, not the client's policy.
        ok, detail = tls11_control(cert1, key1)
        check(ok, 'control: gnutls-cli completes a TLS 1.1 handshake with gnutls-serv ' + detail)

        srv = bt.Server(BOARDD, os.path.join(tmp, 'data'), tokens, tmp,
                                 extra=['--tls-cert', live_cert, '--tls-key', live_key],
                                 cafile=cert1)
        ok, detail = srv.start()
        check(ok, 'boardd starts with --tls-cert/--tls-key ' + detail)
        if not ok:
            return
        port = srv.port
        try:
            r = curl(port, cert1, '/healthz')
            check(r.returncode == 0 and '"ok"' in r.stdout, 'curl --cacert: /healthz over '
                  'https ' + r.stderr)
            r = curl(port, cert1, '/v1/cards', ['-H', 'Authorization: Bearer ' + worker])
            check(r.returncode == 0 and '"cards"' in r.stdout, 'curl --cacert: an '
                  'authenticated route over https ' + r.stderr)
            r = curl(port, cert1, '/healthz', ['--tlsv1.3'])
            check(r.returncode == 0, 'TLS 1.3 is served ' + r.stderr)
            r = curl(port, cert1, '/healthz', ['--tlsv1.2', '--tls-max', '1.2'])
            check(r.returncode == 0, 'TLS 1.2 is served ' + r.stderr)
            check(not gnutls_tls11(port, cert1), 'TLS 1.1 is refused')

            # The bench client over HTTPS: a short claim cycle, every answer as expected.
            r = subprocess.run([LOADGEN, '-p', str(port), '-T', lg_tokens, '-C', cert1,
                                '-w', '2', '-d', '1', '-W', '0', '-P', 'tls'],
                               capture_output=True, text=True, timeout=120)
            res = re.search(r'^RESULT .*\bcycles=(\d+) .*\berrors=(\d+) ', r.stdout, re.M)
            check(r.returncode == 0 and res and int(res.group(1)) > 0 and res.group(2) == '0',
                  'loadgen -C: the claim cycle over https (%s)' %
                  (res.group(0)[:120] if res else r.stdout[-300:] + r.stderr[-300:]))
            r = subprocess.run([LOADGEN, '-p', str(port), '-T', lg_tokens, '-C', cert2,
                                '-w', '1', '-d', '1', '-W', '0', '-P', 'tls2'],
                               capture_output=True, text=True, timeout=120)
            check(r.returncode != 0 or ' errors=0 ' not in r.stdout,
                  'loadgen -C with another CA: refused (certificate verified)')

            # boardctl over HTTPS, when this tree has it.
            if BOARDCTL and os.path.exists(BOARDCTL):
                tf = os.path.join(tmp, 'worker.token')
                with open(tf, 'w') as f:
                    f.write(worker + '\n')
                url = 'https://127.0.0.1:%d' % port
                r = subprocess.run([BOARDCTL, '--url', url, '--token-file', tf, '--cacert', cert1,
                                    'cards', 'ls'], capture_output=True, text=True, timeout=60)
                check(r.returncode == 0, 'boardctl --cacert: cards ls over https (%s)' %
                      r.stderr.strip()[-200:])
                r = subprocess.run([BOARDCTL, '--url', url, '--token-file', tf, 'cards', 'ls'],
                                   capture_output=True, text=True, timeout=60)
                check(r.returncode != 0, 'boardctl without --cacert: the certificate is refused')
            else:
                print('note: no boardctl in this build (%s)' % (BOARDCTL or 'not given'))

            # Plain HTTP to the TLS port: never an HTTP answer.
            with socket.create_connection(('127.0.0.1', port), timeout=10) as s:
                s.sendall(b'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n')
                got = b''
                try:
                    while len(got) < 4096:
                        b = s.recv(4096)
                        if not b:
                            break
                        got += b
                except (socket.timeout, ConnectionResetError):
                    pass
            check(b'HTTP/' not in got and b'"ok"' not in got,
                  'plain HTTP on the TLS port is not served (got %r)' % got[:60])

            # The request-target limits over TLS (no raw answer there): boardd's 414
            # problem+json through libmicrohttpd; a query too large for its buffer, which
            # 0.9.75 would leave unanswered until the headers deadline, is closed at once.
            for label, target in (('a 9000-byte target', '/v1/cards?x=' + 'a' * 9000),
                                  ('100 query parameters',
                                   '/v1/cards?' + '&'.join('p%d=1' % i for i in range(100)))):
                t0 = time.monotonic()
                got = tls_raw(port, cert1, 'GET %s HTTP/1.1\r\nHost: t\r\nAuthorization: '
                              'Bearer %s\r\n\r\n' % (target, worker))
                head, _, body = got.partition(b'\r\n\r\n')
                check(head.startswith(b'HTTP/1.1 414 ') and
                      b'Content-Type: application/problem+json' in head and
                      b'"status":414' in body and time.monotonic() - t0 < 5,
                      'https: %s -> 414 problem+json, closed (%r)' % (label, got[:200]))
            t0 = time.monotonic()
            got = tls_raw(port, cert1, 'GET /v1/cards?%s HTTP/1.1\r\nHost: t\r\n\r\n'
                          % '&'.join('p%d=1' % i for i in range(300)))
            check(got == b'' and time.monotonic() - t0 < 5,
                  'https: 300 query parameters -> closed at once (%r, %.1f s)'
                  % (got[:100], time.monotonic() - t0))

            # SIGHUP with a new pair: new handshakes get it, the listener stays.
            check(same_cert(served_cert(port), cert1), 'the first certificate is served')
            kept = socket.create_connection(('127.0.0.1', port), timeout=10)
            os.replace(cert2, live_cert)
            os.replace(key2, live_key)
            srv.proc.send_signal(signal.SIGHUP)
            check(wait_for(lambda: 'SIGHUP: tls: certificate and key re-read' in
                           srv.log_text()), 'SIGHUP: the reload is logged')
            check(same_cert(served_cert(port), live_cert), 'after SIGHUP the new '
                  'certificate is served')
            r = curl(port, live_cert, '/healthz')
            check(r.returncode == 0, 'curl --cacert NEW after SIGHUP ' + r.stderr)
            r = curl(port, cert1, '/healthz')
            check(r.returncode != 0, 'curl --cacert OLD after SIGHUP fails verification')
            # A connection accepted before the reload still handshakes (and gets the new
            # pair): the listener was never replaced.
            ctx = ssl.create_default_context(cafile=live_cert)
            with ctx.wrap_socket(kept, server_hostname='127.0.0.1') as t:
                t.sendall(b'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n'
                          b'Connection: close\r\n\r\n')
                check(b' 200 ' in t.recv(4096), 'a connection accepted before SIGHUP is '
                      'served')

            # A bad new pair (the key of another certificate): the old pair stays.
            os.replace(key1, live_key)
            srv.proc.send_signal(signal.SIGHUP)
            check(wait_for(lambda: re.search(r'SIGHUP: tls: certificate .* with key .*; keeping '
                                             r'the ones loaded before', srv.log_text())),
                  'SIGHUP with a mismatched key: refused, logged with the reason')
            check(same_cert(served_cert(port), live_cert), 'the previous certificate is '
                  'still served')
            r = curl(port, live_cert, '/metrics')
            check('boardd_tls_reloads_total{result="ok"} 1' in r.stdout and
                  'boardd_tls_reloads_total{result="error"} 1' in r.stdout,
                  'reload counters in /metrics')
            check('boardd_tls_certificate_not_after_seconds ' in r.stdout,
                  'certificate expiry in /metrics')
            check(srv.alive(), 'boardd is still running')
        finally:
            code = srv.stop()
            check(code == 0, 'clean exit on SIGTERM (%s)' % code)
            if bt.failed():
                print(srv.log_tail(40))

        # Both or neither: a clear refusal at start.
        r = subprocess.run([BOARDD, '--listen', '127.0.0.1:0', '--store', 'fs:' + tmp +
                            '/d2', '--tls-cert', cert1], capture_output=True, text=True,
                           timeout=30, env=bt.clean_env())
        check(r.returncode == 2 and '--tls-key' in r.stderr, '--tls-cert alone: exit 2')
        r = subprocess.run([BOARDD, '--listen', '127.0.0.1:0', '--store', 'fs:' + tmp +
                            '/d3', '--tls-cert', cert1, '--tls-key', os.path.join(tmp, 'no')],
                           capture_output=True, text=True, timeout=30,
                           env=bt.clean_env())
        check(r.returncode != 0 and 'cannot read' in r.stderr, 'an unreadable key: refused '
              'at start, saying why (%s)' % r.stderr.strip()[-120:])
        unix_tls(tmp, tokens, worker, *make_pair(tmp, 'unix', 'boardd-unix'))


def unix_tls(tmp, tokens, worker, cert, key):
    """HTTPS on --listen unix:PATH: curl --unix-socket verifies the certificate, and the
    event stream (SSE) opens over the socket."""
    sock = os.path.join(tmp, 'tls.sock')
    log_path = os.path.join(tmp, 'unix.log')
    with open(log_path, 'w') as log:
        p = subprocess.Popen([BOARDD, '--listen', 'unix:' + sock, '--store', 'fs:' + tmp +
                              '/d4', '--tokens', tokens, '--tls-cert', cert, '--tls-key', key],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                             env=bt.clean_env())
    try:
        if not check(wait_for(lambda: 'listening on unix:%s over https' % sock in
                              open(log_path).read(), 15), 'boardd serves HTTPS on unix:' + sock):
            print(open(log_path).read())
        base = ['curl', '-sS', '--max-time', '10', '--unix-socket', sock, '--cacert', cert]
        r = subprocess.run(base + ['https://127.0.0.1/healthz'], capture_output=True,
                           text=True, timeout=30)
        check(r.returncode == 0 and '"ok"' in r.stdout, 'HTTPS over the socket: %s %s' % (
            r.stdout, r.stderr))
        r = subprocess.run(base + ['-N', '--max-time', '2', '-H', 'Authorization: Bearer ' +
                                   worker, 'https://127.0.0.1/v1/events/stream?board=default'],
                           capture_output=True, text=True, timeout=30)
        check(': stream open' in r.stdout, 'the event stream over the socket: %s %s' % (
            r.stdout[:200], r.stderr))
        p.send_signal(signal.SIGTERM)
        check(p.wait(timeout=20) == 0 and not os.path.exists(sock),
              'clean stop, socket file removed')
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


if __name__ == '__main__':
    main()
    sys.exit(bt.summary('tls'))
