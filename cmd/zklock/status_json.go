package main

// What status --json prints: the queue of a path as an array, one element
// per line, and several paths as one object.

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/zklock/zklock"
)

// contenderJSON is one element of 'status --json'. Every field is always
// present, so scripts can rely on the shape.
type contenderJSON struct {
	Position  int        `json:"position"`
	Holder    bool       `json:"holder"`
	Reader    bool       `json:"reader"`
	Node      string     `json:"node"`
	Sequence  int64      `json:"sequence"`
	Token     int64      `json:"token"`
	Host      string     `json:"host"`
	PID       int        `json:"pid"`
	Client    string     `json:"client"`
	Goroutine int64      `json:"goroutine"`
	Owner     string     `json:"owner"`
	Since     *time.Time `json:"since"`
	Data      *string    `json:"data"`
	// RevokeRequested: someone asked the holder to release (break --ask).
	RevokeRequested bool `json:"revoke_requested"`
	// MaxHoldMs is the holder's hold limit in milliseconds, 0 for none.
	MaxHoldMs int64 `json:"max_hold_ms"`
}

// printJSON writes a queue as every --json of status does: a JSON array
// with one element per line, so that line tools work too.
func printJSON(stdout, stderr io.Writer, cs []zklock.Contender) int {
	elems := make([]any, len(cs))
	for i, c := range cs {
		elems[i] = toJSON(i, c)
	}
	return printArray(stdout, stderr, elems)
}

// printArray writes elems as a JSON array, one element per line.
func printArray(stdout, stderr io.Writer, elems []any) int {
	var b strings.Builder
	b.WriteString("[")
	for i, e := range elems {
		line, err := json.Marshal(e)
		if err != nil {
			return fail(stderr, exitFailure, "encoding JSON: %v", err)
		}
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n")
		b.Write(line)
	}
	if len(elems) > 0 {
		b.WriteString("\n")
	}
	b.WriteString("]\n")
	_, _ = io.WriteString(stdout, b.String())
	return exitOK
}

// toJSON is one contender as status --json shows it.
func toJSON(pos int, c zklock.Contender) contenderJSON {
	j := contenderJSON{
		Position: pos, Holder: c.Holder, Reader: c.Reader, Node: c.Node, Sequence: c.Sequence, Token: c.Token,
		Host: c.Owner.Host, PID: c.Owner.PID, Client: c.Owner.Client, Goroutine: c.Owner.Goroutine, Owner: c.Owner.Name,
		RevokeRequested: c.RevokeRequested, MaxHoldMs: c.Owner.MaxHold.Milliseconds(),
	}
	if isRecord(c) {
		since := c.Owner.Since
		j.Since = &since
	} else {
		data := string(c.Data)
		j.Data = &data
	}
	return j
}

// printPathsJSON writes several paths' queues as one JSON object, keyed by
// path, each an array as for one path.
func printPathsJSON(out, stderr io.Writer, paths []string, queues [][]zklock.Contender) int {
	fmt.Fprint(out, "{")
	for i, p := range paths {
		key, _ := json.Marshal(p)
		if i > 0 {
			fmt.Fprint(out, ",")
		}
		fmt.Fprintf(out, "\n%s: ", key)
		var b strings.Builder
		if code := printJSON(&b, stderr, queues[i]); code != exitOK {
			return code
		}
		fmt.Fprint(out, strings.TrimSuffix(b.String(), "\n"))
	}
	fmt.Fprint(out, "\n}\n")
	return exitOK
}
