// A client of `zklock serve`: fair ZooKeeper locks, read/write locks,
// semaphores and elections from Node.js, with no dependencies.
//
//   import { Client } from 'zklock';
//   const client = new Client(); // http://127.0.0.1:7070, or {url, token, socketPath}
//   const held = await client.lock('/locks/report', { timeout: 30 });
//   try {
//     await work({ fencingToken: held.token, signal: held.signal }); // aborted if the lock is lost
//   } finally {
//     await held.release();
//   }
//
// A lock is held while its request to the service stays open: the process's
// connection is the lease. It is built on node:http, which has no idle
// timeouts of its own (the built-in fetch ends a silent body after 300 s);
// the service sends a heartbeat on every stream, and a stream silent for
// three heartbeats counts as lost.

import http from 'node:http';
import https from 'node:https';
import os from 'node:os';

/** This process, for the owner record zklock status shows. */
const me = () => ({ host: os.hostname(), pid: process.pid });

export const DEFAULT_URL = 'http://127.0.0.1:7070';

/** An error answered by the service (`code`, `status`), or a failure to reach it (code "unreachable"). */
export class ZklockError extends Error {
  constructor(message, code = 'failed', status = 0) {
    super(message);
    this.name = 'ZklockError';
    this.code = code;
    this.status = status;
  }
}

/** "zklock: " + prefix + reason, without repeating what the service's reason says already ("zklock: lock lost: ..."). */
function said(prefix, reason) {
  let r = String(reason ?? '');
  if (r.startsWith('zklock: ')) r = r.slice('zklock: '.length);
  return r.startsWith(prefix) ? `zklock: ${r}` : `zklock: ${prefix}${r}`;
}

function coded(message, code, status) {
  return new ZklockError(said('', message), code || 'failed', status);
}

function goDuration(s) {
  const units = { h: 3600e3, m: 60e3, s: 1e3, ms: 1, us: 1e-3, 'µs': 1e-3, ns: 1e-6 };
  let total = 0;
  for (const [, n, u] of String(s).matchAll(/([0-9.]+)([a-zµ]+)/g)) total += Number(n) * (units[u] ?? 1e3);
  return total;
}

/** A timeout in seconds as a Go duration, rounded up to whole milliseconds (a positive one never becomes "0ms"). */
function duration(seconds) {
  return seconds == null ? undefined : `${Math.ceil(seconds * 1000)}ms`;
}

/** Splits a response body into lines as they come. */
async function* lines(res) {
  let buf = '';
  res.setEncoding('utf8');
  for await (const chunk of res) {
    buf += chunk;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      yield buf.slice(0, i);
      buf = buf.slice(i + 1);
    }
  }
}

/** A client of one `zklock serve`. */
export class Client {
  /**
   * @param {{url?: string, token?: string, socketPath?: string, connectTimeout?: number}} [opts]
   *   url: the service (http:// or https://); socketPath: a Unix socket instead; token: the bearer token
   *   (--token-file); connectTimeout: seconds for connecting and every short request (10).
   */
  constructor({ url = DEFAULT_URL, token, socketPath, connectTimeout = 10 } = {}) {
    this.url = new URL(url);
    if (!['http:', 'https:'].includes(this.url.protocol)) throw new TypeError(`zklock: url must be http:// or https://, not ${url}`);
    this.token = token;
    this.socketPath = socketPath;
    this.connectTimeout = connectTimeout * 1000;
  }

