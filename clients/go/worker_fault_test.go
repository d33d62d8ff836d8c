// The worker under faults, against the fake of fake_test.go: an answer lost after the server
// executed the request (claim-next, POST /v1/runs, the final PATCH of the run, the final
// state write), the run's result or error refused by the server's limits, more than 1 000
// claims held, and a renew refused as a whole (401).
package boardd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"
)

func ok(context.Context, *Job) (any, error) { return map[string]int{"ok": 1}, nil }

func wantStats(t *testing.T, w *Worker, want Stats) {
	t.Helper()
	if got := w.Stats(); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
}

// A claim-next whose answer is lost is sent again with the same Idempotency-Key (the server
// answers the first claim again, no second card is claimed); the next claim-next has a key
// of its own.
func TestWorkerClaimNextRetryKeepsItsIdempotencyKey(t *testing.T) {
	for _, conc := range []int{1, 2} { // 2: with count
		t.Run(fmt.Sprint("concurrency ", conc), func(t *testing.T) {
			f := newFakeBoard(t, "c1", "c2", "c3", "c4", "c5")
			f.drop = func(route string, nth int) bool {
				return route == "POST /v1/boards/{b}/claim-next" && nth == 1
			}
			w := runWorker(t, f, ok, WorkerOpts{Concurrency: conc, MaxJobs: 2 * conc})
			reqs := f.requests("POST /v1/boards/{b}/claim-next")
			if len(reqs) < 3 {
				t.Fatalf("%d claim-next requests", len(reqs))
			}
			if reqs[0].key == "" || reqs[1].key != reqs[0].key || string(reqs[1].body) != string(reqs[0].body) {
				t.Errorf("the retry of a claim-next: key %q then %q (bodies %s, %s)", reqs[0].key,
					reqs[1].key, reqs[0].body, reqs[1].body)
			}
			if reqs[2].key == "" || reqs[2].key == reqs[0].key {
				t.Errorf("a new claim-next reuses the key %q", reqs[2].key)
			}
			for i := 1; i <= 5; i++ {
				c := f.card(fmt.Sprint("c", i))
				want := "done"
				if i > 2*conc {
					want = "ready"
				}
				if c.claimed || c.state != want {
					t.Errorf("card %s: state %s, claimed %v (want %s, not claimed)", c.id, c.state, c.claimed, want)
				}
			}
			wantStats(t, w, Stats{Claimed: int64(2 * conc), Succeeded: int64(2 * conc)})
		})
	}
}

// POST /v1/runs whose answer is lost is sent again with the same Idempotency-Key: one run.
func TestWorkerCreateRunRetryKeepsItsIdempotencyKey(t *testing.T) {
	f := newFakeBoard(t, "c1")
	f.drop = func(route string, nth int) bool { return route == "POST /v1/runs" && nth == 1 }
	w := runWorker(t, f, ok, WorkerOpts{MaxJobs: 1})
	reqs := f.requests("POST /v1/runs")
	if len(reqs) != 2 || reqs[0].key == "" || reqs[1].key != reqs[0].key {
		t.Fatalf("POST /v1/runs sent %d times, keys %v", len(reqs), reqs)
	}
	if f.nrun != 1 || f.runs["r1"].status != "finished" {
		t.Errorf("%d runs made; r1 %+v", f.nrun, f.runs["r1"])
	}
	wantStats(t, w, Stats{Claimed: 1, Succeeded: 1})
}

// The client never sends a POST without an Idempotency-Key twice by itself: a POST on a
// kept-alive connection that the server closes unanswered is ErrTransport, sent once.
func TestClientDoesNotReplayAPostWithoutKey(t *testing.T) {
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.Method == "GET" {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, "{}")
			return
		}
		posts.Add(1)
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
	}))
	defer srv.Close()
	c := New(srv.URL, "tok")
	ctx := context.Background()
	for _, send := range []func() error{
		func() error { _, err := c.Comment(ctx, "c1", "hi", "w1", 1); return err },
		func() error { _, err := c.CreateCards(ctx, []any{JSON{"title": "t"}}); return err },
		func() error { _, err := c.Release(ctx, "c1", "w1", 1, false); return err },
	} {
		if _, err := c.Healthz(ctx); err != nil { // the connection is kept alive
			t.Fatal(err)
		}
		posts.Store(0)
		if err := send(); !errors.Is(err, ErrTransport) {
			t.Errorf("an unanswered POST: %v", err)
		}
		if n := posts.Load(); n != 1 {
			t.Errorf("a POST without Idempotency-Key was sent %d times", n)
		}
	}
}

