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
import json
import os
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import boardd_test as bt  # noqa: E402

CARDS = 12
LEASE_MS = 1000


class Replica(bt.Server):
    def __init__(self, binary, uri, tokens, name, tmp):
        super().__init__(binary, store=uri, tokens=tokens, logdir=tmp, name=name,
                         extra=["--reaper=on", "--reaper-interval-ms", "3600000",
                                "--lease-min-ms", "1000"])
        ok, why = self.start(timeout=30)
        if not ok:
            raise SystemExit("replica %s did not start: %s" % (name, why))

    def call(self, method, path, token=None, body=None, headers=None):
        return bt.request(self.port, method, path, token, body, headers, timeout=30)[:2]

    def must(self, want, method, path, token=None, body=None, headers=None):
        st, out = self.call(method, path, token, body, headers)
        if st != want:
            raise SystemExit("%s %s: want %d, got %d: %s" % (method, path, want, st, out))
        return out

    def stop(self):
        code = super().stop(timeout=20)
        if code != 0:
            raise SystemExit("replica exited %s on SIGTERM:\n%s" % (code, self.log_tail(60)))


def main():
    binary = sys.argv[1]
    uri = bt.mongo_database(bt.mongo_uri(), "replicas")
    ferret = bt.mongo_is_ferretdb()

    with tempfile.TemporaryDirectory() as tmp:
        tokens = os.path.join(tmp, "tokens.json")
        worker = bt.token_add(binary, tokens, "worker", ["worker"])
        ops = bt.token_add(binary, tokens, "ops", ["operator", "bot"])
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
            # Both stop even when the first one's exit is the failure to report.
            try:
                a.stop()
            finally:
                b.stop()
    print("ok: %d cards, each filed by exactly one of two replicas; an agent token minted on "
          "one replica works on the other and dies on both with its claim" % CARDS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
