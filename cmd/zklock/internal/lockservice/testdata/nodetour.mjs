// Every kind of clients/node against a service: nodetour.mjs URL TOKEN SOCKET PREFIX.
// Prints "tour ok" at the end; a failed assertion exits non-zero.
import assert from 'node:assert/strict';
import os from 'node:os';

const { Client, ZklockError } = await import(process.env.ZKLOCK_NODE_CLIENT);
const [url, token, sock, pre] = process.argv.slice(2);
const client = new Client({ url, token });
assert.equal((await client.health()).ok, true);

// try: free, then taken
const held = await client.tryLock(`${pre}/try`);
assert.ok(held.token > 0 && held.held);
assert.equal(await client.tryLock(`${pre}/try`), null);
const [me] = await client.status(`${pre}/try`);
assert.equal(me.holder, true);
assert.equal(me.owner, `tour (host ${os.hostname()} pid ${process.pid})`);
assert.equal(await held.release(), true);
assert.equal(await held.release(), true); // a second release answers as the first
assert.ok(!held.held && !held.signal.aborted);

// a timeout; a wait abandoned by a signal
await client.withLock(`${pre}/timeout`, {}, async () => {
  await assert.rejects(client.lock(`${pre}/timeout`, { timeout: 0.2 }), (e) => e instanceof ZklockError && e.code === 'timeout');
  // timeout 0 does not wait, nor does one under a millisecond wait for ever
  for (const timeout of [0, 0.0001]) {
    const began = Date.now();
    await assert.rejects(client.lock(`${pre}/timeout`, { timeout }), (e) => e instanceof ZklockError && e.code === 'timeout' && !e.message.includes('zklock: zklock:'));
    assert.ok(Date.now() - began < 3000, `timeout ${timeout} waited ${Date.now() - began} ms`);
  }
  const ac = new AbortController();
  const waiting = client.lock(`${pre}/timeout`, { signal: ac.signal });
  setTimeout(() => ac.abort(new Error('gave up')), 200);
  await assert.rejects(waiting, /gave up/);
});

// readers share; a writer waits for them
const r1 = await client.readLock(`${pre}/rw`);
const r2 = await client.readLock(`${pre}/rw`, { timeout: 5 });
assert.equal(await client.tryLock(`${pre}/rw`, { kind: 'write' }), null);
await r1.release();
await r2.release();
const w = await client.writeLock(`${pre}/rw`, { timeout: 5 });
assert.ok(w.token > r2.token);
await w.release();
const free = await client.lock(`${pre}/free`, { timeout: 0 }); // free: timeout 0 takes it
assert.ok(free.token > 0);
await free.release();

// a semaphore of 3: 2 permits, then 1 more, then none
const two = await client.semaphore(`${pre}/sem`, 3, { permits: 2, timeout: 5 });
assert.equal(await client.tryLock(`${pre}/sem`, { kind: 'semaphore', limit: 3, permits: 2 }), null);
const one = await client.semaphore(`${pre}/sem`, 3, { timeout: 5 });
assert.equal(await client.tryLock(`${pre}/sem`, { kind: 'semaphore', limit: 3 }), null);
await one.release();
await two.release();

// an election: campaign, leader, watch
assert.equal(await client.leader(`${pre}/elect`), null);
const ac = new AbortController();
const leaders = [];
const watched = (async () => {
  for await (const l of client.watch(`${pre}/elect`, { signal: ac.signal })) {
    leaders.push(l);
    if (leaders.length === 3) return;
  }
})();
const lead = await client.campaign(`${pre}/elect`, '10.0.0.1:80', { timeout: 5 });
const ld = await client.leader(`${pre}/elect`);
assert.equal(ld.value, '10.0.0.1:80');
assert.equal(ld.token, lead.token);
await lead.release();
await watched;
ac.abort();
assert.equal(leaders[0], null);
assert.equal(leaders[1].value, '10.0.0.1:80');
assert.equal(leaders[2], null);

// a bad token, and the Unix socket
await assert.rejects(new Client({ url, token: 'wrong' }).status(`${pre}/try`), (e) => e.status === 401);
const unix = new Client({ socketPath: sock, token });
const u = await unix.lock(`${pre}/unix`, { timeout: 5 });
assert.equal((await unix.status(`${pre}/unix`))[0].holder, true);
await u.release();
console.log('tour ok');
