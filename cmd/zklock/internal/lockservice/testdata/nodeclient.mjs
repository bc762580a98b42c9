// A test driver of clients/node (imported from ZKLOCK_NODE_CLIENT).
//
// nodeclient.mjs URL TOKEN PATH: takes the lock at PATH and prints, one JSON
// object a line, {"event": "granted", ...} with the token and the grant's
// seq; then {"event": "lost", ...} once held.signal aborts (and exits 3), or,
// after a line "release" on stdin, {"event": "released", "ok": ...} (and
// exits 0). A refused lock prints {"event": "error", ...} and exits 4. With
// ZKLOCK_LEASE_TTL set, it takes the lock with a lease of that many seconds
// (client.lease) instead of a stream.
import readline from 'node:readline';

const { Client } = await import(process.env.ZKLOCK_NODE_CLIENT);
const [url, token, path] = process.argv.slice(2);
const out = (o) => process.stdout.write(JSON.stringify({ ...o, at: performance.now() }) + '\n');

const client = new Client({ url, token: token || undefined });
let held;
let lease;
try {
  if (process.env.ZKLOCK_LEASE_TTL) {
    lease = await client.lease(Number(process.env.ZKLOCK_LEASE_TTL));
    held = await lease.lock(path, { timeout: 60 });
    held.granted = { seq: 0 };
  } else {
    held = await client.lock(path, { timeout: 60 });
  }
} catch (err) {
  out({ event: 'error', code: err.code, status: err.status, message: err.message });
  process.exit(4);
}
out({ event: 'granted', token: held.token, id: held.id, node: held.node, seq: held.granted.seq });
let releasing = false;
held.signal.addEventListener('abort', () => {
  if (releasing) return;
  out({ event: 'lost', reason: held.signal.reason.message, seq: held.ended?.seq ?? 0 });
  process.exit(3);
});
const rl = readline.createInterface({ input: process.stdin });
rl.on('line', async (line) => {
  if (line.trim() !== 'release') return;
  releasing = true;
  const ok = await held.release();
  if (lease) await lease.revoke();
  out({ event: 'released', ok });
  process.exit(0);
});
rl.on('close', () => {}); // stdin closed: keep holding
