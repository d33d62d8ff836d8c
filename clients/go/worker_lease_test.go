// The worker's lease clock when claim-next's answer comes late (a long-poll answered late in
// its wait, a claim-next retried after a lost answer): the lease counts from the first try's
// send, the first renew goes out at once when that much of it has passed, and a lease over
// before the answer arrives is renewed first, a loss when that fails, never a crash; and a
// stop while a claim-next is out.
package boardd

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// claimNext503 answers the claim-next requests numbered in `nth` (1: the first) 503, as a
// store that is down would.
func claimNext503(nth ...int) func(http.ResponseWriter, *http.Request, string, []byte) bool {
	var n atomic.Int32
	return func(w http.ResponseWriter, r *http.Request, route string, body []byte) bool {
		if route != "POST /v1/boards/{b}/claim-next" {
			return false
		}
		k := int(n.Add(1))
		for _, x := range nth {
			if k == x {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(503)
				io.WriteString(w, `{"code":"store_unavailable","detail":"down"}`)
				return true
			}
		}
		return false
	}
}

// sleepOrCancel works d, or less when the job's context ends.
func sleepOrCancel(d time.Duration) Handler {
	return func(ctx context.Context, j *Job) (any, error) {
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(d):
			return map[string]int{"ok": 1}, nil
		}
	}
}

// A long-poll answered late in its wait: 2.5 s of a 3 s lease have passed (counted from the
// send) when the claim arrives. The first renew goes out at once, not renew_after_ms after the
// answer (past the local lease end), and the job outlives the first lease.
func TestWorkerLateClaimRenewsAtOnce(t *testing.T) {
	f := newFakeBoard(t, "c1")
	f.leaseMs, f.renewAfterMs = 3000, 1000
	var first atomic.Bool
	f.pre = func(w http.ResponseWriter, r *http.Request, route string, body []byte) bool {
		if route == "POST /v1/boards/{b}/claim-next" && first.CompareAndSwap(false, true) {
			time.Sleep(2500 * time.Millisecond) // the card came late in the wait
		}
		return false
	}
	w := runWorker(t, f, sleepOrCancel(1500*time.Millisecond), WorkerOpts{MaxJobs: 1})
	if c := f.card("c1"); c.claimed || c.state != "done" {
		t.Errorf("card c1: state %s, claimed %v", c.state, c.claimed)
	}
	if n := len(f.requests("POST /v1/claims/renew")); n == 0 {
		t.Errorf("no renew")
	}
	wantStats(t, w, Stats{Claimed: 1, Succeeded: 1})
}

// claim-next's answer lost, then three tries answered 503 (3 s of backoff): the replay's
// claim counts its 4 s lease from the first try, 1 s is left, and the first renew goes out at
// once (renew_after_ms after the answer would be past the lease end).
func TestWorkerRetriedClaimRenewsAtOnce(t *testing.T) {
	f := newFakeBoard(t, "c1")
	f.leaseMs, f.renewAfterMs = 4000, 1333
	f.drop = func(route string, nth int) bool {
		return route == "POST /v1/boards/{b}/claim-next" && nth == 1
	}
	f.pre = claimNext503(2, 3, 4)
	w := runWorker(t, f, sleepOrCancel(2*time.Second), WorkerOpts{MaxJobs: 1, LeaseMs: 4000})
	reqs := f.requests("POST /v1/boards/{b}/claim-next")
	if len(reqs) < 5 || reqs[4].key != reqs[0].key {
		t.Fatalf("%d claim-next requests; the fifth's key is not the first's", len(reqs))
	}
	if c := f.card("c1"); c.claimed || c.state != "done" {
		t.Errorf("card c1: state %s, claimed %v", c.state, c.claimed)
	}
	wantStats(t, w, Stats{Claimed: 1, Succeeded: 1})
}

