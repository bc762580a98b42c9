package zklock

// SetHookBeforeLease runs fn between a grant and the making of its lease (a
// process pause at the worst moment); nil removes it.
func SetHookBeforeLease(fn func()) {
	if fn == nil {
		testHookBeforeLease.Store(nil)
		return
	}
	testHookBeforeLease.Store(&fn)
}