// A result over the server's 64 KiB (413) or one that is not JSON: the run is marked failed,
// saying why, and the card filed into OnFailure and released (it was left claimed).
func TestWorkerRefusedResultFailsTheRun(t *testing.T) {
	for name, res := range map[string]any{"413": strings.Repeat("x", 70000), "not JSON": make(chan int)} {
		t.Run(name, func(t *testing.T) {
			f := newFakeBoard(t, "c1")
			w := runWorker(t, f, func(context.Context, *Job) (any, error) { return res, nil },
				WorkerOpts{MaxJobs: 1})
			r := f.runs["r1"]
			if r == nil || r.status != "failed" || !strings.Contains(r.err, "result") ||
				!strings.Contains(r.err, "refused") || len(r.err) > 4096 {
				t.Errorf("the run: %+v", r)
			}
			if c := f.card("c1"); c.claimed || c.state != "blocked" {
				t.Errorf("card c1: state %s, claimed %v", c.state, c.claimed)
			}
			wantStats(t, w, Stats{Claimed: 1, Failed: 1})
		})
	}
}

// The handler's error text is cut to the server's 4 096 bytes at a character boundary.
func TestWorkerErrorTextCutByUTF8Bytes(t *testing.T) {
	long := strings.Repeat("€", 3000) // 9 000 bytes
	f := newFakeBoard(t, "c1")
	w := runWorker(t, f, func(context.Context, *Job) (any, error) { return nil, errors.New(long) },
		WorkerOpts{MaxJobs: 1})
	r := f.runs["r1"]
	if r == nil || r.status != "failed" {
		t.Fatalf("the run: %+v", r)
	}
	if len(r.err) > 4096 || len(r.err) < 4093 || !utf8.ValidString(r.err) ||
		strings.ContainsRune(r.err, utf8.RuneError) || !strings.HasPrefix(long, r.err) {
		t.Errorf("error of %d bytes: %q...", len(r.err), r.err[max(0, len(r.err)-12):])
	}
	if c := f.card("c1"); c.claimed || c.state != "blocked" {
		t.Errorf("card c1: state %s, claimed %v", c.state, c.claimed)
	}
	wantStats(t, w, Stats{Claimed: 1, Failed: 1})
}

// More than 1 000 claims held: renewed in requests of at most 1 000 tokens (the server
// refuses more), every claim acknowledged.
func TestWorkerRenewManyChunks(t *testing.T) {
	f := newFakeBoard(t)
	c := New(f.srv.URL, "tok")
	w := NewWorker(c, "default", ok, WorkerOpts{Marker: "w1", Logf: t.Logf})
	var held []*Job
	for i := 0; i < 2345; i++ {
		id := fmt.Sprint("c", i)
		f.cards[id] = &fakeCard{id: id, state: "ready", claimed: true, marker: "w1", epoch: int64(i + 1)}
		j := &Job{Card: Card{ID: id}, Token: Token{Marker: "w1", Epoch: int64(i + 1), LeaseMs: 60000}, w: w}
		j.Ctx, j.cancel = context.WithCancelCause(context.Background())
		j.leaseEnd = time.Now().Add(5 * time.Second)
		j.timer = time.AfterFunc(time.Hour, func() {})
		held = append(held, j)
	}
	if ok, _ := w.renew(held); !ok {
		t.Fatal("renew: no answer")
	}
	total := 0
	for _, r := range f.requests("POST /v1/claims/renew") {
		var b struct{ Tokens []TokenRef }
		json.Unmarshal(r.body, &b)
		if len(b.Tokens) > 1000 {
			t.Errorf("a renew of %d tokens", len(b.Tokens))
		}
		total += len(b.Tokens)
	}
	if total != len(held) {
		t.Errorf("%d tokens renewed of %d", total, len(held))
	}
	for _, j := range held {
		if j.isLost() || time.Until(j.end()) < 30*time.Second {
			t.Fatalf("card %s: lost %v, lease end in %v", j.Card.ID, j.isLost(), time.Until(j.end()))
		}
	}
}

