"""Takes a kazoo lock in a loop and prints when it holds it, on the clock
every process on the machine shares (time.monotonic_ns is CLOCK_MONOTONIC on
Linux):

    python3 driver.py SERVERS PATH KIND CYCLES HOLD_MS [EXTRA_PATTERN ...]

KIND is mutex (Lock), read (ReadLock), write (WriteLock) or semaphore:N
(Semaphore with max_leases N); the extra patterns go to extra_lock_patterns.
KIND partition:MS is Lock on a session of MS ms that prints every KazooState
change as "OUT STATE <state> <ns>" (partition_test.go).
KIND leases prints "OUT LEASES <n>" (Semaphore.lease_holders) and exits. It prints READY once connected, then
"ACQ <ns>" right after each acquire and "REL <ns>" right before each release.
"""
import sys
import time

from kazoo.client import KazooClient


def main():
    servers, path, kind, cycles, hold_ms = sys.argv[1:6]
    extra = tuple(sys.argv[6:])
    partition = kind.startswith("partition:")
    zk = KazooClient(hosts=servers, timeout=int(kind[10:]) / 1000 if partition else 10.0)
    if partition:
        zk.add_listener(lambda s: print("OUT STATE", s, time.monotonic_ns(), flush=True))
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
        make = {"mutex": zk.Lock, "read": zk.ReadLock, "write": zk.WriteLock}["mutex" if partition else kind]
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
