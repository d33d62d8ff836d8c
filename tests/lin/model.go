// The sequential specification of the claim protocol with reads, per card, that Porcupine
// checks a recorded history against (DESIGN §3, §16; issue 31).
//
// A card's state is (column, holder, epoch): holder is the claim's marker ("" unclaimed),
// epoch the card's claim_epoch (kept by a release). The operations:
//
//	claim(marker)            fresh: only when unclaimed, and the epoch it returns is above every
//	                         epoch the card had (FS: exactly one more); again by the holder:
//	                         the same epoch, fresh false; held by another: 409
//	set_state(marker,e,to)   the holder with its epoch: moves the card; otherwise 409
//	release(marker,e)        the holder with its epoch: unclaimed, the epoch kept; otherwise 409
//	read                     the card as it stands: column, holder and epoch exactly
//
// An operation whose answer was lost (the connection died: boardd was killed) is
// indeterminate: it may or may not have happened, so the model steps to both states. An
// indeterminate fresh claim that happened took an epoch nobody saw; on the Mongo twin that
// epoch is any value above the card's (it is floored at the server clock), kept as unknown
// with its lower bound until a read or a write with it pins it.
package main

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

type OpKind uint8

const (
	OpClaim OpKind = iota
	OpSetState
	OpRelease
	OpRead
)

func (k OpKind) String() string {
	return [...]string{"claim", "set_state", "release", "read"}[k]
}

type ResKind uint8

const (
	ResOK ResKind = iota
	ResConflict
	ResIndet
)

// Input is what a client asked.
type Input struct {
	Kind   OpKind
	Card   string
	Marker string // claim, set_state, release
	Epoch  int64  // set_state, release: the token's epoch
	To     string // set_state
}

// Output is what it was answered.
type Output struct {
	Res    ResKind
	Epoch  int64  // claim OK: the token's epoch; read/set_state/release OK: claim_epoch
	Fresh  bool   // claim OK
	Col    string // read/set_state/release OK: the card's column
	Holder string // read/set_state/release OK: claim.marker; "" unclaimed
}

// State of one card. Epoch -1: unknown, above Low.
type State struct {
	Col    string
	Holder string
	Epoch  int64
	Low    int64
}

// InitialColumn is where every card of a history starts (unclaimed, epoch 0).
const InitialColumn = "ready"

// Spec is the model's one choice: Exact (the FS twin) makes a fresh claim's epoch exactly
// the card's epoch + 1; otherwise (the Mongo twin) it only has to be above it.
type Spec struct {
	Exact bool
}

func (s State) epochIs(e int64) bool {
	if s.Epoch >= 0 {
		return s.Epoch == e
	}
	return e > s.Low
}

// pin: s with an unknown epoch fixed at e (the caller checked epochIs).
func (s State) pin(e int64) State {
	if s.Epoch < 0 {
		s.Epoch, s.Low = e, 0
	}
	return s
}

func (sp Spec) freshOK(s State, e int64) bool {
	if s.Epoch < 0 {
		return e > s.Low // (only the inexact spec ever has an unknown epoch)
	}
	if sp.Exact {
		return e == s.Epoch+1
	}
	return e > s.Epoch
}

// claimedUnseen: s after a fresh claim by marker whose answer nobody saw.
func (sp Spec) claimedUnseen(s State, marker string) State {
	if sp.Exact && s.Epoch >= 0 {
		return State{Col: s.Col, Holder: marker, Epoch: s.Epoch + 1}
	}
	low := s.Epoch
	if s.Epoch < 0 {
		low = s.Low
	}
	return State{Col: s.Col, Holder: marker, Epoch: -1, Low: low}
}

