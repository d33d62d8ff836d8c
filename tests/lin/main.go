// lin: a linearizability check of boardd's claim protocol with reads, over HTTP against real
// boardd processes killed with SIGKILL, checked by Porcupine (DESIGN §16, issue 31).
//
//	lin -mode fs -boardd build/server/boardd [-duration 4s -kills 5 ...]
//	    one boardd on an FS data directory, killed -kills times and restarted on it
//	lin -mode mongo -boardd build/server/boardd -uri mongodb://HOST:PORT/DB [-kills N]
//	    two replicas sharing one Mongo database (a fresh one named from DB); each kill takes
//	    one of them down and restarts it; the model's epoch only has to grow
//	lin -check history.jsonl     check a history written by -out again, offline
//
// Exit: 0 linearizable and the events log kept what it showed; 1 not (the report says
// where; -viz writes Porcupine's HTML view of it); 2 the harness failed (a surprise answer,
// boardd not starting, the checker timed out); 77 skipped (mongo mode without a server, or
// on FerretDB, whose updates are not atomic). README.md says how to run the long check.
package main

import (
	"flag"
	"fmt"
	"math/rand"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
)

type config struct {
	mode, bin, uri, indet, out, viz, checkFile string
	duration, timeout                          time.Duration
	kills, clients, readers, cards             int
	seed                                       int64
	keep                                       bool
}

func main() {
	var cf config
	flag.StringVar(&cf.mode, "mode", "fs", "fs (one boardd, FS store) or mongo (two replicas on one database)")
	flag.StringVar(&cf.bin, "boardd", "build/server/boardd", "the boardd binary")
	flag.StringVar(&cf.uri, "uri", os.Getenv("BOARDD_TEST_MONGO_URI"), "mongo mode: the server (its database name is a prefix)")
	flag.DurationVar(&cf.duration, "duration", 4*time.Second, "how long the clients run")
	flag.IntVar(&cf.kills, "kills", 5, "kill -9 this many times, spread over the run")
	flag.IntVar(&cf.clients, "clients", 8, "workers (claim / state writes / release, reads)")
	flag.IntVar(&cf.readers, "readers", 2, "clients that only read")
	flag.IntVar(&cf.cards, "cards", 3, "cards they share")
	flag.StringVar(&cf.indet, "indet", "bounded", "bounded: a request whose connection died took effect before it died, or never; unbounded: at any time after its call")
	flag.Int64Var(&cf.seed, "seed", 0, "random seed (0: from the clock)")
	flag.DurationVar(&cf.timeout, "check-timeout", 120*time.Second, "the checker's time limit")
	flag.StringVar(&cf.out, "out", "", "write the history here (JSON lines)")
	flag.StringVar(&cf.viz, "viz", "", "on a failure, write Porcupine's HTML view here")
	flag.StringVar(&cf.checkFile, "check", "", "check this history file instead of running")
	flag.BoolVar(&cf.keep, "keep", false, "keep the data directory and logs")
	flag.Parse()
	os.Exit(run(cf))
}

