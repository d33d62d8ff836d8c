// The worker (DESIGN §19, §12, §17, §18, §20): NewWorker(client, board, handler, opts) claims
// cards with claim-next (long-poll; Count when the server takes it), creates a run per card,
// calls the handler on a goroutine of its own, and meanwhile keeps every held claim alive: one
// renew per tick for all of them (POST /v1/claims/renew; one by one where the server has no
// such route) and a heartbeat of each run. When the handler returns, the run gets its result
// (or its error) and the card is filed (OnSuccess / OnFailure, or back to the pool when the
// error wraps ErrRetry) and released, each write fenced by the claim's epoch. A write that gets
// no answer, a 5xx or a 429 is sent again after a backoff (or the answer's Retry-After when
// longer) while the claim is renewed, for writeRetryFor at most. A card that cannot be filed
// (its column refused: renamed, removed) or whose run cannot be started is released with an
// attempt counted (§17 retry), so it comes back after a backoff and at max_attempts is filed
// into the failed column by the server, never claimed again at once for ever; Run checks
// before it claims anything that OnSuccess and OnFailure are columns of the board.
//
// The handler's context is cancelled the moment the claim is lost: a renew refused (revoked,
// reclaimed, deleted; not one refused after the job's own release was sent), or no renew
// acknowledged before the lease ends (a timer per claim, measured from the moment the
// claim-next, then each acknowledged renew, was sent; a claim whose lease is over when its
// answer arrives is renewed at once, and lost when that is not acknowledged). Each renew is due
// renew_after_ms after that same moment: the first goes out at once for a claim that came late
// in a long-poll or after retries. context.Cause says why. After a loss nothing more is
// written for that card: the job's own writes return ErrClaimLost before they are sent, and
// the server would refuse them anyway (claim_conflict).
//
// Stopping (Run's context done, or SIGTERM/SIGINT with HandleSignals): no new claims; running
// jobs get Grace to finish; then their contexts are cancelled (cause ErrStopping), a job that
// returns an error has its run marked failed_resumable and its claim released, and a handler
// still running a further Grace later has its claim released for it.
package boardd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrRetry: a handler's error wrapping it sends the card back to the pool with one more
// attempt and a backoff (DESIGN §17 retry) instead of filing it into OnFailure.
var ErrRetry = errors.New("boardd: retry")

// ErrStopping is the cause of a job's context cancelled because the worker stops.
var ErrStopping = errors.New("boardd: worker stopping")

// Handler does one card's work. Its result (any JSON value) is recorded on the run.
type Handler func(ctx context.Context, job *Job) (any, error)

// WorkerOpts: Concurrency (default 1); Columns and Labels narrow claim-next; LeaseMs 0 is the
// server's default; OnSuccess (default "done") and OnFailure (default "blocked", or "retry");
// Marker (default host-pid-random); WaitMs the long-poll (default 5000); Grace (default 10 s);
// MaxJobs stops after that many claimed cards are finished (0: no bound); HandleSignals stops
// on SIGTERM/SIGINT; Logf (default log.Printf).
type WorkerOpts struct {
	Concurrency          int
	Columns, Labels      []string
	LeaseMs, WaitMs      int
	OnSuccess, OnFailure string
	Marker               string
	Grace                time.Duration
	MaxJobs              int
	HandleSignals        bool
	Logf                 func(format string, args ...any)
}

// Stats counts what the worker did.
type Stats struct {
	Claimed, Succeeded, Failed, Retried, Lost, Stopped, Parked, Errors int64
}

// Worker claims and works cards of one board.
type Worker struct {
	Client  *Client
	Board   string
	Handler Handler
	Opts    WorkerOpts

	stats struct{ claimed, succeeded, failed, retried, lost, stopped, parked, errors atomic.Int64 }
	// what the server has: 0 unknown, 1 yes, -1 no
	hasCount, hasRenewMany, hasRetry, hasOutput atomic.Int32
	mu                                          sync.Mutex
	held                                        map[string]*Job
	claimed                                     int
	fatal                                       error
	// a claim arrived: the renew loop looks again
	kick chan struct{}
	// nil: time.AfterFunc (a test's stand-in)
	afterFunc func(time.Duration, func()) *time.Timer
}