// Step: every state the card may be in after in answered out from s (none: impossible).
func (sp Spec) Step(s State, in Input, out Output) []State {
	switch in.Kind {
	case OpRead:
		if out.Res != ResOK {
			return []State{s}
		}
		if out.Col != s.Col || out.Holder != s.Holder || !s.epochIs(out.Epoch) {
			return nil
		}
		return []State{s.pin(out.Epoch)}
	case OpClaim:
		switch out.Res {
		case ResOK:
			if out.Fresh {
				if s.Holder != "" || !sp.freshOK(s, out.Epoch) {
					return nil
				}
				return []State{{Col: s.Col, Holder: in.Marker, Epoch: out.Epoch}}
			}
			if s.Holder != in.Marker || !s.epochIs(out.Epoch) {
				return nil
			}
			return []State{s.pin(out.Epoch)}
		case ResConflict:
			if s.Holder == "" || s.Holder == in.Marker {
				return nil
			}
			return []State{s}
		default:
			if s.Holder == "" {
				return []State{s, sp.claimedUnseen(s, in.Marker)}
			}
			return []State{s} // held: a re-claim only refreshes the lease; another's: 409
		}
	case OpSetState, OpRelease:
		match := s.Holder == in.Marker && s.epochIs(in.Epoch)
		after := s.pin(in.Epoch)
		if in.Kind == OpSetState {
			after.Col = in.To
		} else {
			after.Holder = ""
		}
		switch out.Res {
		case ResOK:
			if !match || out.Col != after.Col || out.Holder != after.Holder ||
				out.Epoch != after.Epoch {
				return nil
			}
			return []State{after}
		case ResConflict:
			if s.Holder == in.Marker && s.Epoch >= 0 && s.Epoch == in.Epoch {
				return nil // the holder's own fence: must have been accepted
			}
			return []State{s}
		default:
			if !match {
				return []State{s}
			}
			return []State{s, after}
		}
	}
	return nil
}

// Model: the porcupine model, partitioned by card.
func (sp Spec) Model() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			by := map[string][]porcupine.Operation{}
			var order []string
			for _, op := range h {
				c := op.Input.(Input).Card
				if _, ok := by[c]; !ok {
					order = append(order, c)
				}
				by[c] = append(by[c], op)
			}
			out := make([][]porcupine.Operation, 0, len(order))
			for _, c := range order {
				out = append(out, by[c])
			}
			return out
		},
		Init: func() []interface{} {
			return []interface{}{State{Col: InitialColumn}}
		},
		Step: func(state, input, output interface{}) []interface{} {
			next := sp.Step(state.(State), input.(Input), output.(Output))
			out := make([]interface{}, len(next))
			for i, s := range next {
				out[i] = s
			}
			return out
		},
		DescribeOperation: func(input, output interface{}) string {
			return describe(input.(Input), output.(Output))
		},
		DescribeState: func(state interface{}) string {
			s := state.(State)
			e := fmt.Sprint(s.Epoch)
			if s.Epoch < 0 {
				e = fmt.Sprintf(">%d", s.Low)
			}
			h := s.Holder
			if h == "" {
				h = "-"
			}
			return fmt.Sprintf("%s %s@%s", s.Col, h, e)
		},
	}
	return nm.ToModel()
}

func describe(in Input, out Output) string {
	var call string
	switch in.Kind {
	case OpClaim:
		call = fmt.Sprintf("%s claim(%s)", in.Card, in.Marker)
	case OpSetState:
		call = fmt.Sprintf("%s set_state(%s@%d, %s)", in.Card, in.Marker, in.Epoch, in.To)
	case OpRelease:
		call = fmt.Sprintf("%s release(%s@%d)", in.Card, in.Marker, in.Epoch)
	default:
		call = fmt.Sprintf("%s read", in.Card)
	}
	switch out.Res {
	case ResConflict:
		return call + " -> 409"
	case ResIndet:
		return call + " -> ?"
	}
	if in.Kind == OpClaim {
		return fmt.Sprintf("%s -> epoch %d fresh=%v", call, out.Epoch, out.Fresh)
	}
	h := out.Holder
	if h == "" {
		h = "-"
	}
	return fmt.Sprintf("%s -> %s %s@%d", call, out.Col, h, out.Epoch)
}
