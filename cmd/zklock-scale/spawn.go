package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"
)

// workerProc is a worker process as the coordinator sees it: its stdin for
// orders, its stdout's reports, and its stderr kept for errors.
type workerProc struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	msgs   chan workerMsg // closed when its stdout ends
	stderr *syncBuffer
	exited chan struct{}
	err    error // Wait's result, after exited is closed
}

// startWorker re-executes this program with -worker and sends it wc.
func startWorker(ctx context.Context, wc workerConfig) (*workerProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("zklock-scale: finding this program to start workers: %w", err)
	}
	cmd := exec.CommandContext(ctx, exe, "-worker")
	dieWithParent(cmd)
	w := &workerProc{cmd: cmd, msgs: make(chan workerMsg, 4), stderr: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = w.stderr
	if w.in, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("zklock-scale: starting a worker: %w", err)
	}
	go w.read(out)
	go func() {
		w.err = cmd.Wait()
		close(w.exited)
	}()
	line, _ := json.Marshal(wc)
	if err := w.send(string(line)); err != nil {
		w.kill()
		return nil, err
	}
	return w, nil
}

func (w *workerProc) read(out io.Reader) {
	defer close(w.msgs)
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		var m workerMsg
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			w.msgs <- m
		}
	}
}

func (w *workerProc) send(line string) error {
	if _, err := io.WriteString(w.in, line+"\n"); err != nil {
		return fmt.Errorf("zklock-scale: writing to a worker: %w%s", err, w.stderr.tail())
	}
	return nil
}

// expect waits, up to timeout, for the worker's report of phase.
func (w *workerProc) expect(ctx context.Context, phase string, timeout time.Duration) (workerMsg, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case m, ok := <-w.msgs:
		switch {
		case !ok:
			<-w.exited
			return m, fmt.Errorf("zklock-scale: a worker ended before %q (%v)%s", phase, w.err, w.stderr.tail())
		case m.Phase != phase:
			return m, fmt.Errorf("zklock-scale: a worker reported %q, expected %q", m.Phase, phase)
		}
		return m, nil
	case <-t.C:
		return workerMsg{}, fmt.Errorf("zklock-scale: no %q from a worker within %v%s", phase, timeout, w.stderr.tail())
	case <-ctx.Done():
		return workerMsg{}, ctx.Err()
	}
}

// finish tells the worker to close its sessions and waits for it to exit
// (killing it after a bound); any failure of its own is returned.
func (w *workerProc) finish(ctx context.Context) error {
	_ = w.send("quit")
	w.in.Close()
	select {
	case <-w.exited:
	case <-time.After(time.Minute):
		w.kill()
		return errors.New("zklock-scale: a worker did not exit within a minute of quit")
	case <-ctx.Done():
		w.kill()
		return ctx.Err()
	}
	for range w.msgs { // drained, so read ends
	}
	if w.err != nil {
		return fmt.Errorf("zklock-scale: a worker failed: %w%s", w.err, w.stderr.tail())
	}
	return nil
}

// kill ends the worker at once and waits for it.
func (w *workerProc) kill() {
	_ = w.cmd.Process.Kill()
	w.in.Close()
	<-w.exited
	for range w.msgs {
	}
}

// syncBuffer keeps a worker's stderr.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// tail is the end of the worker's stderr, as a suffix for an error.
func (s *syncBuffer) tail() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.b.Bytes()
	if len(b) == 0 {
		return ""
	}
	return "\n--- worker stderr ---\n" + string(b[max(0, len(b)-4000):])
}
