// Command zklock-fence installs and operates zklock's fence in a SQL
// database, for users outside Go: shell scripts, cron jobs, migrations.
//
//	zklock-fence install [-store S] -dsn DSN      create the fence table and check
//	zklock-fence sql -store S                     print that SQL (psql -f, mysql, sqlite3)
//	zklock-fence claim [-store S] -dsn DSN NAME [TOKEN]
//	                                              record TOKEN (default $ZKLOCK_TOKEN):
//	                                              older holders are refused from now on
//	zklock-fence seen [-store S] -dsn DSN NAME    print the largest token recorded
//
// DSN defaults to $ZKLOCK_FENCE_DSN. The store follows from the DSN when
// -store is not given: postgres:// or postgresql:// is PostgreSQL, file: or
// a path ending in .db is SQLite, anything else MySQL/MariaDB
// (go-sql-driver's user:pass@tcp(host:port)/db). Exit status: 0, 1 on an
// error, 2 on bad usage, 76 when the token is stale (as zklock exec's lost
// lock).
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/zklock/zklock/fence"
)

const (
	exitError = 1
	exitUsage = 2
	exitStale = 76
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: zklock-fence install|sql|claim|seen [flags] [NAME [TOKEN]]")
		return exitUsage
	}
	fs := flag.NewFlagSet("zklock-fence "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	store := fs.String("store", "", "postgres, mysql or sqlite (default: from the DSN)")
	dsn := fs.String("dsn", os.Getenv("ZKLOCK_FENCE_DSN"), "the database (default $ZKLOCK_FENCE_DSN)")
	timeout := fs.Duration("timeout", 30*time.Second, "the bound on the whole command")
	if err := fs.Parse(args[1:]); err != nil {
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	cmd, rest := args[0], fs.Args()
	d, driver, err := dialectOf(*store, *dsn)
	if err != nil {
		fmt.Fprintln(stderr, "zklock-fence:", err)
		return exitUsage
	}
	if cmd == "sql" {
		printSQL(stdout, d)
		return 0
	}
	if *dsn == "" {
		fmt.Fprintln(stderr, "zklock-fence: no database: give -dsn or set ZKLOCK_FENCE_DSN")
		return exitUsage
	}
	db, err := sql.Open(driver, *dsn)
	if err != nil {
		fmt.Fprintln(stderr, "zklock-fence:", err)
		return exitError
	}
	defer db.Close()
	err = runOn(ctx, cmd, fence.New(db, d), rest, stdout)
	var usage usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &usage):
		fmt.Fprintln(stderr, "zklock-fence:", err)
		return exitUsage
	case errors.Is(err, fence.ErrStale):
		fmt.Fprintln(stderr, err)
		return exitStale
	default:
		fmt.Fprintln(stderr, err)
		return exitError
	}
}

type usageError string

func (e usageError) Error() string { return string(e) }

func runOn(ctx context.Context, cmd string, f *fence.Fence, args []string, stdout io.Writer) error {
	switch cmd {
	case "install":
		return f.Install(ctx)
	case "seen":
		if len(args) != 1 {
			return usageError("usage: zklock-fence seen NAME")
		}
		seen, err := f.Seen(ctx, args[0])
		if err == nil {
			fmt.Fprintln(stdout, seen)
		}
		return err
	case "claim":
		name, token, err := claimArgs(args)
		if err != nil {
			return err
		}
		return f.Claim(ctx, name, token)
	}
	return usageError(fmt.Sprintf("unknown command %q: want install, sql, claim or seen", cmd))
}

func claimArgs(args []string) (string, int64, error) {
	if len(args) == 1 {
		args = append(args, os.Getenv("ZKLOCK_TOKEN"))
	}
	if len(args) != 2 || args[1] == "" {
		return "", 0, usageError("usage: zklock-fence claim NAME [TOKEN] (TOKEN defaults to $ZKLOCK_TOKEN)")
	}
	token, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil {
		return "", 0, usageError(fmt.Sprintf("token %q is not a number", args[1]))
	}
	return args[0], token, nil
}

// dialectOf picks the store from -store, else from the DSN's form.
func dialectOf(store, dsn string) (fence.Dialect, string, error) {
	if store == "" {
		switch {
		case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
			store = "postgres"
		case strings.HasPrefix(dsn, "file:"), strings.HasSuffix(dsn, ".db"):
			store = "sqlite"
		case dsn != "":
			store = "mysql"
		}
	}
	switch store {
	case "postgres":
		return fence.Postgres, "pgx", nil
	case "mysql", "mariadb":
		return fence.MySQL, "mysql", nil
	case "sqlite":
		return fence.SQLite, "sqlite", nil
	}
	return nil, "", fmt.Errorf("unknown store %q: want postgres, mysql or sqlite", store)
}

// printSQL prints the install SQL as the store's own client reads it.
func printSQL(w io.Writer, d fence.Dialect) {
	fmt.Fprint(w, fence.InstallScript(d))
}
