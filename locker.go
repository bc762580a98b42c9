package zklock

import "context"

// Locker is a lock as its user sees it: code written against a Locker takes
// any of zklock's primitives. Mutex, ReentrantMutex, MultiLock and Semaphore
// are Lockers, and an RWMutex gives one for each side (Writer, Reader).
//
// Acquire blocks until the caller holds the lock; a ctx deadline is the
// timeout, and a failed or cancelled call leaves nothing behind. TryAcquire
// never waits for the lock: it returns ErrLocked when the caller cannot hold
// at once. Both return the Lease to release, whose Done and Err tell when the
// lock is lost. Each primitive's methods document the details.
type Locker interface {
	Acquire(ctx context.Context) (*Lease, error)
	TryAcquire(ctx context.Context) (*Lease, error)
}

var (
	_ Locker = (*Mutex)(nil)
	_ Locker = (*ReentrantMutex)(nil)
	_ Locker = (*MultiLock)(nil)
	_ Locker = (*Semaphore)(nil)
	_ Locker = rwWriter{}
	_ Locker = rwReader{}
)

// Writer returns the RWMutex's writer side as a Locker: its Acquire is
// AcquireWrite and its TryAcquire TryAcquireWrite.
func (rw *RWMutex) Writer() Locker { return rwWriter{rw} }

// Reader returns the RWMutex's reader side as a Locker: its Acquire is
// AcquireRead and its TryAcquire TryAcquireRead. Readers share the lock.
func (rw *RWMutex) Reader() Locker { return rwReader{rw} }

type rwWriter struct{ rw *RWMutex }

func (w rwWriter) Acquire(ctx context.Context) (*Lease, error)    { return w.rw.AcquireWrite(ctx) }
func (w rwWriter) TryAcquire(ctx context.Context) (*Lease, error) { return w.rw.TryAcquireWrite(ctx) }

type rwReader struct{ rw *RWMutex }

func (r rwReader) Acquire(ctx context.Context) (*Lease, error)    { return r.rw.AcquireRead(ctx) }
func (r rwReader) TryAcquire(ctx context.Context) (*Lease, error) { return r.rw.TryAcquireRead(ctx) }
