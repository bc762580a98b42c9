package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// processRSS is this process's resident memory in bytes (0 if unknown).
func processRSS() uint64 { return statusRSS("/proc/self/status") }

// pidRSS is the resident memory of process pid in bytes (Linux), 0 if
// unknown.
func pidRSS(pid int) uint64 {
	if pid == 0 {
		return 0
	}
	return statusRSS(fmt.Sprintf("/proc/%d/status", pid))
}

// statusRSS reads VmRSS from a /proc status file.
func statusRSS(file string) uint64 {
	f, err := os.Open(file)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
