package zklock

// CalendarSlot is Calendar.slot, for the tests.
func CalendarSlot(c Calendar, ms int64) int64 { return c.slot(ms) }
