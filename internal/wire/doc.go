// Package wire is zklock's byte level: what passes between go-zookeeper and
// a ZooKeeper server. It dials every connection go-zookeeper opens (with the
// TLS handshake inside the dial), rewrites the paths of each packet under a
// connect string's chroot, parses the reply frames to learn the session
// timeout the server granted and when it last heard from the client, tells
// a caller when a queued request has reached the socket, and says why no
// session came (a refusal, a server that is not ZooKeeper, silence).
//
// It does no locking and knows nothing of zklock's Client, leases or
// requests: the root package builds a Tap per Connect and reads the facts it
// gathers. The few things it needs from the root come in its Config.
package wire
