// The clients: each a worker with its own marker cycling claim / owned state writes / release
// over a few cards with reads between, plus readers; every request is recorded with its
// invocation and response times (monotonic) for the model (model.go).
//
// An answer decides the outcome: 200 (the model checks what it says), 409 claim_conflict, a
// 5xx (indeterminate: the server answered, so whatever it did, it did before; Return = the
// answer), a connection that died (indeterminate; Return = when the client saw it die, which
// is after the process died at a kill: "-indet bounded"), a timeout (indeterminate with no
// bound: the server may still act on it). A request refused at connect was never sent: not
// recorded, retried. With -indet unbounded every indeterminate operation may take effect at
// any time after its call. A failed read changes nothing and is not recorded.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/anishathalye/porcupine"
)

// unboundedReturn: replaced by the end of the history once it is known.
const unboundedReturn = math.MaxInt64

type recorder struct {
	t0        time.Time
	unbounded bool // -indet unbounded

	mu        sync.Mutex
	ops       []porcupine.Operation
	indet     int
	surprises []string // answers the protocol does not allow at all (a harness-level failure)
}

func (r *recorder) now() int64 { return int64(time.Since(r.t0)) }

func (r *recorder) add(client int, in Input, out Output, call, ret int64) {
	if out.Res == ResIndet && r.unbounded {
		ret = unboundedReturn
	}
	r.mu.Lock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Output: out,
		Call: call, Return: ret})
	if out.Res == ResIndet {
		r.indet++
	}
	r.mu.Unlock()
}

func (r *recorder) surprise(format string, a ...interface{}) {
	r.mu.Lock()
	if len(r.surprises) < 20 {
		r.surprises = append(r.surprises, fmt.Sprintf(format, a...))
	}
	r.mu.Unlock()
}

// cluster: the replicas a client may talk to, and the restart generation (a client drops
// its idle connections when it changes: they were to a killed process).
type cluster struct {
	replicas []*replica
	gen      atomic.Int64
}

type client struct {
	id      int
	marker  string
	token   string
	cards   []string
	cols    []string
	rec     *recorder
	cl      *cluster
	rnd     *rand.Rand
	hc      *http.Client
	tr      *http.Transport
	seenGen int64
	stop    *atomic.Bool
}

func newClient(id int, marker, token string, cards, cols []string, rec *recorder,
	cl *cluster, seed int64, stop *atomic.Bool) *client {
	tr := &http.Transport{MaxIdleConnsPerHost: 2, DisableCompression: true,
		DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext}
	return &client{id: id, marker: marker, token: token, cards: cards, cols: cols, rec: rec,
		cl: cl, rnd: rand.New(rand.NewSource(seed)), tr: tr,
		hc: &http.Client{Transport: tr, Timeout: 10 * time.Second}, stop: stop}
}

type answer struct {
	status  int
	body    []byte
	err     error
	notSent bool // refused at connect: the request never reached a server
	timeout bool
}

func (c *client) do(method, path string, body interface{}, ifMatch int64) answer {
	if g := c.cl.gen.Load(); g != c.seenGen {
		c.seenGen = g
		c.tr.CloseIdleConnections()
	}
	rep := c.cl.replicas[c.rnd.Intn(len(c.cl.replicas))]
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, rep.base()+path, rd)
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if ifMatch > 0 {
		req.Header.Set("If-Match", fmt.Sprintf("%q", fmt.Sprint(ifMatch)))
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		var ne net.Error
		return answer{err: err, notSent: errors.Is(err, syscall.ECONNREFUSED),
			timeout: errors.As(err, &ne) && ne.Timeout()}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{err: err}
	}
	return answer{status: resp.StatusCode, body: b}
}

type cardJSON struct {
	State string `json:"state"`
	Claim *struct {
		Marker string `json:"marker"`
		Epoch  int64  `json:"epoch"`
	} `json:"claim"`
	ClaimEpoch int64 `json:"claim_epoch"`
}

func (c *client) cardOutput(what string, b []byte) (Output, bool) {
	var cj cardJSON
	if err := json.Unmarshal(b, &cj); err != nil || cj.State == "" {
		c.rec.surprise("%s: not a card: %.200s", what, b)
		return Output{}, false
	}
	out := Output{Res: ResOK, Col: cj.State, Epoch: cj.ClaimEpoch}
	if cj.Claim != nil {
		out.Holder = cj.Claim.Marker
		if cj.Claim.Epoch != cj.ClaimEpoch {
			c.rec.surprise("%s: claim.epoch %d but claim_epoch %d", what, cj.Claim.Epoch,
				cj.ClaimEpoch)
		}
	}
	return out, true
}

func isConflict(b []byte) bool {
	var p struct {
		Code string `json:"code"`
	}
	return json.Unmarshal(b, &p) == nil && p.Code == "claim_conflict"
}

