// Types of the zklock client (index.js).

export declare const DEFAULT_URL: string;

export declare class ZklockError extends Error {
  /** "timeout", "locked", "lost", "unreachable", "incompatible", "too_many", "forbidden_path", ... */
  code: string;
  /** the HTTP status, 0 when the code came on a stream or the service was not reached */
  status: number;
}

export interface ClientOptions {
  /** the service, http:// or https:// (default http://127.0.0.1:7070) */
  url?: string;
  /** the bearer token the service asks for (--token-file) */
  token?: string;
  /** a Unix socket instead of url (zklock serve --unix) */
  socketPath?: string;
  /** seconds for connecting and every short request (10) */
  connectTimeout?: number;
}

export interface LockOptions {
  /** seconds to wait at most; none: wait for ever */
  timeout?: number;
  kind?: 'mutex' | 'read' | 'write' | 'semaphore';
  /** kind semaphore: its number of permits (N) */
  limit?: number;
  /** kind semaphore: how many permits to take at once (k, default 1) */
  permits?: number;
  /** the name zklock status shows */
  owner?: string;
  /** abandons the wait (not a granted holding) */
  signal?: AbortSignal;
}

export interface Leader {
  path: string;
  node: string;
  value: string;
  token: number;
  owner?: string;
  host?: string;
  pid?: number;
}

export declare class Holding {
  readonly id: string;
  readonly path: string;
  readonly node: string;
  /** the fencing token: larger for every later holder of the path */
  readonly token: number;
  /** aborted once the lock is lost; its reason a ZklockError with code "lost" */
  readonly signal: AbortSignal;
  /** resolves with the reason once the lock is lost */
  readonly lost: Promise<string>;
  /** true until released or lost */
  readonly held: boolean;
  /** throws the loss once the lock is gone */
  check(): void;
  /** releases (or resigns) once; false if the lock had been lost */
  release(): Promise<boolean>;
}

export declare class Client {
  constructor(opts?: ClientOptions);
  /** a lease of ttl seconds, kept alive in the background, for locks taken and released in separate steps */
  lease(ttl: number): Promise<Lease>;
  lock(path: string, opts?: LockOptions): Promise<Holding>;
  tryLock(path: string, opts?: Omit<LockOptions, 'timeout' | 'signal'>): Promise<Holding | null>;
  readLock(path: string, opts?: LockOptions): Promise<Holding>;
  writeLock(path: string, opts?: LockOptions): Promise<Holding>;
  semaphore(path: string, limit: number, opts?: LockOptions): Promise<Holding>;
  withLock<T>(path: string, opts: LockOptions, fn: (held: Holding) => Promise<T> | T): Promise<T>;
  campaign(path: string, value: string, opts?: { timeout?: number; owner?: string; signal?: AbortSignal }): Promise<Holding>;
  leader(path: string): Promise<Leader | null>;
  watch(path: string, opts?: { signal?: AbortSignal }): AsyncGenerator<Leader | null>;
  status(path: string): Promise<Array<Record<string, unknown>>>;
  health(): Promise<{ ok: boolean; session: string }>;
}

export interface LeaseLockOptions {
  /** seconds to wait at most (30; the service allows 300) */
  timeout?: number;
  kind?: 'mutex' | 'read' | 'write' | 'semaphore';
  limit?: number;
  permits?: number;
  owner?: string;
  /** do not wait: reject with code "locked" at once if taken */
  try?: boolean;
}

/** A lease (client.lease(ttl)): kept alive every third of its TTL; its locks end with it. */
export declare class Lease {
  id: string;
  /** seconds */
  ttl: number;
  /** aborted once the lease is lost: its TTL passed since the last acknowledged keep-alive was sent, or the service said so */
  signal: AbortSignal;
  lost: Promise<string>;
  check(): void;
  lock(path: string, opts?: LeaseLockOptions): Promise<LeaseHolding>;
  tryLock(path: string, opts?: Omit<LeaseLockOptions, 'try' | 'timeout'>): Promise<LeaseHolding | null>;
  /** releases every lock it holds before resolving */
  revoke(): Promise<void>;
}

/** A lock held with a lease. */
export declare class LeaseHolding {
  id: string;
  path: string;
  node: string;
  /** the fencing token */
  token: number;
  signal: AbortSignal;
  lost: Promise<string>;
  check(): void;
  release(): Promise<boolean>;
}
