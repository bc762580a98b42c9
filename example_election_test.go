package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/zklock/zklock"
)

func ExampleElection() {
	ctx := context.Background()
	client, err := zklock.Connect(ctx, servers)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	election, err := client.NewElection("/examples/election")
	if err != nil {
		fmt.Println(err)
		return
	}

	_, err = election.Leader(ctx)
	fmt.Println(errors.Is(err, zklock.ErrNoLeader))

	lead, err := election.Campaign(ctx, "10.0.0.7:8080") // blocks until this process leads
	if err != nil {
		fmt.Println(err)
		return
	}
	leader, _ := election.Leader(ctx) // anyone can ask, campaigning or not
	fmt.Println(leader.Value, leader.Node == lead.Lease().Node())

	_ = lead.Proclaim(ctx, "10.0.0.7:9090") // a new value, same leader
	leader, _ = election.Leader(ctx)
	fmt.Println(leader.Value)
	_ = lead.Resign(ctx)
	// Output:
	// true
	// 10.0.0.7:8080 true
	// 10.0.0.7:9090
}

func ExampleElection_Observe() {
	client, _ := zklock.Connect(context.Background(), servers)
	defer client.Close()
	election, _ := client.NewElection("/examples/observe")

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	changes := election.Observe(ctx) // the leader now, then every change
	fmt.Printf("%q\n", (<-changes).Value)
	lead, _ := election.Campaign(ctx, "primary")
	fmt.Printf("%q\n", (<-changes).Value)
	_ = lead.Resign(ctx)
	fmt.Printf("%q\n", (<-changes).Node) // nobody leads
	// Output:
	// ""
	// "primary"
	// ""
}

func ExampleLease_Multi() {
	ctx := context.Background()
	client, _ := zklock.Connect(ctx, servers)
	defer client.Close()
	mu, _ := client.NewMutex("/examples/guarded")
	lease, _ := mu.Acquire(ctx) // makes /examples too
	_, _ = client.Conn().Create("/examples/guarded-config", []byte("v1"), 0, zk.WorldACL(zk.PermAll))
	defer client.Conn().Delete("/examples/guarded-config", -1)

	// Applied only while the lease's node exists: a holder that lost the
	// lock (expired, deleted, paused too long) cannot write any more.
	_, err := lease.Multi(ctx, &zk.SetDataRequest{Path: "/examples/guarded-config", Data: []byte("v2"), Version: -1})
	fmt.Println(err)
	_ = lease.Release(ctx)

	_, err = lease.Multi(ctx, &zk.SetDataRequest{Path: "/examples/guarded-config", Data: []byte("v3"), Version: -1})
	fmt.Println(errors.Is(err, zklock.ErrReleased))
	data, _, _ := client.Conn().Get("/examples/guarded-config")
	fmt.Println(string(data))
	// Output:
	// <nil>
	// true
	// v2
}

func ExampleLease_RevokeRequested() {
	ctx := context.Background()
	client, _ := zklock.Connect(ctx, servers)
	defer client.Close()
	mu, _ := client.NewMutex("/examples/revocable")
	lease, _ := mu.Acquire(ctx)

	// Another process (here the same client) asks the holder to let go, as
	// 'zklock break --ask' and Curator's Revoker do.
	_ = client.AskToRelease(ctx, lease.Node())

	select {
	case <-lease.RevokeRequested():
		fmt.Println("asked to release; releasing")
		_ = lease.Release(ctx)
	case <-lease.Done():
	}
	// Output: asked to release; releasing
}

func ExampleClient_StateChanges() {
	client, _ := zklock.Connect(context.Background(), servers)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	states := client.StateChanges(ctx)
	fmt.Println(<-states)
	// A service would watch on: suspended (no contact, leases still held),
	// lost (leases presumed lost), expired, reconnected.
	client.Close()
	fmt.Println(<-states)
	// Output:
	// connected
	// closed
}

// An election whose other participants are Curator LeaderLatches: name the
// nodes as LeaderLatch does, so both queue on one path.
func ExampleLatchNames() {
	ctx := context.Background()
	client, err := zklock.Connect(ctx, servers)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()
	election, err := client.NewElection("/examples/latch", zklock.LatchNames())
	if err != nil {
		fmt.Println(err)
		return
	}
	lead, err := election.Campaign(ctx, "worker-1")
	if err != nil {
		fmt.Println(err)
		return
	}
	leader, _ := election.Leader(ctx)
	fmt.Println(leader.Value, strings.Contains(leader.Node, "-latch-"))
	_ = lead.Resign(ctx)
	// Output:
	// worker-1 true
}
