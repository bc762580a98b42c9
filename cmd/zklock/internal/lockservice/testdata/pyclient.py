#!/usr/bin/env python3
"""A test driver of clients/python (the zklock package on PYTHONPATH).

pyclient.py URL TOKEN PATH: takes the lock at PATH and prints, one JSON
object a line, {"event": "granted", ...} with the token and the grant's seq;
then {"event": "lost", ...} once held.lost is set (and exits 3), or, after a
line "release" on stdin, {"event": "released", "ok": ...} (and exits 0). A
refused lock prints {"event": "error", ...} and exits 4. With
ZKLOCK_LEASE_TTL set, it takes the lock with a lease of that many seconds
(client.lease) instead of a stream.
"""
import json
import os
import sys
import threading
import time

import zklock


def out(**kw):
    kw["at"] = time.monotonic()
    print(json.dumps(kw), flush=True)


def main():
    url, token, path = sys.argv[1], sys.argv[2] or None, sys.argv[3]
    client = zklock.Client(url, token=token)
    lease = None
    try:
        if os.environ.get("ZKLOCK_LEASE_TTL"):
            lease = client.lease(float(os.environ["ZKLOCK_LEASE_TTL"]))
            held = lease.lock(path, timeout=60)
        else:
            held = client.lock(path, timeout=60)
    except zklock.ZklockError as e:
        out(event="error", code=e.code, status=e.status, message=str(e))
        return 4
    out(event="granted", token=held.token, id=held.id, node=held.node, seq=held.granted["seq"] if lease is None else 0)
    releasing = threading.Event()

    def on_stdin():
        for line in sys.stdin:
            if line.strip() == "release":
                releasing.set()
                ok = held.release()
                if lease is not None:
                    lease.revoke()
                out(event="released", ok=ok)
                os._exit(0)

    threading.Thread(target=on_stdin, daemon=True).start()
    held.lost.wait()
    if releasing.is_set():
        threading.Event().wait()  # the release prints and exits
    try:
        held.check()
    except zklock.LockLost as e:
        out(event="lost", reason=str(e), seq=0 if lease is not None else (held.ended or {}).get("seq", 0))
    return 3


if __name__ == "__main__":
    sys.exit(main())
