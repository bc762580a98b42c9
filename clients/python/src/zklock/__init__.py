"""A client of ``zklock serve``: fair ZooKeeper locks, read/write locks,
semaphores and elections from Python, with the standard library only.

    import zklock

    client = zklock.Client()  # http://127.0.0.1:7070, or url=..., token=..., unix_socket=...
    with client.lock("/locks/report", timeout=30) as held:
        print("holding, fencing token", held.token)
        for chunk in work():
            held.check()  # raises zklock.LockLost once the lock is gone
            write(chunk, fencing_token=held.token)

A lock is held while its request to the service stays open: the process's
connection is the lease. Leaving the ``with`` block releases it; a process
that dies releases it as the operating system closes the connection. A lock
can be lost while held (the service's ZooKeeper session cut off, the node
deleted by an operator): ``held.lost`` (a ``threading.Event``) is set, and
``held.check()`` raises, before the service grants the lock to any other of
its callers. The service sends a heartbeat on every stream; a stream that
stays silent for three heartbeats counts as lost too.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import socket
import threading
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional

__all__ = [
    "Client",
    "Holding",
    "Lease",
    "LeaseHolding",
    "LeaseLost",
    "Leader",
    "ZklockError",
    "Locked",
    "LockTimeout",
    "LockLost",
]

DEFAULT_URL = "http://127.0.0.1:7070"


class ZklockError(Exception):
    """An error answered by the service (``code`` and HTTP ``status``), or a
    failure to reach it (``code`` "unreachable", status 0)."""

    def __init__(self, message: str, code: str = "failed", status: int = 0) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


class Locked(ZklockError):
    """A try found the lock held or waited for."""


class LockTimeout(ZklockError):
    """The timeout passed while others held the lock."""


class LockLost(ZklockError):
    """The lock was lost while held (``Holding.check``)."""


class LeaseLost(LockLost):
    """The lease ended (its TTL passed without an acknowledged keep-alive,
    the service lost its ZooKeeper session or restarted): every lock taken
    with it is lost."""


def _error(status: int, body: bytes) -> ZklockError:
    try:
        e = json.loads(body)
        msg, code = e.get("error", ""), e.get("code", "failed")
    except ValueError:
        msg, code = body.decode(errors="replace"), "failed"
    return _coded(msg, code, status)


def _said(prefix: str, reason: str) -> str:
    """"zklock: " + prefix + reason, without repeating what the service's
    reason says already ("zklock: lock lost: ...")."""
    if reason.startswith("zklock: "):
        reason = reason[len("zklock: "):]
    if reason.startswith(prefix):
        return "zklock: " + reason
    return "zklock: " + prefix + reason


def _coded(msg: str, code: str, status: int) -> ZklockError:
    cls = {"locked": Locked, "timeout": LockTimeout, "lost": LockLost,
           "lease_expired": LeaseLost, "lease_lost": LeaseLost, "lease_revoked": LeaseLost}.get(code, ZklockError)
    return cls(_said("", msg), code, status)


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: Optional[float]) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self._path)
        self.sock = s


def _duration(seconds: Optional[float]) -> Optional[str]:
    # Rounded up to whole milliseconds: a positive timeout never becomes
    # "0ms". A timeout of 0 is a try (the callers send "try" instead).
    if seconds is None:
        return None
    return "%dms" % math.ceil(seconds * 1000)


def _parse_go_duration(s: str) -> float:
    """Parses the simple Go durations the service sends (5s, 100ms, 1m30s)."""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
    total, num, i = 0.0, "", 0
    while i < len(s):
        c = s[i]
        if c.isdigit() or c == ".":
            num += c
            i += 1
            continue
        j = i
        while j < len(s) and not (s[j].isdigit() or s[j] == "."):
            j += 1
        total += float(num or 0) * units.get(s[i:j], 1.0)
        num, i = "", j
    return total


@dataclass(frozen=True)
class Leader:
    """An election's leader: what it published (``value``) and its token."""

    path: str
    node: str
    value: str
    token: int
    owner: str = ""
    host: str = ""
    pid: int = 0


