// The Go worker under test (tests/clients/test_clients.py drives it; check.py is its Python
// twin, speaking the same lines). Configured by the environment: BOARDD_URL, BOARDD_TOKEN,
// SCEN (drain | hold | stop | gate | bench | policy), BOARD, LABEL, CONC, MAXJOBS, LEASE_MS,
// GRACE_MS, ON_SUCCESS, ON_FAILURE. It prints one JSON object per line: {"ev":"started",...},
// {"ev":"cancelled",...}, {"ev":"write",...} and last {"ev":"stats",...} (its error and
// detail: what Run returned).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	boardd "github.com/boardd/boardd/clients/go"
)

var outMu sync.Mutex

func emit(m map[string]any) {
	outMu.Lock()
	defer outMu.Unlock()
	b, _ := json.Marshal(m)
	fmt.Println(string(b))
}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func envInt(k string, def int) int {
	n, err := strconv.Atoi(env(k, ""))
	if err != nil {
		return def
	}
	return n
}

func code(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, boardd.ErrClaimLost):
		return "claim_lost"
	case boardd.ProblemOf(err) != nil:
		return boardd.ProblemOf(err).Code
	}
	return err.Error()
}

// cpuSeconds: the process's user+system CPU so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// policy is SCEN=policy (DESIGN §17): the client's side of the dispatch policy on board BOARD
// (the test set it up: ready has limit 1). OP_TOKEN creates the cards; one line per step.
func policy(c *boardd.Client) {
	ctx := context.Background()
	op := boardd.New(os.Getenv("BOARDD_URL"), os.Getenv("OP_TOKEN"))
	board := os.Getenv("BOARD")
	p := board + "-"
	must := func(err error) {
		if err != nil {
			log.Fatal(err)
		}
	}
	attempt := func(ev string, err error) {
		var ny *boardd.NotYet
		var cr *boardd.CapacityReached
		m := map[string]any{"ev": ev, "cls": "", "code": "", "detail": ""}
		switch {
		case errors.As(err, &ny):
			m["cls"] = "NotYet"
		case errors.As(err, &cr):
			m["cls"] = "CapacityReached"
		case err != nil:
			m["cls"] = fmt.Sprintf("%T", err)
		}
		if pr := boardd.ProblemOf(err); pr != nil {
			m["code"], m["detail"], m["status"] = pr.Code, pr.Detail, pr.Status
		}
		emit(m)
	}
	s, err := op.CreateCard(ctx, boardd.NewCard{ID: p + "s", Board: board, State: "ready",
		Title: "s", NotBefore: time.Now().Add(time.Hour)}, "")
	must(err)
	emit(map[string]any{"ev": "created", "not_before": s.NotBefore})
	_, err = c.Claim(ctx, p+"s", "m0", 0)
	attempt("notyet", err)
	for _, x := range []string{"a", "b"} {
		_, err = op.CreateCard(ctx, boardd.NewCard{ID: p + x, Board: board, State: "ready", Title: x}, "")
		must(err)
	}
	tok, err := c.Claim(ctx, p+"a", "m1", 0)
	must(err)
	_, err = c.Claim(ctx, p+"b", "m2", 0)
	attempt("capacity", err)
	b, err := op.GetBoard(ctx, board)
	must(err)
	for _, col := range b.Columns {
		if col.Name == "ready" {
			emit(map[string]any{"ev": "board", "limit": col.Limit, "col_claimed": col.Claimed,
				"max_claims": b.MaxClaims, "claimed": b.Claimed, "retry": b.Retry,
				"retry_effective": b.RetryEffective})
		}
	}
	card, err := c.Release(ctx, p+"a", "m1", tok.Epoch, true)
	must(err)
	emit(map[string]any{"ev": "retry", "attempts": card.Attempts, "not_before": card.NotBefore,
		"claim": card.Claim})
	emit(map[string]any{"ev": "stats", "error": ""})
}