func run(cf config) int {
	if cf.checkFile != "" {
		h, exact, err := readHistory(cf.checkFile)
		if err != nil {
			fmt.Println("lin:", err)
			return 2
		}
		return verdict(cf, Spec{Exact: exact}, h)
	}
	if cf.indet != "bounded" && cf.indet != "unbounded" {
		fmt.Println("lin: -indet bounded|unbounded")
		return 2
	}
	if cf.seed == 0 {
		cf.seed = time.Now().UnixNano()
	}
	tmp, err := os.MkdirTemp("", "boardd-lin-")
	if err != nil {
		fmt.Println("lin:", err)
		return 2
	}
	if cf.keep {
		fmt.Println("lin: data and logs in", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	var stores []string
	spec := Spec{Exact: true}
	switch cf.mode {
	case "fs":
		stores = []string{"fs:" + filepath.Join(tmp, "data")}
	case "mongo":
		if cf.uri == "" {
			fmt.Println("SKIP: mongo mode needs -uri or BOARDD_TEST_MONGO_URI (tests/run.sh sets it)")
			if os.Getenv("CI") == "true" {
				return 1
			}
			return 77
		}
		if os.Getenv("BOARDD_TEST_MONGO_IS_FERRETDB") != "" {
			fmt.Println("SKIP: FerretDB 1.24's single-document updates are not atomic " +
				"(tests/store/mongo_race.c); the Mongo check runs on mongo-java-server")
			return 77
		}
		u, err := url.Parse(cf.uri)
		if err != nil || u.Scheme != "mongodb" {
			fmt.Println("lin: -uri: not a mongodb:// URI:", cf.uri)
			return 2
		}
		u.Path = fmt.Sprintf("/boardd_lin_%d_%d", os.Getpid(), time.Now().Unix()%100000)
		stores = []string{u.String(), u.String()}
		spec = Spec{Exact: false}
	default:
		fmt.Println("lin: -mode fs|mongo")
		return 2
	}
	tokens := filepath.Join(tmp, "tokens.json")
	opsTok, err := addToken(cf.bin, tokens, "ops", "operator", "bot")
	if err != nil {
		fmt.Println("lin:", err)
		return 2
	}
	wrkTok, err := addToken(cf.bin, tokens, "wrk", "worker")
	if err != nil {
		fmt.Println("lin:", err)
		return 2
	}
	cl := &cluster{}
	for i, st := range stores {
		port, err := freePort()
		if err != nil {
			fmt.Println("lin:", err)
			return 2
		}
		r := &replica{name: fmt.Sprintf("boardd%d", i), bin: cf.bin, store: st, tokens: tokens,
			logdir: tmp, port: port}
		if err := r.start(); err != nil {
			fmt.Println("lin:", err)
			stopAll(cl)
			return 2
		}
		cl.replicas = append(cl.replicas, r)
	}
	defer stopAll(cl)
	rec := &recorder{unbounded: cf.indet == "unbounded"}
	var stop atomic.Bool
	cards := cardIDs(cf.cards)
	cols := []string{"ready", "in_progress", "review", "backlog"}
	admin := newClient(-1, "", opsTok, cards, cols, rec, cl, cf.seed, &stop)
	for _, id := range cards {
		a := admin.do("POST", "/v1/cards", map[string]interface{}{"id": id, "title": id,
			"state": InitialColumn}, 0)
		if a.status != 201 {
			fmt.Printf("lin: creating %s: %d %v %s\n", id, a.status, a.err, a.body)
			return 2
		}
	}
	fmt.Printf("lin: mode %s, %d replica(s), %d workers + %d readers on %d cards, %s, %d kills, "+
		"-indet %s, seed %d\n", cf.mode, len(cl.replicas), cf.clients, cf.readers, cf.cards,
		cf.duration, cf.kills, cf.indet, cf.seed)

	rec.t0 = time.Now()
	var wg sync.WaitGroup
	for i := 0; i < cf.clients+cf.readers; i++ {
		c := newClient(i, fmt.Sprintf("m%d", i), wrkTok, cards, cols, rec, cl, cf.seed+int64(i)+1,
			&stop)
		wg.Add(1)
		go func(worker bool) {
			defer wg.Done()
			if worker {
				c.worker()
			} else {
				c.reader()
			}
		}(i < cf.clients)
	}
	fol := &follower{c: newClient(-2, "", opsTok, cards, cols, rec, cl, cf.seed-1, &stop),
		seen: map[int64]string{}}
	var fwg sync.WaitGroup
	fwg.Add(1)
	go func() { defer fwg.Done(); fol.follow(&stop) }()

	kills, harnessErr := killLoop(cf, cl)
	stop.Store(true)
	wg.Wait()
	fwg.Wait()
	if harnessErr != nil {
		fmt.Println("lin:", harnessErr)
		return 2
	}
	// The last word on every card: a read each, after everything.
	final := newClient(cf.clients+cf.readers, "", wrkTok, cards, cols, rec, cl, cf.seed, new(atomic.Bool))
	for _, id := range cards {
		final.read(id)
	}
	probs, nSeen, err := fol.verify()
	if err != nil {
		fmt.Println("lin:", err)
		return 2
	}
	code := 0
	for _, r := range cl.replicas {
		if err := r.stop(); err != nil {
			fmt.Printf("lin: %s did not stop cleanly: %v\n", r.name, err)
			code = 2
		}
	}
	h := rec.ops
	end := rec.now() + 1
	for i := range h {
		if h[i].Return == unboundedReturn {
			h[i].Return = end
		}
	}
	fmt.Printf("lin: %d operations (%s), %d indeterminate, %d kills; %d events followed\n",
		len(h), countKinds(h), rec.indet, kills, nSeen)
	if cf.out != "" {
		if err := writeHistory(cf.out, h, spec.Exact); err != nil {
			fmt.Println("lin:", err)
			return 2
		}
		fmt.Println("lin: history written to", cf.out)
	}
	if len(rec.surprises) > 0 {
		fmt.Println("lin: answers the protocol does not allow at all:")
		for _, s := range rec.surprises {
			fmt.Println("  ", s)
		}
		code = 1
	}
	if len(probs) > 0 {
		fmt.Println("lin: the events log did not keep what it showed:")
		for _, p := range probs {
			fmt.Println("  ", p)
		}
		code = 1
	}
	if v := verdict(cf, spec, h); v != 0 && (code == 0 || v == 1) {
		code = v
	}
	return code
}

// killLoop: -kills kills, the i-th near (i+1)/(kills+1) of -duration (±1/4 of the gap); in
// mongo mode the replicas are killed in turn, the other one serving meanwhile. A restart's
// time is added to the run. Returns the kills done.
func killLoop(cf config, cl *cluster) (int, error) {
	rnd := rand.New(rand.NewSource(cf.seed ^ 0x5eed))
	t0 := time.Now()
	gap := cf.duration / time.Duration(cf.kills+1)
	var restarts time.Duration
	for i := 0; i < cf.kills; i++ {
		at := gap*time.Duration(i+1) - gap/4 + time.Duration(rnd.Int63n(int64(gap/2)+1))
		time.Sleep(time.Until(t0.Add(at + restarts)))
		r := cl.replicas[i%len(cl.replicas)]
		k0 := time.Now()
		r.kill()
		if err := r.start(); err != nil {
			return i + 1, err
		}
		cl.gen.Add(1)
		restarts += time.Since(k0)
	}
	time.Sleep(time.Until(t0.Add(cf.duration + restarts)))
	return cf.kills, nil
}

func stopAll(cl *cluster) {
	for _, r := range cl.replicas {
		r.kill()
	}
}

func countKinds(h []porcupine.Operation) string {
	n := map[OpKind]int{}
	for _, op := range h {
		n[op.Input.(Input).Kind]++
	}
	var parts []string
	for k := OpClaim; k <= OpRead; k++ {
		parts = append(parts, fmt.Sprintf("%d %s", n[k], k))
	}
	return strings.Join(parts, ", ")
}

// verdict: Porcupine over h; 0 linearizable, 1 not (with where), 2 no answer in time.
func verdict(cf config, spec Spec, h []porcupine.Operation) int {
	model := spec.Model()
	t0 := time.Now()
	res := porcupine.CheckOperationsTimeout(model, h, cf.timeout) // stops at the first break
	took := time.Since(t0).Round(time.Millisecond)
	switch res {
	case porcupine.Ok:
		fmt.Printf("lin: LINEARIZABLE (%d operations, checked in %s)\n", len(h), took)
		return 0
	case porcupine.Unknown:
		fmt.Printf("lin: the checker gave no answer within %s\n", cf.timeout)
		return 2
	}
	fmt.Printf("lin: NOT LINEARIZABLE (checked in %s)\n", took)
	byCard := map[string][]porcupine.Operation{}
	var cards []string
	for _, op := range h {
		c := op.Input.(Input).Card
		if byCard[c] == nil {
			cards = append(cards, c)
		}
		byCard[c] = append(byCard[c], op)
	}
	sort.Strings(cards)
	vizDone := false
	for _, c := range cards {
		r, info := porcupine.CheckOperationsVerbose(model, byCard[c], 30*time.Second)
		if r == porcupine.Ok {
			continue
		}
		explain(c, byCard[c], r, info)
		if cf.viz != "" && !vizDone && r == porcupine.Illegal {
			if err := porcupine.VisualizePath(model, info, cf.viz); err == nil {
				fmt.Printf("lin: Porcupine's view of card %s written to %s\n", c, cf.viz)
				vizDone = true
			}
		}
	}
	return 1
}

// explain: for a card whose history has no linearization, the end of the longest one found
// and the operations that could not follow it.
func explain(card string, all []porcupine.Operation, r porcupine.CheckResult,
	info porcupine.LinearizationInfo) {
	if r != porcupine.Illegal {
		fmt.Printf("  card %s: %d operations, no answer within 30 s\n", card, len(all))
		return
	}
	var best []porcupine.Operation
	for _, part := range info.PartialLinearizationsOperations() {
		for _, p := range part {
			if len(p) > len(best) {
				best = p
			}
		}
	}
	fmt.Printf("  card %s: %d operations, the longest linearization found covers %d; its end:\n",
		card, len(all), len(best))
	from := len(best) - 8
	if from < 0 {
		from = 0
	}
	for _, op := range best[from:] {
		fmt.Println("    ", line(op))
	}
	in := map[[2]int64]bool{}
	for _, op := range best {
		in[[2]int64{op.Call, int64(op.ClientId)}] = true
	}
	var rest []porcupine.Operation
	for _, op := range all {
		if !in[[2]int64{op.Call, int64(op.ClientId)}] {
			rest = append(rest, op)
		}
	}
	sort.Slice(rest, func(i, j int) bool { return rest[i].Return < rest[j].Return })
	if len(rest) > 5 {
		rest = rest[:5]
	}
	fmt.Println("    none of these can come next (earliest answers first):")
	for _, op := range rest {
		fmt.Println("    ", line(op))
	}
}

func line(op porcupine.Operation) string {
	return fmt.Sprintf("[%9.3f ms .. %9.3f ms] client %2d: %s", float64(op.Call)/1e6,
		float64(op.Return)/1e6, op.ClientId, describe(op.Input.(Input), op.Output.(Output)))
}