// NewWorker makes a worker; see WorkerOpts for the defaults.
func NewWorker(c *Client, board string, h Handler, o WorkerOpts) *Worker {
	if o.Concurrency < 1 {
		o.Concurrency = 1
	}
	if o.OnSuccess == "" {
		o.OnSuccess = "done"
	}
	if o.OnFailure == "" {
		o.OnFailure = "blocked"
	}
	if o.WaitMs == 0 {
		o.WaitMs = 5000
	}
	if o.Grace == 0 {
		o.Grace = 10 * time.Second
	}
	if o.Marker == "" {
		host, _ := os.Hostname()
		if len(host) > 40 {
			host = host[:40]
		}
		o.Marker = fmt.Sprintf("%s-%d-%x", host, os.Getpid(), time.Now().UnixNano()&0xffffffff)
	}
	if o.Logf == nil {
		o.Logf = log.Printf
	}
	return &Worker{Client: c, Board: board, Handler: h, Opts: o, held: map[string]*Job{},
		kick: make(chan struct{}, 1)}
}

// Stats returns the counts so far.
func (w *Worker) Stats() Stats {
	s := &w.stats
	return Stats{s.claimed.Load(), s.succeeded.Load(), s.failed.Load(), s.retried.Load(),
		s.lost.Load(), s.stopped.Load(), s.parked.Load(), s.errors.Load()}
}

// Job is one claimed card while its handler runs.
type Job struct {
	Card   Card
	Token  Token
	RunID  string
	Ctx    context.Context // cancelled on loss of the claim (or the stop past the grace)
	w      *Worker
	cancel context.CancelCauseFunc

	mu        sync.Mutex
	timer     *time.Timer // fires at leaseEnd; set under mu, never once unheld
	leaseEnd  time.Time
	renewAt   time.Time // the next renew is due
	unheld    bool      // let go (filed, released, lost, parked): no timer any more
	lost      bool      // claim lost (not a stop)
	parked    bool      // an operator cancelled the run: neither filed nor released
	abandoned bool      // released for the handler after the grace
	final     bool      // its run's final status is being written: a run_final is ours
	releasing bool      // its release was sent: a renew refused now is that release's doing
}

func (j *Job) isLost() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.lost || j.abandoned
}

func (j *Job) end() time.Time {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.leaseEnd
}

func (j *Job) due() time.Time {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.renewAt
}

// watch (re)arms the lease timer for leaseEnd; j.mu is held. The timer's function may run at
// once (a lease already over): it takes j.mu first, so it finds j.timer set.
func (j *Job) watch() {
	if j.unheld {
		return
	}
	d := time.Until(j.leaseEnd)
	if j.timer != nil {
		j.timer.Reset(d)
		return
	}
	after := time.AfterFunc
	if j.w.afterFunc != nil {
		after = j.w.afterFunc
	}
	j.timer = after(d, func() {
		if time.Now().Before(j.end()) { // renewed meanwhile
			return
		}
		j.w.lose(j, errors.New("the lease ended without an acknowledged renew"))
	})
}

// fenced sends one of the holder's own writes, not at all when the claim is known lost.
func (j *Job) fenced(fn func(ctx context.Context) error) error {
	if j.isLost() || j.Ctx.Err() != nil {
		return fmt.Errorf("%w: card %s: %v", ErrClaimLost, j.Card.ID, context.Cause(j.Ctx))
	}
	err := fn(context.Background())
	var cc *ClaimConflict
	if errors.As(err, &cc) {
		j.w.lose(j, err)
	}
	return err
}

// Comment adds the holder's comment to the card (fenced).
func (j *Job) Comment(body string) error {
	return j.fenced(func(ctx context.Context) error {
		_, err := j.w.Client.Comment(ctx, j.Card.ID, body, j.Token.Marker, j.Token.Epoch)
		return err
	})
}

// Output appends to the run's output (§20); on a server without the route, nothing.
func (j *Job) Output(text string) error {
	if j.w.hasOutput.Load() < 0 {
		return j.fenced(func(context.Context) error { return nil })
	}
	err := j.fenced(func(ctx context.Context) error {
		_, err := j.w.Client.AppendOutput(ctx, j.RunID, j.Token.Marker, text)
		return err
	})
	if p := ProblemOf(err); p != nil && (p.Status == 404 || p.Status == 405) &&
		strings.Contains(p.Detail, "route") && j.w.hasOutput.Load() == 0 {
		j.w.hasOutput.Store(-1) // the run exists, the route does not: a server before §20
		return nil
	}
	if err == nil {
		j.w.hasOutput.Store(1)
	}
	return err
}

