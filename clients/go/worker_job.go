// The worker's per-job writes (run, outcome, release), the renew tick and the graceful stop
// (the claiming side is in worker.go).
package boardd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// writeRetryFor bounds the tries of one write: after that long its last error is returned.
var writeRetryFor = 60 * time.Second

// write sends one fenced write, again while no answer comes (network, 5xx, 429, an
// Idempotency-Key in flight) and the claim lasts (renewed meanwhile), after a backoff (or the
// answer's Retry-After when longer), for writeRetryFor at most; nothing when the claim is
// known lost (ErrClaimLost), nor when the lease ends while it waits.
func (w *Worker) write(j *Job, fn func(ctx context.Context) error) error {
	delay := 100 * time.Millisecond
	giveUp := time.Now().Add(writeRetryFor)
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
		if err == nil || !again(err) {
			return err
		}
		wait := pause(err, delay, min(retryAfterMax, time.Duration(j.Token.LeaseMs)*time.Millisecond))
		if time.Now().Add(wait).After(giveUp) {
			return err
		}
		w.Opts.Logf("boardd: card %s: %v; again in %v", j.Card.ID, err, wait)
		for end := time.Now().Add(wait); time.Now().Before(end) && !j.isLost(); {
			time.Sleep(min(50*time.Millisecond, time.Until(end)))
		}
		if !time.Now().Before(j.end()) { // no renew acknowledged meanwhile: not ours now
			w.lose(j, errors.New("the lease ended without an acknowledged renew"))
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// writeFinal is write for a final write (the run's outcome, the filing, the release): when a
// try's answer was lost on the way (or was a 5xx, which may come after the write was made) and
// a later try is refused, done(ctx, err) says whether that try did it, and then the write is
// done, not refused.
func (w *Worker) writeFinal(j *Job, fn func(ctx context.Context) error,
	done func(ctx context.Context, err error) bool) error {
	lostAnswer := false
	return w.write(j, func(ctx context.Context) error {
		err := fn(ctx)
		if err != nil && lostAnswer && done(ctx, err) {
			return nil
		}
		lostAnswer = lostAnswer || (err != nil && again(err))
		return err
	})
}

// claimGone: a final write refused because the claim is gone, which a lost try of its own
// may have done (settled reads the card and run back).
func (w *Worker) claimGone(j *Job, to string) func(ctx context.Context, err error) bool {
	return func(_ context.Context, err error) bool {
		var cc *ClaimConflict
		return errors.As(err, &cc) && w.settled(j, to)
	}
}

func lostErr(err error) bool {
	var cc *ClaimConflict
	return errors.Is(err, ErrClaimLost) || errors.As(err, &cc)
}

func (w *Worker) work(j *Job) {
	defer w.unhold(j)
	c := w.Client
	key := newIdemKey() // one run: every retry sends the same key, answered the same run
	err := w.write(j, func(ctx context.Context) error {
		run, err := c.CreateRun(ctx, RunCreate{CardID: j.Card.ID, Marker: j.Token.Marker,
			Status: "running", LeaseMs: int(j.Token.LeaseMs), IdempotencyKey: key})
		if err == nil {
			j.mu.Lock() // the renew tick reads it
			j.RunID = run.ID
			j.mu.Unlock()
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
		// refused (4xx), or no answer for writeRetryFor: given back with an attempt counted,
		// so a card whose run is refused every time ends in the failed column (§17)
		w.Opts.Logf("boardd: card %s: the run could not be started: %v", j.Card.ID, err)
		w.stats.errors.Add(1)
		w.release(j, true)
		return
	}
	result, herr := w.call(j)
	w.finish(j, result, herr, false)
}

// call runs the handler: a panic is its error; a runtime.Goexit (t.FailNow, say) cannot be
// stopped, but the job is finished as failed on the way out, never left held.
func (w *Worker) call(j *Job) (result any, err error) {
	returned := false
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v", r)
		} else if !returned {
			w.finish(j, nil, errors.New("boardd: the handler called runtime.Goexit"), false)
		}
	}()
	result, err = w.Handler(j.Ctx, j)
	returned = true
	return result, err
}

// The server's limits on a run (docs/http.md): result as compact JSON, error as UTF-8.
const (
	runResultMax = 65536
	runErrorMax  = 4096
)

// cutUTF8 is s (invalid UTF-8 replaced by U+FFFD, as JSON sends it) cut to at most n bytes,
// never inside a character.
func cutUTF8(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// refused: the run's final write was refused (the result over the limit, 413; a text the
// server does not take, 400/422; a result that is not JSON; the run pruned by an operator,
// 404), not for the claim or the token: the run is failed saying why (if it still can be)
// and the card filed as for a failed job.
func refused(err error) bool {
	var ute *json.UnsupportedTypeError
	var uve *json.UnsupportedValueError
	var me *json.MarshalerError
	if errors.As(err, &ute) || errors.As(err, &uve) || errors.As(err, &me) {
		return true
	}
	p := ProblemOf(err)
	return p != nil && p.Status >= 400 && p.Status < 500 && p.Status != 401 && p.Status != 403 &&
		p.Status != 409
}

func runFinal(status string) bool {
	return status == "finished" || status == "failed" || status == "failed_resumable" ||
		status == "cancelled"
}

// settled: a final write whose answer was lost, then refused 409 when sent again: it is done
// when the card is no longer held by this claim, is in `to` (when given), and the run is
// final.
func (w *Worker) settled(j *Job, to string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), w.Client.Timeout)
	defer cancel()
	card, err := w.Client.GetCard(ctx, j.Card.ID)
	if err != nil || (card.Claim != nil && card.Claim.Marker == j.Token.Marker &&
		card.Claim.Epoch == j.Token.Epoch) || (to != "" && card.State != to) {
		return false
	}
	if j.RunID != "" {
		run, err := w.Client.GetRun(ctx, j.RunID)
		if err != nil || !runFinal(run.Status) {
			return false
		}
	}
	w.Opts.Logf("boardd: card %s: the answer to its final write was lost; the card shows it done",
		j.Card.ID)
	return true
}

// finish records the outcome on the run, then files (or releases) the card. fallback: this
// is the second try, after the server refused the first outcome for what it carried.
func (w *Worker) finish(j *Job, result any, herr error, fallback bool) {
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
		u.Error = cutUTF8(herr.Error(), runErrorMax)
	}
	j.mu.Lock()
	j.final = true // a run_final from now on is this write's, not an operator's cancel
	j.mu.Unlock()
	err := w.writeFinal(j, func(ctx context.Context) error {
		_, err := c.UpdateRun(ctx, j.RunID, j.Token.Marker, u)
		return err
	}, func(ctx context.Context, err error) bool { // the run final: by our own lost try?
		var rf *RunFinal
		if !errors.As(err, &rf) {
			return false
		}
		run, e := c.GetRun(ctx, j.RunID)
		return e == nil && run.Status == u.Status
	})
	var rf *RunFinal
	if errors.As(err, &rf) { // an operator cancelled the run: parked, as boardctl does
		j.mu.Lock()
		j.parked = true
		j.mu.Unlock()
		w.stats.parked.Add(1)
		return
	}
	if err != nil && !fallback && refused(err) {
		// the result (or the error text) refused: the run fails, saying why, and the card is
		// filed as for a failed job rather than left claimed
		what := "result"
		if herr != nil {
			what = "error"
		}
		w.Opts.Logf("boardd: card %s: the run's %s was refused: %v", j.Card.ID, what, err)
		why := err.Error()
		if p := ProblemOf(err); p != nil {
			why = fmt.Sprintf("%d %s: %s", p.Status, p.Code, p.Detail)
		}
		w.finish(j, nil, fmt.Errorf("boardd: the run's %s was refused (%s)", what,
			cutUTF8(why, 300)), true)
		return
	}
	if err != nil && fallback && refused(err) {
		// the run's error refused too (the run pruned): filed all the same, not left held
		w.Opts.Logf("boardd: card %s: the run's error write refused too: %v", j.Card.ID, err)
		err = nil
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
			j.letGo()
			err = w.writeFinal(j, func(ctx context.Context) error {
				_, err := c.SetState(ctx, j.Card.ID, to, StateOpts{Marker: j.Token.Marker,
					Epoch: j.Token.Epoch, Reason: reason, Release: true})
				return err
			}, w.claimGone(j, to))
			if err != nil && !lostErr(err) && !again(err) {
				// the column refused (gone, renamed): given back with an attempt counted
				// (§17), so back in the pool after a backoff and at max_attempts filed into
				// the failed column by the server, never claimed again at once for ever
				w.Opts.Logf("boardd: card %s: filing into %s refused: %v", j.Card.ID, to, err)
				w.release(j, true)
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
	j.letGo()
	rel := func(retry bool) error {
		return w.writeFinal(j, func(ctx context.Context) error {
			_, err := w.Client.Release(ctx, j.Card.ID, j.Token.Marker, j.Token.Epoch, retry)
			return err
		}, w.claimGone(j, ""))
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

// renewManyMax: the server takes at most this many tokens in one renew (docs/http.md).
const renewManyMax = 1000

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

// renewLoop renews every held claim when the first of them is due: renew_after_ms after its
// claim-next (or its last acknowledged renew) was sent, so at once for a claim whose answer
// came late in a long-poll or after retries.
func (w *Worker) renewLoop(done chan struct{}) {
	var retry time.Time // after a tick without an answer: not before this
	delay := 200 * time.Millisecond
	for {
		wait := 250 * time.Millisecond
		if held := w.live(); len(held) > 0 {
			next := held[0].due()
			for _, j := range held[1:] {
				if t := j.due(); t.Before(next) {
					next = t
				}
			}
			if next.Before(retry) {
				next = retry
			}
			if !time.Now().Before(next) {
				if ok, after := w.renew(held); ok {
					delay, retry = 200*time.Millisecond, time.Time{}
				} else { // no answer: again soon (or after Retry-After), never past the lease end
					left := time.Until(earliest(held))
					retry = time.Now().Add(max(50*time.Millisecond, min(max(delay, after), left/2)))
					delay = min(2*delay, 5*time.Second)
				}
				continue
			}
			wait = min(wait, max(time.Millisecond, time.Until(next)))
		} else {
			retry = time.Time{}
		}
		select {
		case <-done:
			return
		case <-w.kick:
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

// letGo: the job's release (or filing with release) is being sent.
func (j *Job) letGo() {
	j.mu.Lock()
	j.releasing = true
	j.mu.Unlock()
}

// refused: a renew or heartbeat of j refused. The claim is lost, unless the job let the card
// go itself (its release sent, or released for it after the grace): the refusal is then that
// release's doing, and the release's own answer (or its read-back) says how it went.
func (w *Worker) refused(j *Job, why error) {
	j.mu.Lock()
	own := j.releasing || j.abandoned
	j.mu.Unlock()
	if !own {
		w.lose(j, why)
	}
}

func (j *Job) acked(sent time.Time, leaseMs int64) {
	if leaseMs <= 0 {
		leaseMs = j.Token.LeaseMs
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.leaseEnd = sent.Add(time.Duration(leaseMs) * time.Millisecond)
	j.renewAt = sent.Add(time.Duration(j.Token.RenewAfterMs) * time.Millisecond)
	j.watch()
}

// renew: one renew of every held claim and a heartbeat of each run. ok is false when a claim
// got no answer; after is the longest Retry-After of a 429/503 answer (0 when none).
func (w *Worker) renew(held []*Job) (ok bool, after time.Duration) {
	c := w.Client
	sent := time.Now()
	timeout := max(500*time.Millisecond, min(c.Timeout, time.Until(earliest(held))))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var results map[string]BatchResult // a claim not in it: no answer
	if w.hasRenewMany.Load() >= 0 {
		results = map[string]BatchResult{}
	chunks:
		for start := 0; start < len(held); start += renewManyMax {
			chunk := held[start:min(start+renewManyMax, len(held))]
			toks := make([]TokenRef, len(chunk))
			for i, j := range chunk {
				toks[i] = TokenRef{Card: j.Card.ID, Marker: j.Token.Marker, Epoch: j.Token.Epoch}
			}
			res, err := c.RenewMany(ctx, toks, 0)
			p := ProblemOf(err)
			switch {
			case err == nil:
				w.hasRenewMany.Store(1)
				for _, r := range res {
					results[r.Card] = r
				}
			case start == 0 && p != nil && (p.Status == 404 || p.Status == 405) &&
				w.hasRenewMany.Load() == 0:
				w.hasRenewMany.Store(-1) // a server before §18: one by one
				w.Opts.Logf("boardd: renew: no POST /v1/claims/renew on this server; one by one")
				results = nil
				break chunks
			case p != nil && (p.Status == 401 || p.Status == 403):
				// the token is refused (removed, expired): every claim of it is lost now
				w.Opts.Logf("boardd: renew: %v", err)
				for _, j := range chunk {
					results[j.Card.ID] = BatchResult{Card: j.Card.ID, Status: p.Status}
				}
			default:
				w.Opts.Logf("boardd: renew: %v", err)
				after = max(after, pause(err, 0, retryAfterMax))
				if len(results) == 0 && start+renewManyMax >= len(held) {
					return false, after // no answer at all: no heartbeats either
				}
			}
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
			if p := ProblemOf(err); p != nil && !again(err) {
				st = p.Status
			} else if err == nil {
				st, lease = 200, r.LeaseMs
			}
			after = max(after, pause(err, 0, retryAfterMax))
		}
		switch {
		case st == 200:
			j.acked(sent, lease)
		case st >= 400 && st < 500:
			w.refused(j, fmt.Errorf("renew refused (%d)", st))
			continue
		default:
			answered = false
			continue
		}
		j.mu.Lock()
		runID := j.RunID
		j.mu.Unlock()
		if runID != "" {
			hb.Add(1)
			go func(j *Job) {
				defer hb.Done()
				_, err := c.HeartbeatRun(ctx, runID, j.Token.Marker, 0)
				var rf *RunFinal
				var cc *ClaimConflict
				switch {
				case errors.As(err, &rf): // an operator cancelled the run: parked
					j.mu.Lock()
					ours := j.final // or this worker's own final write: the card is being filed
					if !ours {
						j.parked = true
					}
					j.mu.Unlock()
					if !ours {
						w.unhold(j)
						j.cancel(errors.New("boardd: the run was cancelled by an operator"))
					}
				case errors.As(err, &cc):
					w.refused(j, err)
				}
			}(j)
		}
	}
	hb.Wait()
	return answered, after
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
