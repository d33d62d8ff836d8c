// The worker never leaves a claim held without a job behind it, nor gives a card back to be
// claimed again at once for ever: a column it cannot file into, a run refused or pruned, a
// handler that calls runtime.Goexit, claim-next answered by something that is not boardd.
package boardd

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
)

// OnSuccess names a column the board does not have: Run returns ErrNoColumn, naming it,
// before anything is claimed.
func TestWorkerChecksItsColumnsFirst(t *testing.T) {
	f := newFakeBoard(t, "c1")
	c := New(f.srv.URL, "tok")
	w := NewWorker(c, "default", ok, WorkerOpts{OnSuccess: "shipped", Logf: t.Logf})
	err := w.Run(context.Background())
	if !errors.Is(err, ErrNoColumn) || !strings.Contains(err.Error(), `"shipped"`) {
		t.Fatalf("Run: %v", err)
	}
	if n := len(f.requests("POST /v1/boards/{b}/claim-next")); n != 0 {
		t.Errorf("%d claim-next requests", n)
	}
	// "retry" is no column, and needs none
	w = runWorker(t, f, ok, WorkerOpts{OnFailure: "retry", MaxJobs: 1})
	wantStats(t, w, Stats{Claimed: 1, Succeeded: 1})
}

// The filing refused (422: the column renamed meanwhile), or the run's create refused: the
// card is released with retry (an attempt counted, §17), not a plain release.
func TestWorkerRefusedFilingReleasesWithRetry(t *testing.T) {
	for _, route := range []string{"PATCH /v1/cards/{id}/state", "POST /v1/runs"} {
		t.Run(route, func(t *testing.T) {
			f := newFakeBoard(t, "c1")
			f.pre = answerNth(route, 422, "transition_rejected", 0)
			w := runWorker(t, f, ok, WorkerOpts{MaxJobs: 1})
			rel := f.requests("POST /v1/cards/{id}/release")
			var body struct{ Retry bool }
			if len(rel) != 1 || json.Unmarshal(rel[0].body, &body) != nil || !body.Retry {
				t.Fatalf("releases: %+v", rel)
			}
			if c := f.card("c1"); c.claimed {
				t.Errorf("card c1 left claimed")
			}
			wantStats(t, w, Stats{Claimed: 1, Errors: 1})
		})
	}
}

// The run pruned by an operator while its job ran: its final PATCH is 404. The card is filed
// into OnFailure and released, as for a failed job, not left claimed.
func TestWorkerPrunedRunFilesTheCard(t *testing.T) {
	f := newFakeBoard(t, "c1")
	f.pre = answerNth("PATCH /v1/runs/{id}", 404, "not_found", 0)
	w := runWorker(t, f, ok, WorkerOpts{MaxJobs: 1})
	if c := f.card("c1"); c.claimed || c.state != "blocked" {
		t.Errorf("card c1: state %s, claimed %v", c.state, c.claimed)
	}
	wantStats(t, w, Stats{Claimed: 1, Failed: 1})
}

// A handler that calls runtime.Goexit: its job is failed on the way out (the run failed, the
// card filed into OnFailure and released), and the worker goes on.
func TestWorkerHandlerGoexit(t *testing.T) {
	f := newFakeBoard(t, "c1", "c2")
	w := runWorker(t, f, func(ctx context.Context, j *Job) (any, error) {
		if j.Card.ID == "c1" {
			runtime.Goexit()
		}
		return ok(ctx, j)
	}, WorkerOpts{MaxJobs: 2})
	if r := f.runs["r1"]; r == nil || r.status != "failed" || !strings.Contains(r.err, "Goexit") {
		t.Errorf("the run: %+v", r)
	}
	if c := f.card("c1"); c.claimed || c.state != "blocked" {
		t.Errorf("card c1: state %s, claimed %v", c.state, c.claimed)
	}
	if c := f.card("c2"); c.claimed || c.state != "done" {
		t.Errorf("card c2: state %s, claimed %v", c.state, c.claimed)
	}
	wantStats(t, w, Stats{Claimed: 2, Succeeded: 1, Failed: 1})
}

// claim-next answered 200 by something else (an HTML page, then JSON that is not claims):
// logged and tried again as no answer, not Run's end.
func TestWorkerClaimNextUnexpectedAnswer(t *testing.T) {
	f := newFakeBoard(t, "c1")
	page := answerNth("POST /v1/boards/{b}/claim-next", 200, "", 0, 1)
	var n atomic.Int32
	f.pre = func(w http.ResponseWriter, r *http.Request, route string, body []byte) bool {
		if page(w, r, route, body) {
			return true
		}
		if route == "POST /v1/boards/{b}/claim-next" {
			if n.Add(1) == 1 { // the second claim-next (the page was the first)
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(`{"portal":true}`))
				return true
			}
		}
		return false
	}
	w := runWorker(t, f, ok, WorkerOpts{MaxJobs: 1})
	if c := f.card("c1"); c.claimed || c.state != "done" {
		t.Errorf("card c1: state %s, claimed %v", c.state, c.claimed)
	}
	if k := len(f.requests("POST /v1/boards/{b}/claim-next")); k < 3 {
		t.Errorf("%d claim-next requests", k)
	}
	wantStats(t, w, Stats{Claimed: 1, Succeeded: 1})
}
