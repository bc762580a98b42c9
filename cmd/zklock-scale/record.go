package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// kind is what one holding held: the whole path (a mutex), a read or write
// side of a read/write lock, or one permit of a semaphore.
type kind uint8

const (
	kindMutex kind = iota
	kindRead
	kindWrite
	kindPermit
	numKinds
)

var kindNames = [numKinds]string{"mutex", "read", "write", "permit"}

func (k kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// record is one acquisition, as a worker saw it: wall-clock nanoseconds
// (one clock for every process on this machine) of the call, of the grant
// (taken after Acquire returned) and of the release (taken before Release
// was called). A holding is [Grant, Release].
type record struct {
	Path    int32
	Kind    kind
	Call    int64
	Grant   int64
	Release int64
}

// writeRecords writes recs to file, fixed-size and big-endian.
func writeRecords(file string, recs []record) error {
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("zklock-scale: records: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	err = binary.Write(w, binary.BigEndian, recs)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("zklock-scale: writing %s: %w", file, err)
	}
	return nil
}

// readRecords reads what writeRecords wrote.
func readRecords(file string) ([]record, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("zklock-scale: records: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var out []record
	for {
		var rec record
		err := binary.Read(r, binary.BigEndian, &rec)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("zklock-scale: reading %s: %w", file, err)
		}
		out = append(out, rec)
	}
}
