// The events follower's own sanity: against a fake /v1/events whose log changes under it
// (an event taken back, one rewritten), verify reports each; an unchanged log passes.
package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

type fakeLog struct {
	mu     sync.Mutex
	events []map[string]interface{}
}

func (f *fakeLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	f.mu.Lock()
	var page []map[string]interface{}
	for _, e := range f.events {
		if int64(e["seq"].(int)) > after {
			page = append(page, e)
		}
	}
	f.mu.Unlock()
	_ = json.NewEncoder(w).Encode(map[string]interface{}{"events": page})
}

func ev(seq int, typ string) map[string]interface{} {
	return map[string]interface{}{"seq": seq, "type": typ, "card_id": fmt.Sprint("c", seq)}
}

func followerOn(t *testing.T, h http.Handler) *follower {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	cl := &cluster{replicas: []*replica{{name: "fake", port: port}}}
	var stop atomic.Bool
	c := newClient(0, "", "t", nil, nil, &recorder{}, cl, 1, &stop)
	return &follower{c: c, seen: map[int64]string{}}
}

func TestFollowerSeesTakenBackEvents(t *testing.T) {
	log := &fakeLog{events: []map[string]interface{}{ev(1, "a"), ev(2, "b"), ev(3, "c")}}
	f := followerOn(t, log)
	p, ok := f.page(0, false)
	if !ok || len(p.Events) != 3 {
		t.Fatalf("page: %v %v", ok, p)
	}
	for _, raw := range p.Events {
		f.note(raw)
	}
	probs, n, err := f.verify()
	if err != nil || n != 3 || len(probs) != 0 {
		t.Fatalf("unchanged log: %v %d %v", err, n, probs)
	}
	// A kill took event 3 back, and event 2 came back different.
	log.mu.Lock()
	log.events = []map[string]interface{}{ev(1, "a"), ev(2, "other")}
	log.mu.Unlock()
	probs, _, err = f.verify()
	if err != nil || len(probs) != 2 {
		t.Fatalf("changed log: %v %v", err, probs)
	}
}
