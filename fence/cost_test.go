package fence_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/zklock/zklock/fence"
)

// BenchmarkFenceCost measures, on each store, a transaction that updates
// one row against the same transaction with the fence's check first, in
// alternating rounds of one run (a ratio in one run means more than a time
// on a noisy machine). Reported: each one's time and their ratio.
//
//	go test -run '^$' -bench FenceCost -benchtime 2000x ./fence
func BenchmarkFenceCost(b *testing.B) {
	for _, st := range stores() {
		b.Run(st.name, func(b *testing.B) {
			db := st.db(b)
			f := fence.New(db, st.d)
			ctx := context.Background()
			if err := f.Install(ctx); err != nil {
				b.Fatal(err)
			}
			for _, q := range []string{
				`CREATE TABLE IF NOT EXISTS cost_work (k VARCHAR(64) PRIMARY KEY, v BIGINT NOT NULL)`,
				`DELETE FROM cost_work`,
				`INSERT INTO cost_work (k, v) VALUES ('k', 0)`,
			} {
				if _, err := db.Exec(q); err != nil {
					b.Fatal(err)
				}
			}
			update := `UPDATE cost_work SET v = v + 1 WHERE k = 'k'`
			tx := func(fenced bool) {
				err := inTx(ctx, db, func(tx *sql.Tx) error {
					if fenced {
						if err := f.Check(ctx, tx, "cost", 1); err != nil {
							return err
						}
					}
					_, err := tx.ExecContext(ctx, update)
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			var plain, fenced time.Duration
			const rounds = 10
			b.ResetTimer()
			for r := range rounds {
				n := b.N / rounds
				if r < b.N%rounds {
					n++
				}
				start := time.Now()
				for range n {
					tx(false)
				}
				plain += time.Since(start)
				start = time.Now()
				for range n {
					tx(true)
				}
				fenced += time.Since(start)
			}
			b.ReportMetric(float64(plain.Nanoseconds())/float64(b.N), "ns/plain-tx")
			b.ReportMetric(float64(fenced.Nanoseconds())/float64(b.N), "ns/fenced-tx")
			b.ReportMetric(float64(fenced)/float64(plain), "fenced/plain")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func inTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}
