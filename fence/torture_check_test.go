//go:build linux

package fence_test

import (
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// fencedRegister is porcupine's model of the fence and the register behind
// it: a claim or write with a token below the largest seen is refused; an
// accepted one makes the register one more and records its token.
type registerState struct{ max, v int64 }

var fencedRegister = porcupine.NondeterministicModel{
	Init: func() []any { return []any{registerState{}} },
	Step: func(state, input, output any) []any {
		s, ev, out := state.(registerState), input.(tortureEvent), output.(tortureEvent)
		fresh := ev.Token >= s.max
		switch out.Result {
		case "failed":
			return []any{s}
		case "stale":
			if !fresh {
				return []any{s}
			}
		case "ok":
			if fresh && out.V == s.v+1 {
				return []any{registerState{ev.Token, s.v + 1}}
			}
		case "unknown": // a commit whose outcome is not known
			if fresh && out.V == s.v+1 {
				return []any{s, registerState{ev.Token, s.v + 1}}
			}
			return []any{s}
		}
		return nil
	},
	DescribeOperation: func(input, output any) string {
		ev, out := input.(tortureEvent), output.(tortureEvent)
		return fmt.Sprintf("%s(%d) -> %s v=%d", ev.Ev, ev.Token, out.Result, out.V)
	},
}

// check reads the committed log, counts, and checks the workers' history.
func (tr *tortureRun) check(db *sql.DB, seed uint64) {
	t := tr.t
	staleAccepted, logged := committedOrder(t, db)
	var ops []porcupine.Operation
	counts := map[string]int{}
	for _, ev := range tr.events {
		if ev.Ev != "write" && ev.Ev != "claim" {
			counts[ev.Ev]++
			continue
		}
		counts[ev.Ev+"_"+ev.Result]++
		if ev.Result == "ok" && logged[ev.V] != ev.Token {
			t.Errorf("worker %d's write of v=%d under token %d is logged under token %d", ev.Worker, ev.V, ev.Token, logged[ev.V])
			staleAccepted++
		}
		ops = append(ops, porcupine.Operation{ClientId: ev.Worker, Input: ev, Call: ev.Call, Output: ev, Return: ev.Ret})
	}
	res := porcupine.CheckOperationsTimeout(fencedRegister.ToModel(), ops, time.Minute)
	refused := counts["write_stale"] + counts["claim_stale"]
	violations := staleAccepted
	if res != porcupine.Ok {
		violations++
	}
	summary := fmt.Sprintf("fence torture: seed=%d workers=%d holds=%d writes=%d accepted=%d claims=%d stale_refused=%d stale_accepted=%d unknown=%d failed=%d pauses_short=%d pauses_past_session=%d linearizable=%v violations=%d",
		seed, len(tr.workers), counts["held"], counts["write_ok"]+counts["write_stale"]+counts["write_unknown"]+counts["write_failed"],
		counts["write_ok"], counts["claim_ok"], refused, staleAccepted, counts["write_unknown"],
		counts["write_failed"]+counts["claim_failed"], tr.pauses["short"], tr.pauses["long"], res, violations)
	t.Log(summary)
	fmt.Println(summary)
	if violations > 0 {
		t.Errorf("violations: %d; replay with -torture.seed=%d", violations, seed)
	}
	if counts["write_ok"] == 0 {
		t.Error("no write was accepted: the torture tested nothing")
	}
	if *tortureDuration >= time.Minute && tr.pauses["long"] > 0 && refused == 0 {
		t.Error("holders were paused past their session, yet no stale write was refused: the torture tested nothing")
	}
}

// committedOrder reads the log, claims and writes, in the register's order
// (the fence's row lock serializes them, so this is the commit order) and
// counts the entries whose token is below one committed before them.
func committedOrder(t *testing.T, db *sql.DB) (staleAccepted int, logged map[int64]int64) {
	t.Helper()
	rows, err := db.Query(`SELECT v, token FROM torture_log ORDER BY v`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	logged = map[int64]int64{}
	var max, want int64 = 0, 1
	for rows.Next() {
		var v, token int64
		if err := rows.Scan(&v, &token); err != nil {
			t.Fatal(err)
		}
		if v != want {
			t.Errorf("the log skips from %d to %d", want-1, v)
		}
		want = v + 1
		if token < max {
			t.Errorf("stale write accepted: v=%d under token %d after token %d", v, token, max)
			staleAccepted++
		}
		max = max64(max, token)
		logged[v] = token
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return staleAccepted, logged
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
