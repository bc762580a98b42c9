package zkserver

import "sync"

// Log forwards to a logging function until closed: output goroutines may race
// with the end of a test, and a test's Logf panics once the test completed.
// A nil function discards.
type Log struct {
	mu     sync.Mutex
	f      func(string, ...any)
	closed bool
}

// NewLog returns a Log forwarding to f.
func NewLog(f func(string, ...any)) *Log { return &Log{f: f} }

// Logf forwards to the function unless the log is closed.
func (g *Log) Logf(format string, args ...any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed && g.f != nil {
		g.f(format, args...)
	}
}

// Close stops the forwarding; it waits for a Logf in progress.
func (g *Log) Close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// logTail keeps the last lines of a server's output for error messages.
type logTail struct {
	mu    sync.Mutex
	lines []string
	next  int
	full  bool
}

func newLogTail(n int) *logTail { return &logTail{lines: make([]string, n)} }

func (t *logTail) add(l string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines[t.next] = l
	t.next = (t.next + 1) % len(t.lines)
	if t.next == 0 {
		t.full = true
	}
}

func (t *logTail) last(n int) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var all []string
	if t.full {
		all = append(all, t.lines[t.next:]...)
	}
	all = append(all, t.lines[:t.next]...)
	if len(all) > n {
		all = all[len(all)-n:]
	}
	return all
}
