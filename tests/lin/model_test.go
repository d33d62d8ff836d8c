// The checker's own sanity (issue 31: "it rejects injected anomalies"): hand-made histories,
// each the smallest form of a break the check exists to find, must be found not
// linearizable; their lawful neighbours (the same operations with an order or an answer that
// is allowed) must pass. Also the history file round trip and the indeterminate bound.
package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

const c1 = "c1"

type hop struct {
	client   int
	in       Input
	out      Output
	call, rt int64
}

func ops(h []hop) []porcupine.Operation {
	out := make([]porcupine.Operation, len(h))
	for i, o := range h {
		out[i] = porcupine.Operation{ClientId: o.client, Input: o.in, Output: o.out,
			Call: o.call, Return: o.rt}
	}
	return out
}

func claim(cl int, m string, call, rt int64, out Output) hop {
	return hop{cl, Input{Kind: OpClaim, Card: c1, Marker: m}, out, call, rt}
}
func setState(cl int, m string, e int64, to string, call, rt int64, out Output) hop {
	return hop{cl, Input{Kind: OpSetState, Card: c1, Marker: m, Epoch: e, To: to}, out, call, rt}
}
func release(cl int, m string, e int64, call, rt int64, out Output) hop {
	return hop{cl, Input{Kind: OpRelease, Card: c1, Marker: m, Epoch: e}, out, call, rt}
}
func read(cl int, call, rt int64, col, holder string, e int64) hop {
	return hop{cl, Input{Kind: OpRead, Card: c1}, Output{Res: ResOK, Col: col, Holder: holder,
		Epoch: e}, call, rt}
}

var (
	indet    = Output{Res: ResIndet}
	conflict = Output{Res: ResConflict}
)

func fresh(e int64) Output { return Output{Res: ResOK, Epoch: e, Fresh: true} }
func again(e int64) Output { return Output{Res: ResOK, Epoch: e} }
func card(col, holder string, e int64) Output {
	return Output{Res: ResOK, Col: col, Holder: holder, Epoch: e}
}

func check(t *testing.T, sp Spec, name string, h []hop, want porcupine.CheckResult) {
	t.Helper()
	got := porcupine.CheckOperationsTimeout(sp.Model(), ops(h), 10*time.Second)
	if got != want {
		t.Errorf("%s: %s, want %s", name, got, want)
	}
}

var fs, mongo = Spec{Exact: true}, Spec{Exact: false}

// The FS break of issue 31 item 1: a read shows m3 holding at an epoch from a claim that was
// never acknowledged (its connection died at the kill); after the restart another worker is
// handed that same epoch fresh. A reader saw an epoch that later repeats.
func TestRejectsReadOfAnEpochThatRepeats(t *testing.T) {
	h := []hop{
		claim(0, "m1", 0, 10, fresh(1)),
		release(0, "m1", 1, 11, 12, card("ready", "", 1)),
		claim(1, "m3", 20, 100, indet), // the kill at 100
		read(2, 30, 31, "ready", "m3", 2),
		claim(3, "m4", 200, 201, fresh(2)),
	}
	for _, sp := range []Spec{fs, mongo} {
		check(t, sp, "epoch read then handed out again", h, porcupine.Illegal)
	}
	// Without the read, the lost claim simply did not happen: lawful.
	check(t, fs, "lost claim, no read", append(h[:3:3], h[4]), porcupine.Ok)
	// Or m3's claim happened and m3 released it before m4's (epoch 3 then): lawful.
	ok := append(h[:4:4], release(1, "m3", 2, 150, 151, card("ready", "", 2)),
		claim(3, "m4", 200, 201, fresh(3)))
	check(t, fs, "claim seen, released, claimed again", ok, porcupine.Ok)
}

// A read shows an unacknowledged state write; after the restart the card is back.
func TestRejectsReadOfAWriteTakenBack(t *testing.T) {
	h := []hop{
		claim(0, "m1", 0, 1, fresh(1)),
		setState(0, "m1", 1, "in_progress", 2, 3, card("in_progress", "m1", 1)),
		setState(0, "m1", 1, "review", 4, 100, indet),
		read(1, 10, 11, "review", "m1", 1),
		read(1, 200, 201, "in_progress", "m1", 1),
	}
	check(t, fs, "a write read, then gone", h, porcupine.Illegal)
	check(t, fs, "the write never read", append(h[:3:3], h[4]), porcupine.Ok)
}

func TestRejectsStaleRead(t *testing.T) {
	h := []hop{
		claim(0, "m1", 0, 1, fresh(1)),
		setState(0, "m1", 1, "review", 2, 3, card("review", "m1", 1)),
		read(1, 4, 5, "ready", "m1", 1),
	}
	check(t, fs, "a read older than an acknowledged write", h, porcupine.Illegal)
	h[2].call = 2 // concurrent with the write: either is lawful
	check(t, fs, "a read concurrent with the write", h, porcupine.Ok)
}

