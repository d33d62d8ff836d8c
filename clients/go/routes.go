// One method per route of openapi/openapi.yaml, and Routes: "METHOD /path/{param}" -> the
// method's name (routes_test.go checks both ways against the OpenAPI document).
package boardd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// Routes maps each route this client calls to its method.
var Routes = map[string]string{
	"GET /healthz":                               "Healthz",
	"GET /readyz":                                "Readyz",
	"GET /metrics":                               "Metrics",
	"GET /openapi.json":                          "OpenAPIJSON",
	"GET /openapi.yaml":                          "OpenAPIYAML",
	"GET /v1/whoami":                             "Whoami",
	"GET /":                                      "Root",
	"GET /ui":                                    "UI",
	"GET /ui/":                                   "UIIndex",
	"GET /ui/{file}":                             "UIFile",
	"POST /mcp":                                  "MCP",
	"POST /v1/cards":                             "CreateCard",
	"GET /v1/cards":                              "ListCards",
	"GET /v1/cards/{id}":                         "GetCard",
	"PATCH /v1/cards/{id}":                       "UpdateCard",
	"DELETE /v1/cards/{id}":                      "DeleteCard",
	"POST /v1/cards/{id}/reopen":                 "Reopen",
	"PATCH /v1/cards/{id}/state":                 "SetState",
	"PUT /v1/cards/{id}/labels":                  "SetLabels",
	"PATCH /v1/cards/{id}/labels":                "AdjustLabels",
	"POST /v1/cards/{id}/comments":               "Comment",
	"GET /v1/cards/{id}/runs":                    "CardRuns",
	"POST /v1/cards/{id}/claim":                  "Claim",
	"POST /v1/cards/{id}/renew":                  "Renew",
	"POST /v1/cards/{id}/release":                "Release",
	"POST /v1/cards/{id}/claim/revoke":           "RevokeClaim",
	"PUT /v1/cards/{id}/last-run":                "SetLastRun",
	"PUT /v1/cards/{id}/awaiting-input":          "SetAwaitingInput",
	"PUT /v1/cards/{id}/gave-up":                 "SetGaveUp",
	"POST /v1/cards/{id}/agent-tokens":           "AgentToken",
	"POST /v1/boards/{b}/claim-next":             "ClaimNext",
	"POST /v1/claims/renew":                      "RenewMany",
	"POST /v1/claims/release":                    "ReleaseMany",
	"GET /v1/labels":                             "Labels",
	"POST /v1/labels/rename":                     "RenameLabel",
	"POST /v1/labels/merge":                      "MergeLabels",
	"DELETE /v1/labels/{name}":                   "DeleteLabel",
	"POST /v1/runs":                              "CreateRun",
	"GET /v1/runs":                               "ListRuns",
	"GET /v1/runs/{id}":                          "GetRun",
	"PATCH /v1/runs/{id}":                        "UpdateRun",
	"DELETE /v1/runs/{id}":                       "PruneRun",
	"POST /v1/runs/{id}/heartbeat":               "HeartbeatRun",
	"POST /v1/runs/{id}/cancel":                  "CancelRun",
	"POST /v1/runs/{id}/output":                  "AppendOutput",
	"GET /v1/events":                             "Events",
	"GET /v1/events/stream":                      "StreamEvents",
	"GET /v1/attention":                          "Attention",
	"GET /v1/boards":                             "Boards",
	"GET /v1/boards/{b}":                         "GetBoard",
	"PUT /v1/boards/{b}":                         "PutBoard",
	"POST /v1/boards/{b}/columns/{c}/rename":     "RenameColumn",
	"GET /v1/boards/{b}/activity":                "Activity",
	"GET /v1/boards/{b}/subscriptions":           "Subscriptions",
	"GET /v1/boards/{b}/subscriptions/{name}":    "GetSubscription",
	"PUT /v1/boards/{b}/subscriptions/{name}":    "PutSubscription",
	"DELETE /v1/boards/{b}/subscriptions/{name}": "DeleteSubscription",
	"GET /v1/deliveries":                         "Deliveries",
	"POST /v1/deliveries/{id}/retry":             "RetryDelivery",
	"GET /v1/reaper":                             "Reaper",
	"POST /v1/reaper/pass":                       "ReaperPass",
}

// ---- service -------------------------------------------------------------------------------

