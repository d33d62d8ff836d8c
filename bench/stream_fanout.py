#!/usr/bin/env python3
"""Event-stream fan-out (DESIGN §15): N open GET /v1/events/stream answers, M card creations;
prints how long until every stream has every event, the server's threads (no thread is held
per stream), and its CPU time while the streams sit idle and while they deliver.

usage: bench/stream_fanout.py path/to/boardd [-n STREAMS] [-m EVENTS]
Measured, not asserted (bench/README.md).
"""
import argparse
import asyncio
import http.client
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests',
                                'common'))
from boardd_test import Board  # noqa: E402


def proc_stat(pid):
    with open('/proc/%d/stat' % pid) as f:
        fields = f.read().rsplit(')', 1)[1].split()
    ticks = os.sysconf('SC_CLK_TCK')
    cpu = (int(fields[11]) + int(fields[12])) / ticks  # utime + stime
    with open('/proc/%d/status' % pid) as f:
        st = dict(line.split(':', 1) for line in f if ':' in line)
    return cpu, int(st['Threads']), int(st['VmRSS'].split()[0])


async def stream(port, token, want, done, start_seq):
    r, w = await asyncio.open_connection('127.0.0.1', port)
    w.write(('GET /v1/events/stream?after=%d HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n'
             'Accept: text/event-stream\r\n\r\n' % (start_seq, token)).encode())
    await w.drain()
    got = 0
    while got < want:
        line = await r.readline()
        if not line:
            break
        if line.startswith(b'event: card_created'):
            got += 1
    done.append(time.monotonic())
    w.close()


async def main_async(a, srv):
    seq = srv.ok('GET', '/v1/events?after=0&limit=1000')['next']
    done = []
    tasks = [asyncio.create_task(stream(srv.port, srv.tok['op'], a.events, done, seq))
             for _ in range(a.streams)]
    await asyncio.sleep(2)
    cpu0, threads, rss = proc_stat(srv.proc.pid)
    await asyncio.sleep(5)
    cpu1, _, _ = proc_stat(srv.proc.pid)
    print('open streams %d: server threads %d, RSS %d KiB, CPU while idle %.3f s over 5 s'
          % (a.streams, threads, rss, cpu1 - cpu0))
    loop = asyncio.get_running_loop()

    def writer():
        c = http.client.HTTPConnection('127.0.0.1', srv.port)
        for i in range(a.events):
            c.request('POST', '/v1/cards', body=json.dumps({'title': 'e%d' % i}),
                      headers={'Authorization': 'Bearer ' + srv.tok['bot'],
                               'Content-Type': 'application/json'})
            c.getresponse().read()
        return time.monotonic()
    t0 = time.monotonic()
    t_written = await loop.run_in_executor(None, writer)
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=300)
    cpu2, threads2, rss2 = proc_stat(srv.proc.pid)
    print('%d creations written in %.2f s; every stream had every event %.2f s after the first '
          'write (%.0f events/s delivered in all); server CPU %.2f s; threads %d; RSS %d KiB'
          % (a.events, t_written - t0, max(done) - t0,
             a.events * a.streams / (max(done) - t0), cpu2 - cpu1, threads2, rss2))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('boardd')
    ap.add_argument('-n', '--streams', type=int, default=100)
    ap.add_argument('-m', '--events', type=int, default=2000)
    a = ap.parse_args()
    srv = Board(a.boardd, ['--max-streams', str(a.streams), '--log-format', 'json'])
    try:
        asyncio.run(main_async(a, srv))
    finally:
        srv.stop()


if __name__ == '__main__':
    main()
