//go:build !race

package fence_test

const raceEnabled = false