func (c *Client) get(ctx context.Context, path string) (JSON, error) {
	var out JSON
	_, err := c.Call(ctx, "GET", path, nil, nil, &out)
	return out, err
}

func (c *Client) text(ctx context.Context, path string) (string, error) {
	var raw []byte
	_, err := c.Call(ctx, "GET", path, nil, nil, &raw)
	return string(raw), err
}

func (c *Client) Healthz(ctx context.Context) (JSON, error)   { return c.get(ctx, "/healthz") }
func (c *Client) Readyz(ctx context.Context) (JSON, error)    { return c.get(ctx, "/readyz") }
func (c *Client) Whoami(ctx context.Context) (JSON, error)    { return c.get(ctx, "/v1/whoami") }
func (c *Client) Reaper(ctx context.Context) (JSON, error)    { return c.get(ctx, "/v1/reaper") }
func (c *Client) Metrics(ctx context.Context) (string, error) { return c.text(ctx, "/metrics") }
func (c *Client) OpenAPIJSON(ctx context.Context) (JSON, error) {
	return c.get(ctx, "/openapi.json")
}
func (c *Client) OpenAPIYAML(ctx context.Context) (string, error) {
	return c.text(ctx, "/openapi.yaml")
}

// Root reads the server's root (it sends a browser to the UI; redirects are followed).
func (c *Client) Root(ctx context.Context) (string, error)    { return c.text(ctx, "/") }
func (c *Client) UI(ctx context.Context) (string, error)      { return c.text(ctx, "/ui") }
func (c *Client) UIIndex(ctx context.Context) (string, error) { return c.text(ctx, "/ui/") }
func (c *Client) UIFile(ctx context.Context, file string) (string, error) {
	return c.text(ctx, "/ui/"+esc(file))
}

// MCP sends one JSON-RPC message to the MCP endpoint (session: Mcp-Session-Id, or "").
func (c *Client) MCP(ctx context.Context, message any, session string) (json.RawMessage, error) {
	h := http.Header{"Accept": {"application/json, text/event-stream"}}
	if session != "" {
		h.Set("Mcp-Session-Id", session)
	}
	var raw []byte
	_, err := c.Call(ctx, "POST", "/mcp", message, h, &raw)
	return raw, err
}

// ---- cards ---------------------------------------------------------------------------------

// CreateCard creates one card (a NewCard, or a map or struct of its fields); idemKey:
// Idempotency-Key or "".
func (c *Client) CreateCard(ctx context.Context, card any, idemKey string) (*Card, error) {
	var h http.Header
	if idemKey != "" {
		h = http.Header{"Idempotency-Key": {idemKey}}
	}
	out := &Card{}
	_, err := c.Call(ctx, "POST", "/v1/cards", card, h, out)
	return out, err
}

// CreateCards is the batch create (§18): at most 1 000 bodies, one result per item.
func (c *Client) CreateCards(ctx context.Context, cards []any) ([]JSON, error) {
	var out struct {
		Results []JSON `json:"results"`
	}
	_, err := c.Call(ctx, "POST", "/v1/cards", cards, nil, &out)
	return out.Results, err
}

type ListCardsOpts struct {
	Board, State, Label, Claimed, After string // Claimed: "true", "false" or ""
	Limit                               int
}

func (c *Client) ListCards(ctx context.Context, o ListCardsOpts) (*CardList, error) {
	out := &CardList{}
	_, err := c.Call(ctx, "GET", "/v1/cards"+query("board", o.Board, "state", o.State, "label",
		o.Label, "claimed", o.Claimed, "limit", itoa(o.Limit), "after", o.After), nil, nil, out)
	return out, err
}

func (c *Client) GetCard(ctx context.Context, id string) (*Card, error) {
	out := &Card{}
	_, err := c.Call(ctx, "GET", "/v1/cards/"+esc(id), nil, nil, out)
	return out, err
}

// UpdateCard: title, body, blockers, priority, not_before ...
func (c *Client) UpdateCard(ctx context.Context, id string, fields JSON) (*Card, error) {
	out := &Card{}
	_, err := c.Call(ctx, "PATCH", "/v1/cards/"+esc(id), fields, nil, out)
	return out, err
}

func (c *Client) DeleteCard(ctx context.Context, id string) error {
	_, err := c.Call(ctx, "DELETE", "/v1/cards/"+esc(id), nil, nil, nil)
	return err
}