  /** Sends a request; resolves with the response once its headers arrive. */
  #request(method, route, body, signal, idle = this.connectTimeout) {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const headers = { Accept: 'application/json' };
    if (data !== undefined) headers['Content-Type'] = 'application/json';
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    const mod = this.url.protocol === 'https:' ? https : http;
    const opts = { method, headers, agent: false };
    if (this.socketPath) Object.assign(opts, { socketPath: this.socketPath, path: route });
    else Object.assign(opts, { hostname: this.url.hostname, port: this.url.port, path: this.url.pathname.replace(/\/$/, '') + route });
    return new Promise((resolve, reject) => {
      signal?.throwIfAborted();
      const req = mod.request(opts, (res) => resolve({ req, res }));
      const onAbort = () => req.destroy(signal.reason);
      signal?.addEventListener('abort', onAbort, { once: true });
      req.once('close', () => signal?.removeEventListener('abort', onAbort));
      req.stop = () => signal?.removeEventListener('abort', onAbort); // the signal no longer ends this request
      req.on('error', (err) => reject(signal?.aborted ? signal.reason : coded(`cannot reach the service: ${err.message}`, 'unreachable', 0)));
      req.setTimeout(idle, () => req.destroy(new Error(`no answer within ${idle} ms`)));
      req.end(data);
    });
  }

  async #call(method, route, body, idle) {
    const { res } = await this.#request(method, route, body, undefined, idle);
    let text = '';
    res.setEncoding('utf8');
    for await (const chunk of res) text += chunk;
    const v = text ? JSON.parse(text) : {};
    if (res.statusCode !== 200) throw coded(v.error ?? text, v.code, res.statusCode);
    return v;
  }

  /**
   * Waits for the lock at path and returns the holding.
   * @param {string} path
   * @param {{timeout?: number, kind?: 'mutex'|'read'|'write'|'semaphore', limit?: number, permits?: number,
   *          owner?: string, signal?: AbortSignal}} [opts] timeout in seconds (none: wait for ever; 0: do not wait,
   *   a try that rejects with code "timeout" at once if the lock is taken); limit: a
   *   semaphore's number of permits, permits: how many to take at once (1); signal: abandons the wait.
   * @returns {Promise<Holding>} rejects with a ZklockError (code "timeout", ...), or the signal's reason.
   */
  async lock(path, { timeout, kind = 'mutex', limit, permits, owner, signal } = {}) {
    if (timeout != null && timeout <= 0) { // do not wait: a try
      try {
        return await this.#hold('/v1/lock/acquire', { path, kind, limit, permits, owner, try: true, ...me() }, signal);
      } catch (err) {
        if (err.code === 'locked') throw new ZklockError(err.message, 'timeout', err.status);
        throw err;
      }
    }
    return this.#hold('/v1/lock/acquire', { path, kind, limit, permits, owner, timeout: duration(timeout), ...me() }, signal);
  }

  /** Takes the lock only if it is free now: the holding, or null. */
  async tryLock(path, { kind = 'mutex', limit, permits, owner } = {}) {
    try {
      return await this.#hold('/v1/lock/acquire', { path, kind, limit, permits, owner, try: true, ...me() });
    } catch (err) {
      if (err.code === 'locked') return null;
      throw err;
    }
  }

  /** A read lock: readers share it, a writer waits for them. */
  readLock(path, opts = {}) { return this.lock(path, { ...opts, kind: 'read' }); }

  /** A write lock: held alone. */
  writeLock(path, opts = {}) { return this.lock(path, { ...opts, kind: 'write' }); }

  /** `permits` (1) of a semaphore of `limit` permits. */
  semaphore(path, limit, opts = {}) { return this.lock(path, { ...opts, kind: 'semaphore', limit }); }

  /**
   * Runs fn(holding) holding the lock, and releases it when fn settles.
   * @template T
   * @param {string} path
   * @param {object} opts as for lock()
   * @param {(held: Holding) => Promise<T>|T} fn
   * @returns {Promise<T>}
   */
  async withLock(path, opts, fn) {
    const held = await this.lock(path, opts);
    try {
      return await fn(held);
    } finally {
      await held.release();
    }
  }

  /** Waits until elected leader of path, publishing value; release() resigns. */
  campaign(path, value, { timeout, owner, signal } = {}) {
    return this.#hold('/v1/election/campaign', { path, value, owner, timeout: duration(timeout), ...me() }, signal);
  }

  /** The leader of path now, or null while nobody leads. */
  async leader(path) {
    try {
      return await this.#call('GET', `/v1/election/leader?path=${encodeURIComponent(path)}`);
    } catch (err) {
      if (err.code === 'no_leader') return null;
      throw err;
    }
  }

  /**
   * The leader of path now and at every change (null while nobody leads), until signal aborts.
   * @returns {AsyncGenerator<object|null>}
   */
  async *watch(path, { signal } = {}) {
    const { req, res } = await this.#request('GET', `/v1/election/watch?path=${encodeURIComponent(path)}`, undefined, signal);
    try {
      if (res.statusCode !== 200) {
        let text = '';
        for await (const c of res) text += c;
        const v = JSON.parse(text);
        throw coded(v.error, v.code, res.statusCode);
      }
      quietAfter(req, res);
      let data = '';
      for await (const line of lines(res)) {
        if (line.startsWith('data:')) data = line.slice(5).trim();
        else if (line === '' && data) {
          const l = JSON.parse(data);
          data = '';
          yield l.node ? l : null;
        }
      }
    } catch (err) {
      if (signal?.aborted) return;
      throw err;
    } finally {
      req.destroy();
    }
  }

  /** Who holds and who waits at path, holders first. */
  async status(path) {
    return (await this.#call('GET', `/v1/lock/status?path=${encodeURIComponent(path)}`)).contenders;
  }

  /** The service's /healthz: {ok, session}. */
  async health() {
    const { res } = await this.#request('GET', '/healthz');
    let text = '';
    for await (const c of res) text += c;
    return JSON.parse(text);
  }

  async #hold(route, body, signal) {
    const { req, res } = await this.#request('POST', route, body, signal);
    if (res.statusCode !== 200) {
      let text = '';
      for await (const c of res) text += c;
      let v = {};
      try { v = JSON.parse(text); } catch { v = { error: text }; }
      throw coded(v.error, v.code, res.statusCode);
    }
    quietAfter(req, res);
    const it = lines(res)[Symbol.asyncIterator]();
    try {
      for (;;) {
        const { value, done } = await it.next();
        if (done) throw coded('the service ended the stream before the grant', 'unreachable', 0);
        const ev = JSON.parse(value);
        if (ev.event === 'granted' || ev.event === 'elected') {
          req.stop(); // the signal abandons the wait, not the holding
          return new Holding(this, req, it, ev);
        }
        if (ev.event === 'failed') throw coded(ev.reason ?? '', ev.code, 0);
      }
    } catch (err) {
      req.destroy(); // a wait given up leaves nothing behind
      if (signal?.aborted) throw signal.reason;
      if (err instanceof ZklockError) throw err;
      throw coded(`the service fell silent: ${err.message}`, 'unreachable', 0);
    }
  }

  /**
   * Grants a lease of ttl seconds (between 1 and a third of the service's session timeout), kept alive in the
   * background: for a process that takes and releases locks in separate steps rather than holding a request open.
   * @param {number} ttl seconds
   * @returns {Promise<Lease>}
   */
  async lease(ttl) {
    const sent = performance.now();
    const d = await this.#call('POST', '/v1/lease/grant', { ttl: duration(ttl) });
    return new Lease(this, d, sent);
  }

  /** One JSON request (for Lease); idle: ms of silence allowed. */
  _call(method, route, body, idle) { return this.#call(method, route, body, idle); }

  /** Asks the service to release holding id; false if it was lost. */
  async _release(id) {
    try {
      await this.#call('POST', '/v1/lock/release', { id });
      return true;
    } catch (err) {
      if (err.code === 'lost') return false;
      if (err.code === 'not_found') return true; // its stream ended already
      throw err;
    }
  }
}

