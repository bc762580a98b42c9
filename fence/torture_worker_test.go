//go:build linux

package fence_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/fence"
)

// tortureWorker is a worker process of TestFenceTorture: until its stdin
// closes it takes the lock, claims the fence half the time (a fenced
// transaction with nothing else in it), writes 2 to 6
// times under its token without asking its lease between the writes (as a
// thawed process would), and releases.
func tortureWorker(t *testing.T) {
	id, _ := strconv.Atoi(os.Getenv("FENCE_TORTURE_WORKER"))
	db, err := sql.Open("pgx", os.Getenv("FENCE_TORTURE_DSN"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w := &worker{id: id, f: fence.New(db, fence.Postgres, fence.WithHolder("worker "+strconv.Itoa(id))),
		db: db, enc: json.NewEncoder(os.Stdout), rng: rand.New(rand.NewPCG(uint64(os.Getpid()), 2))}
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); w.stopped.Store(true) }()
	servers := strings.Split(os.Getenv("FENCE_TORTURE_ZK"), ",")
	for !w.stopped.Load() {
		w.session(servers)
	}
}

type worker struct {
	id      int
	f       *fence.Fence
	db      *sql.DB
	enc     *json.Encoder
	rng     *rand.Rand
	stopped atomic.Bool
}

// session holds the lock again and again on one client, until the client
// fails to take it.
func (w *worker) session(servers []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	c, err := zklock.Connect(ctx, servers, zklock.WithSessionTimeout(tortureSession))
	cancel()
	if err != nil {
		time.Sleep(100 * time.Millisecond)
		return
	}
	defer c.Close()
	m, err := c.NewMutex(tortureLock)
	if err != nil {
		return
	}
	for !w.stopped.Load() {
		if err := w.hold(m); err != nil {
			return
		}
	}
}

func (w *worker) hold(m *zklock.Mutex) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := m.Acquire(ctx)
	if err != nil {
		return err
	}
	defer func() {
		_ = l.Release(ctx)
		w.emit(tortureEvent{Ev: "released"})
	}()
	token, err := l.Token(ctx)
	if err != nil {
		return nil
	}
	w.emit(tortureEvent{Ev: "held", Token: token})
	if w.rng.IntN(2) == 0 {
		w.emit(w.op("claim", token, func() (int64, error) { return w.write(ctx, "claim", token) }))
	}
	for range 2 + w.rng.IntN(5) {
		w.emit(w.op("write", token, func() (int64, error) { return w.write(ctx, "write", token) }))
		time.Sleep(time.Duration(20+w.rng.IntN(60)) * time.Millisecond)
	}
	return nil
}

// op runs one fenced operation and says how it ended.
func (w *worker) op(kind string, token int64, fn func() (int64, error)) tortureEvent {
	ev := tortureEvent{Ev: kind, Token: token, Call: time.Now().UnixNano()}
	v, err := fn()
	ev.Ret, ev.V = time.Now().UnixNano(), v
	switch {
	case err == nil:
		ev.Result = "ok"
	case errors.Is(err, fence.ErrStale):
		ev.Result = "stale"
	case errors.Is(err, errCommit):
		ev.Result, ev.Err = "unknown", err.Error()
	default:
		ev.Result, ev.Err = "failed", err.Error()
	}
	return ev
}

var errCommit = errors.New("commit")

// write: check, increment the register, log the new value, commit. A
// claim is the same transaction with no work of its own: it goes into the
// log too, so that the log's order covers claims (a stale write committed
// after a newer claim shows there).
func (w *worker) write(ctx context.Context, kind string, token int64) (int64, error) {
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit, a no-op
	if err := w.f.Check(ctx, tx, tortureFence, token); err != nil {
		return 0, err
	}
	var v int64
	err = tx.QueryRowContext(ctx, `UPDATE torture_register SET v = v + 1, token = $1 WHERE k = 'r' RETURNING v`, token).Scan(&v)
	if err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO torture_log VALUES ($1, $2, $3, $4)`, v, token, w.id, kind); err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return v, errors.Join(errCommit, err)
	}
	return v, nil
}

func (w *worker) emit(ev tortureEvent) {
	ev.Worker = w.id
	_ = w.enc.Encode(ev)
}
