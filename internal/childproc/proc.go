package childproc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is one child process (a kvselect node or kvsim) that can be
// started again. Its command line and log
// file stay the same across restarts. mu guards every field below it; the
// waiter goroutine of each run reaps it and then closes that run's done.
type Proc struct {
	// Name names it in errors; Tag heads each start line of the log
	// ("=== <Tag> <name>: start ...").
	Name, Tag string
	Path      string
	Args      []string
	LogPath   string

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{} // closed once the current run is reaped
	err      error         // the current run's exit status, after done
	stopping bool          // the harness signalled the current run
	paused   bool
}

// Start runs the process, appending its output to its log. The child has
// its own process group (a terminal's Ctrl-C reaches only the harness)
// and the kernel kills it if the harness dies first (Pdeathsig).
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done != nil && !isClosed(p.done) {
		return fmt.Errorf("%s is already running", p.Name)
	}
	f, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "=== %s %s: start %s %s\n", p.Tag, time.Now().UTC().Format(time.RFC3339Nano), p.Path, strings.Join(p.Args, " "))
	cmd := exec.Command(p.Path, p.Args...)
	cmd.Stdout, cmd.Stderr, cmd.Env = f, f, Env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.err, p.stopping, p.paused = cmd, done, nil, false, false
	go func() {
		err := cmd.Wait()
		f.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// Running reports whether the current run is alive, and its pid.
func (p *Proc) Running() (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil || isClosed(p.done) {
		return 0, false
	}
	return p.cmd.Process.Pid, true
}

// Live reports whether the current run is alive and not paused.
func (p *Proc) Live() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done != nil && !isClosed(p.done) && !p.paused
}

// IsPaused reports whether the current run is alive and paused.
func (p *Proc) IsPaused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused && p.done != nil && !isClosed(p.done)
}

// ExitedOnItsOwn is the exit status of a run that ended without the
// harness stopping it (a crash), else nil.
func (p *Proc) ExitedOnItsOwn() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil || !isClosed(p.done) || p.stopping {
		return nil
	}
	if p.err == nil {
		return errors.New("exit status 0")
	}
	return p.err
}

// SetPaused pauses (SIGSTOP) or resumes (SIGCONT) the current run.
func (p *Proc) SetPaused(pause bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil || isClosed(p.done) {
		return fmt.Errorf("%s is not running", p.Name)
	}
	sig := syscall.SIGCONT
	if pause {
		sig = syscall.SIGSTOP
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("%s: %w", p.Name, err)
	}
	p.paused = pause
	return nil
}

// Signal sends sig to the current run (SIGHUP to reload, say). Unlike
// Stop it does not mark the run as stopped by the harness: an exit it
// causes counts as the process's own.
func (p *Proc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil || isClosed(p.done) {
		return fmt.Errorf("%s is not running", p.Name)
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("%s: %w", p.Name, err)
	}
	return nil
}

// Stop sends sig (and SIGCONT, so a paused process sees it) and waits up
// to grace for the exit, then kills. It returns once the run is reaped.
func (p *Proc) Stop(sig syscall.Signal, grace time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	if done == nil || isClosed(done) {
		p.mu.Unlock()
		return
	}
	p.stopping = true
	_ = cmd.Process.Signal(sig)
	if p.paused && sig != syscall.SIGKILL {
		_ = cmd.Process.Signal(syscall.SIGCONT)
	}
	p.paused = false
	p.mu.Unlock()
	if grace > 0 {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-done:
			return
		case <-t.C:
		}
	}
	_ = cmd.Process.Kill()
	<-done
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// ExitErr is the current run's exit status once it has exited (nil
// before).
func (p *Proc) ExitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}
