// The REST client of boardd (DESIGN §8, §12, §17, §18, §20; openapi/openapi.yaml): one method
// per route, standard library only, JSON in and out, error answers returned as the typed
// errors of errors.go. Routes lists every route and the method that calls it;
// routes_test.go walks openapi/openapi.yaml against that list (a route no method calls fails).
// Owned (fenced) writes take the claim's marker and epoch; the epoch goes in If-Match.
package boardd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Version is boardd's version, which this module follows.
const Version = "0.1.0"

// JSON is any JSON object, for the routes whose bodies this client passes through.
type JSON = map[string]any

// Client talks to one boardd. Safe for concurrent use.
type Client struct {
	URL       string // http(s)://host:port, no trailing slash
	Token     string
	HTTP      *http.Client
	Timeout   time.Duration // per request; a long-poll adds its wait
	UserAgent string
}

// New returns a client with keep-alive connections enough for a busy worker.
func New(baseURL, token string) *Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	return &Client{URL: strings.TrimRight(baseURL, "/"), Token: token,
		HTTP: &http.Client{Transport: tr}, Timeout: 30 * time.Second, UserAgent: "boardd-go"}
}

func esc(s string) string { return url.PathEscape(s) }

func fence(epoch int64) http.Header {
	return http.Header{"If-Match": {fmt.Sprintf("%q", strconv.FormatInt(epoch, 10))}}
}

func query(kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			v.Add(kv[i], kv[i+1])
		}
	}
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}

func itoa(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// Raw sends one request and returns the status, the body and the headers; an error status
// is not an error here (only a request that got no answer is: ErrTransport).
func (c *Client) Raw(ctx context.Context, method, path string, body any, hdr http.Header,
	timeout time.Duration) (int, []byte, http.Header, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, nil, err
		}
		rd = bytes.NewReader(b)
	}
	if timeout <= 0 {
		timeout = c.Timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.URL+path, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.UserAgent)
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	res, err := c.HTTP.Do(req)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("%w: %s %s: %v", ErrTransport, method, path, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("%w: %s %s: %v", ErrTransport, method, path, err)
	}
	return res.StatusCode, data, res.Header, nil
}

// Call sends one request; an error status is returned as its typed error, a 2xx body is
// decoded into out (when not nil; a *[]byte gets the raw body). It returns the status.
func (c *Client) Call(ctx context.Context, method, path string, body any, hdr http.Header,
	out any) (int, error) {
	return c.call(ctx, method, path, body, hdr, out, 0)
}

func (c *Client) call(ctx context.Context, method, path string, body any, hdr http.Header,
	out any, timeout time.Duration) (int, error) {
	st, data, h, err := c.Raw(ctx, method, path, body, hdr, timeout)
	if err != nil {
		return 0, err
	}
	if st >= 400 {
		p := &Problem{Status: st, Method: method, Path: path}
		var m map[string]any
		if json.Unmarshal(data, &m) == nil {
			p.Body = m
			p.Code, _ = m["code"].(string)
			p.Detail, _ = m["detail"].(string)
			p.Title, _ = m["title"].(string)
			p.Type, _ = m["type"].(string)
		} else {
			p.Detail = string(data[:min(len(data), 200)])
		}
		if ra, e := strconv.Atoi(h.Get("Retry-After")); e == nil {
			p.RetryAfter = time.Duration(ra) * time.Second
		}
		return st, errorFor(p)
	}
	if out != nil && len(data) > 0 {
		if raw, ok := out.(*[]byte); ok {
			*raw = data
		} else if err := json.Unmarshal(data, out); err != nil {
			return st, fmt.Errorf("boardd: %s %s: decoding the answer: %w", method, path, err)
		}
	}
	return st, nil
}

// ---- the contract's types ------------------------------------------------------------------

type Comment struct {
	Body  string `json:"body"`
	Actor string `json:"actor"`
	At    string `json:"at"`
}

type Claim struct {
	Marker     string `json:"marker"`
	Epoch      int64  `json:"epoch"`
	ClaimedAt  string `json:"claimed_at"`
	LeaseUntil string `json:"lease_until"`
	LeaseMs    int64  `json:"lease_ms"`
	Holder     string `json:"holder,omitempty"`
	From       string `json:"from,omitempty"` // §17
}

type Card struct {
	ID            string          `json:"id"`
	Board         string          `json:"board"`
	Title         string          `json:"title"`
	Body          string          `json:"body"`
	State         string          `json:"state"`
	Priority      int             `json:"priority"`
	Labels        []string        `json:"labels"`
	Blockers      []string        `json:"blockers"`
	Comments      []Comment       `json:"comments"`
	Claim         *Claim          `json:"claim"`
	ClaimEpoch    *int64          `json:"claim_epoch"`
	LastRunID     *string         `json:"last_run_id"`
	AwaitingInput bool            `json:"awaiting_input"`
	GaveUp        json.RawMessage `json:"gave_up"`
	StateReason   *string         `json:"state_reason"`
	Attempts      int             `json:"attempts,omitempty"`   // §17
	NotBefore     *string         `json:"not_before,omitempty"` // §17
	CreatedAt     string          `json:"created_at"`
	UpdatedAt     string          `json:"updated_at"`
	StateAt       string          `json:"state_at"`
}