/** A stream with no line for three heartbeats is dead. */
function quietAfter(req, res) {
  const hb = goDuration(res.headers['zklock-heartbeat'] ?? '');
  if (hb > 0) req.setTimeout(Math.max(3 * hb, 1000), () => req.destroy(new Error(`no heartbeat within ${3 * hb} ms`)));
  else req.setTimeout(0); // no heartbeat promised: no bound on silence
}

/**
 * A granted lock (or leadership): token (the fencing token), id, node, path, signal (an AbortSignal aborted
 * once the lock is lost, its reason saying why), lost (a promise resolved with the reason then), release().
 */
export class Holding {
  #client;
  #req;
  #abort = new AbortController();
  #asked = false;
  #released = null;
  #releasing = null;
  #ended;

  constructor(client, req, it, granted) {
    this.#client = client;
    this.#req = req;
    this.granted = granted;
    this.id = granted.id;
    this.path = granted.path;
    this.node = granted.node ?? '';
    this.token = granted.token ?? 0;
    /** @type {AbortSignal} aborted once the lock is lost */
    this.signal = this.#abort.signal;
    /** @type {Promise<string>} resolves with the reason once the lock is lost */
    this.lost = new Promise((resolve) => this.signal.addEventListener('abort', () => resolve(String(this.signal.reason?.message ?? this.signal.reason)), { once: true }));
    this.#ended = this.#read(it);
  }

