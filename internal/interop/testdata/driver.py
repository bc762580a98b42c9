"""Takes a kazoo lock in a loop and prints when it holds it, on the clock
every process on the machine shares (time.monotonic_ns is CLOCK_MONOTONIC on
Linux):

    python3 driver.py SERVERS PATH KIND CYCLES HOLD_MS [EXTRA_PATTERN ...]

KIND is mutex (Lock), read (ReadLock), write (WriteLock) or semaphore:N
(Semaphore with max_leases N); the extra patterns go to extra_lock_patterns.
KIND leases prints "OUT LEASES <n>" (Semaphore.lease_holders) and exits. It prints READY once connected, then
"ACQ <ns>" right after each acquire and "REL <ns>" right before each release.
"""
import sys
import time

from kazoo.client import KazooClient


def main():
    servers, path, kind, cycles, hold_ms = sys.argv[1:6]
    extra = tuple(sys.argv[6:])
    zk = KazooClient(hosts=servers, timeout=10.0)
    zk.start(timeout=20)
    print("READY", flush=True)
    if kind == "leases":
        holders = zk.Semaphore(path, "kazoo-driver").lease_holders()
        print("OUT LEASES", len(holders), flush=True)
        zk.stop()
        zk.close()
        return
    if kind.startswith("semaphore:"):
        lock = zk.Semaphore(path, "kazoo-driver", max_leases=int(kind[10:]))
    else:
        make = {"mutex": zk.Lock, "read": zk.ReadLock, "write": zk.WriteLock}[kind]
        lock = make(path, "kazoo-driver", extra_lock_patterns=extra)
    for _ in range(int(cycles)):
        lock.acquire()
        print("ACQ", time.monotonic_ns(), flush=True)
        time.sleep(int(hold_ms) / 1000)
        print("REL", time.monotonic_ns(), flush=True)
        lock.release()
    zk.stop()
    zk.close()


if __name__ == "__main__":
    main()
