//go:build unix

package zkserver

import (
	"os"
	"syscall"
)

// tryLock takes f's advisory lock without waiting; closing f drops it.
func tryLock(f *os.File) bool {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
}
