// The worker's per-job writes (run, outcome, release), the renew tick and the graceful stop
// (the claiming side is in worker.go).
package boardd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// write sends one fenced write, again while no answer comes (network, 503) and the lease
// lasts; nothing when the claim is known lost (ErrClaimLost).
func (w *Worker) write(j *Job, fn func(ctx context.Context) error) error {
	delay := 100 * time.Millisecond
	for {
		if j.isLost() {
			return fmt.Errorf("%w: card %s", ErrClaimLost, j.Card.ID)
		}
		err := fn(context.Background())
		var cc *ClaimConflict
		if errors.As(err, &cc) {
			w.lose(j, err)
			return err
		}
		if err == nil || !transient(err) || time.Now().Add(delay).After(j.end()) {
			return err
		}
		time.Sleep(delay)
		delay = min(2*delay, 2*time.Second)
	}
}

func lostErr(err error) bool {
	var cc *ClaimConflict
	return errors.Is(err, ErrClaimLost) || errors.As(err, &cc)
}

func (w *Worker) work(j *Job) {
	defer w.unhold(j)
	c := w.Client
	err := w.write(j, func(ctx context.Context) error {
		run, err := c.CreateRun(ctx, RunCreate{CardID: j.Card.ID, Marker: j.Token.Marker,
			Status: "running", LeaseMs: int(j.Token.LeaseMs)})
		if err == nil {
			j.RunID = run.ID
		}
		return err
	})
	if err == nil {
		err = w.write(j, func(ctx context.Context) error {
			_, err := c.SetLastRun(ctx, j.Card.ID, j.Token.Marker, j.Token.Epoch, j.RunID)
			return err
		})
	}
	if err != nil {
		if lostErr(err) {
			w.stats.lost.Add(1)
			return
		}
		w.Opts.Logf("boardd: card %s: the run could not be started: %v", j.Card.ID, err)
		w.stats.errors.Add(1)
		w.release(j, false)
		return
	}
	result, herr := w.call(j)
	w.finish(j, result, herr)
}

func (w *Worker) call(j *Job) (result any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v", r)
		}
	}()
	return w.Handler(j.Ctx, j)
}

func (w *Worker) finish(j *Job, result any, herr error) {
	c := w.Client
	j.mu.Lock()
	lost, abandoned, parked := j.lost, j.abandoned, j.parked
	j.mu.Unlock()
	switch {
	case lost:
		w.stats.lost.Add(1)
		return
	case abandoned:
		return // counted when it was released for it
	case parked:
		w.stats.parked.Add(1)
		return
	}
	stopping := herr != nil && errors.Is(context.Cause(j.Ctx), ErrStopping)
	u := RunUpdate{}
	var counter = &w.stats.succeeded
	switch {
	case stopping:
		u.Status, counter = "failed_resumable", &w.stats.stopped
	case herr == nil:
		u.Status = "finished"
	case errors.Is(herr, ErrRetry) || w.Opts.OnFailure == "retry":
		u.Status, counter = "failed_resumable", &w.stats.retried
	default:
		u.Status, counter = "failed", &w.stats.failed
	}
	if herr == nil {
		u.Result, u.HasResult = result, true
	} else {
		u.Error = herr.Error()
		if len(u.Error) > 4000 {
			u.Error = u.Error[:4000]
		}
	}
	err := w.write(j, func(ctx context.Context) error {
		_, err := c.UpdateRun(ctx, j.RunID, j.Token.Marker, u)
		return err
	})
	var rf *RunFinal
	if errors.As(err, &rf) { // an operator cancelled the run: parked, as boardctl does
		j.mu.Lock()
		j.parked = true
		j.mu.Unlock()
		w.stats.parked.Add(1)
		return
	}
	if err == nil {
		switch {
		case u.Status == "failed_resumable":
			err = w.releaseErr(j, !stopping)
		default:
			to, reason := w.Opts.OnSuccess, "run_finished"
			if herr != nil {
				to, reason = w.Opts.OnFailure, "run_failed"
			}
			err = w.write(j, func(ctx context.Context) error {
				_, err := c.SetState(ctx, j.Card.ID, to, StateOpts{Marker: j.Token.Marker,
					Epoch: j.Token.Epoch, Reason: reason, Release: true})
				return err
			})
			if err != nil && !lostErr(err) { // the column refused: give the card back at once
				w.Opts.Logf("boardd: card %s: filing into %s refused: %v", j.Card.ID, to, err)
				w.release(j, false)
				w.stats.errors.Add(1)
				return
			}
		}
	}
	if err != nil {
		if lostErr(err) {
			w.stats.lost.Add(1)
		} else {
			w.Opts.Logf("boardd: card %s: %v", j.Card.ID, err)
			w.stats.errors.Add(1)
		}
		return
	}
	counter.Add(1)
}

func (w *Worker) release(j *Job, retry bool) {
	if err := w.releaseErr(j, retry); err != nil {
		w.Opts.Logf("boardd: card %s: release: %v", j.Card.ID, err)
	}
}

// releaseErr: the fenced release, with retry (§17) when asked and the server takes it.
func (w *Worker) releaseErr(j *Job, retry bool) error {
	defer w.unhold(j)
	rel := func(retry bool) error {
		return w.write(j, func(ctx context.Context) error {
			_, err := w.Client.Release(ctx, j.Card.ID, j.Token.Marker, j.Token.Epoch, retry)
			return err
		})
	}
	if retry && w.hasRetry.Load() >= 0 {
		err := rel(true)
		var br *BadRequest
		if err == nil {
			w.hasRetry.Store(1)
			return nil
		}
		if !errors.As(err, &br) || w.hasRetry.Load() > 0 || !strings.Contains(br.Detail, "retry") {
			return err
		}
		w.hasRetry.Store(-1) // a server before §17: a plain release
	}
	return rel(false)
}

