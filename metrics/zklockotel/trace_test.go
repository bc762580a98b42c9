package zklockotel

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/zklock/zklock"
)

func attr(s sdktrace.ReadOnlySpan, key string) attribute.Value {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// The spans zklock's calls make, as the in-memory exporter sees them: the
// waiter's acquisition links to the holder's through the trace context the
// holder's node recorded; holds are children of the caller's span.
func TestTracerSpans(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	tr := NewTracer(tp.Tracer("test"))

	ctx, caller := tp.Tracer("test").Start(context.Background(), "job")
	holder := tr.StartAcquire(ctx, zklock.KindMutex, "/locks/a")
	holder.Queued(1)
	recorded := holder.Context() // what the holder's node carries
	require.Regexp(t, `^00-[0-9a-f]{32}-[0-9a-f]{16}-01$`, recorded)
	held := holder.Granted("/locks/a/_c_0123-lock-0000000007", 7)

	waiter := tr.StartAcquire(context.Background(), zklock.KindMutex, "/locks/a")
	waiter.Queued(2)
	waiter.WaitingFor(recorded)
	held.Ended(zklock.ErrReleased)
	waiter.Granted("/locks/a/_c_4567-lock-0000000009", 9).Ended(errors.Join(zklock.ErrLockLost, errors.New("connection to ZooKeeper lost")))
	failed := tr.StartAcquire(context.Background(), zklock.KindMutex, "/locks/a")
	failed.Failed(zklock.ErrLocked)
	caller.End()

	spans := exp.GetSpans().Snapshots()
	byName := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byName[s.Name()] = append(byName[s.Name()], s)
	}
	acq, holds := byName["zklock.acquire"], byName["zklock.hold"]
	require.Len(t, acq, 3)
	require.Len(t, holds, 2)
	h, w, f := acq[0], acq[1], acq[2]
	require.Equal(t, caller.SpanContext().SpanID(), h.Parent().SpanID())
	require.Len(t, w.Links(), 1)
	require.Equal(t, h.SpanContext().SpanID(), w.Links()[0].SpanContext.SpanID(), "the waiter links to the holder's acquisition")
	require.Equal(t, int64(2), attr(w, "zklock.queue.length").AsInt64())
	require.Equal(t, "granted", attr(w, "zklock.outcome").AsString())
	require.Equal(t, "locked", attr(f, "zklock.outcome").AsString())
	require.Equal(t, int64(7), attr(holds[0], "zklock.token").AsInt64())
	require.Equal(t, "/locks/a/_c_0123-lock-0000000007", attr(holds[0], "zklock.node").AsString())
	require.Equal(t, caller.SpanContext().SpanID(), holds[0].Parent().SpanID(), "the hold is the caller's child")
	require.Equal(t, "released", attr(holds[0], "zklock.end").AsString())
	require.Equal(t, "connection_lost", attr(holds[1], "zklock.end").AsString())
}
