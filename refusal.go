package zklock

import (
	"context"
	"errors"
	"fmt"
)

// This file is Connect's early end: a connection refused for a cause that no
// retry changes while the configuration stays (a server certificate the
// client does not trust or that is not valid for the name, a client
// certificate the server refuses) is retried by go-zookeeper like any other.
// Once every server in the list has failed so (the wire tells: Tap.Hopeless),
// waiting out the connect timeout would only delay the same error, so
// Connect returns it then.
//
// Refused credentials cannot be told apart at that point: ZooKeeper accepts
// any digest credentials (a wrong password shows only as NoAuth on a node),
// and a refusal by another scheme fails addAuth at once already.

// errNoRetryHelps ends Connect's wait once every server refused permanently.
var errNoRetryHelps = errors.New("every server refused the connection for a cause that retrying cannot change")

// firstSession waits for Connect's session, or gives up once every server
// refused the connection permanently.
func (c *Client) firstSession(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-c.wire.Hopeless():
			cancel(errNoRetryHelps)
		case <-ctx.Done():
		}
	}()
	_, err := c.session.live(ctx)
	cancel(nil)
	<-done
	if err != nil && errors.Is(context.Cause(ctx), errNoRetryHelps) {
		return fmt.Errorf("%w: %w", ErrUnreachable, errNoRetryHelps)
	}
	return err
}
