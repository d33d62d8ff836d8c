// DESIGN §17 in the Go client's types: NewCard sends not_before as RFC 3339 UTC (and not at
// all when zero); Board reads back the limits, the counts and the retry policy.
package boardd

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestNewCardNotBefore(t *testing.T) {
	b, err := json.Marshal(NewCard{Title: "t", State: "ready"})
	if err != nil || strings.Contains(string(b), "not_before") {
		t.Fatalf("a zero NotBefore is not sent: %s %v", b, err)
	}
	at := time.Date(2026, 12, 7, 9, 0, 0, 123456789, time.FixedZone("CET", 3600))
	b, _ = json.Marshal(NewCard{Title: "t", NotBefore: at, Labels: []string{"x"}})
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["not_before"] != "2026-12-07T08:00:00.123Z" || m["title"] != "t" || m["state"] != nil {
		t.Fatalf("not_before in UTC with milliseconds, the other fields as given: %s", b)
	}
}

func TestBoardDecodes(t *testing.T) {
	var b Board
	err := json.Unmarshal([]byte(`{"name":"b","columns":[{"name":"ready","terminal":false,
		"eligible":true,"limit":2,"claimed":1},{"name":"done","terminal":true,"eligible":false,
		"claimed":0}],"running":"ready","completed":"done","failed":null,"waiting":null,
		"max_claims":5,"claimed":1,"retry":{"max_attempts":3,"backoff_ms":1000,
		"max_backoff_ms":4000},"retry_effective":{"max_attempts":3,"backoff_ms":1000,
		"max_backoff_ms":4000}}`), &b)
	if err != nil {
		t.Fatal(err)
	}
	if b.Columns[0].Limit == nil || *b.Columns[0].Limit != 2 || b.Columns[0].Claimed != 1 ||
		b.Columns[1].Limit != nil || b.MaxClaims == nil || *b.MaxClaims != 5 || b.Claimed != 1 ||
		b.Retry == nil || *b.Retry != (RetryPolicy{3, 1000, 4000}) ||
		b.RetryEffective == nil || *b.RetryEffective != *b.Retry {
		t.Fatalf("decoded: %+v", b)
	}
}