func (c *Client) card(ctx context.Context, method, path string, body any, h http.Header) (*Card, error) {
	out := &Card{}
	_, err := c.Call(ctx, method, path, body, h, out)
	return out, err
}

func omit(m JSON) JSON {
	for k, v := range m {
		if v == "" || v == nil || v == 0 || v == false {
			delete(m, k)
		}
	}
	return m
}

func (c *Client) Reopen(ctx context.Context, id, to, reason string) (*Card, error) {
	return c.card(ctx, "POST", "/v1/cards/"+esc(id)+"/reopen", omit(JSON{"to": to, "reason": reason}), nil)
}

// StateOpts: with Marker the holder's fenced move (Epoch in If-Match; Release also releases,
// one step; Retry with Release counts an attempt too, §17); without, SetStateFrom (bots give
// From; operators may omit it).
type StateOpts struct {
	From, Reason, Marker string
	Epoch                int64
	Release, Retry       bool
}

func (c *Client) SetState(ctx context.Context, id, to string, o StateOpts) (*Card, error) {
	path := "/v1/cards/" + esc(id) + "/state"
	if o.Marker != "" {
		return c.card(ctx, "PATCH", path, omit(JSON{"marker": o.Marker, "to": to,
			"reason": o.Reason, "release": o.Release, "retry": o.Retry}), fence(o.Epoch))
	}
	return c.card(ctx, "PATCH", path, omit(JSON{"from": o.From, "to": to, "reason": o.Reason}), nil)
}

func (c *Client) SetLabels(ctx context.Context, id string, labels []string) (*Card, error) {
	if labels == nil {
		labels = []string{}
	}
	return c.card(ctx, "PUT", "/v1/cards/"+esc(id)+"/labels", JSON{"labels": labels}, nil)
}

func (c *Client) AdjustLabels(ctx context.Context, id string, add, remove []string) (*Card, error) {
	if add == nil {
		add = []string{}
	}
	if remove == nil {
		remove = []string{}
	}
	return c.card(ctx, "PATCH", "/v1/cards/"+esc(id)+"/labels", JSON{"add": add, "remove": remove}, nil)
}

// Comment: a bot's or operator's comment; with marker the claim holder's (fenced by epoch).
func (c *Client) Comment(ctx context.Context, id, body, marker string, epoch int64) (JSON, error) {
	var out JSON
	var err error
	if marker != "" {
		_, err = c.Call(ctx, "POST", "/v1/cards/"+esc(id)+"/comments",
			JSON{"marker": marker, "body": body}, fence(epoch), &out)
	} else {
		_, err = c.Call(ctx, "POST", "/v1/cards/"+esc(id)+"/comments", JSON{"body": body}, nil, &out)
	}
	return out, err
}

// CardRuns lists one page of a card's runs, newest first (§20): {runs, next}.
func (c *Client) CardRuns(ctx context.Context, id string, limit int, after string) (JSON, error) {
	return c.get(ctx, "/v1/cards/"+esc(id)+"/runs"+query("limit", itoa(limit), "after", after))
}

// ---- claims --------------------------------------------------------------------------------

func (c *Client) Claim(ctx context.Context, id, marker string, leaseMs int) (*Token, error) {
	out := &Token{}
	_, err := c.Call(ctx, "POST", "/v1/cards/"+esc(id)+"/claim",
		omit(JSON{"marker": marker, "lease_ms": leaseMs}), nil, out)
	return out, err
}

func (c *Client) Renew(ctx context.Context, id, marker string, epoch int64, leaseMs int) (*Renewed, error) {
	out := &Renewed{}
	_, err := c.Call(ctx, "POST", "/v1/cards/"+esc(id)+"/renew",
		drop0(JSON{"marker": marker, "epoch": epoch, "lease_ms": leaseMs}, "lease_ms"), nil, out)
	return out, err
}

// Release gives the claim back; retry (§17) adds an attempt and a backoff (NotBefore), or at
// the board's retry.MaxAttempts has the server file the card into the failed column with
// gave_up {reason: "attempts_exhausted"}. It answers the card as released (or filed).
func (c *Client) Release(ctx context.Context, id, marker string, epoch int64, retry bool) (*Card, error) {
	b := JSON{"marker": marker, "epoch": epoch}
	if retry {
		b["retry"] = true
	}
	return c.card(ctx, "POST", "/v1/cards/"+esc(id)+"/release", b, nil)
}

