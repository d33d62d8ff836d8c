// The routes of labels, runs, events and boards (the rest are in routes.go).
package boardd

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

func msDur(ms int) time.Duration { return time.Duration(ms) * time.Millisecond }

// ---- labels --------------------------------------------------------------------------------

func (c *Client) Labels(ctx context.Context, board string) (JSON, error) {
	return c.get(ctx, "/v1/labels"+query("board", board))
}

func (c *Client) labelOp(ctx context.Context, path string, from any, to, board string) (JSON, error) {
	var out JSON
	_, err := c.Call(ctx, "POST", path, omit(JSON{"from": from, "to": to, "board": board}), nil, &out)
	return out, err
}

func (c *Client) RenameLabel(ctx context.Context, from, to, board string) (JSON, error) {
	return c.labelOp(ctx, "/v1/labels/rename", from, to, board)
}

// MergeLabels merges the labels `from` into `to`.
func (c *Client) MergeLabels(ctx context.Context, from []string, to, board string) (JSON, error) {
	return c.labelOp(ctx, "/v1/labels/merge", from, to, board)
}

func (c *Client) DeleteLabel(ctx context.Context, name, board string) (JSON, error) {
	var out JSON
	_, err := c.Call(ctx, "DELETE", "/v1/labels/"+esc(name)+query("board", board), nil, nil, &out)
	return out, err
}

// ---- runs ----------------------------------------------------------------------------------

type RunCreate struct {
	CardID         string `json:"card_id"`
	Marker         string `json:"marker"`
	Status         string `json:"status"`
	ID             string `json:"id,omitempty"`
	LeaseMs        int    `json:"lease_ms,omitempty"`
	IdempotencyKey string `json:"-"`
}

func (c *Client) CreateRun(ctx context.Context, r RunCreate) (*Run, error) {
	if r.Status == "" {
		r.Status = "running"
	}
	var h http.Header
	if r.IdempotencyKey != "" {
		h = http.Header{"Idempotency-Key": {r.IdempotencyKey}}
	}
	out := &Run{}
	_, err := c.Call(ctx, "POST", "/v1/runs", r, h, out)
	return out, err
}

// ListRuns lists runs (§20): {runs, next}.
func (c *Client) ListRuns(ctx context.Context, board, status string, limit int, after string) (JSON, error) {
	return c.get(ctx, "/v1/runs"+query("board", board, "status", status, "limit", itoa(limit), "after", after))
}

func (c *Client) GetRun(ctx context.Context, id string) (*Run, error) {
	out := &Run{}
	_, err := c.Call(ctx, "GET", "/v1/runs/"+esc(id), nil, nil, out)
	return out, err
}

// RunUpdate is the owner's PATCH of a run; Result is sent when HasResult (it may be nil).
type RunUpdate struct {
	Status       string
	Continuation *string
	FailureCode  string
	Result       any
	HasResult    bool
	Error        string
	LeaseMs      int
}

func (c *Client) UpdateRun(ctx context.Context, id, marker string, u RunUpdate) (*Run, error) {
	b := omit(JSON{"marker": marker, "status": u.Status, "failure_code": u.FailureCode,
		"error": u.Error, "lease_ms": u.LeaseMs})
	if u.Continuation != nil {
		b["continuation"] = *u.Continuation
	}
	if u.HasResult {
		b["result"] = u.Result
	}
	out := &Run{}
	_, err := c.Call(ctx, "PATCH", "/v1/runs/"+esc(id), b, nil, out)
	return out, err
}

func (c *Client) PruneRun(ctx context.Context, id string) error {
	_, err := c.Call(ctx, "DELETE", "/v1/runs/"+esc(id), nil, nil, nil)
	return err
}

func (c *Client) HeartbeatRun(ctx context.Context, id, marker string, leaseMs int) (*Run, error) {
	out := &Run{}
	_, err := c.Call(ctx, "POST", "/v1/runs/"+esc(id)+"/heartbeat",
		omit(JSON{"marker": marker, "lease_ms": leaseMs}), nil, out)
	return out, err
}

func (c *Client) CancelRun(ctx context.Context, id string) (*Run, error) {
	out := &Run{}
	_, err := c.Call(ctx, "POST", "/v1/runs/"+esc(id)+"/cancel", nil, nil, out)
	return out, err
}

// AppendOutput appends to the run's output tail (§20).
func (c *Client) AppendOutput(ctx context.Context, id, marker, text string) (*Run, error) {
	out := &Run{}
	_, err := c.Call(ctx, "POST", "/v1/runs/"+esc(id)+"/output", JSON{"marker": marker, "text": text}, nil, out)
	return out, err
}

// ---- events --------------------------------------------------------------------------------

// Events reads one page of the audit tail after `after` (long-poll up to waitMs).
func (c *Client) Events(ctx context.Context, board string, after int64, limit, waitMs int) (*EventList, error) {
	a := ""
	if after > 0 {
		a = strconv.FormatInt(after, 10)
	}
	out := &EventList{}
	_, err := c.call(ctx, "GET", "/v1/events"+query("board", board, "after", a, "limit", itoa(limit),
		"wait_ms", itoa(waitMs)), nil, nil, out, c.Timeout+msDur(waitMs))
	return out, err
}

