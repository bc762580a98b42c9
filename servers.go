package zklock

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"unicode"
)

// defaultPort is ZooKeeper's client port, which ZooKeeper's own clients and
// go-zookeeper assume when an address names none.
const defaultPort = "2181"

// parseServers checks a server list before any dial, so a malformed one is an
// error at once rather than a wait for a session that cannot come. Entries
// may hold several comma-separated addresses, as a ZooKeeper connect string
// does; an address without a port gets 2181. As in ZooKeeper's connect string,
// a chroot may follow the last address ("h1:2181,h2:2181/app"): it is the
// suffix from the first '/' of the whole list, returned without the addresses
// ("" for none or "/"), and must be a valid lock path.
func parseServers(servers []string) (addrs []string, chroot string, err error) {
	if len(servers) == 0 {
		return nil, "", fmt.Errorf("%w: no servers", ErrInvalidOption)
	}
	joined := strings.Join(servers, ",")
	bad := func(err error) error {
		return fmt.Errorf("%w: server list %q: %w", ErrInvalidOption, joined, err)
	}
	hosts := joined
	if i := strings.IndexByte(joined, '/'); i >= 0 {
		hosts, chroot = joined[:i], strings.TrimRightFunc(joined[i:], unicode.IsSpace)
		switch {
		case strings.Contains(chroot, ","):
			return nil, "", bad(fmt.Errorf("chroot %q: a chroot can only follow the last address (host:port,host:port/chroot)", chroot))
		case chroot == "/":
			chroot = ""
		default:
			if err := validatePath(chroot); err != nil {
				return nil, "", bad(fmt.Errorf("chroot: %w", err))
			}
		}
	}
	for _, a := range strings.Split(hosts, ",") {
		addr, err := parseServer(strings.TrimSpace(a))
		if err != nil {
			return nil, "", bad(err)
		}
		addrs = append(addrs, addr)
	}
	return addrs, chroot, nil
}

// parseServer checks one host:port address.
func parseServer(a string) (string, error) {
	switch {
	case a == "":
		return "", fmt.Errorf("empty address")
	case strings.ContainsAny(a, "/ \t"):
		return "", fmt.Errorf("address %q: not host:port", a)
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		if !strings.Contains(err.Error(), "missing port") {
			return "", fmt.Errorf("address %q: %w", a, err)
		}
		host, port = a, defaultPort
		if strings.HasPrefix(a, "[") && strings.HasSuffix(a, "]") {
			host = a[1 : len(a)-1] // an IPv6 literal
		}
	}
	switch {
	case host == "":
		return "", fmt.Errorf("address %q: no host", a)
	case strings.ContainsAny(host, "[]"):
		return "", fmt.Errorf("address %q: stray brackets", a)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("address %q: port %q is not a number from 1 to 65535", a, port)
	}
	return net.JoinHostPort(host, port), nil
}