// A renew refused as a whole with 401 (the worker's token removed) cancels the handlers at
// once, not at the lease end; nothing more is written for the card.
func TestWorkerRenewRefused401CancelsAtOnce(t *testing.T) {
	for _, st := range []int{401, 403} {
		t.Run(fmt.Sprint(st), func(t *testing.T) {
			f := newFakeBoard(t, "c1")
			f.leaseMs, f.renewAfterMs = 4000, 100
			f.pre = func(w http.ResponseWriter, r *http.Request, route string, body []byte) bool {
				if route != "POST /v1/claims/renew" {
					return false
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(st)
				io.WriteString(w, `{"code":"unauthorized","detail":"unknown token"}`)
				return true
			}
			var mu sync.Mutex
			var cause error
			var took time.Duration
			w := runWorker(t, f, func(ctx context.Context, j *Job) (any, error) {
				t0 := time.Now()
				select {
				case <-ctx.Done():
				case <-time.After(3 * time.Second):
				}
				mu.Lock()
				cause, took = context.Cause(ctx), time.Since(t0)
				mu.Unlock()
				return nil, ctx.Err()
			}, WorkerOpts{MaxJobs: 1})
			if !errors.Is(cause, ErrClaimLost) || took > 1500*time.Millisecond {
				t.Errorf("the handler's context: cause %v after %v", cause, took)
			}
			if n := len(f.requests("PATCH /v1/cards/{id}/state")) + len(f.requests("PATCH /v1/runs/{id}")); n != 0 {
				t.Errorf("%d writes after the loss", n)
			}
			wantStats(t, w, Stats{Claimed: 1, Lost: 1})
		})
	}
}

// The final write (state and release, or the retry release) executed but its answer lost:
// the retry's 409 is checked against the card, and the job counted as done, not lost.
func TestWorkerFinalWriteAnswerLost(t *testing.T) {
	for name, c := range map[string]struct {
		route string
		h     Handler
		state string
		want  Stats
	}{
		"state": {"PATCH /v1/cards/{id}/state", ok, "done", Stats{Claimed: 1, Succeeded: 1}},
		"release": {"POST /v1/cards/{id}/release", func(context.Context, *Job) (any, error) {
			return nil, fmt.Errorf("later: %w", ErrRetry)
		}, "ready", Stats{Claimed: 1, Retried: 1}},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeBoard(t, "c1")
			f.drop = func(route string, nth int) bool { return route == c.route && nth == 1 }
			w := runWorker(t, f, c.h, WorkerOpts{MaxJobs: 1})
			if n := len(f.requests(c.route)); n != 2 {
				t.Errorf("%s sent %d times", c.route, n)
			}
			if cd := f.card("c1"); cd.claimed || cd.state != c.state {
				t.Errorf("card c1: state %s, claimed %v", cd.state, cd.claimed)
			}
			wantStats(t, w, c.want)
		})
	}
}

// The run's final PATCH executed but its answer lost: the retry's run_final is checked
// against the run (it is the worker's own write, not an operator's cancel), and the card is
// filed and released.
func TestWorkerFinalRunPatchAnswerLost(t *testing.T) {
	f := newFakeBoard(t, "c1")
	f.drop = func(route string, nth int) bool { return route == "PATCH /v1/runs/{id}" && nth == 1 }
	w := runWorker(t, f, ok, WorkerOpts{MaxJobs: 1})
	if c := f.card("c1"); c.claimed || c.state != "done" {
		t.Errorf("card c1: state %s, claimed %v", c.state, c.claimed)
	}
	wantStats(t, w, Stats{Claimed: 1, Succeeded: 1})
}
