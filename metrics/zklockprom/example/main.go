// Command example exposes zklock's metrics on http://127.0.0.1:9464/metrics
// while a few workers take turns on one lock:
//
//	go run . -servers 127.0.0.1:2181
//
// (`zklock server` starts a throwaway ZooKeeper and prints its address.)
package main

import (
	"context"
	"flag"
	"log"
	"net/http"
	"strings"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/zklock/zklock"
	zklockprom "github.com/zklock/zklock/metrics/zklockprom"
)

func main() {
	servers := flag.String("servers", "127.0.0.1:2181", "ZooKeeper servers, comma-separated")
	listen := flag.String("listen", "127.0.0.1:9464", "where to serve /metrics")
	flag.Parse()

	reg := prom.NewRegistry()
	m, err := zklockprom.New(reg)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	for i := range 3 {
		c, err := zklock.Connect(ctx, strings.Split(*servers, ","), zklock.WithMetrics(m))
		if err != nil {
			log.Fatal(err)
		}
		defer c.Close()
		mu, err := c.NewMutex("/zklock-example/metrics")
		if err != nil {
			log.Fatal(err)
		}
		go work(ctx, mu, time.Duration(i+1)*20*time.Millisecond)
	}
	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	log.Printf("serving metrics on http://%s/metrics", *listen)
	log.Fatal(http.ListenAndServe(*listen, nil))
}

// work takes the lock, holds it for hold, and lets go, forever.
func work(ctx context.Context, mu *zklock.Mutex, hold time.Duration) {
	for {
		l, err := mu.Acquire(ctx)
		if err != nil {
			log.Print(err)
			time.Sleep(time.Second)
			continue
		}
		select {
		case <-l.Done():
		case <-time.After(hold):
		}
		_ = l.Release(ctx)
	}
}