// FollowEvents calls fn for every event after `after`, for ever (long-poll), resuming from
// the last one seen after a transport error; it returns when ctx ends or fn returns an error.
func (c *Client) FollowEvents(ctx context.Context, board string, after int64, fn func(Event) error) error {
	for ctx.Err() == nil {
		page, err := c.Events(ctx, board, after, 500, 10000)
		if err != nil {
			if transient(err) {
				select {
				case <-ctx.Done():
				case <-time.After(500 * time.Millisecond):
				}
				continue
			}
			return err
		}
		for _, ev := range page.Events {
			if err := fn(ev); err != nil {
				return err
			}
		}
		if page.Next > after {
			after = page.Next
		}
	}
	return ctx.Err()
}

// StreamEvents reads the event stream (SSE) and calls fn per event until ctx ends, the
// stream ends or fn returns an error. lastEventID ("" for none) resumes after that id.
func (c *Client) StreamEvents(ctx context.Context, board, lastEventID string, fn func(Event) error) error {
	req, err := http.NewRequestWithContext(ctx, "GET", c.URL+"/v1/events/stream"+query("board", board), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	res, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode >= 400 {
		p := &Problem{Status: res.StatusCode, Method: "GET", Path: "/v1/events/stream"}
		var m map[string]any
		if json.NewDecoder(res.Body).Decode(&m) == nil {
			p.Code, _ = m["code"].(string)
			p.Detail, _ = m["detail"].(string)
		}
		return errorFor(p)
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var data []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		case line == "" && len(data) > 0:
			var ev Event
			if err := json.Unmarshal([]byte(strings.Join(data, "\n")), &ev); err != nil {
				return err
			}
			data = nil
			if err := fn(ev); err != nil {
				return err
			}
		}
	}
	return sc.Err()
}

func (c *Client) Attention(ctx context.Context, board string) (JSON, error) {
	return c.get(ctx, "/v1/attention"+query("board", board))
}

// ---- boards --------------------------------------------------------------------------------

func (c *Client) Boards(ctx context.Context) (JSON, error) { return c.get(ctx, "/v1/boards") }

// GetBoard reads one board: its columns with their limits and claimed counts, max_claims,
// the claimed total and the retry policy in force (§17).
func (c *Client) GetBoard(ctx context.Context, board string) (*Board, error) {
	out := &Board{}
	_, err := c.Call(ctx, "GET", "/v1/boards/"+esc(board), nil, nil, out)
	return out, err
}

func (c *Client) put(ctx context.Context, method, path string, body any) (JSON, error) {
	var out JSON
	_, err := c.Call(ctx, method, path, body, nil, &out)
	return out, err
}

func (c *Client) PutBoard(ctx context.Context, board string, config any) (JSON, error) {
	return c.put(ctx, "PUT", "/v1/boards/"+esc(board), config)
}

func (c *Client) RenameColumn(ctx context.Context, board, column, to string) (JSON, error) {
	return c.put(ctx, "POST", "/v1/boards/"+esc(board)+"/columns/"+esc(column)+"/rename", JSON{"to": to})
}

// Activity is the last hour per minute (§21; this replica's, reset on restart): {board,
// minute_ms, minutes, series: {claims, completions, failures, reaper_actions}, columns}.
// minutes 0: the whole hour.
func (c *Client) Activity(ctx context.Context, board string, minutes int) (JSON, error) {
	return c.get(ctx, "/v1/boards/"+esc(board)+"/activity"+query("minutes", itoa(minutes)))
}

func (c *Client) Subscriptions(ctx context.Context, board string) (JSON, error) {
	return c.get(ctx, "/v1/boards/"+esc(board)+"/subscriptions")
}

func (c *Client) GetSubscription(ctx context.Context, board, name string) (JSON, error) {
	return c.get(ctx, "/v1/boards/"+esc(board)+"/subscriptions/"+esc(name))
}

func (c *Client) PutSubscription(ctx context.Context, board, name string, config any) (JSON, error) {
	return c.put(ctx, "PUT", "/v1/boards/"+esc(board)+"/subscriptions/"+esc(name), config)
}

func (c *Client) DeleteSubscription(ctx context.Context, board, name string) error {
	_, err := c.Call(ctx, "DELETE", "/v1/boards/"+esc(board)+"/subscriptions/"+esc(name), nil, nil, nil)
	return err
}

func (c *Client) Deliveries(ctx context.Context, board, status string, limit int) (JSON, error) {
	return c.get(ctx, "/v1/deliveries"+query("board", board, "status", status, "limit", itoa(limit)))
}

func (c *Client) RetryDelivery(ctx context.Context, id string) (JSON, error) {
	return c.put(ctx, "POST", "/v1/deliveries/"+esc(id)+"/retry", nil)
}

func (c *Client) ReaperPass(ctx context.Context) (JSON, error) {
	return c.put(ctx, "POST", "/v1/reaper/pass", nil)
}
