//go:build !unix

package zkserver

import "os"

// tryLock: without flock, a reservation is the file alone (a port taken
// between the check and the JVM's bind is retried, see Cluster.start).
func tryLock(*os.File) bool { return true }
