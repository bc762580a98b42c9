package zklock

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"
)

// A run's record keeps the last success with who ran it: a failed run by
// another owner after it still names the success's runner. A record
// written before the runner was kept decodes with a zero Owner.
func TestPureJobSuccessKeepsItsRunner(t *testing.T) {
	a := Owner{Host: "web-1", PID: 917, Client: "c1", Name: "report"}
	ok := encodeRun(Run{Slot: 1, Period: time.Hour, Owner: a, Start: time.UnixMilli(1000), Outcome: "succeeded"}, nil)
	_, success := decodeRun(ok, &zk.Stat{Mtime: 2000})
	require.Equal(t, &jobSuccess{Slot: 1, Start: 1000, End: 2000, Owner: a}, success)

	b := Owner{Host: "web-2", PID: 4242, Client: "c2", Name: "report"}
	failed := encodeRun(Run{Slot: 2, Period: time.Hour, Owner: b, Start: time.UnixMilli(3000), Outcome: "failed", Cause: CauseError, Error: "exit status 3"}, success)
	run, kept := decodeRun(failed, &zk.Stat{Mtime: 4000})
	require.Equal(t, b, run.Owner)
	require.Equal(t, &jobSuccess{Slot: 1, Start: 1000, End: 2000, Owner: a}, kept, "the success names its own runner, not the last run's")

	_, old := decodeRun([]byte(`{"slot":2,"periodMs":3600000,"owner":{"client":"c2"},"start":3000,"outcome":"failed",`+
		`"lastSuccess":{"slot":1,"start":1000,"end":2000}}`), &zk.Stat{Mtime: 4000})
	require.Equal(t, &jobSuccess{Slot: 1, Start: 1000, End: 2000}, old)
}