// The same with a 1 s lease (and 1.4 s of backoff): it is over (locally) before the answer
// arrives. The claims are renewed before anything else: acknowledged, the jobs are done; not
// answered, each is lost and nothing is written for it. The lease timer of a lease over fires
// at once; here its function runs before the timer is even returned (as a busy machine may
// schedule it) — it used to stop a timer not yet set, a nil pointer, and the process died.
func TestWorkerClaimArrivingAfterItsLease(t *testing.T) {
	for _, renewed := range []bool{true, false} {
		t.Run(fmt.Sprint("renewed ", renewed), func(t *testing.T) {
			const n = 5
			var ids []string
			for i := 0; i < n; i++ {
				ids = append(ids, fmt.Sprint("c", i))
			}
			f := newFakeBoard(t, ids...)
			f.leaseMs, f.renewAfterMs = 1000, 333
			f.drop = func(route string, nth int) bool {
				return route == "POST /v1/boards/{b}/claim-next" && nth == 1
			}
			pre := claimNext503(2, 3)
			f.pre = func(w http.ResponseWriter, r *http.Request, route string, body []byte) bool {
				if !renewed && strings.HasSuffix(route, "/renew") {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(503)
					io.WriteString(w, `{"code":"store_unavailable","detail":"down"}`)
					return true
				}
				return pre(w, r, route, body)
			}
			var early atomic.Int32
			w := runWorkerWith(t, f, ok, WorkerOpts{Concurrency: n, MaxJobs: n, LeaseMs: 1000},
				func(w *Worker) {
					// a connection per request: the dropped claim-next reaches the worker as no
					// answer (net/http sends a keyed request again itself when a reused
					// connection breaks, and Run's board check leaves one to reuse)
					w.Client.HTTP.Transport.(*http.Transport).DisableKeepAlives = true
					w.afterFunc = func(d time.Duration, fn func()) *time.Timer {
						if d > 0 {
							return time.AfterFunc(d, fn)
						}
						early.Add(1)
						go fn()
						time.Sleep(20 * time.Millisecond) // the timer's goroutine runs first
						t := time.AfterFunc(time.Hour, fn)
						t.Stop()
						return t
					}
				})
			if renewed {
				for _, id := range ids {
					if c := f.card(id); c.claimed || c.state != "done" {
						t.Errorf("card %s: state %s, claimed %v", id, c.state, c.claimed)
					}
				}
				wantStats(t, w, Stats{Claimed: n, Succeeded: n})
				return
			}
			if early.Load() != n {
				t.Errorf("%d of %d lease timers armed over", early.Load(), n)
			}
			if k := len(f.requests("POST /v1/runs")); k != 0 {
				t.Errorf("%d runs created for claims whose lease was over", k)
			}
			wantStats(t, w, Stats{Claimed: n, Lost: n})
		})
	}
}

// Run's context ends while a claim-next is out, and its answer is lost: the worker asks once
// more with the same Idempotency-Key (the server answers the claim it made) and releases the
// card, rather than leaving it claimed.
func TestWorkerStopDuringClaimNextReleasesItsAnswer(t *testing.T) {
	f := newFakeBoard(t, "c1")
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var first atomic.Bool
	f.pre = func(w http.ResponseWriter, r *http.Request, route string, body []byte) bool {
		if route == "POST /v1/boards/{b}/claim-next" && first.CompareAndSwap(false, true) {
			stop() // the worker stops while this one is being served
		}
		return false
	}
	f.drop = func(route string, nth int) bool {
		return route == "POST /v1/boards/{b}/claim-next" && nth == 1
	}
	c := New(f.srv.URL, "tok")
	c.Timeout = 5 * time.Second
	w := NewWorker(c, "default", ok, WorkerOpts{Marker: "w1", WaitMs: 100, Grace: time.Second,
		Logf: t.Logf})
	runToEnd(t, w, ctx)
	reqs := f.requests("POST /v1/boards/{b}/claim-next")
	if len(reqs) != 2 || reqs[1].key != reqs[0].key {
		t.Errorf("%d claim-next requests (want the lost one and one more with its key)", len(reqs))
	}
	if cd := f.card("c1"); cd.claimed || cd.state != "ready" {
		t.Errorf("card c1: state %s, claimed %v (want ready, released)", cd.state, cd.claimed)
	}
	if k := len(f.requests("POST /v1/cards/{id}/release")); k != 1 {
		t.Errorf("%d releases", k)
	}
}
