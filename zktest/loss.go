package zktest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// Loss drops packets on loopback at random, as a lossy link does: TCP sends
// them again, so a connection through it slows and stalls for a while
// rather than breaks, and one direction may fare worse than the other. It
// uses nftables (Linux, root, the nft command of the nftables package:
// scripts/install-interop.sh installs it) with a table of its own, named
// after the test process, which holds one rule per Drop and is deleted when
// the test ends (or by the next NewLoss on the machine, should the process
// die first). Loss acts on ports, so every connection to or from them is
// lossy, whichever test made it: give it servers of the test's own.
type Loss struct {
	table string
	mu    sync.Mutex
}

// Direction is which packets of a port's connections Drop loses.
type Direction int

const (
	// ToPort loses the packets sent to the port: a client's requests to a
	// server's client port, a follower's to its leader's quorum port.
	ToPort Direction = iota
	// FromPort loses the packets the port sends: a server's replies.
	FromPort
)

var lossSeq atomic.Int64

// lossTable names the nftables tables of this package: the pid, a counter.
var lossTable = regexp.MustCompile(`^table inet (zktest_loss_(\d+)_\d+)$`)

// NewLoss makes an empty nftables table for t's lossy links and deletes it
// when t ends. It fails t, saying how to get nft, when nft is missing or
// refuses (not root, no nf_tables in the kernel).
func NewLoss(t testing.TB) *Loss {
	t.Helper()
	if nftPath() == "" {
		t.Fatal("zktest: Loss needs nft, which is neither on $PATH nor /usr/sbin/nft (Debian's nftables package; scripts/install-interop.sh installs it)")
	}
	removeDeadLossTables()
	l := &Loss{table: fmt.Sprintf("zktest_loss_%d_%d", os.Getpid(), lossSeq.Add(1))}
	if err := nft("add", "table", "inet", l.table); err != nil {
		t.Fatalf("zktest: Loss: %v (run as root, on a kernel with nf_tables)", err)
	}
	if err := nft("add", "chain", "inet", l.table, "out", "{ type filter hook output priority 0 ; }"); err != nil {
		t.Fatalf("zktest: Loss: %v", err)
	}
	t.Cleanup(func() { _ = nft("delete", "table", "inet", l.table) })
	return l
}

// Drop loses percent (1 to 100) of the loopback TCP packets going to or
// coming from port, as dir says, from now until Heal. Drops on the same
// port and direction add up.
func (l *Loss) Drop(port int, dir Direction, percent int) error {
	if percent < 1 || percent > 100 || port < 1 || port > 65535 {
		return fmt.Errorf("zktest: Loss.Drop: port %d, percent %d: want a port and 1 to 100 percent", port, percent)
	}
	match := "dport"
	if dir == FromPort {
		match = "sport"
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	rule := []string{"add", "rule", "inet", l.table, "out", "ip", "daddr", "127.0.0.1", "tcp", match, strconv.Itoa(port)}
	if percent < 100 { // numgen's values are 0 to 99
		rule = append(rule, "numgen", "random", "mod", "100", "<", strconv.Itoa(percent))
	}
	return nft(append(rule, "counter", "drop")...)
}

var droppedPackets = regexp.MustCompile(`counter packets (\d+) bytes`)

// Dropped returns how many packets the Drops of l have lost so far (since
// the last Heal).
func (l *Loss) Dropped() (int64, error) {
	out, err := exec.Command(nftPath(), "list", "table", "inet", l.table).Output()
	if err != nil {
		return 0, fmt.Errorf("zktest: Loss.Dropped: nft list table: %w", err)
	}
	var n int64
	for _, m := range droppedPackets.FindAllSubmatch(out, -1) {
		c, _ := strconv.ParseInt(string(m[1]), 10, 64)
		n += c
	}
	return n, nil
}

// Heal ends every Drop of l: the links lose nothing again.
func (l *Loss) Heal() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return nft("flush", "chain", "inet", l.table, "out")
}

// removeDeadLossTables deletes the tables of test processes that are gone.
func removeDeadLossTables() {
	out, err := exec.Command(nftPath(), "list", "tables").Output()
	if err != nil {
		return
	}
	for _, line := range bytes.Split(out, []byte("\n")) {
		m := lossTable.FindSubmatch(bytes.TrimSpace(line))
		if m == nil {
			continue
		}
		pid, _ := strconv.Atoi(string(m[2]))
		if !processAlive(pid) {
			_ = nft("delete", "table", "inet", string(m[1]))
		}
	}
}

// nft runs the nft command with args.
func nft(args ...string) error {
	out, err := exec.Command(nftPath(), args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("nft %v: %w: %s", args, err, bytes.TrimSpace(out))
	}
	return nil
}

// processAlive reports whether pid names a live process (signal 0).
func processAlive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	return !errors.Is(p.Signal(syscall.Signal(0)), os.ErrProcessDone) // EPERM: alive, someone else's
}

// nftPath finds nft: on $PATH, else where Debian puts it (a PATH without
// /usr/sbin, as cron's); "" if neither.
func nftPath() string {
	if p, err := exec.LookPath("nft"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/nft"); err == nil {
		return "/usr/sbin/nft"
	}
	return ""
}
