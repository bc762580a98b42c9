package lockservice_test

// The service under load against the library: each parallel caller takes
// and releases a mutex of its own path, over and over. go test -run '^$'
// -bench . -benchtime 3s -cpu 64 ./cmd/zklock/internal/lockservice/
// (-cpu sets the callers: RunParallel runs that many goroutines). The
// figures are in docs/performance.md.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zklock/zklock"
	"github.com/zklock/zklock/cmd/zklock/internal/lockservice"
)

var benchSeq atomic.Int64

func benchPath(b *testing.B) string {
	return fmt.Sprintf("/zklock-serve-bench/%s-%d", b.Name(), benchSeq.Add(1))
}

// BenchmarkLibrary: the same cycle through the library, on one client.
func BenchmarkLibrary(b *testing.B) {
	ctx := context.Background()
	c, err := zklock.Connect(ctx, cluster.Addrs(), zklock.WithSessionTimeout(6*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		m, _ := c.NewMutex(benchPath(b))
		for pb.Next() {
			l, err := m.Acquire(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			_ = l.Release(ctx)
		}
	})
}

func benchService(b *testing.B) (*lockservice.Service, string, *http.Client, func()) {
	ctx := context.Background()
	c, err := zklock.Connect(ctx, cluster.Addrs(), zklock.WithSessionTimeout(6*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	svc, _ := lockservice.New(c, lockservice.Config{MaxHolds: 100000, MaxLeases: 100000})
	srv := newBenchServer(svc.Handler())
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4096}}
	return svc, srv.URL, hc, func() {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = svc.Close(cctx)
		srv.Close()
		hc.CloseIdleConnections()
		c.Close()
	}
}

func post(hc *http.Client, url string, body any) (*http.Response, error) {
	raw, _ := json.Marshal(body)
	return hc.Post(url, "application/json", bytes.NewReader(raw))
}

// BenchmarkServiceStream: acquire as a stream, read the grant, release by
// closing the request.
func BenchmarkServiceStream(b *testing.B) {
	_, url, hc, stop := benchService(b)
	defer stop()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		p := benchPath(b)
		for pb.Next() {
			resp, err := post(hc, url+"/v1/lock/acquire", lockservice.AcquireRequest{Path: p})
			if err != nil {
				b.Error(err)
				return
			}
			rd := bufio.NewReader(resp.Body)
			for {
				line, err := rd.ReadBytes('\n')
				if err != nil {
					b.Error(err)
					return
				}
				if bytes.Contains(line, []byte(`"granted"`)) {
					break
				}
			}
			resp.Body.Close() // the release
		}
	})
}

// BenchmarkServiceLease: one lease per caller; acquire (try) and release
// by id, two plain requests a cycle.
func BenchmarkServiceLease(b *testing.B) {
	_, url, hc, stop := benchService(b)
	defer stop()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		p := benchPath(b)
		resp, err := post(hc, url+"/v1/lease/grant", lockservice.LeaseGrantRequest{TTL: "2s"})
		if err != nil {
			b.Error(err)
			return
		}
		var lr lockservice.LeaseResponse
		_ = json.NewDecoder(resp.Body).Decode(&lr)
		resp.Body.Close()
		last := time.Now()
		for pb.Next() {
			if time.Since(last) > 500*time.Millisecond {
				r, err := post(hc, url+"/v1/lease/keepalive", lockservice.LeaseRequest{Lease: lr.Lease})
				if err == nil {
					r.Body.Close()
				}
				last = time.Now()
			}
			r, err := post(hc, url+"/v1/lease/acquire", lockservice.LeaseAcquireRequest{Lease: lr.Lease, Path: p, Timeout: "10s"})
			if err != nil {
				b.Error(err)
				return
			}
			var got lockservice.LeaseAcquireResponse
			_ = json.NewDecoder(r.Body).Decode(&got)
			r.Body.Close()
			if !got.Granted {
				b.Errorf("not granted: %d", r.StatusCode)
				return
			}
			r, err = post(hc, url+"/v1/lease/release", lockservice.LeaseReleaseRequest{Lease: lr.Lease, ID: got.ID})
			if err != nil {
				b.Error(err)
				return
			}
			r.Body.Close()
		}
	})
}

// BenchmarkHoldingCost: memory and goroutines of the service per lease
// holding held at once (b.N holdings).
func BenchmarkHoldingCost(b *testing.B) {
	_, url, hc, stop := benchService(b)
	defer stop()
	resp, _ := post(hc, url+"/v1/lease/grant", lockservice.LeaseGrantRequest{TTL: "2s"})
	var lr lockservice.LeaseResponse
	_ = json.NewDecoder(resp.Body).Decode(&lr)
	resp.Body.Close()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	g0 := runtime.NumGoroutine()
	last := time.Now()
	for i := 0; i < b.N; i++ {
		if time.Since(last) > 500*time.Millisecond {
			r, _ := post(hc, url+"/v1/lease/keepalive", lockservice.LeaseRequest{Lease: lr.Lease})
			r.Body.Close()
			last = time.Now()
		}
		r, err := post(hc, url+"/v1/lease/acquire", lockservice.LeaseAcquireRequest{Lease: lr.Lease, Path: benchPath(b), Try: true})
		if err != nil || r.StatusCode != 200 {
			b.Fatalf("acquire: %v %v", err, r.StatusCode)
		}
		r.Body.Close()
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/float64(b.N), "heapB/holding")
	b.ReportMetric(float64(runtime.NumGoroutine()-g0)/float64(b.N), "goroutines/holding")
	r, _ := post(hc, url+"/v1/lease/revoke", lockservice.LeaseRequest{Lease: lr.Lease})
	r.Body.Close()
}
