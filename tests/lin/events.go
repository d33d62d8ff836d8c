// The events log beside the claim protocol (issue 31: "no event a reader saw is missing or
// different after a restart"): a follower pages through GET /v1/events during the run,
// across the kills, and keeps every event it was shown by seq; at the end the whole log is
// read again and every event seen must be there, the same.
package main

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync/atomic"
	"time"
)

type follower struct {
	c    *client
	seen map[int64]string // seq -> the event as first shown
	diff []string         // an event shown twice, differently, during the run
}

type eventsPage struct {
	Events []json.RawMessage `json:"events"`
	Next   *int64            `json:"next"`
}

func eventSeq(raw json.RawMessage) (int64, string, bool) {
	var e map[string]interface{}
	if json.Unmarshal(raw, &e) != nil {
		return 0, "", false
	}
	seq, ok := e["seq"].(float64)
	if !ok {
		return 0, "", false
	}
	canon, _ := json.Marshal(e) // map keys sorted: one form per content
	return int64(seq), string(canon), true
}

// page: one page after `after`; ok false on any failure (the server may be down).
func (f *follower) page(after int64, wait bool) (*eventsPage, bool) {
	q := fmt.Sprintf("/v1/events?after=%d&limit=500", after)
	if wait {
		q += "&wait_ms=200"
	}
	a := f.c.do("GET", q, nil, 0)
	if a.err != nil || a.status != 200 {
		return nil, false
	}
	var p eventsPage
	if json.Unmarshal(a.body, &p) != nil {
		return nil, false
	}
	return &p, true
}

func (f *follower) note(raw json.RawMessage) int64 {
	seq, canon, ok := eventSeq(raw)
	if !ok {
		return -1
	}
	if old, had := f.seen[seq]; had && old != canon && len(f.diff) < 10 {
		f.diff = append(f.diff, fmt.Sprintf("event %d shown as %s, later as %s", seq, old, canon))
	} else if !had {
		f.seen[seq] = canon
	}
	return seq
}

// follow: until stop, the tail of the log.
func (f *follower) follow(stop *atomic.Bool) {
	var after int64
	for !stop.Load() {
		p, ok := f.page(after, true)
		if !ok {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		for _, raw := range p.Events {
			if seq := f.note(raw); seq > after {
				after = seq
			}
		}
	}
}

// verify: the whole log now against what was seen; the problems found.
func (f *follower) verify() ([]string, int, error) {
	now := map[int64]string{}
	var after int64
	for {
		p, ok := f.page(after, false)
		if !ok {
			return nil, 0, fmt.Errorf("cannot read the events log at the end")
		}
		if len(p.Events) == 0 {
			break
		}
		for _, raw := range p.Events {
			seq, canon, ok := eventSeq(raw)
			if ok {
				now[seq] = canon
				if seq > after {
					after = seq
				}
			}
		}
	}
	probs := append([]string(nil), f.diff...)
	var seqs []int64
	for seq := range f.seen {
		seqs = append(seqs, seq)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	for _, seq := range seqs {
		got, ok := now[seq]
		switch {
		case !ok && len(probs) < 10:
			probs = append(probs, fmt.Sprintf("event %d was shown (%s) and is gone", seq,
				f.seen[seq]))
		case ok && got != f.seen[seq] && len(probs) < 10:
			probs = append(probs, fmt.Sprintf("event %d was shown as %s and is now %s", seq,
				f.seen[seq], got))
		}
	}
	return probs, len(f.seen), nil
}