// SetAwaitingInput sets the card's awaiting_input (fenced).
func (j *Job) SetAwaitingInput(v bool) error {
	return j.fenced(func(ctx context.Context) error {
		_, err := j.w.Client.SetAwaitingInput(ctx, j.Card.ID, j.Token.Marker, j.Token.Epoch, v)
		return err
	})
}

// SetState moves the card, still held, to another column (fenced).
func (j *Job) SetState(to, reason string) error {
	return j.fenced(func(ctx context.Context) error {
		_, err := j.w.Client.SetState(ctx, j.Card.ID, to, StateOpts{Marker: j.Token.Marker,
			Epoch: j.Token.Epoch, Reason: reason})
		return err
	})
}

// ---- running -------------------------------------------------------------------------------

// Run works until ctx is done (then stops gracefully), SIGTERM/SIGINT (HandleSignals), or
// MaxJobs cards were claimed and finished. Before anything is claimed, OnSuccess and OnFailure
// are checked to be columns of the board: an error wrapping ErrNoColumn when one is not. A
// refusal of claim-next itself (a wrong board, column or token) stops the worker and is
// returned; an answer to it that is none (ErrUnexpectedAnswer: a proxy's page) is logged and
// tried again, as no answer is.
func (w *Worker) Run(ctx context.Context) error {
	if w.Opts.HandleSignals {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
		defer stop()
	}
	if err := w.checkColumns(ctx); err != nil || ctx.Err() != nil {
		return err // nil when stopped while the board could not be read: nothing was claimed
	}
	stopCtx, stopNow := context.WithCancel(ctx)
	defer stopNow()
	n := w.Opts.Concurrency
	slots := make(chan struct{}, n)
	for i := 0; i < n; i++ {
		slots <- struct{}{}
	}
	var jobs sync.WaitGroup
	renewDone := make(chan struct{})
	renewStopped := make(chan struct{})
	go func() { w.renewLoop(renewDone); close(renewStopped) }()

	var pollers sync.WaitGroup
	poll := func() {
		defer pollers.Done()
		w.pollLoop(stopCtx, stopNow, slots, &jobs)
	}
	pollers.Add(1)
	go poll()
	extra := false
	for stopCtx.Err() == nil {
		select {
		case <-stopCtx.Done():
		case <-time.After(200 * time.Millisecond):
		}
		if w.done(slots) {
			stopNow()
		}
		if !extra && w.hasCount.Load() < 0 && n > 1 { // one card per call: a poller per slot
			extra = true
			for i := 1; i < n; i++ {
				pollers.Add(1)
				go poll()
			}
		}
	}
	stoppedAt := time.Now() // the grace counts from here
	pollers.Wait()          // a long-poll in flight may still claim: given back at once
	w.drain(&jobs, stoppedAt)
	close(renewDone)
	<-renewStopped
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fatal
}

// checkColumns: OnSuccess and OnFailure (but "retry") are columns of the board, as boardctl
// checks its --on-success and --on-failure: a filing into a column the board does not have is
// refused (422), and the card would come back for ever. The board unreadable for want of an
// answer: tried again until ctx ends (then nil); a token that may not read it (403): not
// checked, the server judges each filing; another refusal is returned.
func (w *Worker) checkColumns(ctx context.Context) error {
	delay := 200 * time.Millisecond
	var b *Board
	for {
		var err error
		if b, err = w.Client.GetBoard(ctx, w.Board); err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		var fb *Forbidden
		if errors.As(err, &fb) {
			w.Opts.Logf("boardd: board %s: its columns are not checked: %v", w.Board, err)
			return nil
		}
		if !again(err) {
			return fmt.Errorf("boardd: board %s: %w", w.Board, err)
		}
		wait := pause(err, delay, retryAfterMax)
		w.Opts.Logf("boardd: board %s: %v; again in %v", w.Board, err, wait)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		delay = min(2*delay, 5*time.Second)
	}
	names := make([]string, 0, len(b.Columns))
	has := map[string]bool{}
	for _, c := range b.Columns {
		names = append(names, c.Name)
		has[c.Name] = true
	}
	for _, o := range []struct{ opt, col string }{{"OnSuccess", w.Opts.OnSuccess},
		{"OnFailure", w.Opts.OnFailure}} {
		if !has[o.col] && !(o.opt == "OnFailure" && o.col == "retry") {
			return fmt.Errorf("%w: %s %q: board %s has no column %q (its columns: %s)",
				ErrNoColumn, o.opt, o.col, w.Board, o.col, strings.Join(names, ", "))
		}
	}
	return nil
}

