package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/internal/lockpath"
)

// maxTreeNodes bounds the walk of 'status --tree'.
const maxTreeNodes = 10000

// lockPathsUnder walks the tree under root and returns, sorted, every lock
// path in it (lockpath.IsLockPath), and the leaves named like a job's
// record (<lock path>.run), which may be a job's whose lock path is gone
// while it is idle. It does not look inside a lock path.
func lockPathsUnder(ctx context.Context, client *zklock.Client, root string, w *changeWatch) (paths, runs []string, err error) {
	conn := client.Conn()
	var out []string
	queue, seen := []string{root}, 0
	for len(queue) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		p := queue[0]
		queue = queue[1:]
		if seen++; seen > maxTreeNodes {
			return nil, nil, fmt.Errorf("more than %d nodes under %s: give a narrower root", maxTreeNodes, root)
		}
		children, _, err := conn.Children(p)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			continue
		case err != nil:
			return nil, nil, err
		}
		w.add(p)
		if lockpath.IsLockPath(children) {
			out = append(out, p)
			continue
		}
		if len(children) == 0 && strings.HasSuffix(p, jobRecordSuffix) {
			runs = append(runs, p)
			w.addData(p) // a run's start is written after its lock's grant
		}
		sort.Strings(children)
		for _, c := range children {
			if c := join(p, c); c != "/zookeeper" { // the server's own: quotas, config
				queue = append(queue, c)
			}
		}
	}
	sort.Strings(out)
	return out, runs, nil
}

func join(parent, child string) string {
	if parent == "/" {
		return "/" + child
	}
	return parent + "/" + child
}

// treeRow is one lock path of the tree.
type treeRow struct {
	Path    string          `json:"path"`
	Holders []contenderJSON `json:"holders"`
	Waiting int             `json:"waiting"`
	// Job is the job's record, as 'zklock job --json' prints it; null for
	// a lock path that is no job's.
	Job *jobJSON `json:"job"`
}

func printTree(out io.Writer, root string, paths []string, queues [][]zklock.Contender, jobs map[string]zklock.JobState) {
	if len(paths) == 0 {
		fmt.Fprintf(out, "no lock paths under %s\n", root)
		return
	}
	now := time.Now()
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PATH\tHOLDER\tHOST\tPID\tHELD\tQUEUE\tLAST RUN")
	for i, p := range paths {
		holder, host, pid, held, waiting := "-", "-", "-", "-", 0
		for _, c := range queues[i] {
			if !c.Holder {
				waiting++
				continue
			}
			if holder != "-" {
				holder += "+" // readers or a semaphore's leases share
				continue
			}
			if isRecord(c) {
				holder, host, pid, held = ownerName(c.Owner), c.Owner.Host, strconv.Itoa(c.Owner.PID), ago(now, c.Owner.Since)
			} else {
				holder = "data " + strconv.Quote(truncate(string(c.Data), 24))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", p, truncate(holder, 32), host, pid, held, waiting, lastRunCell(jobs, p))
	}
	tw.Flush()
}

func printTreeJSON(out, stderr io.Writer, paths []string, queues [][]zklock.Contender, jobs map[string]zklock.JobState) int {
	rows := make([]any, len(paths))
	for i, p := range paths {
		row := treeRow{Path: p, Holders: []contenderJSON{}}
		if st, ok := jobs[p]; ok {
			j := toJobJSON(p, st)
			row.Job = &j
		}
		for pos, c := range queues[i] {
			if c.Holder {
				row.Holders = append(row.Holders, toJSON(pos, c))
			} else {
				row.Waiting++
			}
		}
		rows[i] = row
	}
	return printArray(out, stderr, rows)
}

// changeWatch sets a child watch on every path it is given (a data watch
// with addData) and closes the channel of the current view (begin) at the
// first event of any (--watch); off, it does nothing. It lives as long as
// the command and sets a watch on a path only while none is pending there:
// ZooKeeper's watches fire once, and a view set anew at every redraw would
// leave a goroutine and a watcher behind for every path that did not change,
// without bound while status --watch runs.
type changeWatch struct {
	client *zklock.Client
	on     bool

	mu      sync.Mutex
	pending map[string]bool // "c", "e" or "d" and a path: a watch set and not fired yet
	ch      chan struct{}   // closed at the first event since begin
	fired   bool            // ch is closed
}

func newChangeWatch(client *zklock.Client, on bool) *changeWatch {
	return &changeWatch{client: client, on: on, pending: map[string]bool{}, ch: make(chan struct{})}
}

// begin starts a view: the channel it returns is closed at the next event
// (or at once if a watch could not be set during the view).
func (w *changeWatch) begin() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fired {
		w.ch, w.fired = make(chan struct{}), false
	}
	return w.ch
}

func (w *changeWatch) add(p string) {
	if !w.on || w.isPending("c"+p) || w.isPending("e"+p) {
		return
	}
	_, _, ev, err := w.client.Conn().ChildrenW(p)
	if err == nil {
		w.await("c"+p, ev)
		return
	}
	_, _, ev, err = w.client.Conn().ExistsW(p) // not there: watch for it
	if err != nil {
		w.fire() // cannot watch: look again
		return
	}
	w.await("e"+p, ev)
}

// addData watches p's data too: a job's record changes without a child.
func (w *changeWatch) addData(p string) {
	if !w.on || w.isPending("d"+p) {
		return
	}
	_, _, ev, err := w.client.Conn().ExistsW(p)
	if err != nil {
		w.fire() // cannot watch: look again
		return
	}
	w.await("d"+p, ev)
}

func (w *changeWatch) isPending(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pending[key]
}

// await marks the watch key pending until ev fires (or the session ends).
func (w *changeWatch) await(key string, ev <-chan zk.Event) {
	w.mu.Lock()
	w.pending[key] = true
	w.mu.Unlock()
	go func() {
		<-ev
		w.mu.Lock()
		delete(w.pending, key)
		w.mu.Unlock()
		w.fire()
	}()
}

func (w *changeWatch) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.fired {
		w.fired = true
		close(w.ch)
	}
}

// clearScreen clears a terminal before --watch redraws; to a file or a pipe
// it writes a separator instead.
func clearScreen(out io.Writer) {
	if f, ok := out.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			fmt.Fprint(out, "\033[H\033[2J")
			return
		}
	}
	fmt.Fprintf(out, "--- %s\n", time.Now().Format(time.RFC3339))
}
