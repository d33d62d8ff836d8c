#!/usr/bin/env python3
"""Two boardd replicas on one MongoDB database, each with its reaper on.

A worker claims cards through replica A, records finished runs, and dies (stops renewing).
Once the leases have run out on the database server's clock, both replicas run reaper passes
and the test shows every card is filed exactly once: one reaper transfers and files it, the
other skips it cleanly (listed nothing, or lost the transfer CAS), with no error.

On FerretDB (BOARDD_TEST_MONGO_IS_FERRETDB=1), whose single-document updates are not atomic
under concurrency, the two passes run one after the other; on MongoDB they run at the same
time, so both reapers race for the same cards.

usage: two_replicas.py BOARDD_BINARY    (needs BOARDD_TEST_MONGO_URI; skips with 77 without it,
                                         unless CI=true, where a missing server fails)
"""
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

CARDS = 12
LEASE_MS = 1000


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Replica:
    def __init__(self, binary, uri, tokens, name, tmp):
        self.port = free_port()
        self.log = open(os.path.join(tmp, name + ".log"), "w+")
        self.proc = subprocess.Popen(
            [binary, "--listen", "127.0.0.1:%d" % self.port, "--store", uri,
             "--tokens", tokens, "--reaper=on", "--reaper-interval-ms", "3600000",
             "--lease-min-ms", "1000", "--threads", "4"],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit("replica %s exited at start:\n%s" % (name, self.tail()))
            try:
                if self.call("GET", "/readyz")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise SystemExit("replica %s never became ready:\n%s" % (name, self.tail()))

    def tail(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-3000:]

    def call(self, method, path, token=None, body=None, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        h = dict(headers or {})
        if token:
            h["Authorization"] = "Bearer " + token
        data = None
        if body is not None:
            data = json.dumps(body)
            h["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=h)
        r = conn.getresponse()
        raw = r.read()
        conn.close()
        try:
            return r.status, json.loads(raw) if raw else None
        except ValueError:
            return r.status, raw

    def must(self, want, method, path, token=None, body=None, headers=None):
        st, out = self.call(method, path, token, body, headers)
        if st != want:
            raise SystemExit("%s %s: want %d, got %d: %s" % (method, path, want, st, out))
        return out

    def stop(self):
        self.proc.terminate()
        try:
            code = self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = -9
        if code != 0:
            raise SystemExit("replica exited %s on SIGTERM:\n%s" % (code, self.tail()))


def token_add(binary, tokens, name, *roles):
    args = [binary, "token", "add", "--tokens", tokens, "--name", name]
    for r in roles:
        args += ["--role", r]
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout.strip()


def main():
    binary = sys.argv[1]
    uri = os.environ.get("BOARDD_TEST_MONGO_URI")
    if not uri:
        if os.environ.get("CI") == "true":
            print("FAIL: BOARDD_TEST_MONGO_URI is not set; the Mongo suite must run in CI")
            return 1
        print("SKIP: BOARDD_TEST_MONGO_URI is not set")
        return 77
    ferret = os.environ.get("BOARDD_TEST_MONGO_IS_FERRETDB") == "1"
    parts = urllib.parse.urlsplit(uri)
    db = "boardd_replicas_%d_%d" % (os.getpid(), int(time.time()))
    uri = urllib.parse.urlunsplit((parts.scheme, parts.netloc, "/" + db, parts.query, ""))

    with tempfile.TemporaryDirectory() as tmp:
        tokens = os.path.join(tmp, "tokens.json")
        worker = token_add(binary, tokens, "worker", "worker")
        ops = token_add(binary, tokens, "ops", "operator", "bot")
        a = Replica(binary, uri, tokens, "a", tmp)
        b = Replica(binary, uri, tokens, "b", tmp)
        try:
            for i in range(CARDS):
                cid, run = "card-%d" % i, "run-%d" % i
                a.must(201, "POST", "/v1/cards", ops, {"id": cid, "state": "in_progress"})
                claim = a.must(200, "POST", "/v1/cards/%s/claim" % cid, worker,
                               {"marker": "worker-%d" % i, "lease_ms": LEASE_MS})
                a.must(201, "POST", "/v1/runs", worker,
                       {"id": run, "card_id": cid, "marker": "worker-%d" % i,
                        "status": "running", "lease_ms": LEASE_MS})
                a.must(200, "PUT", "/v1/cards/%s/last-run" % cid, worker,
                       {"marker": "worker-%d" % i, "run_id": run},
                       {"If-Match": '"%d"' % claim["epoch"]})
                a.must(200, "PATCH", "/v1/runs/%s" % run, worker,
                       {"marker": "worker-%d" % i, "status": "finished",
                        "lease_ms": LEASE_MS})
            # The worker dies here: nothing renews. Wait out the lease on the server clock.
            time.sleep(LEASE_MS / 1000.0 * 2 + 0.5)

            results = {}

            def run_pass(rep, key):
                results[key] = rep.must(200, "POST", "/v1/reaper/pass", ops)

            if ferret:
                print("note: FerretDB: the two passes run one after the other "
                      "(its single-document updates are not atomic under concurrency)")
                run_pass(a, "a")
                run_pass(b, "b")
            else:
                ta = threading.Thread(target=run_pass, args=(a, "a"))
                tb = threading.Thread(target=run_pass, args=(b, "b"))
                ta.start(); tb.start(); ta.join(); tb.join()
            sa, sb = results["a"], results["b"]
            print("replica a:", json.dumps(sa))
            print("replica b:", json.dumps(sb))
            assert sa["errors"] == 0 and sb["errors"] == 0, "a reaper reported errors"
            assert sa["transferred"] + sb["transferred"] == CARDS, "every card transferred once"
            assert sa["actions"]["complete"] + sb["actions"]["complete"] == CARDS
            # the other reaper skipped cleanly: nothing listed, or a lost CAS counted as skip
            assert sa["listed"] - sa["transferred"] == sa["skipped"]
            assert sb["listed"] - sb["transferred"] == sb["skipped"]
            if ferret:
                assert sb["transferred"] == 0 and sb["listed"] == 0

            for i in range(CARDS):
                card = b.must(200, "GET", "/v1/cards/card-%d" % i, ops)
                assert card["state"] == "done", card
                assert card["state_reason"] == "run_finished", card
                assert card["claim"] is None, card
            # The Mongo twin moves each write's events from the card's outbox to the tail
            # with their seq; read the whole tail, following `next` (bounded).
            events, after, deadline = [], 0, time.time() + 15
            while time.time() < deadline:
                page = b.must(200, "GET", "/v1/events?after=%d&limit=1000&wait_ms=500" % after,
                              ops)
                events += page["events"]
                after = page["next"]
                done = [e for e in events if e["type"] == "card_state_changed"
                        and e["payload"].get("to") == "done"]
                if not page["events"] and len(done) >= CARDS:
                    break
            for i in range(CARDS):
                cid = "card-%d" % i
                reclaims = [e for e in events if e["card_id"] == cid and e["type"] == "card_claimed"
                            and "reclaimed_from" in e["payload"]]
                filings = [e for e in events if e["card_id"] == cid
                           and e["type"] == "card_state_changed" and e["payload"].get("to") == "done"]
                assert len(reclaims) == 1, (cid, reclaims)
                assert len(filings) == 1, (cid, len(events), events[-1]["seq"] if events else 0,
                                           sorted(set(e["type"] for e in events)))

            # Agent tokens (DESIGN §13): minted on one replica, honoured by the other (the
            # signing key is the store's shared secret, the claim is read from the store),
            # and dead on both once the claim is released through either.
            a.must(201, "POST", "/v1/cards", ops, {"id": "agent-card", "state": "ready"})
            claim = a.must(200, "POST", "/v1/cards/agent-card/claim", worker,
                           {"marker": "w-agent", "lease_ms": 60000})
            minted = a.must(201, "POST", "/v1/cards/agent-card/agent-tokens", worker,
                            {"marker": "w-agent", "caps": ["board.read", "board.label"]},
                            {"If-Match": '"%d"' % claim["epoch"]})
            agent = minted["token"]
            b.must(200, "GET", "/v1/cards/agent-card", agent)
            card = b.must(200, "PATCH", "/v1/cards/agent-card/labels", agent, {"add": ["ai"]})
            assert card["labels"] == ["ai"], card
            b.must(200, "POST", "/v1/cards/agent-card/release", worker,
                   {"marker": "w-agent", "epoch": claim["epoch"]})
            a.must(401, "GET", "/v1/cards/agent-card", agent)
            b.must(401, "GET", "/v1/cards/agent-card", agent)
        finally:
            a.stop()
            b.stop()
    print("ok: %d cards, each filed by exactly one of two replicas; an agent token minted on "
          "one replica works on the other and dies on both with its claim" % CARDS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
