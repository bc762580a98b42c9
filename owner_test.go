package zklock

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var since = time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC)

func TestPureOwnerRoundTrip(t *testing.T) {
	for _, o := range []Owner{
		{Host: "web-1", PID: 4242, Client: "0123456789abcdef", Goroutine: 17, Since: since},
		{Host: "web-1", PID: 4242, Client: "0123456789abcdef", Name: "job-9", Since: since},
		{Client: "c", Name: "ünïcødé \"quoted\" \n", Since: since},
		{Client: "c", Value: "leader at 10.0.0.7:8080", Since: since},
	} {
		got, ok := parseOwner(o.marshal())
		require.True(t, ok, "%+v", o)
		assert.Equal(t, o, got)
	}
}

func TestPureParseOwnerForeignData(t *testing.T) {
	tests := []struct {
		name string
		data string
	}{
		{"empty (go-zookeeper's zk.Lock)", ""},
		{"Curator's default: the client's IP", "192.168.10.7"},
		{"Curator, IPv6", "fe80::1"},
		{"kazoo identifier", "worker-3"},
		{"kazoo numeric identifier", "42"},
		{"JSON null", "null"},
		{"JSON string", `"host"`},
		{"JSON array", `[1,2]`},
		{"empty object", "{}"},
		{"another library's JSON", `{"host":"h","pid":7}`},
		{"client of the wrong type", `{"client":7}`},
		{"partly decodable", `{"client":"c","host":"h","pid":"x"}`},
		{"truncated record", `{"client":"c","host":"h"`},
		{"trailing garbage", `{"client":"c"} x`},
		{"binary", "\x00\xff\xfe\x01"},
	}
	for _, tt := range tests {
		o, ok := parseOwner([]byte(tt.data))
		assert.False(t, ok, tt.name)
		assert.Zero(t, o, "%s: a foreign record must not half-decode", tt.name)
	}
	_, ok := parseOwner(nil)
	assert.False(t, ok, "nil data")
}

// A newer zklock may add fields; an older one still recognises the record.
func TestPureParseOwnerUnknownFields(t *testing.T) {
	o, ok := parseOwner([]byte(`{"client":"c","pid":3,"since":"2024-05-06T07:08:09Z","lease":"x"}`))
	require.True(t, ok)
	assert.Equal(t, Owner{Client: "c", PID: 3, Since: time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)}, o)
}

// FuzzParseOwner: no data makes parseOwner panic or half-decode, and every
// record zklock writes reads back as written (strings as JSON stores them).
func FuzzParseOwner(f *testing.F) {
	f.Add([]byte(Owner{Host: "h", PID: 1, Client: "c", Goroutine: 2, Since: since}.marshal()), "h", "c", "o", 1, int64(2), since.UnixNano())
	f.Add([]byte("192.168.10.7"), "", "c", "", 0, int64(0), int64(0))
	f.Add([]byte(`{"client":"c","pid":"x"}`), "\xff", "\xfe", "", -1, int64(-1), int64(-1))
	f.Add([]byte("null"), "", "", "", 0, int64(0), int64(0))
	f.Fuzz(func(t *testing.T, data []byte, host, client, owner string, pid int, goroutine, nanos int64) {
		o, ok := parseOwner(data)
		if ok {
			require.NotEmpty(t, o.Client)
		} else {
			require.Zero(t, o)
		}

		if client == "" {
			return // not a record zklock writes
		}
		in := Owner{Host: host, PID: pid, Client: client, Goroutine: goroutine, Name: owner, Since: time.Unix(0, nanos).UTC()}
		got, ok := parseOwner(in.marshal())
		require.True(t, ok, "%+v", in)
		want := in
		want.Host, want.Client, want.Name = asJSON(host), asJSON(client), asJSON(owner)
		require.Equal(t, want, got)
	})
}

// asJSON is s as encoding/json stores it: each invalid UTF-8 byte becomes U+FFFD.
func asJSON(s string) string { return string([]rune(s)) }

// marshal is hand-written for speed; it must write exactly what
// encoding/json writes, for any owner.
func FuzzOwnerMarshalMatchesEncodingJSON(f *testing.F) {
	f.Add("web-1", 4242, "0123456789abcdef", int64(17), "", "", int64(0))
	f.Add("", 0, "", int64(0), "ünï <&> \"q\" \n\x00", "10.0.0.7:8080", int64(-1))
	f.Add("h", -3, "c", int64(-9), "\xff", "\xfe<", int64(1<<62))
	f.Fuzz(func(t *testing.T, host string, pid int, client string, g int64, name, value string, nanos int64) {
		o := Owner{Host: host, PID: pid, Client: client, Goroutine: g, Name: name, Value: value, Since: time.Unix(0, nanos).UTC()}
		want, err := json.Marshal(o)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(o.marshal()))
	})
}

func TestPureOwnerMarshalOutOfRangeYear(t *testing.T) {
	o := Owner{Client: "c", Since: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	_, err := json.Marshal(o)
	require.Error(t, err)
	assert.Nil(t, o.marshal(), "as encoding/json: no record")
}
