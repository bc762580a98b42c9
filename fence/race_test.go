//go:build race

package fence_test

// raceEnabled: the CLIs the tests build are built with -race too, so that
// they share the test binary's compiled packages (modernc's SQLite above all).
const raceEnabled = true
