package zktest

// SetBeforeLaunch installs a hook run after ports are chosen and before the
// servers are launched; it returns a function that removes it.
func SetBeforeLaunch(f func(addrs []string)) (restore func()) {
	testHookBeforeLaunch = f
	return func() { testHookBeforeLaunch = nil }
}

// ReconfigApplied is reconfigApplied, for its pure test.
var ReconfigApplied = reconfigApplied