class Client:
    """A client of one ``zklock serve``. It is safe to use from many threads.

    ``url`` is the service's address (http:// or https://); ``unix_socket`` a
    Unix socket path instead; ``token`` the bearer token the service asks for
    (``--token-file``), if any. ``connect_timeout`` bounds connecting and
    every short request.
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        token: Optional[str] = None,
        unix_socket: Optional[str] = None,
        connect_timeout: float = 10.0,
    ) -> None:
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https"):
            raise ValueError("zklock: url must be http:// or https://, not %r" % url)
        self._url = u
        self._token = token
        self._unix = unix_socket
        self._timeout = connect_timeout

    # -- connections -------------------------------------------------------

    def _conn(self) -> http.client.HTTPConnection:
        if self._unix:
            return _UnixHTTPConnection(self._unix, self._timeout)
        if self._url.scheme == "https":
            return http.client.HTTPSConnection(self._url.hostname or "", self._url.port, timeout=self._timeout)
        return http.client.HTTPConnection(self._url.hostname or "", self._url.port or 80, timeout=self._timeout)

    def _headers(self, body: bool) -> Dict[str, str]:
        h = {"Accept": "application/json"}
        if body:
            h["Content-Type"] = "application/json"
        if self._token:
            h["Authorization"] = "Bearer " + self._token
        return h

    def _open(self, method: str, route: str, body: Optional[Dict[str, Any]] = None):
        conn = self._conn()
        data = None if body is None else json.dumps({k: v for k, v in body.items() if v is not None}).encode()
        try:
            conn.request(method, self._url.path.rstrip("/") + route, body=data, headers=self._headers(data is not None))
            return conn, conn.getresponse()
        except OSError as e:
            conn.close()
            raise ZklockError("zklock: cannot reach the service: %s" % e, "unreachable") from e

    def _call(self, method: str, route: str, body: Optional[Dict[str, Any]] = None) -> Any:
        conn, resp = self._open(method, route, body)
        try:
            raw = resp.read()
        finally:
            conn.close()
        if resp.status != 200:
            raise _error(resp.status, raw)
        return json.loads(raw)

    # -- locks -------------------------------------------------------------

    def lock(
        self,
        path: str,
        timeout: Optional[float] = None,
        *,
        kind: str = "mutex",
        limit: Optional[int] = None,
        permits: Optional[int] = None,
        owner: Optional[str] = None,
    ) -> "Holding":
        """Waits for the lock at ``path`` (at most ``timeout`` seconds; None
        waits for ever) and returns the holding, a context manager that
        releases it. ``kind`` is "mutex", "read", "write" or "semaphore"
        (with ``limit``, its number of permits, and ``permits`` taken at
        once, default 1). ``timeout=0`` does not wait: a try, raising
        LockTimeout at once if the lock is taken. Raises LockTimeout, or
        ZklockError."""
        body = {"path": path, "kind": kind, "limit": limit, "permits": permits, "owner": owner, **_me()}
        if timeout is not None and timeout <= 0:
            body["try"] = True
            try:
                return self._hold("/v1/lock/acquire", body)
            except Locked as e:
                raise LockTimeout(str(e), "timeout", e.status) from e
        body["timeout"] = _duration(timeout)
        return self._hold("/v1/lock/acquire", body)

    def try_lock(self, path: str, **kw: Any) -> Optional["Holding"]:
        """Takes the lock only if it is free now: the holding, or None."""
        body = {"path": path, "kind": kw.get("kind", "mutex"), "limit": kw.get("limit"),
                "permits": kw.get("permits"), "owner": kw.get("owner"), "try": True, **_me()}
        try:
            return self._hold("/v1/lock/acquire", body)
        except Locked:
            return None

    def read_lock(self, path: str, timeout: Optional[float] = None, **kw: Any) -> "Holding":
        """A read lock: readers share it, a writer waits for them."""
        return self.lock(path, timeout, kind="read", **kw)

    def write_lock(self, path: str, timeout: Optional[float] = None, **kw: Any) -> "Holding":
        """A write lock: held alone, after the readers queued before it."""
        return self.lock(path, timeout, kind="write", **kw)

    def semaphore(self, path: str, limit: int, timeout: Optional[float] = None, *, permits: int = 1, **kw: Any) -> "Holding":
        """``permits`` of a semaphore of ``limit`` permits."""
        return self.lock(path, timeout, kind="semaphore", limit=limit, permits=permits, **kw)

    def lease(self, ttl: float) -> "Lease":
        """Grants a lease of ``ttl`` seconds (between 1 and a third of the
        service's session timeout) and keeps it alive from a background
        thread: for a process that takes and releases locks in separate
        steps rather than holding a request open. Locks taken with it
        (``lease.lock``) end with it. Use it as a context manager (leaving
        revokes it, releasing every lock it holds), or call ``revoke()``."""
        return Lease(self, ttl)

    def status(self, path: str) -> List[Dict[str, Any]]:
        """Who holds and who waits at ``path``, holders first."""
        return self._call("GET", "/v1/lock/status?" + urllib.parse.urlencode({"path": path}))["contenders"]

    def health(self) -> Dict[str, Any]:
        """The service's /healthz: {"ok": ..., "session": ...}."""
        conn, resp = self._open("GET", "/healthz")
        try:
            return json.loads(resp.read())
        finally:
            conn.close()

    # -- elections ---------------------------------------------------------

    def campaign(self, path: str, value: str, timeout: Optional[float] = None, *, owner: Optional[str] = None) -> "Holding":
        """Waits until elected leader of ``path``, publishing ``value``; the
        holding's release (or the ``with`` block's end) resigns."""
        return self._hold("/v1/election/campaign",
                          {"path": path, "value": value, "timeout": _duration(timeout), "owner": owner, **_me()})

    def leader(self, path: str) -> Optional[Leader]:
        """The leader of ``path`` now, or None while nobody leads."""
        try:
            d = self._call("GET", "/v1/election/leader?" + urllib.parse.urlencode({"path": path}))
        except ZklockError as e:
            if e.code == "no_leader":
                return None
            raise
        return _leader(d)

    def watch(self, path: str) -> Iterator[Optional[Leader]]:
        """Yields the leader of ``path`` now and at every change (None while
        nobody leads), until the generator is closed. Raises ZklockError
        when the service falls silent for three heartbeats."""
        conn, resp = self._open("GET", "/v1/election/watch?" + urllib.parse.urlencode({"path": path}))
        try:
            if resp.status != 200:
                raise _error(resp.status, resp.read())
            _quiet_after(conn, resp)
            data = ""
            while True:
                try:
                    line = resp.readline()
                except OSError as e:
                    raise ZklockError("zklock: the watch fell silent: %s" % e, "unreachable") from e
                if not line:
                    return
                text = line.decode().rstrip("\r\n")
                if text.startswith("data:"):
                    data = text[5:].strip()
                elif text == "" and data:
                    d = json.loads(data)
                    data = ""
                    yield _leader(d) if d.get("node") else None
        finally:
            conn.close()

    # -- holding -----------------------------------------------------------

    def _hold(self, route: str, body: Dict[str, Any]) -> "Holding":
        conn, resp = self._open("POST", route, body)
        if resp.status != 200:
            try:
                raise _error(resp.status, resp.read())
            finally:
                conn.close()
        try:
            _quiet_after(conn, resp)
            while True:
                ev = _read_event(resp)
                if ev is None:
                    raise ZklockError("zklock: the service ended the stream before the grant", "unreachable")
                if ev["event"] in ("granted", "elected"):
                    return Holding(self, conn, resp, ev)
                if ev["event"] == "failed":
                    raise _coded(ev.get("reason", ""), ev.get("code", "failed"), 0)
        except BaseException:
            conn.close()  # a wait given up (KeyboardInterrupt too) leaves nothing behind
            raise

    def _release(self, holding_id: str) -> bool:
        """Asks the service to release; False if the lock was lost."""
        try:
            self._call("POST", "/v1/lock/release", {"id": holding_id})
            return True
        except LockLost:
            return False
        except ZklockError as e:
            if e.code == "not_found":  # its stream ended already
                return True
            raise


def _me() -> Dict[str, Any]:
    """This process, for the owner record zklock status shows."""
    return {"host": socket.gethostname(), "pid": os.getpid()}


def _leader(d: Dict[str, Any]) -> Leader:
    return Leader(path=d["path"], node=d["node"], value=d.get("value", ""), token=d.get("token", 0),
                  owner=d.get("owner", ""), host=d.get("host", ""), pid=d.get("pid", 0))


def _quiet_after(conn: http.client.HTTPConnection, resp: http.client.HTTPResponse) -> None:
    """A stream with no line for three heartbeats is dead: reads time out."""
    hb = resp.getheader("Zklock-Heartbeat")
    if conn.sock is not None:
        conn.sock.settimeout(max(3 * _parse_go_duration(hb), 1.0) if hb else None)


def _read_event(resp: http.client.HTTPResponse) -> Optional[Dict[str, Any]]:
    try:
        line = resp.readline()
    except OSError as e:  # socket.timeout included: three heartbeats missed
        raise ZklockError("zklock: the service is unreachable: the stream was cut or fell silent: %s" % e, "unreachable") from e
    if not line:
        return None
    return json.loads(line)


class Holding:
    """A granted lock (or leadership). Use it as a context manager, or call
    ``release()``. Attributes: ``token`` (the fencing token: send it to the
    resource you protect), ``id``, ``node``, ``path``, ``lost`` (a
    ``threading.Event`` set once the lock is lost), ``reason`` (why)."""

    def __init__(self, client: Client, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse, granted: Dict[str, Any]) -> None:
        self._client = client
        self._conn = conn
        self._resp = resp
        self.granted = granted
        self.id: str = granted["id"]
        self.path: str = granted["path"]
        self.node: str = granted.get("node", "")
        self.token: int = granted.get("token", 0)
        self.lost = threading.Event()
        self.reason: Optional[str] = None
        self.ended: Optional[Dict[str, Any]] = None  # the stream's last event
        self._released = False
        self._asked = False  # release() has asked the service
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, name="zklock " + self.path, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        reason = "the stream ended"
        try:
            while True:
                ev = _read_event(self._resp)
                if ev is None:
                    break
                if ev["event"] == "heartbeat":
                    continue
                self.ended = ev
                if ev["event"] == "released":
                    with self._lock:
                        if self._asked:
                            return
                    reason = "released by the service: %s" % ev.get("reason", "")
                    break
                if ev["event"] == "lost":
                    reason = ev.get("reason", "lost")
                    break
        except (ZklockError, ValueError, OSError) as e:
            reason = str(e)
        with self._lock:
            if self._released:
                return
            if self.reason is None:
                self.reason = reason
        self.lost.set()

    def check(self) -> None:
        """Raises LockLost once the lock is gone."""
        if self.lost.is_set():
            raise LockLost(_said("lock lost: ", str(self.reason)), "lost")

    @property
    def held(self) -> bool:
        """True until the lock is released or lost."""
        return not self.lost.is_set() and not self._released

    def release(self) -> bool:
        """Releases the lock (or resigns), once; returns False if it had been
        lost. It returns within one ZooKeeper round trip. If the service
        cannot be asked, it closes the stream, which releases the lock as
        well, and raises ZklockError."""
        with self._lock:
            if self._released or self._asked:
                return self.reason is None
            lost = self.lost.is_set()
            self._asked = True
        try:
            ok = not lost and self._client._release(self.id)
        except BaseException:
            self._conn.close()  # closing the stream releases the lock too
            raise
        with self._lock:
            self._released = True
            if not ok and self.reason is None:
                self.reason = "lost before the release"
        if not ok:
            self.lost.set()
        self._reader.join(10)  # the stream ends with "released" or "lost"
        self._conn.close()
        return ok

    def __enter__(self) -> "Holding":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def __repr__(self) -> str:
        return "<zklock.Holding %s token=%d %s>" % (self.path, self.token, "lost" if self.lost.is_set() else "held")


class Lease:
    """A lease of the service: locks taken with it are held while it is kept
    alive, which a background thread does every third of its TTL.

    The rule it applies for you: everything it holds counts as lost once its
    TTL has passed since the last acknowledged keep-alive was sent (the
    service may then release it). ``lost`` (a ``threading.Event``) is set
    then, or when the service answers that the lease ended, and every
    holding's ``lost`` with it; ``check()`` raises ``LeaseLost``."""

    def __init__(self, client: Client, ttl: float) -> None:
        self._client = client
        sent = time.monotonic()
        d = client._call("POST", "/v1/lease/grant", {"ttl": _duration(ttl)})
        self.id: str = d["lease"]
        self.ttl: float = d["ttl_ms"] / 1000.0
        self.lost = threading.Event()
        self.reason: Optional[str] = None
        self._deadline = sent + self.ttl
        self._holdings: Dict[str, "LeaseHolding"] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._keep, name="zklock lease", daemon=True)
        self._thread.start()

    def _lose(self, reason: str) -> None:
        with self._lock:
            if self.reason is None:
                self.reason = reason
            hs = list(self._holdings.values())
        for h in hs:
            h._lose(reason)
        self.lost.set()

    def _keep(self) -> None:
        while not self._stop.is_set() and not self.lost.is_set():
            with self._lock:
                deadline = self._deadline
            wait = min(self.ttl / 3, deadline - time.monotonic())
            if self._stop.wait(max(wait, 0)):
                return
            if time.monotonic() >= deadline:
                self._lose("no keep-alive acknowledged within the lease's ttl %gs" % self.ttl)
                return
            sent = time.monotonic()
            try:
                d = self._client._call("POST", "/v1/lease/keepalive", {"lease": self.id})
            except LeaseLost as e:
                self._lose(str(e))
                return
            except ZklockError:
                continue  # not acknowledged: try again until the deadline
            with self._lock:
                self._deadline = sent + self.ttl
                lost = [(self._holdings.get(h["id"]), h["lost"]) for h in d["holdings"] if h.get("lost")]
            for h, why in lost:
                if h is not None:
                    h._lose(why)

    def check(self) -> None:
        """Raises LeaseLost once the lease is gone."""
        if self.lost.is_set() or time.monotonic() >= self._deadline:
            raise LeaseLost(_said("lease lost: ", self.reason or "its ttl passed"), "lease_lost")

    def lock(self, path: str, timeout: float = 30, *, kind: str = "mutex", limit: Optional[int] = None,
             permits: Optional[int] = None, owner: Optional[str] = None, try_: bool = False) -> "LeaseHolding":
        """Takes the lock at ``path`` with this lease, waiting at most
        ``timeout`` seconds (at most 300); raises LockTimeout, Locked (with
        ``try_``), LeaseLost or ZklockError. ``timeout=0`` does not wait:
        a try, raising LockTimeout at once if the lock is taken."""
        if timeout <= 0 and not try_:
            try:
                return self.lock(path, kind=kind, limit=limit, permits=permits, owner=owner, try_=True)
            except Locked as e:
                raise LockTimeout(str(e), "timeout", e.status) from e
        body = {"lease": self.id, "path": path, "kind": kind, "limit": limit, "permits": permits,
                "owner": owner, **_me()}
        if try_:
            body["try"] = True
        else:
            body["timeout"] = _duration(timeout)
        conn, resp = self._client._open("POST", "/v1/lease/acquire", body)
        if not try_:
            conn.sock.settimeout(timeout + self._client._timeout)
        try:
            raw = resp.read()
        finally:
            conn.close()
        if resp.status != 200:
            err = _error(resp.status, raw)
            if isinstance(err, LeaseLost):
                self._lose(str(err))
            raise err
        h = LeaseHolding(self, json.loads(raw))
        with self._lock:
            self._holdings[h.id] = h
        if self.lost.is_set():
            h._lose(self.reason or "lease lost")
        return h

    def try_lock(self, path: str, **kw: Any) -> Optional["LeaseHolding"]:
        """Takes the lock only if it is free now: the holding, or None."""
        try:
            return self.lock(path, try_=True, **kw)
        except Locked:
            return None

    def revoke(self) -> None:
        """Ends the lease: every lock it holds is released before this
        returns. Revoking a lease already lost does nothing."""
        self._stop.set()
        if self.lost.is_set():
            return
        try:
            self._client._call("POST", "/v1/lease/revoke", {"lease": self.id})
        except LeaseLost as e:
            self._lose(str(e))
            return
        finally:
            self._thread.join(10)
        with self._lock:
            hs = list(self._holdings.values())
            self.reason = self.reason or "revoked"
        for h in hs:
            h._released = True
        self.lost.set()

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.revoke()


