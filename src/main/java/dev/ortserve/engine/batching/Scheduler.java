package dev.ortserve.engine.batching;

import dev.ortserve.engine.EngineOptions;
import dev.ortserve.engine.EngineQueueFullException;
import dev.ortserve.engine.EngineQueueTimeoutException;

import dev.ortserve.engine.kv.PrefixCache;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * What runs next: the admission queue (bounded; requests wait here for a batch slot), the batch
 * window of an idle engine, and the prefill plan of each step (which prompts share one batched
 * pass, how many tokens the others get within the prefill budget). Admission is called from any
 * thread; the rest from the engine thread.
 * <p>
 * The KV budget, one pool for running sequences and the prefix cache, counted as the memory it
 * is: what is held against {@code kvBudgetBytes} ({@link #kvHeldBytes}) is
 * <ul>
 * <li>the batch's rows as the batch lays them out: every running sequence (from when it leaves the queue
 * until it leaves the engine, {@link #retired}) holds one row of as many positions as the longest
 * any of them may come to hold (prompt + max_tokens, {@link Sequence#maxPositions}): the rows are
 * padded to one length ({@link KvCache}), so one long prompt among short ones makes every row long
 * (counted per sequence instead, the soak's mixed traffic laid out past the budget and the engine
 * failed on direct memory);</li>
 * <li>each sequence's KV in the draft model while it has one ({@link #reserveDraft});</li>
 * <li>plus every prefix-cache block ({@link PrefixCache#bytes}): a block a running sequence
 * references (reused or written) is a second copy of positions its row holds too, so it counts
 * beside the reservation, not inside it; blocks no one references are kept while there is room and
 * evicted when a request needs it.</li>
 * </ul>
 * A sequence leaves the queue only if the rows with its own added, the draft reservations, and the blocks
 * that no eviction can free (those running sequences reference and those its own lookup will) fit the
 * budget; least recently used unreferenced blocks are then evicted until the total fits (never a
 * block a running sequence references; the request's own cached prefix is referenced first, so it is
 * reused, not evicted). Otherwise it and everything behind it wait (first come, first served, at most
 * the queue timeout) until running sequences leave. A sequence alone always runs, even over the
 * budget (then every unreferenced block is evicted for it). Storing into the cache takes only the room
 * the reservations leave ({@link #cacheRoom}; a leaving sequence's reservation counts as room, its row
 * being freed as its blocks are stored), within the cache's cap. So after every change the total is
 * within the budget, unless one sequence alone is over it.
 * <p>
 * Threads: {@link #admit} and the statistics from any thread; {@link #next}, {@link #retired} and
 * so every prefix-cache call here run on the engine thread (a sequence leaves the queue in
 * {@link #next}, called by the engine loop), as the prefix cache requires.
 */
final class Scheduler {

    /** Largest logits output (float32) of one prefill pass that grows past the budget on an idle engine. */
    private static final long IDLE_PASS_LOGITS_BYTES = 256L << 20;

    private final EngineOptions options;
    private final int budget;
    /** Positions one prefill pass may hold while no row decodes (see {@link #batchedPrefill}). */
    private final int idlePassTokens;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition work = lock.newCondition();
    private final ArrayDeque<Sequence> queue = new ArrayDeque<>();
    private final AtomicInteger waiting = new AtomicInteger();
    private final long kvBudgetBytes;
    private final long kvBytesPerToken;
    /** The rows' layout plus the draft reservations (read from any thread; changed on the engine thread). */
    private final java.util.concurrent.atomic.AtomicLong kvReserved = new java.util.concurrent.atomic.AtomicLong();
    /** The running sequences' {@link Sequence#maxPositions} (count of each): the rows are as long as the largest. Engine thread. */
    private final java.util.TreeMap<Integer, Integer> rowLengths = new java.util.TreeMap<>();
    private int rows;
    private long draftBytes;
    private final java.util.concurrent.atomic.AtomicLong kvWaits = new java.util.concurrent.atomic.AtomicLong();
    private final java.util.concurrent.atomic.AtomicLong timedOut = new java.util.concurrent.atomic.AtomicLong();
    /** The prefix cache inside the same budget, or null when it is off. Engine thread only. */
    private final PrefixCache prefix;
    private boolean closed;

    /** @param lastPositionLogits the model's logits are one position per row, not every position of the pass */
    Scheduler(EngineOptions options, int vocabSize, boolean lastPositionLogits) {
        this(options, vocabSize, lastPositionLogits, Long.MAX_VALUE, 0, null);
    }

    /**
     * @param kvBudgetBytes   the KV budget (see the class comment)
     * @param kvBytesPerToken KV bytes of one position of one sequence
     * @param prefix          the prefix cache (inside the budget), or null when it is off
     */
    Scheduler(EngineOptions options, int vocabSize, boolean lastPositionLogits, long kvBudgetBytes, long kvBytesPerToken,
              PrefixCache prefix) {
        this.options = options;
        this.prefix = prefix;
        this.kvBudgetBytes = kvBudgetBytes;
        this.kvBytesPerToken = kvBytesPerToken;
        this.budget = Math.max(1, options.prefillChunkTokens());
        long byLogits = lastPositionLogits ? Long.MAX_VALUE : IDLE_PASS_LOGITS_BYTES / (4L * vocabSize);
        this.idlePassTokens = (int) Math.max(budget, Math.min((long) budget * options.maxSequences(), byLogits));
    }

    int waiting() {
        return waiting.get();
    }

    /** Queues all of the sequences or none (queue full: {@link EngineQueueFullException}). */
    void admit(List<Sequence> sequences) {
        lock.lock();
        try {
            if (closed) throw new dev.ortserve.engine.EngineClosedException();
            if (queue.size() + sequences.size() > options.queueCapacity()) {
                throw new EngineQueueFullException(options.queueCapacity());
            }
            queue.addAll(sequences);
            waiting.addAndGet(sequences.size());
            work.signal();
        } finally {
            lock.unlock();
        }
    }

    /**
     * Waits until there is work (or the engine closes: then null). An idle engine first lets a
     * burst gather (the batch window). Returns the sequences that leave the queue for prefill now:
     * as many as {@code free} slots allow; cancelled ones are finished here and not returned. Each
     * returned sequence holds its KV reservation and (cache on) references its longest cached
     * prefix ({@link Sequence#hold}). Engine thread.
     */
    List<Sequence> next(boolean busy, int free) {
        lock.lock();
        try {
            while (!closed && queue.isEmpty() && !busy) work.awaitUninterruptibly();
            if (closed) return null;
            if (!busy) gatherBurst();
            expire();
            List<Sequence> taken = new ArrayList<>();
            while (!queue.isEmpty() && taken.size() < free) {
                Sequence s = queue.peek();
                if (!s.cancelled()) {
                    long reserved = kvReserved.get();
                    // every row as long as the longest may come to be, this one's included
                    long with = layoutBytes(rows + 1, Math.max(longestRow(), s.maxPositions())) + draftBytes;
                    // the cache blocks running sequences reference, and those this one's lookup would, are copies of
                    // positions batch rows hold too: they stay, whatever is evicted, so they count beside the reservations
                    long pinned = prefix == null ? 0 : prefix.referencedBytes();
                    if (reserved > 0 && prefix != null && with + pinned <= kvBudgetBytes) {
                        pinned += prefix.wouldReferenceFrom(s.prompt, s.prefixRoot()); // walked only when it could decide
                    }
                    if (reserved > 0 && with + pinned > kvBudgetBytes) {
                        kvWaits.incrementAndGet();
                        break; // waits for running sequences to give their KV back
                    }
                    s.rowPositions = s.maxPositions();
                    rowLengths.merge(s.maxPositions(), 1, Integer::sum);
                    rows++;
                    updateReserved();
                    if (prefix != null) {
                        // its own cached prefix first (referenced: inside its reservation, never evicted for it) ...
                        s.hold = prefix.lookupFrom(s.prompt, s.prefixRoot());
                        // ... then room from the least recently used blocks no one references
                        fitBudget();
                    }
                }
                queue.poll();
                waiting.decrementAndGet();
                if (s.cancelled()) {
                    s.releaseKv();
                    retired(s);
                    s.finish();
                    continue;
                }
                taken.add(s);
            }
            return taken;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Fails the queued sequences that have waited longer than the queue timeout (lock held): they leave
     * without any model work done for them, holding nothing, with {@link EngineQueueTimeoutException}.
     */
    private void expire() {
        long timeout = options.queueTimeout().toNanos();
        if (timeout <= 0 || queue.isEmpty()) return;
        long now = System.nanoTime();
        for (java.util.Iterator<Sequence> it = queue.iterator(); it.hasNext(); ) {
            Sequence s = it.next();
            long waited = now - s.admittedAt;
            if (waited < timeout) continue;
            it.remove();
            waiting.decrementAndGet();
            timedOut.incrementAndGet();
            s.fail(new EngineQueueTimeoutException(java.time.Duration.ofNanos(waited)));
        }
    }

    /** Requests that left the queue unstarted because they waited longer than the queue timeout. */
    long timedOut() {
        return timedOut.get();
    }

    /**
     * On an idle engine, lets a burst of requests gather before the first prefill (lock held), so
     * that clients arriving within milliseconds of each other share one prefill pass and start
     * decoding together instead of the first ones' prefill and first tokens racing ahead of the
     * rest. Waits until no new request has come for a quarter of the batch window, the queue holds
     * a full batch, or the window has passed since the first arrival; zero turns it off.
     */
    private void gatherBurst() {
        long window = options.batchWindow().toNanos();
        if (window <= 0 || queue.isEmpty()) return;
        long quiet = Math.max(1, window / 4);
        long deadline = queue.peekFirst().admittedAt + window;
        while (!closed && queue.size() < options.maxSequences()) {
            long wait = Math.min(queue.peekLast().admittedAt + quiet, deadline) - System.nanoTime();
            if (wait <= 0) break;
            try {
                work.awaitNanos(wait);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    /** Evicts unreferenced prefix-cache blocks while the total held is over the budget (engine thread). */
    private void fitBudget() {
        long over = kvReserved.get() + prefix.bytes() - kvBudgetBytes;
        if (over > 0) prefix.evict(over);
    }

    /**
     * Bytes the prefix cache may hold now: the budget less the rows and draft reservations, the {@code leaving} sequences'
     * rows not counted (they leave in this repack: their rows are freed as their blocks are stored). Engine thread.
     */
    long cacheRoom(List<Sequence> leaving) {
        java.util.TreeMap<Integer, Integer> staying = new java.util.TreeMap<>(rowLengths);
        int left = 0;
        for (Sequence s : leaving) {
            if (s.rowPositions <= 0) continue;
            staying.computeIfPresent(s.rowPositions, (k, n) -> n == 1 ? null : n - 1);
            left++;
        }
        return kvBudgetBytes - draftBytes - layoutBytes(rows - left, staying.isEmpty() ? 0 : staying.lastKey());
    }

    /** KV bytes of {@code rowCount} rows of {@code positions} each. */
    private long layoutBytes(int rowCount, int positions) {
        return kvBytesPerToken * rowCount * positions;
    }

    /** Positions of the longest row the running sequences may come to hold (0: none running). Engine thread. */
    private int longestRow() {
        return rowLengths.isEmpty() ? 0 : rowLengths.lastKey();
    }

    private void updateReserved() {
        kvReserved.set(layoutBytes(rows, longestRow()) + draftBytes);
    }

    /**
     * A sequence left the engine (engine thread; its prefix-cache blocks already let go): its KV
     * reservation is free again, and if the blocks it referenced, now unreferenced, leave the
     * total over the budget (it ran alone over it), the least recently used are evicted.
     */
    void retired(Sequence s) {
        release(s);
        if (prefix != null) fitBudget();
    }

    private void release(Sequence s) {
        int r = s.rowPositions;
        s.rowPositions = 0;
        if (r > 0) {
            rowLengths.computeIfPresent(r, (k, n) -> n == 1 ? null : n - 1);
            rows--;
        }
        releaseDraft(s);
        updateReserved();
    }

    /**
     * Reserves {@code bytes} of the KV budget for a running sequence's KV in the draft model (speculative decoding), when
     * they fit beside the reservations and the cache blocks no eviction can free (unreferenced blocks are evicted for
     * them); false otherwise: the sequence decodes without its draft model for now. Engine thread.
     */
    boolean reserveDraft(Sequence s, long bytes) {
        long pinned = prefix == null ? 0 : prefix.referencedBytes();
        if (kvReserved.get() + bytes + pinned > kvBudgetBytes) return false;
        draftBytes += bytes;
        s.draftReserved += bytes;
        updateReserved();
        if (prefix != null) fitBudget();
        return true;
    }

    /** Gives back a sequence's draft-model reservation (its draft KV was let go). Engine thread. */
    void releaseDraft(Sequence s) {
        long r = s.draftReserved;
        s.draftReserved = 0;
        if (r > 0) {
            draftBytes -= r;
            updateReserved();
        }
    }

    /** KV bytes reserved by the running sequences now: their rows as laid out (each as long as the longest may come to be) and their draft KV. */
    long kvReservedBytes() {
        return kvReserved.get();
    }

    /**
     * KV bytes held against the budget now: the running sequences' reservations and every prefix-cache
     * block (exact on the engine thread; elsewhere two reads a step apart at most).
     */
    long kvHeldBytes() {
        return kvReserved.get() + (prefix == null ? 0 : prefix.bytes());
    }

    /** Times the head of the queue waited for KV budget. */
    long kvWaits() {
        return kvWaits.get();
    }

    long kvBudgetBytes() {
        return kvBudgetBytes;
    }

    /** Prompt tokens prefilled per step while rows decode. */
    int budget() {
        return budget;
    }

    /**
     * The prefilling sequences whose whole rest of prompt fits the budget, to be prefilled in one
     * padded pass (padding counted; while no row decodes, the pass may hold up to
     * max-sequences budgets, within 256 MB of logits unless the head runs on the last positions only): sixteen prompts arriving together cost one
     * pass instead of sixteen. Rows may continue pasts of different lengths (cached prefixes or
     * earlier chunks). Fewer than two: no batched pass.
     */
    List<Sequence> batchedPrefill(List<Sequence> prefilling, boolean decoding) {
        List<Sequence> group = new ArrayList<>();
        int longest = 0;
        // the budget bounds how long running streams wait for a prefill; with none running, the pass
        // may hold every prompt that fits the budget on its own (a burst on an idle engine in one
        // pass), as long as its logits (every position x vocabulary, its largest output) stay bounded
        int passBudget = decoding ? budget : idlePassTokens;
        for (Sequence s : prefilling) {
            int rest = s.prompt.length - s.length;
            if (s.cancelled() || rest > budget) continue;
            int l = Math.max(longest, rest);
            if ((group.size() + 1) * l > passBudget) continue;
            group.add(s);
            longest = l;
        }
        return group.size() < 2 ? List.of() : group;
    }

    /** Closes admission; returns what was still queued (to be failed by the engine). */
    List<Sequence> close() {
        lock.lock();
        try {
            closed = true;
            work.signal();
            List<Sequence> left = new ArrayList<>(queue);
            queue.clear();
            waiting.set(0);
            return left;
        } finally {
            lock.unlock();
        }
    }
}