func (w *Worker) done(slots chan struct{}) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.Opts.MaxJobs > 0 && w.claimed >= w.Opts.MaxJobs && len(slots) == cap(slots)
}

func (w *Worker) pollLoop(ctx context.Context, stop context.CancelFunc, slots chan struct{},
	jobs *sync.WaitGroup) {
	delay := 200 * time.Millisecond
	for ctx.Err() == nil {
		select {
		case <-slots:
		case <-ctx.Done():
			return
		}
		n := 1
		if w.hasCount.Load() >= 0 {
		more:
			for n < 100 {
				select {
				case <-slots:
					n++
				default:
					break more
				}
			}
		}
		w.mu.Lock()
		if w.Opts.MaxJobs > 0 {
			for n > 0 && w.claimed+n > w.Opts.MaxJobs {
				n--
				slots <- struct{}{}
			}
		}
		w.claimed += n
		w.mu.Unlock()
		if n == 0 {
			return
		}
		got, err := w.claim(ctx, n)
		if err != nil {
			if again(err) {
				wait := pause(err, delay, retryAfterMax)
				w.Opts.Logf("boardd: claim-next: %v; again in %v", err, wait)
				select {
				case <-ctx.Done():
				case <-time.After(wait):
				}
				delay = min(2*delay, 5*time.Second)
			} else {
				w.Opts.Logf("boardd: claim-next refused: %v", err)
				w.mu.Lock()
				w.fatal = err
				w.mu.Unlock()
				stop()
			}
		} else {
			delay = 200 * time.Millisecond
		}
		w.mu.Lock()
		w.claimed -= n - len(got)
		w.mu.Unlock()
		for i := len(got); i < n; i++ {
			slots <- struct{}{}
		}
		for _, j := range got {
			jobs.Add(1)
			go func(j *Job) {
				defer func() { slots <- struct{}{}; jobs.Done() }()
				if ctx.Err() != nil { // claimed while stopping: given back at once
					w.release(j, false)
					return
				}
				w.work(j)
			}(j)
		}
	}
}

// newIdemKey is a fresh Idempotency-Key: 128 random bits in hex.
func newIdemKey() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on the systems Go supports
	}
	return hex.EncodeToString(b)
}

// again: an answer that says "send the same request again" (no answer, or one that is none:
// ErrUnexpectedAnswer; a 5xx but 501, a 429, or the first request with this Idempotency-Key
// still being served).
func again(err error) bool {
	var inFlight *IdempotencyKeyInFlight
	if transient(err) || errors.As(err, &inFlight) || errors.Is(err, ErrUnexpectedAnswer) {
		return true
	}
	p := ProblemOf(err)
	return p != nil && (p.Status == 429 || (p.Status >= 500 && p.Status != 501))
}

// retryAfterMax: a Retry-After is waited at most this long (a job's write: one lease).
const retryAfterMax = 60 * time.Second

// pause is the wait before the next try after err: the backoff d, or the answer's Retry-After
// (a 429 or 503) when that is longer, at most limit.
func pause(err error, d, limit time.Duration) time.Duration {
	if p := ProblemOf(err); p != nil && (p.Status == 429 || p.Status == 503) && p.RetryAfter > d {
		return max(d, min(p.RetryAfter, limit))
	}
	return d
}

