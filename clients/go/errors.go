// boardd's problem+json answers as Go errors (DESIGN §8, §17, §18, §20): *Problem carries the
// answer's status, code, detail (and title, type, Retry-After, the whole body), and each
// problem code has a type of its own wrapping it (*ClaimConflict, *TerminalStateExit,
// *CapacityReached, ...), so callers match with errors.As, or by code with IsCode. A code this
// client does not know yet stays a plain *Problem. ErrTransport wraps a request that got no
// answer; ErrUnexpectedAnswer a success answer that is not what the route answers (a proxy's
// page); ErrClaimLost is a worker's write refused locally because its claim is known lost.
package boardd

import (
	"errors"
	"fmt"
	"time"
)

// Problem is one error answer.
type Problem struct {
	Status     int
	Code       string
	Detail     string
	Title      string
	Type       string
	RetryAfter time.Duration
	Method     string
	Path       string
	Body       map[string]any
}

func (p *Problem) Error() string {
	where := ""
	if p.Method != "" {
		where = p.Method + " " + p.Path + ": "
	}
	return fmt.Sprintf("%s%d %s: %s", where, p.Status, p.Code, p.Detail)
}

// problem lets ProblemOf find the *Problem inside any typed error.
func (p *Problem) problem() *Problem { return p }

type problemer interface{ problem() *Problem }

// ProblemOf returns the answer behind err (nil when err is not a server's error answer).
func ProblemOf(err error) *Problem {
	var pr problemer
	if errors.As(err, &pr) {
		return pr.problem()
	}
	return nil
}

// IsCode tells whether err is an error answer with this problem code.
func IsCode(err error, code string) bool {
	p := ProblemOf(err)
	return p != nil && p.Code == code
}

// ErrTransport: no answer (connection refused or reset, a timeout). Wrapped with the cause.
var ErrTransport = errors.New("boardd: no answer")

// ErrUnexpectedAnswer: a 2xx answer whose body is not what the route answers (not JSON, or
// without the fields it must carry): something between the client and boardd answered, or the
// answer was mangled on the way. ClaimNext wraps it; the worker takes it as no answer.
var ErrUnexpectedAnswer = errors.New("boardd: unexpected answer")

// ErrClaimLost: a worker's write not sent because its claim is known lost.
var ErrClaimLost = errors.New("boardd: claim lost")

// ErrNoColumn: the worker's OnSuccess or OnFailure is not a column of its board (Run checks
// before it claims anything).
var ErrNoColumn = errors.New("boardd: no such column")

// One type per problem code, each wrapping the *Problem.
type (
	BadRequest             struct{ *Problem }
	Unauthorized           struct{ *Problem }
	Forbidden              struct{ *Problem }
	NotFound               struct{ *Problem }
	MethodNotAllowed       struct{ *Problem }
	ClaimConflict          struct{ *Problem }
	StateConflict          struct{ *Problem }
	DependentsOutstanding  struct{ *Problem }
	BlockersPending        struct{ *Problem }
	RunFinal               struct{ *Problem }
	AlreadyExists          struct{ *Problem }
	CapacityReached        struct{ *Problem } // §17
	NotYet                 struct{ *Problem } // §17
	IdempotencyKeyReused   struct{ *Problem } // §18
	IdempotencyKeyInFlight struct{ *Problem } // §18: the first is still being served; retry
	PayloadTooLarge        struct{ *Problem }
	UnsupportedMediaType   struct{ *Problem }
	TransitionRejected     struct{ *Problem }
	TerminalStateExit      struct{ *Problem } // a kind of transition_rejected (DESIGN §4)
	PreconditionRequired   struct{ *Problem }
	URITooLong             struct{ *Problem }
	NotImplemented         struct{ *Problem }
	InvalidBoard           struct{ *Problem }
	StoreUnavailable       struct{ *Problem }
	Busy                   struct{ *Problem }
	OutOfMemory            struct{ *Problem }
	Internal               struct{ *Problem }
)

// Codes maps each problem code to the constructor of its type.
var Codes = map[string]func(*Problem) error{
	"bad_request":               func(p *Problem) error { return &BadRequest{p} },
	"unauthorized":              func(p *Problem) error { return &Unauthorized{p} },
	"forbidden":                 func(p *Problem) error { return &Forbidden{p} },
	"not_found":                 func(p *Problem) error { return &NotFound{p} },
	"method_not_allowed":        func(p *Problem) error { return &MethodNotAllowed{p} },
	"claim_conflict":            func(p *Problem) error { return &ClaimConflict{p} },
	"state_conflict":            func(p *Problem) error { return &StateConflict{p} },
	"dependents_outstanding":    func(p *Problem) error { return &DependentsOutstanding{p} },
	"blockers_pending":          func(p *Problem) error { return &BlockersPending{p} },
	"run_final":                 func(p *Problem) error { return &RunFinal{p} },
	"already_exists":            func(p *Problem) error { return &AlreadyExists{p} },
	"capacity_reached":          func(p *Problem) error { return &CapacityReached{p} },
	"not_yet":                   func(p *Problem) error { return &NotYet{p} },
	"idempotency_key_reused":    func(p *Problem) error { return &IdempotencyKeyReused{p} },
	"idempotency_key_in_flight": func(p *Problem) error { return &IdempotencyKeyInFlight{p} },
	"payload_too_large":         func(p *Problem) error { return &PayloadTooLarge{p} },
	"unsupported_media_type":    func(p *Problem) error { return &UnsupportedMediaType{p} },
	"transition_rejected":       func(p *Problem) error { return &TransitionRejected{p} },
	"terminal_state_exit":       func(p *Problem) error { return &TerminalStateExit{p} },
	"precondition_required":     func(p *Problem) error { return &PreconditionRequired{p} },
	"uri_too_long":              func(p *Problem) error { return &URITooLong{p} },
	"not_implemented":           func(p *Problem) error { return &NotImplemented{p} },
	"invalid_board":             func(p *Problem) error { return &InvalidBoard{p} },
	"store_unavailable":         func(p *Problem) error { return &StoreUnavailable{p} },
	"busy":                      func(p *Problem) error { return &Busy{p} },
	"out_of_memory":             func(p *Problem) error { return &OutOfMemory{p} },
	"internal":                  func(p *Problem) error { return &Internal{p} },
}

// Unwrap of a terminal_state_exit is a *TransitionRejected, so both match it.
func (e *TerminalStateExit) Unwrap() error { return &TransitionRejected{e.Problem} }

var byStatus = map[int]string{400: "bad_request", 401: "unauthorized", 403: "forbidden",
	404: "not_found", 405: "method_not_allowed", 413: "payload_too_large",
	415: "unsupported_media_type", 428: "precondition_required", 503: "store_unavailable"}

// errorFor makes the typed error of an error answer.
func errorFor(p *Problem) error {
	if p.Code == "" {
		if c, ok := byStatus[p.Status]; ok {
			p.Code = c
		} else if p.Status >= 500 {
			p.Code = "internal"
		} else {
			p.Code = fmt.Sprintf("http_%d", p.Status)
		}
	}
	if mk, ok := Codes[p.Code]; ok {
		return mk(p)
	}
	return p
}

// transient: no answer, or an answer that says "again later".
func transient(err error) bool {
	return errors.Is(err, ErrTransport) || IsCode(err, "store_unavailable") || IsCode(err, "busy")
}