  async #read(it) {
    let reason = 'the stream ended';
    let code = 'lost';
    try {
      for (;;) {
        const { value, done } = await it.next();
        if (done) break;
        const ev = JSON.parse(value);
        if (ev.event === 'heartbeat') continue;
        this.ended = ev;
        if (ev.event === 'released') {
          if (this.#asked) return;
          reason = `released by the service: ${ev.reason ?? ''}`;
          break;
        }
        if (ev.event === 'lost') {
          reason = ev.reason ?? 'lost';
          break;
        }
      }
    } catch (err) {
      // A cut connection (Node says only "aborted"), or a silent one: the
      // service cannot be heard, so the lock must be presumed lost.
      reason = `the service is unreachable: the stream was cut (${err.message})`;
      code = 'unreachable';
    }
    if (this.#asked && this.#released !== null) return;
    this.#abort.abort(coded(said('lock lost: ', reason), code, 0));
  }

  /** True until the lock is released or lost. */
  get held() { return !this.signal.aborted && !this.#asked; }

  /** Throws a ZklockError (code "lost") once the lock is gone. */
  check() {
    if (this.signal.aborted) throw this.signal.reason;
  }

  /**
   * Releases the lock (or resigns), once (a later call resolves as the first); resolves false if it had been lost.
   * Within one ZooKeeper round trip. If the
   * service cannot be asked, it closes the stream, which releases the lock as well, and rejects.
   * @returns {Promise<boolean>}
   */
  release() {
    this.#releasing ??= this.#release();
    return this.#releasing;
  }

  async #release() {
    this.#asked = true;
    let ok;
    try {
      ok = !this.signal.aborted && (await this.#client._release(this.id));
    } catch (err) {
      this.#req.destroy(); // closing the stream releases the lock too
      throw err;
    }
    this.#released = ok;
    if (!ok && !this.signal.aborted) this.#abort.abort(coded('lock lost before the release', 'lost', 0));
    let timer;
    await Promise.race([this.#ended, new Promise((r) => { timer = setTimeout(r, 10000); })]);
    clearTimeout(timer);
    this.#req.destroy();
    return ok;
  }
}

const leaseLost = (code) => ['lease_expired', 'lease_lost', 'lease_revoked'].includes(code);

/**
 * A lease: locks taken with it (lease.lock) are held while it is kept alive, which it does every third of its TTL.
 * Everything it holds counts as lost once its TTL has passed since the last acknowledged keep-alive was sent (the
 * service may then release it): signal aborts then, or when the service answers that the lease ended, and every
 * holding's signal with it. id, ttl (seconds), signal, lost (a promise of the reason), check(), lock(), tryLock(),
 * revoke().
 */
export class Lease {
  #client;
  #abort = new AbortController();
  #deadline;
  #holdings = new Map();
  #timer;
  #stopped = false;

  constructor(client, d, sent) {
    this.#client = client;
    this.id = d.lease;
    this.ttl = d.ttl_ms / 1000;
    this.#deadline = sent + d.ttl_ms;
    /** @type {AbortSignal} aborted once the lease is lost */
    this.signal = this.#abort.signal;
    /** @type {Promise<string>} */
    this.lost = new Promise((resolve) => this.signal.addEventListener('abort', () => resolve(String(this.signal.reason?.message)), { once: true }));
    this.#schedule();
  }

  #lose(reason) {
    if (this.signal.aborted) return;
    clearTimeout(this.#timer);
    const err = reason instanceof Error ? reason : coded(said('lease lost: ', reason), 'lease_lost', 0);
    for (const h of this.#holdings.values()) h._lose(err);
    this.#abort.abort(err);
  }

  #schedule() {
    if (this.#stopped || this.signal.aborted) return;
    const wait = Math.max(0, Math.min(this.ttl * 1000 / 3, this.#deadline - performance.now()));
    this.#timer = setTimeout(() => this.#keep(), wait);
  }

  async #keep() {
    if (this.#stopped || this.signal.aborted) return;
    if (performance.now() >= this.#deadline) {
      this.#lose(`no keep-alive acknowledged within the lease's ttl ${this.ttl}s`);
      return;
    }
    const sent = performance.now();
    try {
      const d = await this.#client._call('POST', '/v1/lease/keepalive', { lease: this.id });
      this.#deadline = sent + d.ttl_ms;
      for (const h of d.holdings) if (h.lost) this.#holdings.get(h.id)?._lose(coded(said('lock lost: ', h.lost), 'lost', 0));
    } catch (err) {
      if (leaseLost(err.code)) {
        this.#lose(err);
        return;
      }
      // not acknowledged: try again until the deadline
    }
    this.#schedule();
  }

  /** Throws a ZklockError (code lease_lost, lease_expired, ...) once the lease is gone. */
  check() {
    if (!this.signal.aborted && performance.now() >= this.#deadline) this.#lose(`its ttl ${this.ttl}s passed`);
    if (this.signal.aborted) throw this.signal.reason;
  }

  /**
   * Takes the lock at path with this lease, waiting at most timeout seconds (30; at most 300).
   * @returns {Promise<LeaseHolding>} rejects with a ZklockError (code timeout, locked, lease_expired, ...).
   */
  async lock(path, { timeout = 30, kind = 'mutex', limit, permits, owner, try: tryOnly = false } = {}) {
    if (!tryOnly && timeout <= 0) { // do not wait: a try
      try {
        return await this.lock(path, { kind, limit, permits, owner, try: true });
      } catch (err) {
        if (err.code === 'locked') throw new ZklockError(err.message, 'timeout', err.status);
        throw err;
      }
    }
    const body = { lease: this.id, path, kind, limit, permits, owner, ...me() };
    if (tryOnly) body.try = true;
    else body.timeout = duration(timeout);
    let d;
    try {
      d = await this.#client._call('POST', '/v1/lease/acquire', body, tryOnly ? undefined : timeout * 1000 + this.#client.connectTimeout);
    } catch (err) {
      if (leaseLost(err.code)) this.#lose(err);
      throw err;
    }
    const h = new LeaseHolding(this, this.#client, d);
    this.#holdings.set(h.id, h);
    if (this.signal.aborted) h._lose(this.signal.reason);
    return h;
  }

  /** Takes the lock only if it is free now: the holding, or null. */
  async tryLock(path, opts = {}) {
    try {
      return await this.lock(path, { ...opts, try: true });
    } catch (err) {
      if (err.code === 'locked') return null;
      throw err;
    }
  }

  _forget(id) { this.#holdings.delete(id); }

  /** Ends the lease: every lock it holds is released before this resolves. Does nothing once lost. */
  async revoke() {
    this.#stopped = true;
    clearTimeout(this.#timer);
    if (this.signal.aborted) return;
    try {
      await this.#client._call('POST', '/v1/lease/revoke', { lease: this.id });
    } catch (err) {
      if (leaseLost(err.code)) {
        this.#lose(err);
        return;
      }
      throw err;
    }
    for (const h of this.#holdings.values()) h._released = true;
    this.#abort.abort(coded('lease revoked', 'lease_revoked', 0));
  }
}

/** A lock held with a lease: token (the fencing token), id, node, path, signal, lost, check(), release(). */
export class LeaseHolding {
  #lease;
  #client;
  #abort = new AbortController();

  constructor(lease, client, d) {
    this.#lease = lease;
    this.#client = client;
    this.id = d.id;
    this.path = d.path;
    this.node = d.node;
    this.token = d.token;
    this._released = false;
    /** @type {AbortSignal} aborted once the lock (or its lease) is lost */
    this.signal = this.#abort.signal;
    /** @type {Promise<string>} */
    this.lost = new Promise((resolve) => this.signal.addEventListener('abort', () => resolve(String(this.signal.reason?.message)), { once: true }));
  }

  _lose(err) { if (!this._released && !this.signal.aborted) this.#abort.abort(err); }

  /** Throws once the lock or its lease is gone. */
  check() {
    if (this.signal.aborted) throw this.signal.reason;
    this.#lease.check();
  }

  /** Releases the lock, once; resolves false if it had been lost. */
  async release() {
    if (this._released) return !this.signal.aborted;
    this._released = true;
    this.#lease._forget(this.id);
    if (this.signal.aborted) return false;
    try {
      await this.#client._call('POST', '/v1/lease/release', { lease: this.#lease.id, id: this.id });
      return true;
    } catch (err) {
      if (err.code === 'lost' || leaseLost(err.code)) {
        this.#abort.abort(err);
        return false;
      }
      throw err;
    }
  }
}
