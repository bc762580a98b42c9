package zklock

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// Owner is the record a lock node carries, so a holder can be recognised (for
// re-entry) and an operator can see who holds and who waits. It is small on
// purpose: every contender writes one.
type Owner struct {
	Host      string `json:"host,omitempty"`
	PID       int    `json:"pid,omitempty"`
	Client    string `json:"client,omitempty"`    // the Client's random id
	Goroutine int64  `json:"goroutine,omitempty"` // a reentrant lock's owning goroutine, when no explicit owner was named
	Name      string `json:"owner,omitempty"`     // the explicit owner named with ContextWithOwner
	Value     string `json:"value,omitempty"`     // what a leader publishes (Election.Campaign, Proclaim; RunSingleton's WithValue)
	// Since is when the node was created (joined the queue), on the
	// server's clock: readers fill it from the node's ctime. Records
	// written before 0.9 carried the writer's clock here.
	Since time.Time `json:"since,omitzero"`
	// MaxHold is the client's hold limit (WithMaxHold), 0 for none: the
	// holder ends its lease by itself that long after the grant. A read
	// lease made by RWMutex.Downgrade publishes what was left of the
	// writer's limit at the downgrade.
	MaxHold time.Duration `json:"maxHold,omitempty"`
	// Revoke marks a record into which AskToRelease wrote a request to
	// release: the holder's identity stays readable beside the request.
	Revoke bool `json:"revoke,omitempty"`
	// Held marks the record a holder with a hold limit writes back once
	// granted: the node's modification time is then no earlier than the
	// grant, on the server's clock (WithBreakOverdue).
	Held bool `json:"held,omitempty"`
	// Trace is the acquisition's trace context (a W3C traceparent) when
	// its client traces (WithTracer): a waiter links its trace to it.
	Trace string `json:"trace,omitempty"`
}

// marshal encodes o exactly as encoding/json does, without its reflection:
// every Acquire writes one record, and json.Marshal was a visible part of an
// Acquire's CPU. Each field is written with a trailing comma, and the last
// comma becomes the closing brace.
func (o Owner) marshal() []byte {
	b := make([]byte, 0, 96)
	b = append(b, '{')
	b = appendField(b, "host", o.Host)
	if o.PID != 0 {
		b = append(strconv.AppendInt(append(b, `"pid":`...), int64(o.PID), 10), ',')
	}
	b = appendField(b, "client", o.Client)
	if o.Goroutine != 0 {
		b = append(strconv.AppendInt(append(b, `"goroutine":`...), o.Goroutine, 10), ',')
	}
	b = appendField(b, "owner", o.Name)
	b = appendField(b, "value", o.Value)
	if !o.Since.IsZero() {
		since, err := o.Since.MarshalJSON()
		if err != nil { // a year outside 0..9999: let encoding/json say what it does
			out, _ := json.Marshal(o)
			return out
		}
		b = append(append(append(b, `"since":`...), since...), ',')
	}
	if o.MaxHold != 0 {
		b = append(strconv.AppendInt(append(b, `"maxHold":`...), int64(o.MaxHold), 10), ',')
	}
	if o.Revoke {
		b = append(b, `"revoke":true,`...)
	}
	if o.Held {
		b = append(b, `"held":true,`...)
	}
	b = appendField(b, "trace", o.Trace)
	if b[len(b)-1] == ',' {
		b[len(b)-1] = '}'
		return b
	}
	return append(b, '}')
}

// appendField appends `"key":"value",` when value is set.
func appendField(b []byte, key, value string) []byte {
	if value == "" {
		return b
	}
	b = append(append(append(b, '"'), key...), `":`...)
	return append(appendJSONString(b, value), ',')
}

// appendJSONString appends s as encoding/json quotes it: plain printable
// ASCII directly, anything else through encoding/json itself.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// revokeMessage is the data Curator's Revoker.attemptRevoke writes. Into a
// node that carries zklock's owner record, AskToRelease writes the record
// back marked Revoke instead, so the holder stays known to operators; both
// are requests to a zklock holder.
var revokeMessage = []byte("__REVOKE__")