// NewCard is the body of CreateCard. NotBefore (§17): not claimed before then (a claim is
// refused NotYet); the zero time is none.
type NewCard struct {
	ID        string    `json:"id,omitempty"`
	Board     string    `json:"board,omitempty"`
	Title     string    `json:"title,omitempty"`
	Body      string    `json:"body,omitempty"`
	State     string    `json:"state,omitempty"`
	Priority  int       `json:"priority,omitempty"`
	Labels    []string  `json:"labels,omitempty"`
	Blockers  []string  `json:"blockers,omitempty"`
	NotBefore time.Time `json:"-"`
}

// MarshalJSON sends NotBefore as RFC 3339 in UTC (milliseconds), and not at all when zero.
func (n NewCard) MarshalJSON() ([]byte, error) {
	type plain NewCard
	v := struct {
		plain
		NotBefore string `json:"not_before,omitempty"`
	}{plain: plain(n)}
	if !n.NotBefore.IsZero() {
		v.NotBefore = RFC3339(n.NotBefore)
	}
	return json.Marshal(v)
}

// RFC3339 formats t as boardd takes times (UTC, milliseconds): for UpdateCard's not_before.
func RFC3339(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// Column is one column of a board. Limit (§17): at most that many live claims taken from it
// at once (nil: none); Claimed is the server's count of them (read-only).
type Column struct {
	Name     string `json:"name"`
	Terminal bool   `json:"terminal"`
	Eligible bool   `json:"eligible"`
	Limit    *int   `json:"limit,omitempty"`
	Claimed  int    `json:"claimed,omitempty"`
}

// RetryPolicy is a board's retry policy (§17): the defaults are 20 (the server's
// --run-ceiling), 1 000 and 300 000.
type RetryPolicy struct {
	MaxAttempts  int   `json:"max_attempts"`
	BackoffMs    int64 `json:"backoff_ms"`
	MaxBackoffMs int64 `json:"max_backoff_ms"`
}

// Board is a board as GET /v1/boards/{b} answers it; PutBoard takes it back as is (the
// read-only Claimed counts and RetryEffective are ignored there).
type Board struct {
	Name      string       `json:"name,omitempty"`
	Columns   []Column     `json:"columns"`
	Running   *string      `json:"running"`
	Completed *string      `json:"completed"`
	Failed    *string      `json:"failed"`
	Waiting   *string      `json:"waiting"`
	MaxClaims *int         `json:"max_claims,omitempty"` // §17; nil: none
	Claimed   int          `json:"claimed,omitempty"`    // §17: live claims on the board
	Retry     *RetryPolicy `json:"retry,omitempty"`      // §17: the board's own; nil: none
	// §17, read-only: the policy in force (Retry, else the server's defaults)
	RetryEffective *RetryPolicy `json:"retry_effective,omitempty"`
}

type CardList struct {
	Cards []Card  `json:"cards"`
	Next  *string `json:"next"`
}

// Token is a claim's token as claim and claim-next answer it.
type Token struct {
	Marker       string `json:"marker"`
	Epoch        int64  `json:"epoch"`
	ClaimedAt    string `json:"claimed_at"`
	LeaseUntil   string `json:"lease_until"`
	LeaseMs      int64  `json:"lease_ms"`
	RenewAfterMs int64  `json:"renew_after_ms"`
	Fresh        bool   `json:"fresh"`
}

type Claimed struct {
	Card  Card  `json:"card"`
	Token Token `json:"token"`
}

type Renewed struct {
	Marker     string `json:"marker"`
	Epoch      int64  `json:"epoch"`
	LeaseUntil string `json:"lease_until"`
	LeaseMs    int64  `json:"lease_ms"`
}

type Run struct {
	ID           string          `json:"id"`
	CardID       string          `json:"card_id"`
	Board        string          `json:"board"`
	Status       string          `json:"status"`
	Continuation *string         `json:"continuation"`
	FailureCode  *string         `json:"failure_code"`
	Owner        *string         `json:"owner"`
	Result       json.RawMessage `json:"result"`
	Error        *string         `json:"error"`
	Output       string          `json:"output,omitempty"` // §20
	ClaimEpoch   int64           `json:"claim_epoch"`
	LockUntil    string          `json:"lock_until"`
	LeaseMs      int64           `json:"lease_ms"`
	CreatedAt    string          `json:"created_at"`
	UpdatedAt    string          `json:"updated_at"`
}

type Event struct {
	Seq      int64           `json:"seq"`
	BoardSeq int64           `json:"board_seq"`
	At       string          `json:"at"`
	Board    string          `json:"board"`
	Type     string          `json:"type"`
	CardID   string          `json:"card_id"`
	Actor    string          `json:"actor"`
	Reason   *string         `json:"reason"`
	Machine  bool            `json:"machine"`
	Payload  json.RawMessage `json:"payload"`
}

type EventList struct {
	Events []Event `json:"events"`
	Next   int64   `json:"next"`
}

// TokenRef names one held claim in the batched routes (§18).
type TokenRef struct {
	Card   string `json:"card"`
	Marker string `json:"marker"`
	Epoch  int64  `json:"epoch"`
	To     string `json:"to,omitempty"`
	Reason string `json:"reason,omitempty"`
	Retry  bool   `json:"retry,omitempty"`
}

// BatchResult is one item's answer of a batched route (§18).
type BatchResult struct {
	Card       string `json:"card"`
	Status     int    `json:"status"`
	LeaseUntil string `json:"lease_until,omitempty"`
	Code       string `json:"code,omitempty"`
	Detail     string `json:"detail,omitempty"`
}
