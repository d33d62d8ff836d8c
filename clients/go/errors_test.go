// The typed errors: a problem+json answer becomes the type of its code, carrying status, code
// and detail; terminal_state_exit also matches TransitionRejected; an unknown code stays a
// *Problem; no answer at all is ErrTransport.
package boardd

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestProblemTypes(t *testing.T) {
	code := "claim_conflict"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("Retry-After", "2")
		w.WriteHeader(map[string]int{"claim_conflict": 409, "terminal_state_exit": 422,
			"capacity_reached": 409, "brand_new": 409}[code])
		w.Write([]byte(`{"type":"/problems/` + code + `","title":"t","status":0,"code":"` + code +
			`","detail":"why"}`))
	}))
	defer srv.Close()
	c := New(srv.URL, "tok")
	ctx := context.Background()

	_, err := c.GetCard(ctx, "c1")
	var cc *ClaimConflict
	if !errors.As(err, &cc) || cc.Status != 409 || cc.Code != "claim_conflict" || cc.Detail != "why" {
		t.Fatalf("claim_conflict: %#v", err)
	}
	code = "terminal_state_exit"
	_, err = c.GetCard(ctx, "c1")
	var te *TerminalStateExit
	var tr *TransitionRejected
	if !errors.As(err, &te) || !errors.As(err, &tr) || ProblemOf(err).Status != 422 {
		t.Fatalf("terminal_state_exit: %#v", err)
	}
	code = "capacity_reached"
	_, err = c.GetCard(ctx, "c1")
	var cr *CapacityReached
	if !errors.As(err, &cr) || cr.RetryAfter.Seconds() != 2 || !IsCode(err, "capacity_reached") {
		t.Fatalf("capacity_reached: %#v", err)
	}
	code = "brand_new"
	_, err = c.GetCard(ctx, "c1")
	if p, ok := err.(*Problem); !ok || p.Code != "brand_new" {
		t.Fatalf("an unknown code: %#v", err)
	}
	srv.Close()
	if _, err = c.GetCard(ctx, "c1"); !errors.Is(err, ErrTransport) {
		t.Fatalf("no server: %v", err)
	}
}
