// Driver takes a Curator lock in a loop and prints when it holds it, on the
// clock every process on the machine shares (System.nanoTime is
// CLOCK_MONOTONIC on Linux):
//
//   java Driver SERVERS PATH KIND CYCLES HOLD_MS
//
// KIND is mutex (InterProcessMutex), read or write (InterProcessReadWriteLock)
// or semaphore:N (InterProcessSemaphoreV2). It prints READY once connected,
// then "ACQ <ns>" right after each acquire and "REL <ns>" right before each
// release.
//
// Leadership and revocation (election_test.go):
//   leader:ID    LeaderSelector with participant id ID: CYCLES leaderships
//                (auto-requeued), each stamped ACQ/REL and held HOLD_MS
//   leaderof     prints "OUT LEADER <id> <isLeader>" (LeaderSelector.getLeader)
//   revocable    InterProcessMutex made revocable: prints ACQ once held, then
//                "OUT REVOKED" when asked to release, releases, prints REL
//   revoke:NODE  Revoker.attemptRevoke on NODE, then "OUT SENT"
//   latch:ID     LeaderLatch with participant id ID: CYCLES leaderships (a
//                new latch each), each stamped ACQ/REL and held HOLD_MS
//   latchof      prints "OUT LEADER <id> <isLeader>" (LeaderLatch.getLeader)
//
// Other recipes (recipes_test.go):
//   semmutex     InterProcessSemaphoreMutex (a semaphore's layout)
//   multi:OTHER  InterProcessMultiLock of PATH then OTHER, in that order
//
// A server partition (partition_test.go):
//   partition:MS InterProcessMutex on a session of MS ms: held HOLD_MS, and
//                every ConnectionStateListener change printed as
//                "OUT STATE <state> <ns>"
import java.util.Arrays;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMultiLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.locks.Revoker;
import org.apache.curator.retry.RetryOneTime;

public class Driver {
    public static void main(String[] args) throws Exception {
        String servers = args[0], path = args[1], kind = args[2];
        int cycles = Integer.parseInt(args[3]);
        long holdMs = Long.parseLong(args[4]);
        boolean partition = kind.startsWith("partition:");
        int sessionMs = partition ? Integer.parseInt(kind.substring(10)) : 10000;
        CuratorFramework client = CuratorFrameworkFactory.newClient(servers, sessionMs, Math.min(5000, sessionMs), new RetryOneTime(100));
        if (partition) {
            client.getConnectionStateListenable().addListener((c, state) -> out("STATE " + state + " " + System.nanoTime()));
        }
        client.start();
        if (!client.blockUntilConnected(20, TimeUnit.SECONDS)) {
            throw new IllegalStateException("no connection to " + servers);
        }
        System.out.println("READY");
        System.out.flush();
        if (kind.startsWith("leader:")) {
            lead(client, path, kind.substring(7), cycles, holdMs);
        } else if (kind.equals("leaderof")) {
            Participant p = new LeaderSelector(client, path, new LeaderSelectorListenerAdapter() {
                public void takeLeadership(CuratorFramework c) {}
            }).getLeader();
            out("LEADER " + p.getId() + " " + p.isLeader());
        } else if (kind.startsWith("latch:")) {
            for (int i = 0; i < cycles; i++) {
                LeaderLatch latch = new LeaderLatch(client, path, kind.substring(6));
                latch.start();
                latch.await();
                hold(holdMs);
                latch.close();
            }
        } else if (kind.equals("latchof")) {
            Participant p = new LeaderLatch(client, path, "observer").getLeader();
            out("LEADER " + p.getId() + " " + p.isLeader());
        } else if (kind.equals("revocable")) {
            InterProcessMutex lock = new InterProcessMutex(client, path);
            CountDownLatch asked = new CountDownLatch(1);
            lock.makeRevocable(l -> asked.countDown());
            lock.acquire();
            stamp("ACQ");
            asked.await();
            out("REVOKED");
            stamp("REL");
            lock.release();
        } else if (kind.startsWith("revoke:")) {
            Revoker.attemptRevoke(client, kind.substring(7));
            out("SENT");
        } else if (kind.startsWith("semaphore:")) {
            InterProcessSemaphoreV2 sem = new InterProcessSemaphoreV2(client, path, Integer.parseInt(kind.substring(10)));
            for (int i = 0; i < cycles; i++) {
                Lease lease = sem.acquire();
                hold(holdMs);
                sem.returnLease(lease);
            }
        } else {
            InterProcessLock lock;
            String k = kind.startsWith("multi:") ? "multi" : partition ? "mutex" : kind;
            switch (k) {
                case "multi": lock = new InterProcessMultiLock(client, Arrays.asList(path, kind.substring(6))); break;
                case "mutex": lock = new InterProcessMutex(client, path); break;
                case "read": lock = new InterProcessReadWriteLock(client, path).readLock(); break;
                case "write": lock = new InterProcessReadWriteLock(client, path).writeLock(); break;
                case "semmutex": lock = new InterProcessSemaphoreMutex(client, path); break;
                default: throw new IllegalArgumentException("unknown kind " + kind);
            }
            for (int i = 0; i < cycles; i++) {
                lock.acquire();
                hold(holdMs);
                lock.release();
            }
        }
        client.close();
    }

    // lead takes the leadership cycles times.
    static void lead(CuratorFramework client, String path, String id, int cycles, long holdMs) throws Exception {
        Semaphore led = new Semaphore(0);
        LeaderSelector sel = new LeaderSelector(client, path, new LeaderSelectorListenerAdapter() {
            public void takeLeadership(CuratorFramework c) throws Exception {
                hold(holdMs);
                led.release();
            }
        });
        sel.setId(id);
        sel.autoRequeue();
        sel.start();
        led.acquire(cycles);
        sel.close();
    }

    static void out(String line) {
        System.out.println("OUT " + line);
        System.out.flush();
    }

    static void stamp(String what) {
        System.out.println(what + " " + System.nanoTime());
        System.out.flush();
    }

    static void hold(long ms) throws InterruptedException {
        System.out.println("ACQ " + System.nanoTime());
        System.out.flush();
        Thread.sleep(ms);
        System.out.println("REL " + System.nanoTime());
        System.out.flush();
    }
}