// RevokeClaim drops any claim on the card (operator).
func (c *Client) RevokeClaim(ctx context.Context, id string) (*Card, error) {
	return c.card(ctx, "POST", "/v1/cards/"+esc(id)+"/claim/revoke", nil, nil)
}

func (c *Client) SetLastRun(ctx context.Context, id, marker string, epoch int64, runID string) (*Card, error) {
	return c.card(ctx, "PUT", "/v1/cards/"+esc(id)+"/last-run", JSON{"marker": marker, "run_id": runID}, fence(epoch))
}

func (c *Client) SetAwaitingInput(ctx context.Context, id, marker string, epoch int64, awaiting bool) (*Card, error) {
	return c.card(ctx, "PUT", "/v1/cards/"+esc(id)+"/awaiting-input",
		JSON{"marker": marker, "awaiting_input": awaiting}, fence(epoch))
}

func (c *Client) SetGaveUp(ctx context.Context, id, marker string, epoch int64, gaveUp any) (*Card, error) {
	return c.card(ctx, "PUT", "/v1/cards/"+esc(id)+"/gave-up", JSON{"marker": marker, "gave_up": gaveUp}, fence(epoch))
}

// AgentToken mints a bot token bound to the claim (DESIGN §13); ttlMs 0: the default.
func (c *Client) AgentToken(ctx context.Context, id, marker string, epoch int64, caps []string, ttlMs int) (JSON, error) {
	var out JSON
	_, err := c.Call(ctx, "POST", "/v1/cards/"+esc(id)+"/agent-tokens",
		omit(JSON{"marker": marker, "caps": caps, "ttl_ms": ttlMs}), fence(epoch), &out)
	return out, err
}

type ClaimNextOpts struct {
	LeaseMs, WaitMs int
	Columns, Labels []string
	Count           int    // §18: up to Count claims in one answer (0: one, today's shape)
	IdempotencyKey  string // §18
}

// ClaimNext claims the board's best free card(s): none (nil, nil) when nothing came within
// WaitMs (204). A 200 that is not JSON (a proxy's page) is an error wrapping
// ErrUnexpectedAnswer.
func (c *Client) ClaimNext(ctx context.Context, board, marker string, o ClaimNextOpts) ([]Claimed, error) {
	b := omit(JSON{"marker": marker, "lease_ms": o.LeaseMs, "wait_ms": o.WaitMs, "count": o.Count})
	if len(o.Columns) > 0 {
		b["columns"] = o.Columns
	}
	if len(o.Labels) > 0 {
		b["labels"] = o.Labels
	}
	var h http.Header
	if o.IdempotencyKey != "" {
		h = http.Header{"Idempotency-Key": {o.IdempotencyKey}}
	}
	var raw []byte
	st, err := c.call(ctx, "POST", "/v1/boards/"+esc(board)+"/claim-next", b, h, &raw,
		c.Timeout+msDur(o.WaitMs))
	if err != nil || st == 204 || len(raw) == 0 {
		return nil, err
	}
	var many struct {
		Claims []Claimed `json:"claims"`
	}
	if err := json.Unmarshal(raw, &many); err == nil && many.Claims != nil {
		return many.Claims, nil
	}
	var one Claimed
	if err := json.Unmarshal(raw, &one); err != nil {
		return nil, fmt.Errorf("%w: claim-next: %v (%.200q)", ErrUnexpectedAnswer, err, raw)
	}
	return []Claimed{one}, nil
}

// RenewMany renews many claims in one request (§18); one result per token.
func (c *Client) RenewMany(ctx context.Context, tokens []TokenRef, leaseMs int) ([]BatchResult, error) {
	var out struct {
		Results []BatchResult `json:"results"`
	}
	_, err := c.Call(ctx, "POST", "/v1/claims/renew",
		drop0(JSON{"tokens": tokens, "lease_ms": leaseMs}, "lease_ms"), nil, &out)
	return out.Results, err
}

// ReleaseMany files and releases many claims in one request (§18).
func (c *Client) ReleaseMany(ctx context.Context, tokens []TokenRef) ([]BatchResult, error) {
	var out struct {
		Results []BatchResult `json:"results"`
	}
	_, err := c.Call(ctx, "POST", "/v1/claims/release", JSON{"tokens": tokens}, nil, &out)
	return out.Results, err
}

func drop0(m JSON, k string) JSON {
	if m[k] == 0 {
		delete(m, k)
	}
	return m
}