class LeaseHolding:
    """A lock held with a lease: ``token`` (the fencing token), ``id``,
    ``node``, ``path``, ``lost`` (a ``threading.Event``), ``reason``. A
    context manager; ``release()`` releases it."""

    def __init__(self, lease: Lease, d: Dict[str, Any]) -> None:
        self._lease = lease
        self.id: str = d["id"]
        self.path: str = d["path"]
        self.node: str = d["node"]
        self.token: int = d["token"]
        self.lost = threading.Event()
        self.reason: Optional[str] = None
        self._released = False

    def _lose(self, reason: str) -> None:
        if not self._released:
            self.reason = self.reason or reason
            self.lost.set()

    def check(self) -> None:
        """Raises LockLost once the lock (or its lease) is gone."""
        if self.lost.is_set():
            raise LockLost(_said("lock lost: ", str(self.reason)), "lost")
        self._lease.check()

    def release(self) -> bool:
        """Releases the lock, once; False if it had been lost."""
        if self._released:
            return self.reason is None
        self._released = True
        with self._lease._lock:
            self._lease._holdings.pop(self.id, None)
        if self.lost.is_set():
            return False
        try:
            self._lease._client._call("POST", "/v1/lease/release", {"lease": self._lease.id, "id": self.id})
        except LockLost as e:
            self.reason = str(e)
            self.lost.set()
            return False
        return True

    def __enter__(self) -> "LeaseHolding":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def __repr__(self) -> str:
        return "<zklock.LeaseHolding %s token=%d %s>" % (self.path, self.token, "lost" if self.lost.is_set() else "held")
