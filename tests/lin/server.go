// boardd processes for the check: started on a fixed 127.0.0.1 port (a restart takes the same
// one), ready when /readyz answers 200, killed with SIGKILL (kill -9) and restarted on the
// same store (FS data directory or Mongo database). Each start logs to its own file.
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

type replica struct {
	name   string
	bin    string
	store  string
	tokens string
	logdir string
	port   int
	extra  []string

	mu     sync.Mutex
	p      *proc
	starts int
}

type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when it exited; err is its status then
	err  error
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (r *replica) base() string { return fmt.Sprintf("http://127.0.0.1:%d", r.port) }

// start runs boardd and waits (30 s at most) until /readyz answers 200.
func (r *replica) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts++
	logPath := filepath.Join(r.logdir, fmt.Sprintf("%s.%03d.log", r.name, r.starts))
	log, err := os.Create(logPath)
	if err != nil {
		return err
	}
	args := []string{"--store", r.store, "--tokens", r.tokens,
		"--listen", fmt.Sprintf("127.0.0.1:%d", r.port), "--threads", "4",
		"--reaper=off", "--deliverers", "0"}
	cmd := exec.Command(r.bin, append(args, r.extra...)...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return err
	}
	log.Close()
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			tail, _ := os.ReadFile(logPath)
			return fmt.Errorf("%s exited at start (%v): %s", r.name, p.err, lastLines(tail, 15))
		default:
		}
		resp, err := hc.Get(r.base() + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				r.p = p
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	<-p.done
	return fmt.Errorf("%s: /readyz not 200 within 30 s (log %s)", r.name, logPath)
}

// kill: SIGKILL, and waits until the process is gone.
func (r *replica) kill() {
	r.mu.Lock()
	p := r.p
	r.p = nil
	r.mu.Unlock()
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop: SIGTERM (a clean shutdown), SIGKILL after 20 s; the exit status (nil: 0).
func (r *replica) stop() error {
	r.mu.Lock()
	p := r.p
	r.p = nil
	r.mu.Unlock()
	if p == nil {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop within 20 s of SIGTERM", r.name)
	}
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// addToken: `boardd token add`, which prints the new token.
func addToken(bin, file, name string, roles ...string) (string, error) {
	args := []string{"token", "add", "--tokens", file, "--name", name}
	for _, r := range roles {
		args = append(args, "--role", r)
	}
	out, err := exec.Command(bin, args...).Output()
	if err != nil {
		return "", fmt.Errorf("boardd token add %s: %w", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}
