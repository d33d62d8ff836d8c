// The worker against a server that fails for a while, on the fake of fake_test.go: a 5xx (or
// 429) is waited out with a backoff, or the answer's Retry-After when longer, the claim renewed
// meanwhile, for writeRetryFor at most; a renew refused after the job's own release is not a
// loss; a run_final that follows the worker's own final write is not an operator's cancel.
// And the client: a DELETE whose answer is lost is not sent again (no 404 of a re-send).
package boardd

import (
	"context"
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
)

type preFunc = func(http.ResponseWriter, *http.Request, string, []byte) bool

// answerNth answers the requests of route numbered in nth (1: the first; none: every one) with
// status and a problem of code, and Retry-After (seconds) when retryAfter > 0, without
// executing them.
func answerNth(route string, status int, code string, retryAfter int, nth ...int) preFunc {
	var n atomic.Int32
	return func(w http.ResponseWriter, r *http.Request, rt string, body []byte) bool {
		if rt != route {
			return false
		}
		k, hit := int(n.Add(1)), len(nth) == 0
		for _, x := range nth {
			hit = hit || k == x
		}
		if !hit {
			return false
		}
		if retryAfter > 0 {
			w.Header().Set("Retry-After", fmt.Sprint(retryAfter))
		}
		if code == "" { // a proxy's answer: no problem body
			w.WriteHeader(status)
			io.WriteString(w, "<html>bad gateway</html>")
			return true
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"status":%d,"code":%q,"detail":"injected"}`, status, code)
		return true
	}
}

// anyOf: the first of pres that answers the request.
func anyOf(pres ...preFunc) preFunc {
	return func(w http.ResponseWriter, r *http.Request, route string, body []byte) bool {
		for _, p := range pres {
			if p(w, r, route, body) {
				return true
			}
		}
		return false
	}
}

// A 5xx on the final writes (the run's outcome, the filing with release, the retry release) is
// sent again after a backoff, not taken for a refusal: the card is filed, the job counted done.
func TestWorkerFinalWrite5xxIsRetried(t *testing.T) {
	retry := func(context.Context, *Job) (any, error) { return nil, fmt.Errorf("later: %w", ErrRetry) }
	for name, c := range map[string]struct {
		route, code string
		status      int
		h           Handler
		state       string
		want        Stats
	}{
		"run 500":     {"PATCH /v1/runs/{id}", "internal", 500, ok, "done", Stats{Claimed: 1, Succeeded: 1}},
		"state 502":   {"PATCH /v1/cards/{id}/state", "", 502, ok, "done", Stats{Claimed: 1, Succeeded: 1}},
		"release 500": {"POST /v1/cards/{id}/release", "internal", 500, retry, "ready", Stats{Claimed: 1, Retried: 1}},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeBoard(t, "c1")
			f.pre = answerNth(c.route, c.status, c.code, 0, 1, 2)
			w := runWorker(t, f, c.h, WorkerOpts{MaxJobs: 1})
			if n := len(f.requests(c.route)); n != 3 {
				t.Errorf("%s sent %d times, want 3", c.route, n)
			}
			if cd := f.card("c1"); cd.claimed || cd.state != c.state {
				t.Errorf("card c1: state %s, claimed %v (want %s, released)", cd.state, cd.claimed, c.state)
			}
			wantStats(t, w, c.want)
		})
	}
}

// A final write that fails for longer than writeRetryFor is given up (counted an error), after
// several tries.
func TestWorkerFinalWriteRetryIsBounded(t *testing.T) {
	defer func(d time.Duration) { writeRetryFor = d }(writeRetryFor)
	writeRetryFor = 700 * time.Millisecond
	f := newFakeBoard(t, "c1")
	f.pre = answerNth("PATCH /v1/runs/{id}", 500, "internal", 0)
	w := runWorker(t, f, ok, WorkerOpts{MaxJobs: 1})
	if n := len(f.requests("PATCH /v1/runs/{id}")); n < 3 || n > 6 {
		t.Errorf("the run's PATCH sent %d times in %v", n, writeRetryFor)
	}
	wantStats(t, w, Stats{Claimed: 1, Errors: 1})
}

// A 429 on claim-next and a 503 on the run's final PATCH, each with Retry-After: 1: the next
// try waits that second, not the backoff's 200 ms and 100 ms.
func TestWorkerHonoursRetryAfter(t *testing.T) {
	f := newFakeBoard(t, "c1")
	f.pre = anyOf(answerNth("POST /v1/boards/{b}/claim-next", 429, "too_many_requests", 1, 1),
		answerNth("PATCH /v1/runs/{id}", 503, "store_unavailable", 1, 1))
	w := runWorker(t, f, ok, WorkerOpts{MaxJobs: 1})
	for _, route := range []string{"POST /v1/boards/{b}/claim-next", "PATCH /v1/runs/{id}"} {
		reqs := f.requests(route)
		if len(reqs) < 2 {
			t.Errorf("%s sent %d times", route, len(reqs))
			continue
		}
		if gap := reqs[1].at.Sub(reqs[0].at); gap < 950*time.Millisecond || gap > 3*time.Second {
			t.Errorf("%s: the try after Retry-After: 1 came %v later", route, gap)
		}
	}
	if c := f.card("c1"); c.claimed || c.state != "done" {
		t.Errorf("card c1: state %s, claimed %v", c.state, c.claimed)
	}
	wantStats(t, w, Stats{Claimed: 1, Succeeded: 1})
}

// A renew sent before the job filed and released its card, answered after: the refusal (409)
// is that release's doing, not a loss: nothing says "claim lost", the job is counted done.
func TestWorkerRenewAfterOwnReleaseIsNotALoss(t *testing.T) {
	f := newFakeBoard(t, "c1")
	f.leaseMs, f.renewAfterMs = 3000, 100
	var once, raced atomic.Bool
	f.pre = func(w http.ResponseWriter, r *http.Request, route string, body []byte) bool {
		if route == "POST /v1/claims/renew" && once.CompareAndSwap(false, true) {
			for end := time.Now().Add(2 * time.Second); time.Now().Before(end) && f.card("c1").claimed; {
				time.Sleep(5 * time.Millisecond) // held until the job has released the card
			}
			raced.Store(!f.card("c1").claimed)
		}
		return false
	}
	var mu sync.Mutex
	var lines []string
	logf := func(format string, args ...any) {
		mu.Lock()
		lines = append(lines, fmt.Sprintf(format, args...))
		mu.Unlock()
		t.Logf(format, args...)
	}
	w := runWorker(t, f, func(ctx context.Context, j *Job) (any, error) {
		for len(f.requests("POST /v1/claims/renew")) == 0 && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond) // a renew is out
		}
		return "ok", nil
	}, WorkerOpts{MaxJobs: 1, Logf: logf})
	if c := f.card("c1"); c.claimed || c.state != "done" {
		t.Errorf("card c1: state %s, claimed %v", c.state, c.claimed)
	}
	if !raced.Load() {
		t.Errorf("the renew was not answered after the release")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, l := range lines {
		if strings.Contains(l, "claim lost") {
			t.Errorf("logged: %s", l)
		}
	}
	wantStats(t, w, Stats{Claimed: 1, Succeeded: 1})
}

// The filing answered 503 for 2.5 s, longer than the 1.5 s lease: the renew ticks meanwhile
// heartbeat the run the worker has just made final, and get run_final. That is the worker's own
// write, not an operator's cancel: the job is not parked, its claim is still renewed, and the
// card is filed once the server answers.
func TestWorkerOwnRunFinalIsNotParked(t *testing.T) {
	f := newFakeBoard(t, "c1")
	f.leaseMs, f.renewAfterMs = 1500, 200
	var since atomic.Int64
	f.pre = func(w http.ResponseWriter, r *http.Request, route string, body []byte) bool {
		if route != "PATCH /v1/cards/{id}/state" {
			return false
		}
		since.CompareAndSwap(0, time.Now().UnixNano())
		if time.Since(time.Unix(0, since.Load())) > 2500*time.Millisecond {
			return false
		}
		return answerNth(route, 503, "store_unavailable", 0)(w, r, route, body)
	}
	var job atomic.Pointer[Job]
	w := runWorker(t, f, func(ctx context.Context, j *Job) (any, error) {
		job.Store(j)
		return "ok", nil
	}, WorkerOpts{MaxJobs: 1})
	j := job.Load()
	j.mu.Lock()
	parked := j.parked
	j.mu.Unlock()
	if parked {
		t.Errorf("the job was parked by its own run_final")
	}
	var beats int
	patched := f.requests("PATCH /v1/runs/{id}")[0].at
	for _, r := range f.requests("POST /v1/runs/{id}/heartbeat") {
		if r.at.After(patched) {
			beats++
		}
	}
	if beats == 0 {
		t.Errorf("no heartbeat after the run's final PATCH")
	}
	if c := f.card("c1"); c.claimed || c.state != "done" {
		t.Errorf("card c1: state %s, claimed %v", c.state, c.claimed)
	}
	wantStats(t, w, Stats{Claimed: 1, Succeeded: 1})
}

// Go's net/http re-sends on a broken kept-alive connection only GET, HEAD, OPTIONS, TRACE and
// requests with an Idempotency-Key: a DELETE whose answer is lost is ErrTransport, sent once,
// never a 404 of a second try taken for an error.
func TestClientDoesNotReplayADelete(t *testing.T) {
	var deletes atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "GET" {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, "{}")
			return
		}
		if deletes.Add(1) == 1 { // done, and the answer lost
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(404)
		io.WriteString(w, `{"code":"not_found","detail":"no card"}`)
	}))
	defer srv.Close()
	c := New(srv.URL, "tok")
	ctx := context.Background()
	if _, err := c.Healthz(ctx); err != nil { // the connection is kept alive
		t.Fatal(err)
	}
	if err := c.DeleteCard(ctx, "c1"); !errors.Is(err, ErrTransport) {
		t.Errorf("a DELETE whose answer was lost: %v", err)
	}
	if n := deletes.Load(); n != 1 {
		t.Errorf("the DELETE was sent %d times", n)
	}
}