func main() {
	log.SetOutput(os.Stderr)
	c := boardd.New(os.Getenv("BOARDD_URL"), os.Getenv("BOARDD_TOKEN"))
	scen := env("SCEN", "drain")
	if scen == "policy" {
		policy(c)
		return
	}
	stdin := bufio.NewReader(os.Stdin)
	var h boardd.Handler
	switch scen {
	case "bench":
		h = func(ctx context.Context, j *boardd.Job) (any, error) { return nil, nil }
	case "drain":
		h = func(ctx context.Context, j *boardd.Job) (any, error) {
			if err := j.Output("out:" + j.Card.Title); err != nil {
				return nil, err
			}
			switch {
			case strings.Contains(j.Card.Title, "fail"):
				return nil, errors.New("boom")
			case strings.Contains(j.Card.Title, "retry"):
				return nil, fmt.Errorf("later: %w", boardd.ErrRetry)
			}
			return map[string]any{"title": j.Card.Title}, nil
		}
	case "gate":
		// says it started (with its run); the first job then waits for a line on stdin (the
		// test changes the board or the run meanwhile); each returns its title
		var once sync.Once
		h = func(ctx context.Context, j *boardd.Job) (any, error) {
			emit(map[string]any{"ev": "started", "card": j.Card.ID, "title": j.Card.Title,
				"epoch": j.Token.Epoch, "marker": j.Token.Marker, "run": j.RunID})
			once.Do(func() { stdin.ReadString('\n') })
			return map[string]any{"title": j.Card.Title}, nil
		}
	case "hold", "stop":
		var once sync.Mutex
		h = func(ctx context.Context, j *boardd.Job) (any, error) {
			emit(map[string]any{"ev": "started", "card": j.Card.ID, "title": j.Card.Title,
				"epoch": j.Token.Epoch, "marker": j.Token.Marker, "run": j.RunID})
			if scen == "stop" && strings.Contains(j.Card.Title, "quick") {
				time.Sleep(time.Second)
				return "quick", nil
			}
			<-ctx.Done()
			emit(map[string]any{"ev": "cancelled", "card": j.Card.ID,
				"reason": context.Cause(ctx).Error()})
			if scen == "hold" {
				once.Lock()
				_, err := stdin.ReadString('\n')
				once.Unlock()
				if err != nil && err != io.EOF {
					return nil, err
				}
				werr := j.Comment("late write")
				emit(map[string]any{"ev": "write", "card": j.Card.ID, "error": code(werr)})
			}
			return nil, context.Cause(ctx)
		}
	default:
		log.Fatalf("unknown SCEN %q", scen)
	}
	o := boardd.WorkerOpts{Concurrency: envInt("CONC", 2), LeaseMs: envInt("LEASE_MS", 0),
		MaxJobs: envInt("MAXJOBS", 0), Grace: time.Duration(envInt("GRACE_MS", 10000)) * time.Millisecond,
		WaitMs: envInt("WAIT_MS", 1000), HandleSignals: true, OnSuccess: env("ON_SUCCESS", ""),
		OnFailure: env("ON_FAILURE", "")}
	if l := env("LABEL", ""); l != "" {
		o.Labels = []string{l}
	}
	if scen == "bench" {
		o.Logf = func(string, ...any) {}
	}
	w := boardd.NewWorker(c, env("BOARD", "default"), h, o)
	t0 := time.Now()
	err := w.Run(context.Background())
	s := w.Stats()
	detail := ""
	if err != nil {
		detail = err.Error()
	}
	emit(map[string]any{"ev": "stats", "claimed": s.Claimed, "succeeded": s.Succeeded,
		"failed": s.Failed, "retried": s.Retried, "lost": s.Lost, "stopped": s.Stopped,
		"parked": s.Parked, "errors": s.Errors, "seconds": time.Since(t0).Seconds(),
		"error": code(err), "detail": detail, "cpu": cpuSeconds()})
	if err != nil {
		os.Exit(1)
	}
}
