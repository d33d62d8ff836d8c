// A fake boardd for the worker's tests (httptest): just enough of claim-next, runs, renew,
// state and release to run the worker's loop, with Idempotency-Key replay as docs/http.md
// describes it, the server's limits on a run's result and error, and hooks to refuse a
// request or to drop its answer after it was executed (the connection closed unanswered).
package boardd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

type fakeCard struct {
	id, state string
	marker    string
	epoch     int64
	claimed   bool
}

type fakeRun struct {
	id, card, status, err string
	result                json.RawMessage
}

type fakeReq struct {
	method, path, key string
	body              []byte
	at                time.Time // when it came
}

type fakeBoard struct {
	t            *testing.T
	srv          *httptest.Server
	mu           sync.Mutex
	cards        map[string]*fakeCard
	order        []string
	runs         map[string]*fakeRun
	nrun         int
	epoch        int64
	leaseMs      int64
	renewAfterMs int64
	idem         map[string][]byte // method path key -> answer
	idemBody     map[string][]byte
	reqs         []fakeReq
	n            map[string]int // "METHOD route" -> requests so far
	// pre answers a request itself (true) before the fake does; drop closes the connection
	// unanswered after the fake executed the request (nth: 1 for the first of that route).
	pre  func(w http.ResponseWriter, r *http.Request, route string, body []byte) bool
	drop func(route string, nth int) bool
}

