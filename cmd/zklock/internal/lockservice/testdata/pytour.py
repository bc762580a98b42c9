#!/usr/bin/env python3
"""Every kind of clients/python against a service: pytour.py URL TOKEN SOCKET PREFIX.
Prints "tour ok" at the end; an assertion failure exits non-zero."""
import os
import socket
import sys
import threading
import time

import zklock

url, token, sock, pre = sys.argv[1:5]
client = zklock.Client(url, token=token)
assert client.health()["ok"] is True

# try: free, then taken
with client.try_lock(pre + "/try") as held:
    assert held.token > 0 and held.held
    assert client.try_lock(pre + "/try") is None
    me = client.status(pre + "/try")[0]
    assert me["holder"] is True
    assert me["owner"] == "tour (host %s pid %d)" % (socket.gethostname(), os.getpid()), me
assert not held.held and not held.lost.is_set()

# a timeout
with client.lock(pre + "/timeout"):
    try:
        client.lock(pre + "/timeout", timeout=0.2)
        raise AssertionError("granted while held")
    except zklock.LockTimeout as e:
        assert e.code == "timeout"
    # timeout 0 does not wait, nor does one under a millisecond wait for ever
    for timeout in (0, 0.0001):
        began = time.monotonic()
        try:
            client.lock(pre + "/timeout", timeout=timeout)
            raise AssertionError("granted while held")
        except zklock.LockTimeout as e:
            assert e.code == "timeout" and "zklock: zklock:" not in str(e), e
        assert time.monotonic() - began < 3, (timeout, time.monotonic() - began)
with client.lock(pre + "/free", timeout=0) as free:  # free: timeout 0 takes it
    assert free.token > 0
assert free.release() is True  # released: a second release answers as the first

# readers share; a writer waits for them
r1 = client.read_lock(pre + "/rw")
r2 = client.read_lock(pre + "/rw", timeout=5)
assert client.try_lock(pre + "/rw", kind="write") is None
r1.release()
r2.release()
with client.write_lock(pre + "/rw", timeout=5) as w:
    assert w.token > r2.token

# a semaphore of 3: 2 permits, then 1 more, then none
two = client.semaphore(pre + "/sem", 3, permits=2, timeout=5)
assert client.try_lock(pre + "/sem", kind="semaphore", limit=3, permits=2) is None
one = client.semaphore(pre + "/sem", 3, timeout=5)
assert client.try_lock(pre + "/sem", kind="semaphore", limit=3) is None
one.release()
two.release()

# an election: campaign, leader, watch
assert client.leader(pre + "/elect") is None
leaders = []
seen = threading.Event()
watch = client.watch(pre + "/elect")


def follow():
    for ld in watch:
        leaders.append(ld)
        if len(leaders) == 3:
            seen.set()
            return


t = threading.Thread(target=follow, daemon=True)
t.start()
with client.campaign(pre + "/elect", "10.0.0.1:80", timeout=5) as lead:
    ld = client.leader(pre + "/elect")
    assert ld is not None and ld.value == "10.0.0.1:80" and ld.token == lead.token
assert seen.wait(10), leaders
assert leaders[0] is None and leaders[1].value == "10.0.0.1:80" and leaders[2] is None, leaders

# a bad token, and the Unix socket
try:
    zklock.Client(url, token="wrong").status(pre + "/try")
    raise AssertionError("a wrong token was accepted")
except zklock.ZklockError as e:
    assert e.status == 401, e.status
unix = zklock.Client(unix_socket=sock, token=token)
with unix.lock(pre + "/unix", timeout=5) as held:
    assert unix.status(pre + "/unix")[0]["holder"] is True
print("tour ok")
