package fence_test

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/zklock/zklock/fence"
)

var updateSQL = flag.Bool("update-sql", false, "rewrite fence/sql/*.sql from InstallScript")

// TestPureSQLFilesAreInstallScript: the scripts in fence/sql (for migration
// tools, and make demo's SQLite) are what Install runs; -update-sql writes
// them.
func TestPureSQLFilesAreInstallScript(t *testing.T) {
	for name, d := range map[string]fence.Dialect{"postgres.sql": fence.Postgres, "mysql.sql": fence.MySQL, "sqlite.sql": fence.SQLite} {
		path := filepath.Join("sql", name)
		want := fence.InstallScript(d)
		if *updateSQL {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("%s differs from InstallScript(%s): run go test ./fence -run TestPureSQLFiles -args -update-sql", path, d.Name())
		}
	}
}
