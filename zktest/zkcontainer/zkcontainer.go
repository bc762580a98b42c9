// Package zkcontainer starts ZooKeeper in Docker with testcontainers-go.
//
// It is a module of its own so that testcontainers-go and its many
// dependencies stay out of the builds of zklock's users: zktest, the harness,
// reaches it only across a process boundary (go run ./cmd/zkcontainer), when
// neither ZKLOCK_TEST_SERVERS nor a local ZooKeeper install is available and
// a Docker engine answers.
package zkcontainer

import (
	"context"
	"fmt"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Image is the official ZooKeeper image the harness tests against.
const Image = "zookeeper:3.8"

// Start runs one standalone ZooKeeper with the settings zktest uses (short
// tick, every four-letter command enabled, fast container cleanup) and returns
// its client address and a function that removes the container.
func Start(ctx context.Context) (addr string, stop func(context.Context) error, err error) {
	req := testcontainers.ContainerRequest{
		Image:        Image,
		ExposedPorts: []string{"2181/tcp"},
		Env: map[string]string{
			"ZOO_TICK_TIME":              "100",
			"ZOO_4LW_COMMANDS_WHITELIST": "*",
			"ZOO_ADMINSERVER_ENABLED":    "false",
			"ZOO_CFG_EXTRA":              "minSessionTimeout=200 maxSessionTimeout=60000",
			"JVMFLAGS":                   "-Xmx256m -Dznode.container.checkIntervalMs=1000",
		},
		WaitingFor: wait.ForListeningPort("2181/tcp"),
	}
	c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{ContainerRequest: req, Started: true})
	if err != nil {
		return "", nil, fmt.Errorf("zkcontainer: start %s: %w", Image, err)
	}
	addr, err = c.PortEndpoint(ctx, "2181/tcp", "")
	if err != nil {
		_ = c.Terminate(ctx)
		return "", nil, fmt.Errorf("zkcontainer: address of %s: %w", Image, err)
	}
	return addr, func(ctx context.Context) error { return c.Terminate(ctx) }, nil
}
