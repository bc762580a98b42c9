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
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.RetryOneTime;

public class Driver {
    public static void main(String[] args) throws Exception {
        String servers = args[0], path = args[1], kind = args[2];
        int cycles = Integer.parseInt(args[3]);
        long holdMs = Long.parseLong(args[4]);
        CuratorFramework client = CuratorFrameworkFactory.newClient(servers, 10000, 5000, new RetryOneTime(100));
        client.start();
        if (!client.blockUntilConnected(20, TimeUnit.SECONDS)) {
            throw new IllegalStateException("no connection to " + servers);
        }
        System.out.println("READY");
        System.out.flush();
        if (kind.startsWith("semaphore:")) {
            InterProcessSemaphoreV2 sem = new InterProcessSemaphoreV2(client, path, Integer.parseInt(kind.substring(10)));
            for (int i = 0; i < cycles; i++) {
                Lease lease = sem.acquire();
                hold(holdMs);
                sem.returnLease(lease);
            }
        } else {
            InterProcessLock lock;
            switch (kind) {
                case "mutex": lock = new InterProcessMutex(client, path); break;
                case "read": lock = new InterProcessReadWriteLock(client, path).readLock(); break;
                case "write": lock = new InterProcessReadWriteLock(client, path).writeLock(); break;
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

    static void hold(long ms) throws InterruptedException {
        System.out.println("ACQ " + System.nanoTime());
        System.out.flush();
        Thread.sleep(ms);
        System.out.println("REL " + System.nanoTime());
        System.out.flush();
    }
}