var revokeMark = []byte(`"revoke":true`)

func isRevokeRequest(data []byte) bool {
	if bytes.Equal(data, revokeMessage) {
		return true
	}
	if !bytes.Contains(data, revokeMark) {
		return false
	}
	o, ok := parseOwner(data)
	return ok && o.Revoke
}

// parseOwner decodes the data of a lock node. ok is false, and the Owner
// zero, for data zklock did not write: other libraries store other things
// (Curator the client's IP address, kazoo an identifier string), and a record
// that only partly decodes must not pass for a half-known owner. Every record
// zklock writes names its client.
func parseOwner(data []byte) (o Owner, ok bool) {
	if err := json.Unmarshal(data, &o); err != nil || o.Client == "" {
		return Owner{}, false
	}
	return o, true
}

// readOwner is parseOwner for a node read with its stat: a record without
// a time of its own gets the node's creation time, on the server's clock.
func readOwner(data []byte, stat *zk.Stat) (Owner, bool) {
	o, ok := parseOwner(data)
	if ok && o.Since.IsZero() && stat != nil {
		o.Since = time.UnixMilli(stat.Ctime).UTC()
	}
	return o, ok
}

type ownerKey struct{}

// ContextWithOwner returns a copy of ctx that names an explicit owner for
// reentrant locks. Acquire and Release calls that carry the same owner id through the
// same Client are the same owner, whatever goroutine makes them: a lock taken
// in one goroutine can be released in another (a job handed to a pool).
func ContextWithOwner(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, ownerKey{}, id)
}

// explicitOwner is the owner ctx names (ContextWithOwner), or "".
func explicitOwner(ctx context.Context) string {
	id, _ := ctx.Value(ownerKey{}).(string)
	return id
}

// ownerID is the identity a reentrant lock keys its holds by: the explicit
// owner if the context names one, otherwise the calling goroutine. It is
// always combined with the client, so two clients (or processes) running a
// goroutine with the same number never share an identity.
func ownerID(ctx context.Context) (explicit string, goroutine int64) {
	if id, ok := ctx.Value(ownerKey{}).(string); ok && id != "" {
		return id, 0
	}
	return "", goroutineID()
}

// goroutineID parses the running goroutine's number from its stack header,
// "goroutine 123 [running]:". Go hides it on purpose; here it is only an
// identity within one client, never a key on its own.
func goroutineID() int64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	n, _ := strconv.ParseInt(string(b), 10, 64)
	return n
}

// identity is who a client is in its lock nodes: a random id (half of every
// default owner identity and of every GUID), and the host and process.
type identity struct {
	id    string
	host  string
	pid   int
	guids atomic.Uint64 // create attempts so far: the other half of a GUID

	maxHold time.Duration // the hold limit every record publishes (WithMaxHold)
}

func newIdentity(maxHold time.Duration) *identity {
	var id [8]byte
	_, _ = rand.Read(id[:])
	host, _ := os.Hostname()
	return &identity{id: hex.EncodeToString(id[:]), host: host, pid: os.Getpid(), maxHold: maxHold}
}

// record is the owner record of a node made for explicit, or for the
// goroutine a reentrant lock keys its holds by (0 for other locks: finding
// a goroutine's number costs microseconds of stack walking, and only
// re-entry needs it). The time comes from the node's ctime when read.
func (me *identity) record(explicit string, goroutine int64) Owner {
	return Owner{Host: me.host, PID: me.pid, Client: me.id, Goroutine: goroutine, Name: explicit, MaxHold: me.maxHold}
}

// newGUID names one create attempt: the client's random id and a counter,
// 32 hex digits. It needs to be unique only among the nodes of lock paths, and
// the client id already is (64 random bits); a counter costs nothing where
// crypto/rand per Acquire cost a syscall.
func (me *identity) newGUID() string {
	var b [32]byte
	copy(b[:16], me.id)
	n := me.guids.Add(1)
	const digits = "0123456789abcdef"
	for i := 31; i >= 16; i-- {
		b[i] = digits[n&0xf]
		n >>= 4
	}
	return string(b[:])
}
