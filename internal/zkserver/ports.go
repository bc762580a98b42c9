package zkserver

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Ports for the servers. A port found free by binding 127.0.0.1:0 comes
// from the kernel's ephemeral range, and before the JVM binds it the kernel
// may hand it to any outgoing connection as its local port: with many
// tests' clients connecting at once, a server's election listener then
// failed to bind, and ZooKeeper exits its JVM when that listener gives up,
// in the middle of a test. So ports are drawn below the ephemeral range,
// which the kernel never hands out on its own, and each is reserved with a
// lock file that every zktest process honours until its cluster shuts down.

// portRange is where ports are drawn: below the ephemeral range's start,
// or nothing (0, 0) when there is too little room (then 127.0.0.1:0).
func portRange() (low, high int) {
	const floor, room = 10000, 5000
	start := 32768 // Linux's default, and below macOS's 49152
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				start = n
			}
		}
	}
	if start-floor < room {
		return 0, 0
	}
	return floor, start
}

// portLock is a reserved port: its lock file stays locked while held.
type portLock struct {
	port int
	f    *os.File
}

// release drops the reservation (closing the file drops its lock).
func (p portLock) release() {
	if p.f != nil {
		p.f.Close()
	}
}

// reservePort locks port's file, or reports that another process holds it.
// Where the files cannot be made (another user's directory), the port goes
// unreserved: the bind check and Cluster.start's retry remain.
func reservePort(port int) (portLock, bool) {
	dir := filepath.Join(os.TempDir(), "zktest-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return portLock{port: port}, true
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return portLock{port: port}, true
	}
	if !tryLock(f) {
		f.Close()
		return portLock{}, false
	}
	return portLock{port, f}, true
}

// takePort returns a free port, reserved, with a listener that keeps it
// until the caller has chosen all of its ports.
func takePort(low, high int) (portLock, net.Listener, error) {
	if low == 0 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return portLock{}, nil, err
		}
		return portLock{port: l.Addr().(*net.TCPAddr).Port}, l, nil
	}
	for range 200 {
		p := low + rand.IntN(high-low)
		lk, ok := reservePort(p)
		if !ok {
			continue
		}
		// The election listener binds every address: so does the check.
		l, err := net.Listen("tcp", ":"+strconv.Itoa(p))
		if err != nil {
			lk.release()
			continue
		}
		return lk, l, nil
	}
	return portLock{}, nil, fmt.Errorf("no free port in %d-%d after 200 tries", low, high)
}

// ReservePort returns a free loopback port for another kind of server (the
// fence module's databases), drawn as the ZooKeeper servers' ports are:
// below the ephemeral range, reserved with a lock file that every zktest
// process honours. Its check listener is closed before ReservePort returns,
// so the caller's server can bind the port; the reservation lasts until
// release is called (release is idempotent).
func ReservePort() (port int, release func(), err error) {
	lk, l, err := takePort(portRange())
	if err != nil {
		return 0, nil, fmt.Errorf("zktest: allocating a loopback port: %w", err)
	}
	l.Close()
	var once sync.Once
	return lk.port, func() { once.Do(lk.release) }, nil
}