// op sends one protocol request (retried while refused at connect), records it, and
// returns its outcome (false: the run is stopping and it was never sent).
func (c *client) op(in Input) (Output, bool) {
	for {
		if c.stop.Load() && in.Kind == OpRead {
			return Output{}, false
		}
		var a answer
		call := c.rec.now()
		switch in.Kind {
		case OpClaim:
			a = c.do("POST", "/v1/cards/"+in.Card+"/claim",
				map[string]interface{}{"marker": c.marker, "lease_ms": 86400000}, 0)
		case OpSetState:
			a = c.do("PATCH", "/v1/cards/"+in.Card+"/state",
				map[string]interface{}{"marker": c.marker, "to": in.To}, in.Epoch)
		case OpRelease:
			a = c.do("POST", "/v1/cards/"+in.Card+"/release",
				map[string]interface{}{"marker": c.marker, "epoch": in.Epoch}, 0)
		case OpRead:
			a = c.do("GET", "/v1/cards/"+in.Card, nil, 0)
		}
		ret := c.rec.now()
		if a.notSent {
			if c.stop.Load() && in.Kind == OpRead {
				return Output{}, false
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		var out Output
		switch {
		case a.err != nil || a.status >= 500:
			if in.Kind == OpRead {
				return Output{Res: ResIndet}, true // a read changes nothing: not recorded
			}
			out = Output{Res: ResIndet}
			if a.timeout {
				ret = unboundedReturn
			}
		case a.status == 409 && isConflict(a.body) && in.Kind != OpRead:
			out = Output{Res: ResConflict}
		case a.status == 200 && in.Kind == OpClaim:
			var tok struct {
				Marker string `json:"marker"`
				Epoch  int64  `json:"epoch"`
				Fresh  bool   `json:"fresh"`
			}
			if json.Unmarshal(a.body, &tok) != nil || tok.Marker != c.marker || tok.Epoch <= 0 {
				c.rec.surprise("claim %s: not a token: %.200s", in.Card, a.body)
				return Output{Res: ResIndet}, true
			}
			out = Output{Res: ResOK, Epoch: tok.Epoch, Fresh: tok.Fresh}
		case a.status == 200:
			var ok bool
			if out, ok = c.cardOutput(in.Kind.String()+" "+in.Card, a.body); !ok {
				return Output{Res: ResIndet}, true
			}
		default:
			c.rec.surprise("%s %s: HTTP %d %.200s", in.Kind, in.Card, a.status, a.body)
			return Output{Res: ResIndet}, true
		}
		c.rec.add(c.id, in, out, call, ret)
		return out, true
	}
}

func (c *client) read(card string) {
	c.op(Input{Kind: OpRead, Card: card})
}

// settle: after an indeterminate answer on card, claim it again until the answer is
// definite; if it is ours, release it (the card must not stay held by a client that left).
func (c *client) settle(card string) {
	for i := 0; i < 50; i++ {
		out, sent := c.op(Input{Kind: OpClaim, Card: card, Marker: c.marker})
		if !sent {
			return
		}
		switch out.Res {
		case ResConflict:
			return
		case ResOK:
			rel, _ := c.op(Input{Kind: OpRelease, Card: card, Marker: c.marker,
				Epoch: out.Epoch})
			if rel.Res != ResIndet {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// worker: until stopped, one cycle at a time on a random card.
func (c *client) worker() {
	for !c.stop.Load() {
		card := c.cards[c.rnd.Intn(len(c.cards))]
		if c.rnd.Intn(2) == 0 {
			c.read(c.cards[c.rnd.Intn(len(c.cards))])
		}
		out, _ := c.op(Input{Kind: OpClaim, Card: card, Marker: c.marker})
		switch out.Res {
		case ResConflict:
			continue
		case ResIndet:
			c.settle(card)
			continue
		}
		e, lost := out.Epoch, false
		for n := 1 + c.rnd.Intn(2); n > 0 && !lost; n-- {
			to := c.cols[c.rnd.Intn(len(c.cols))]
			w, _ := c.op(Input{Kind: OpSetState, Card: card, Marker: c.marker, Epoch: e, To: to})
			lost = w.Res != ResOK
			if c.rnd.Intn(2) == 0 {
				c.read(card)
			}
		}
		rel, _ := c.op(Input{Kind: OpRelease, Card: card, Marker: c.marker, Epoch: e})
		if lost || rel.Res == ResIndet {
			c.settle(card)
		}
	}
}

// reader: reads random cards until stopped.
func (c *client) reader() {
	for !c.stop.Load() {
		c.read(c.cards[c.rnd.Intn(len(c.cards))])
	}
}

func cardIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("lin-%d", i)
	}
	return ids
}

func shortErr(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		return s[i+2:]
	}
	return s
}