func TestRejectsTwoHolders(t *testing.T) {
	h := []hop{
		claim(0, "m1", 0, 1, fresh(1)),
		claim(1, "m2", 2, 3, fresh(2)),
	}
	for _, sp := range []Spec{fs, mongo} {
		check(t, sp, "two fresh claims without a release", h, porcupine.Illegal)
	}
}

// The Mongo break of issue 31 item 7: a claim of a free card answered 409.
func TestRejectsConflictOnAFreeCard(t *testing.T) {
	h := []hop{
		claim(0, "m1", 0, 1, fresh(5000)),
		release(0, "m1", 5000, 2, 3, card("ready", "", 5000)),
		claim(1, "m2", 4, 5, conflict),
	}
	check(t, mongo, "409 on a free card", h, porcupine.Illegal)
	h[2].call = 1 // concurrent with the release: m1 may still hold it
	check(t, mongo, "409 concurrent with the release", h, porcupine.Ok)
}

// ... and a holder told its valid fence is stale.
func TestRejectsFenceRefusedToItsHolder(t *testing.T) {
	h := []hop{
		claim(0, "m1", 0, 1, fresh(1)),
		release(0, "m1", 1, 2, 3, conflict),
	}
	check(t, fs, "the holder's release refused", h, porcupine.Illegal)
}

func TestEpochs(t *testing.T) {
	grow := []hop{
		claim(0, "m1", 0, 1, fresh(1000)),
		release(0, "m1", 1000, 2, 3, card("ready", "", 1000)),
		claim(1, "m2", 4, 5, fresh(7000)),
	}
	check(t, mongo, "Mongo: the epoch grows by any step", grow, porcupine.Ok)
	check(t, fs, "FS: the epoch grows by exactly one", grow, porcupine.Illegal)
	back := []hop{
		claim(0, "m1", 0, 1, fresh(1000)),
		release(0, "m1", 1000, 2, 3, card("ready", "", 1000)),
		claim(1, "m2", 4, 5, fresh(1000)),
	}
	check(t, mongo, "Mongo: an epoch handed out twice", back, porcupine.Illegal)
	again := []hop{
		claim(0, "m1", 0, 1, fresh(1)),
		claim(0, "m1", 2, 3, again(1)),
		claim(0, "m1", 4, 5, again(2)),
	}
	check(t, fs, "a re-claim that changes the epoch", again, porcupine.Illegal)
}

// An indeterminate fresh claim on Mongo takes an epoch nobody saw: a later read pins it, and
// it must be above every earlier one.
func TestUnseenMongoEpoch(t *testing.T) {
	h := []hop{
		claim(0, "m1", 0, 1, fresh(1000)),
		release(0, "m1", 1000, 2, 3, card("ready", "", 1000)),
		claim(1, "m2", 4, 50, indet),
		read(2, 60, 61, "ready", "m2", 4000),
		claim(1, "m2", 70, 71, again(4000)),
		release(1, "m2", 4000, 72, 73, card("ready", "", 4000)),
	}
	check(t, mongo, "an unseen epoch pinned by a read", h, porcupine.Ok)
	h[3].out.Epoch = 900
	h[4].out.Epoch = 900
	h[5].in.Epoch, h[5].out.Epoch = 900, 900
	check(t, mongo, "an unseen epoch below the last one", h, porcupine.Illegal)
}

// The bound on an indeterminate operation: it may have happened only before its Return (the
// kill). A read after the restart that shows it, long after, is still fine (it happened
// before the kill); one that shows it did not, then one that shows it did, is not.
func TestIndeterminateIsBounded(t *testing.T) {
	h := []hop{
		claim(0, "m1", 0, 1, fresh(1)),
		setState(0, "m1", 1, "review", 2, 10, indet),
		read(1, 20, 21, "ready", "m1", 1),
		read(1, 30, 31, "review", "m1", 1),
	}
	check(t, fs, "bounded: not happened, then happened", h, porcupine.Illegal)
	h[1].rt = 1 << 62 // unbounded: it may take effect at any time after its call
	check(t, fs, "unbounded: happened late", h, porcupine.Ok)
}

func TestHistoryFileRoundTrip(t *testing.T) {
	h := []hop{
		claim(0, "m1", 0, 1, fresh(1)),
		setState(0, "m1", 1, "review", 2, 10, indet),
		read(1, 20, 21, "review", "m1", 1),
	}
	path := filepath.Join(t.TempDir(), "h.jsonl")
	if err := writeHistory(path, ops(h), false); err != nil {
		t.Fatal(err)
	}
	back, exact, err := readHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	if exact || len(back) != len(h) {
		t.Fatalf("round trip: %d ops, exact %v", len(back), exact)
	}
	for i := range back {
		if back[i].Input.(Input) != h[i].in || back[i].Output.(Output) != h[i].out ||
			back[i].Call != h[i].call || back[i].Return != h[i].rt {
			t.Errorf("op %d: %+v", i, back[i])
		}
	}
	_ = os.Remove(path)
}