// ---- the renew tick ------------------------------------------------------------------------

func (w *Worker) live() []*Job {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]*Job, 0, len(w.held))
	for _, j := range w.held {
		j.mu.Lock()
		ok := !j.lost && !j.parked && !j.abandoned
		j.mu.Unlock()
		if ok {
			out = append(out, j)
		}
	}
	return out
}

func (w *Worker) renewLoop(done chan struct{}) {
	var next time.Time
	delay := 200 * time.Millisecond
	for {
		wait := 50 * time.Millisecond
		held := w.live()
		if len(held) > 0 {
			interval := time.Duration(1<<62 - 1)
			for _, j := range held {
				interval = min(interval, time.Duration(j.Token.RenewAfterMs)*time.Millisecond)
			}
			now := time.Now()
			if next.IsZero() {
				next = now.Add(interval)
			}
			if !now.Before(next) {
				if w.renew(held) {
					delay = 200 * time.Millisecond
					next = time.Now().Add(interval)
				} else { // no answer: again soon, never past the earliest lease end
					left := time.Until(earliest(held))
					next = time.Now().Add(max(50*time.Millisecond, min(delay, left/2)))
					delay = min(2*delay, 5*time.Second)
				}
			}
			wait = min(250*time.Millisecond, max(time.Millisecond, time.Until(next)))
		} else {
			next = time.Time{}
		}
		select {
		case <-done:
			return
		case <-time.After(wait):
		}
	}
}

func earliest(held []*Job) time.Time {
	e := held[0].end()
	for _, j := range held[1:] {
		if t := j.end(); t.Before(e) {
			e = t
		}
	}
	return e
}

func (j *Job) acked(sent time.Time, leaseMs int64) {
	if leaseMs <= 0 {
		leaseMs = j.Token.LeaseMs
	}
	end := sent.Add(time.Duration(leaseMs) * time.Millisecond)
	j.mu.Lock()
	j.leaseEnd = end
	j.mu.Unlock()
	j.timer.Reset(time.Until(end))
}

// renew: one renew of every held claim and a heartbeat of each run; false when no answer.
func (w *Worker) renew(held []*Job) bool {
	c := w.Client
	sent := time.Now()
	timeout := max(500*time.Millisecond, min(c.Timeout, time.Until(earliest(held))))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var results map[string]BatchResult
	if w.hasRenewMany.Load() >= 0 {
		toks := make([]TokenRef, len(held))
		for i, j := range held {
			toks[i] = TokenRef{Card: j.Card.ID, Marker: j.Token.Marker, Epoch: j.Token.Epoch}
		}
		res, err := c.RenewMany(ctx, toks, 0)
		p := ProblemOf(err)
		switch {
		case err == nil:
			w.hasRenewMany.Store(1)
			results = map[string]BatchResult{}
			for _, r := range res {
				results[r.Card] = r
			}
		case p != nil && (p.Status == 404 || p.Status == 405) && w.hasRenewMany.Load() == 0:
			w.hasRenewMany.Store(-1) // a server before §18: one by one
			w.Opts.Logf("boardd: renew: no POST /v1/claims/renew on this server; one by one")
		default:
			w.Opts.Logf("boardd: renew: %v", err)
			return false
		}
	}
	answered := true
	var hb sync.WaitGroup
	for _, j := range held {
		st, lease := 0, int64(0)
		if results != nil {
			r, ok := results[j.Card.ID]
			if ok {
				st = r.Status
			}
		} else {
			r, err := c.Renew(ctx, j.Card.ID, j.Token.Marker, j.Token.Epoch, 0)
			if p := ProblemOf(err); p != nil && !transient(err) {
				st = p.Status
			} else if err == nil {
				st, lease = 200, r.LeaseMs
			}
		}
		switch {
		case st == 200:
			j.acked(sent, lease)
		case st >= 400 && st < 500:
			w.lose(j, fmt.Errorf("renew refused (%d)", st))
			continue
		default:
			answered = false
			continue
		}
		if j.RunID != "" {
			hb.Add(1)
			go func(j *Job) {
				defer hb.Done()
				_, err := c.HeartbeatRun(ctx, j.RunID, j.Token.Marker, 0)
				var rf *RunFinal
				var cc *ClaimConflict
				switch {
				case errors.As(err, &rf): // an operator cancelled the run: parked
					j.mu.Lock()
					j.parked = true
					j.mu.Unlock()
					w.unhold(j)
					j.cancel(errors.New("boardd: the run was cancelled by an operator"))
				case errors.As(err, &cc):
					w.lose(j, err)
				}
			}(j)
		}
	}
	hb.Wait()
	return answered
}

// ---- stopping ------------------------------------------------------------------------------

func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	ch := make(chan struct{})
	go func() { wg.Wait(); close(ch) }()
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// drain: running jobs finish within the grace, then are cancelled; a handler still running a
// grace later has its claim released for it.
func (w *Worker) drain(jobs *sync.WaitGroup, stoppedAt time.Time) {
	if waitTimeout(jobs, time.Until(stoppedAt.Add(w.Opts.Grace))) {
		return
	}
	for _, j := range w.live() {
		j.cancel(ErrStopping)
	}
	if waitTimeout(jobs, w.Opts.Grace) {
		return
	}
	for _, j := range w.live() {
		j.mu.Lock()
		j.abandoned = true
		j.mu.Unlock()
		w.unhold(j)
		_, err := w.Client.Release(context.Background(), j.Card.ID, j.Token.Marker, j.Token.Epoch, false)
		if err != nil {
			w.Opts.Logf("boardd: card %s: release after the grace: %v", j.Card.ID, err)
		}
		w.stats.stopped.Add(1)
	}
}
