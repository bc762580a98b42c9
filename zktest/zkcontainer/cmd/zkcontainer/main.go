// Command zkcontainer starts ZooKeeper in Docker for zktest: it prints
// "ZKLOCK_TEST_SERVERS=<addr>" once the server listens, and removes the
// container when its standard input closes or it is signalled.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/zklock/zklock/zktest/zkcontainer"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	addr, stop, err := zkcontainer.Start(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("ZKLOCK_TEST_SERVERS=%s\n", addr)

	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(done)
	}()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	select {
	case <-done:
	case <-sigs:
	}
	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := stop(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