// claim sends one claim-next, with an Idempotency-Key of its own, and again with the same
// key (and body) while no answer comes (or one that is none: ErrUnexpectedAnswer): an answer
// lost after the server claimed the cards is answered again, not a second claim (which would
// strand the first). After ctx ends (the worker stops) one more try only; what it gets is
// released by the caller.
func (w *Worker) claim(ctx context.Context, n int) ([]*Job, error) {
	useCount := n > 1 && w.hasCount.Load() >= 0
	o := ClaimNextOpts{LeaseMs: w.Opts.LeaseMs, WaitMs: w.Opts.WaitMs, Columns: w.Opts.Columns,
		Labels: w.Opts.Labels, IdempotencyKey: newIdemKey()}
	if useCount {
		o.Count = n
	}
	sent := time.Now() // the first try may have been the claim: its lease counts from here
	var got []Claimed
	var err error
	delay := 200 * time.Millisecond
	for try := 0; ; try++ {
		last := ctx.Err() != nil // sent after the stop: the one more try
		cctx, cancel := context.Background(), context.CancelFunc(func() {})
		if last {
			cctx, cancel = context.WithTimeout(cctx, msDur(o.WaitMs)+5*time.Second)
		}
		got, err = w.Client.ClaimNext(cctx, w.Board, w.Opts.Marker, o)
		cancel()
		for _, g := range got { // a card without an id, a token without a marker: not claims
			if err == nil && (g.Card.ID == "" || g.Token.Marker == "") {
				got, err = nil, fmt.Errorf("%w: claim-next: not claims: %+v", ErrUnexpectedAnswer, g)
			}
		}
		if !again(err) || last || try >= 100 {
			break
		}
		wait := pause(err, delay, retryAfterMax)
		w.Opts.Logf("boardd: claim-next: %v; again (same Idempotency-Key) in %v", err, wait)
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		delay = min(2*delay, 5*time.Second)
	}
	var br *BadRequest
	if err != nil && useCount && errors.As(err, &br) && w.hasCount.Load() == 0 &&
		strings.Contains(br.Detail, "count") {
		w.hasCount.Store(-1) // a server before §18: one card per call
		w.Opts.Logf("boardd: claim-next: no count on this server; one card at a time")
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if useCount {
		w.hasCount.Store(1)
	}
	jobs := make([]*Job, 0, len(got))
	for _, g := range got {
		j := &Job{Card: g.Card, Token: g.Token, w: w}
		if j.Token.LeaseMs <= 0 {
			j.Token.LeaseMs = 60000
		}
		if j.Token.RenewAfterMs <= 0 {
			j.Token.RenewAfterMs = j.Token.LeaseMs / 3
		}
		j.Ctx, j.cancel = context.WithCancelCause(context.Background())
		j.leaseEnd = sent.Add(time.Duration(j.Token.LeaseMs) * time.Millisecond)
		j.renewAt = sent.Add(time.Duration(j.Token.RenewAfterMs) * time.Millisecond)
		jobs = append(jobs, j)
	}
	// a lease over (locally) before the answer came: renewed before anything else is done
	// (the server keeps an expired claim its holder's until the reaper takes it), else lost
	var late []*Job
	for _, j := range jobs {
		if !time.Now().Before(j.leaseEnd) {
			late = append(late, j)
		}
	}
	if len(late) > 0 {
		w.renew(late)
	}
	w.mu.Lock()
	for _, j := range jobs {
		w.held[j.Card.ID] = j
	}
	w.mu.Unlock()
	for _, j := range jobs {
		j.mu.Lock()
		j.watch()
		j.mu.Unlock()
		if !time.Now().Before(j.end()) { // nothing is written for it, its handler not called
			w.lose(j, errors.New("the lease ended before claim-next's answer arrived"))
		}
	}
	select { // its first renew may be due now
	case w.kick <- struct{}{}:
	default:
	}
	w.stats.claimed.Add(int64(len(jobs)))
	return jobs, nil
}

func (w *Worker) unhold(j *Job) {
	w.mu.Lock()
	if w.held[j.Card.ID] == j {
		delete(w.held, j.Card.ID)
	}
	w.mu.Unlock()
	j.mu.Lock()
	j.unheld = true
	t := j.timer
	j.mu.Unlock()
	if t != nil {
		t.Stop()
	}
}

// lose: the claim is gone; the handler's context is cancelled at once.
func (w *Worker) lose(j *Job, why error) {
	j.mu.Lock()
	first := !j.lost
	j.lost = true
	j.mu.Unlock()
	w.unhold(j)
	if first {
		w.Opts.Logf("boardd: card %s: claim lost (%v); its handler is cancelled", j.Card.ID, why)
		j.cancel(fmt.Errorf("%w: %v", ErrClaimLost, why))
	}
}