func newFakeBoard(t *testing.T, cards ...string) *fakeBoard {
	f := &fakeBoard{t: t, cards: map[string]*fakeCard{}, runs: map[string]*fakeRun{},
		idem: map[string][]byte{}, idemBody: map[string][]byte{}, n: map[string]int{}, leaseMs: 60000, renewAfterMs: 20000}
	for _, id := range cards {
		f.cards[id] = &fakeCard{id: id, state: "ready"}
		f.order = append(f.order, id)
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeBoard) requests(route string) []fakeReq {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeReq
	for _, r := range f.reqs {
		if r.method+" "+routeOf(r.path) == route {
			out = append(out, r)
		}
	}
	return out
}

func (f *fakeBoard) card(id string) fakeCard {
	f.mu.Lock()
	defer f.mu.Unlock()
	return *f.cards[id]
}

// routeOf names a path by its template.
func routeOf(p string) string {
	s := strings.Split(strings.TrimPrefix(p, "/"), "/")
	switch {
	case len(s) == 4 && s[1] == "boards" && s[3] == "claim-next":
		return "/v1/boards/{b}/claim-next"
	case len(s) == 3 && s[1] == "boards":
		return "/v1/boards/{b}"
	case len(s) >= 3 && s[1] == "cards":
		s[2] = "{id}"
	case len(s) >= 3 && s[1] == "runs":
		s[2] = "{id}"
	}
	return "/" + strings.Join(s, "/")
}

func (f *fakeBoard) cardJSON(c *fakeCard) map[string]any {
	var claim any
	if c.claimed {
		claim = map[string]any{"marker": c.marker, "epoch": c.epoch, "lease_ms": f.leaseMs}
	}
	return map[string]any{"id": c.id, "board": "default", "title": c.id, "state": c.state,
		"claim": claim, "claim_epoch": c.epoch}
}

func (f *fakeBoard) runJSON(r *fakeRun) map[string]any {
	m := map[string]any{"id": r.id, "card_id": r.card, "status": r.status}
	if r.err != "" {
		m["error"] = r.err
	}
	if r.result != nil {
		m["result"] = r.result
	}
	return m
}

func problem(status int, code, detail string) (int, any) {
	return status, map[string]any{"status": status, "code": code, "detail": detail}
}

func (f *fakeBoard) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	route := r.Method + " " + routeOf(r.URL.Path)
	key := r.Header.Get("Idempotency-Key")
	f.mu.Lock()
	f.reqs = append(f.reqs, fakeReq{r.Method, r.URL.Path, key, body, time.Now()})
	f.n[route]++
	nth := f.n[route]
	pre, drop := f.pre, f.drop
	f.mu.Unlock()
	if pre != nil && pre(w, r, route, body) {
		return
	}
	var in map[string]any
	json.Unmarshal(body, &in)
	f.mu.Lock()
	var st int
	var out any
	idemKey := r.Method + " " + r.URL.Path + " " + key
	if ans, ok := f.idem[idemKey]; key != "" && ok {
		same := string(f.idemBody[idemKey]) == string(body)
		f.mu.Unlock()
		if !same {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(422)
			io.WriteString(w, `{"code":"idempotency_key_reused","detail":"another body"}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(int(ans[0])<<8 | int(ans[1]))
		w.Write(ans[2:])
		return
	}
	if key != "" && r.Method == "POST" && strings.Contains(route, "claim-next") {
		if wait, _ := in["wait_ms"].(float64); wait > 0 && !f.anyFree() {
			f.mu.Unlock()
			time.Sleep(20 * time.Millisecond) // a short "long-poll"
			f.mu.Lock()
		}
	}
	st, out = f.exec(r, route, in)
	ans, _ := json.Marshal(out)
	if key != "" && st < 500 {
		f.idem[idemKey] = append([]byte{byte(st >> 8), byte(st)}, ans...)
		f.idemBody[idemKey] = body
	}
	f.mu.Unlock()
	if drop != nil && drop(route, nth) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	if st == 204 {
		w.WriteHeader(204)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(st)
	w.Write(ans)
}

func (f *fakeBoard) anyFree() bool {
	for _, id := range f.order {
		if c := f.cards[id]; !c.claimed && c.state == "ready" {
			return true
		}
	}
	return false
}

func (f *fakeBoard) token(c *fakeCard) map[string]any {
	return map[string]any{"marker": c.marker, "epoch": c.epoch, "lease_ms": f.leaseMs,
		"renew_after_ms": f.renewAfterMs, "fresh": true}
}

// held: the card, when marker and epoch (the body's or If-Match) name its live claim.
func (f *fakeBoard) held(r *http.Request, id string, in map[string]any) *fakeCard {
	c := f.cards[id]
	if c == nil || !c.claimed {
		return nil
	}
	marker, _ := in["marker"].(string)
	epoch := int64(-1)
	if e, ok := in["epoch"].(float64); ok {
		epoch = int64(e)
	} else if im := r.Header.Get("If-Match"); im != "" {
		fmt.Sscanf(strings.Trim(im, `"`), "%d", &epoch)
	}
	if marker != c.marker || (epoch >= 0 && epoch != c.epoch) {
		return nil
	}
	return c
}

func (f *fakeBoard) exec(r *http.Request, route string, in map[string]any) (int, any) {
	id := ""
	if s := strings.Split(r.URL.Path, "/"); len(s) > 3 {
		id = s[3]
	}
	switch route {
	case "POST /v1/boards/{b}/claim-next":
		n, many := 1, false
		if c, ok := in["count"].(float64); ok {
			n, many = int(c), true
		}
		var claims []any
		for _, cid := range f.order {
			c := f.cards[cid]
			if len(claims) < n && !c.claimed && c.state == "ready" {
				f.epoch++
				c.claimed, c.marker, c.epoch = true, in["marker"].(string), f.epoch
				claims = append(claims, map[string]any{"card": f.cardJSON(c), "token": f.token(c)})
			}
		}
		if len(claims) == 0 {
			return 204, nil
		}
		if many {
			return 200, map[string]any{"claims": claims}
		}
		return 200, claims[0]
	case "POST /v1/runs":
		cid, _ := in["card_id"].(string)
		if f.held(r, cid, in) == nil {
			return problem(409, "claim_conflict", "not the holder")
		}
		f.nrun++
		run := &fakeRun{id: fmt.Sprintf("r%d", f.nrun), card: cid, status: "running"}
		f.runs[run.id] = run
		return 201, f.runJSON(run)
	case "GET /v1/boards/{b}": // the worker checks its OnSuccess and OnFailure columns
		cols := []map[string]any{}
		for _, c := range []string{"ready", "in_progress", "done", "blocked"} {
			cols = append(cols, map[string]any{"name": c, "terminal": c == "done" || c == "blocked",
				"eligible": c == "ready"})
		}
		return 200, map[string]any{"name": "default", "columns": cols, "running": "in_progress",
			"completed": "done", "failed": "blocked"}
	case "GET /v1/runs/{id}":
		if run := f.runs[id]; run != nil {
			return 200, f.runJSON(run)
		}
		return problem(404, "not_found", "no run")
	case "PATCH /v1/runs/{id}", "POST /v1/runs/{id}/heartbeat":
		run := f.runs[id]
		if run == nil {
			return problem(404, "not_found", "no run")
		}
		if run.status != "running" {
			return problem(409, "run_final", "the run is "+run.status)
		}
		if route == "POST /v1/runs/{id}/heartbeat" {
			return 200, f.runJSON(run)
		}
		if e, ok := in["error"].(string); ok {
			if utf8.RuneCountInString(e) > 4096 {
				return problem(400, "bad_request", `field "error" is longer than 4096 characters`)
			}
			if len(e) > 4096 {
				return problem(400, "bad_request", fmt.Sprintf(`field "error" is %d bytes as UTF-8; at most 4096 are kept`, len(e)))
			}
		}
		if res, ok := in["result"]; ok {
			b, _ := json.Marshal(res)
			if len(b) > 65536 {
				return problem(413, "payload_too_large", fmt.Sprintf("result is %d bytes as compact JSON; at most 65536 are kept", len(b)))
			}
			run.result = b
		}
		if e, ok := in["error"].(string); ok {
			run.err = e
		}
		if s, ok := in["status"].(string); ok {
			run.status = s
		}
		return 200, f.runJSON(run)
	case "PUT /v1/cards/{id}/last-run":
		if c := f.held(r, id, in); c != nil {
			return 200, f.cardJSON(c)
		}
		return problem(409, "claim_conflict", "not the holder")
	case "GET /v1/cards/{id}":
		if c := f.cards[id]; c != nil {
			return 200, f.cardJSON(c)
		}
		return problem(404, "not_found", "no card")
	case "PATCH /v1/cards/{id}/state":
		c := f.held(r, id, in)
		if c == nil {
			return problem(409, "claim_conflict", "not the holder")
		}
		c.state = in["to"].(string)
		if rel, _ := in["release"].(bool); rel {
			c.claimed = false
		}
		return 200, f.cardJSON(c)
	case "POST /v1/cards/{id}/release":
		c := f.held(r, id, in)
		if c == nil {
			return problem(409, "claim_conflict", "not the holder")
		}
		c.claimed = false
		return 200, f.cardJSON(c)
	case "POST /v1/cards/{id}/renew":
		if c := f.held(r, id, in); c != nil {
			return 200, map[string]any{"marker": c.marker, "epoch": c.epoch, "lease_ms": f.leaseMs}
		}
		return problem(409, "claim_conflict", "not the holder")
	case "POST /v1/claims/renew":
		toks, _ := in["tokens"].([]any)
		if len(toks) < 1 || len(toks) > 1000 {
			return problem(400, "bad_request", fmt.Sprintf(`field "tokens": %d items; 1..1000`, len(toks)))
		}
		var res []any
		for _, t := range toks {
			tm := t.(map[string]any)
			cid, _ := tm["card"].(string)
			if f.held(r, cid, tm) != nil {
				res = append(res, map[string]any{"card": cid, "status": 200})
			} else {
				res = append(res, map[string]any{"card": cid, "status": 409, "code": "claim_conflict"})
			}
		}
		return 200, map[string]any{"results": res}
	}
	return problem(404, "not_found", "no route "+route)
}

// runWorker runs a worker against the fake until it returns (or the test's deadline).
func runWorker(t *testing.T, f *fakeBoard, h Handler, o WorkerOpts) *Worker {
	t.Helper()
	return runWorkerWith(t, f, h, o, nil)
}

// runWorkerWith is runWorker with set(w) called on the worker before it runs.
func runWorkerWith(t *testing.T, f *fakeBoard, h Handler, o WorkerOpts, set func(*Worker)) *Worker {
	t.Helper()
	c := New(f.srv.URL, "tok")
	c.Timeout = 5 * time.Second
	if o.Logf == nil {
		o.Logf = t.Logf
	}
	if o.WaitMs == 0 {
		o.WaitMs = 100
	}
	o.Marker = "w1"
	w := NewWorker(c, "default", h, o)
	if set != nil {
		set(w)
	}
	runToEnd(t, w, context.Background())
	return w
}

// runToEnd runs w under ctx and waits (20 s at most) for Run to return, without an error.
func runToEnd(t *testing.T, w *Worker, ctx context.Context) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the worker did not return; stats %+v", w.Stats())
	}
}
