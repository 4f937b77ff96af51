package dev.ortserve.engine;

import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OnnxValue;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtException;
import ai.onnxruntime.OrtSession;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.operators.multi.processors.UnicastProcessor;
import org.jboss.logging.Logger;

import java.nio.Buffer;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.LongBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * One engine loop per model, owning the ONNX session and every KV cache (iteration-level,
 * "continuous" batching as vLLM does it):
 * <ol>
 * <li>Each iteration runs one decode step for all running sequences in a single batched
 * forward pass. Rows have different lengths: the KV cache is left-padded, padding is masked
 * with 0 in attention_mask and each row has its own position_ids.</li>
 * <li>While the membership does not change, the previous step's present tensors are fed back as
 * the next past tensors without a copy. Only when sequences join or leave is the batch
 * repacked (one copy of the live rows into a new left-padded layout, trimmed to the longest).</li>
 * <li>Waiting prompts are prefilled between decode steps, at most prefill-chunk-tokens per
 * iteration, so a long prompt never freezes running streams: prompts that fit the budget whole
 * share one left-padded pass, longer ones are prefilled alone in chunks. While nothing decodes,
 * one pass may take every waiting prompt that fits the budget whole.</li>
 * <li>An idle engine lets a burst of requests gather for a few milliseconds (the batch window)
 * before its first prefill, so that clients arriving together start decoding together.</li>
 * </ol>
 * Finished or cancelled sequences leave at the next step boundary.
 */
public final class ContinuousBatchingEngine implements GenerationEngine {

    private static final Logger LOG = Logger.getLogger(ContinuousBatchingEngine.class);
    /** Largest logits output (float32) of one prefill pass that grows past the budget on an idle engine. */
    private static final long IDLE_PASS_LOGITS_BYTES = 256L << 20;

    private final LoadedModel model;
    private final DecoderSpec spec;
    /** Positions one prefill pass may hold while no row decodes (see prefillTogether). */
    private final int idlePassTokens;
    private final EngineOptions options;
    private final OrtEnvironment env;
    private final OrtSession session;
    private final Set<String> outputs;
    private final Thread thread;

    private final ReentrantLock lock = new ReentrantLock();
    private final Condition work = lock.newCondition();
    private final ArrayDeque<Sequence> queue = new ArrayDeque<>();
    private volatile boolean closed;

    private final AtomicInteger running = new AtomicInteger();
    private final AtomicInteger waiting = new AtomicInteger();
    private final AtomicLong steps = new AtomicLong();
    private volatile EngineListener listener = EngineListener.NONE;
    private final AtomicInteger faultAtRows = new AtomicInteger();

    // engine-thread state
    private final List<Sequence> prefilling = new ArrayList<>();
    private final List<Sequence> rows = new ArrayList<>();
    private OnnxTensor[] pastKeys;
    private OnnxTensor[] pastValues;
    private AutoCloseable pastOwner;
    private int batchLength;
    private long lastForwardNanos;

    public ContinuousBatchingEngine(LoadedModel model, EngineOptions options) {
        this.model = model;
        this.spec = model.spec();
        this.options = options;
        this.env = model.environment();
        this.session = model.session();
        this.outputs = new LinkedHashSet<>(spec.outputNames());
        int budget = Math.max(1, options.prefillChunkTokens());
        long byLogits = IDLE_PASS_LOGITS_BYTES / (4L * spec.vocabSize());
        this.idlePassTokens = (int) Math.max(budget, Math.min((long) budget * options.maxSequences(), byLogits));
        this.thread = new Thread(this::loop, "ortserve-engine");
        this.thread.setDaemon(true);
        this.thread.start();
    }

    @Override
    public LoadedModel model() {
        return model;
    }

    @Override
    public int runningSequences() {
        return running.get();
    }

    @Override
    public int waitingSequences() {
        return waiting.get();
    }

    @Override
    public long steps() {
        return steps.get();
    }

    /**
     * Fault injection for resilience tests: the next batched decode step that holds at least
     * {@code minRows} sequences is given a token id past the embedding table, so ONNX Runtime itself
     * fails that step (a real OrtException, not a simulated one) and every sequence in it fails as a
     * real step failure would. Armed before the requests start, it does not depend on timing;
     * 0 disarms it.
     */
    public void injectDecodeFault(int minRows) {
        faultAtRows.set(Math.max(0, minRows));
    }

    /** Sets who hears about scheduling and steps (metrics). */
    public void listener(EngineListener listener) {
        this.listener = listener == null ? EngineListener.NONE : listener;
    }

    @Override
    public Multi<TokenEvent> generate(GenerationRequest request) {
        return generateAll(List.of(request)).get(0);
    }

    @Override
    public List<Multi<TokenEvent>> generateAll(List<GenerationRequest> requests) {
        List<Sequence> admitted = new ArrayList<>(requests.size());
        for (GenerationRequest r : requests) {
            admitted.add(new Sequence(r));
        }
        lock.lock();
        try {
            if (closed) {
                throw new IllegalStateException("The engine is shut down");
            }
            if (queue.size() + admitted.size() > options.queueCapacity()) {
                throw new EngineQueueFullException(options.queueCapacity());
            }
            queue.addAll(admitted);
            waiting.addAndGet(admitted.size());
            work.signal();
        } finally {
            lock.unlock();
        }
        return admitted.stream().map(s -> s.events).toList();
    }

    @Override
    public void close() {
        lock.lock();
        try {
            closed = true;
            work.signal();
        } finally {
            lock.unlock();
        }
        try {
            thread.join(10_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    // ------------------------------------------------------------------ the loop

    private void loop() {
        while (true) {
            List<Sequence> joining = List.of();
            lock.lock();
            try {
                while (!closed && queue.isEmpty() && rows.isEmpty() && prefilling.isEmpty()) {
                    work.awaitUninterruptibly();
                }
                if (closed) break;
                if (rows.isEmpty() && prefilling.isEmpty()) {
                    gatherBurst();
                }
                while (!queue.isEmpty() && rows.size() + prefilling.size() < options.maxSequences()) {
                    Sequence s = queue.poll();
                    waiting.decrementAndGet();
                    if (s.cancelled) {
                        s.finish(FinishReason.CANCELLED);
                        continue;
                    }
                    prefilling.add(s);
                    running.incrementAndGet();
                    listener.scheduled(System.nanoTime() - s.admittedAt);
                }
            } finally {
                lock.unlock();
            }
            try {
                if (!rows.isEmpty()) {
                    int decoding = rows.size();
                    long started = System.nanoTime();
                    decodeStep();
                    listener.decoded(decoding, lastForwardNanos, System.nanoTime() - started);
                }
                joining = prefillChunks();
                List<Sequence> leaving = rows.stream().filter(Sequence::done).toList();
                if (!leaving.isEmpty() || !joining.isEmpty()) {
                    repack(leaving, joining);
                    // what the batch holds now (zero once the last row has left)
                    listener.stepped(rows.size(), (long) rows.size() * batchLength, (long) options.maxSequences() * spec.maxModelLen());
                }
            } catch (Throwable e) {
                failAll(e, joining);
            }
        }
        shutdown();
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

    /** One batched decode step for every running row. */
    private void decodeStep() throws OrtException {
        int b = rows.size();
        int total = batchLength + 1;
        LongBuffer ids = longs(b), mask = longs(b * total), pos = longs(b);
        for (int r = 0; r < b; r++) {
            Sequence s = rows.get(r);
            ids.put(r, s.lastToken);
            pos.put(r, s.length);
            int pad = batchLength - s.length;
            for (int j = pad; j < total; j++) mask.put(r * total + j, 1);
        }
        int faultRows = faultAtRows.get();
        if (faultRows > 0 && b >= faultRows && faultAtRows.compareAndSet(faultRows, 0)) {
            ids.put(0, Integer.MAX_VALUE);
        }
        Map<String, OnnxTensor> in = new HashMap<>();
        List<OnnxTensor> created = new ArrayList<>(4);
        try {
            put(in, created, spec.inputIds(), OnnxTensor.createTensor(env, ids, new long[] {b, 1}));
            put(in, created, spec.attentionMask(), OnnxTensor.createTensor(env, mask, new long[] {b, total}));
            if (spec.positionIds() != null) put(in, created, spec.positionIds(), OnnxTensor.createTensor(env, pos, new long[] {b, 1}));
            if (spec.useCacheBranch() != null) put(in, created, spec.useCacheBranch(), OnnxTensor.createTensor(env, new boolean[] {true}));
            for (int l = 0; l < spec.layers(); l++) {
                in.put(spec.pastKey(l), pastKeys[l]);
                in.put(spec.pastValue(l), pastValues[l]);
            }
            long forwardStart = System.nanoTime();
            OrtSession.Result result = session.run(in, outputs);
            lastForwardNanos = System.nanoTime() - forwardStart;
            steps.incrementAndGet();
            closeQuietly(pastOwner);
            adoptPresent(result);
            batchLength = total;
            listener.stepped(b, (long) b * total, (long) options.maxSequences() * spec.maxModelLen());
            FloatBuffer logits = ((OnnxTensor) result.get(spec.logits()).get()).getFloatBuffer();
            int vocab = logits.capacity() / b;
            float[] row = new float[vocab];
            for (int r = 0; r < b; r++) {
                Sequence s = rows.get(r);
                logits.get(r * vocab, row, 0, vocab);
                s.length++;
                if (!s.cancelled) {
                    s.onLogits(row);
                }
            }
        } finally {
            created.forEach(ContinuousBatchingEngine::closeQuietly);
        }
    }

    /** Prefills waiting prompts, at most prefill-chunk-tokens per iteration; returns those ready to join. */
    private List<Sequence> prefillChunks() throws OrtException {
        List<Sequence> ready = new ArrayList<>();
        int budget = Math.max(1, options.prefillChunkTokens());
        budget -= prefillTogether(ready, budget);
        for (int i = 0; i < prefilling.size() && budget > 0; i++) {
            Sequence s = prefilling.get(i);
            if (s.cancelled) {
                s.releaseOwnKv();
                s.finish(FinishReason.CANCELLED);
                prefilling.remove(i--);
                s.leave();
                continue;
            }
            int n = Math.min(budget, s.prompt.length - s.length);
            budget -= n;
            try {
                prefill(s, n);
            } catch (OrtException | RuntimeException e) {
                // a prompt the model cannot run fails alone; the batch and the other prompts go on
                LOG.error("Prefill failed for one sequence", e);
                s.releaseOwnKv();
                s.fail(new EngineStepException("The model failed on this prompt: " + e.getMessage(), e));
                prefilling.remove(i--);
                s.leave();
                continue;
            }
            if (s.length == s.prompt.length) {
                prefilling.remove(i--);
                if (s.done()) {
                    s.releaseOwnKv();
                    s.leave();
                } else {
                    ready.add(s);
                }
            }
        }
        return ready;
    }

    /**
     * Prefills, in one left-padded forward pass, the waiting sequences that have not started and
     * whose whole prompt fits the budget (padding counted; while no row decodes, the pass may hold
     * up to max-sequences budgets, within 256 MB of logits): sixteen prompts arriving together cost
     * one pass instead of sixteen.
     * Returns the budget used. If the pass fails, nothing changed and
     * the per-sequence path below runs them one by one, so a bad prompt still fails alone.
     */
    private int prefillTogether(List<Sequence> ready, int budget) throws OrtException {
        List<Sequence> group = new ArrayList<>();
        int longest = 0;
        // the budget bounds how long running streams wait for a prefill; with none running, the pass
        // may hold every prompt that fits the budget on its own (a burst on an idle engine in one
        // pass), as long as its logits (every position x vocabulary, its largest output) stay bounded
        int passBudget = rows.isEmpty() ? idlePassTokens : budget;
        for (Sequence s : prefilling) {
            if (s.cancelled || s.length != 0 || s.ownKeys != null || s.prompt.length > budget) continue;
            int l = Math.max(longest, s.prompt.length);
            if ((group.size() + 1) * l > passBudget) continue;
            group.add(s);
            longest = l;
        }
        if (group.size() < 2 || !prefillBatch(group, longest)) return 0;
        for (Sequence s : group) {
            prefilling.remove(s);
            if (s.done()) {
                s.releaseOwnKv();
                s.leave();
            } else {
                ready.add(s);
            }
        }
        return group.size() * longest;
    }

    /** False when ONNX Runtime failed the pass: then no sequence was touched. */
    private boolean prefillBatch(List<Sequence> group, int total) throws OrtException {
        int b = group.size();
        LongBuffer ids = longs(b * total), mask = longs(b * total), pos = longs(b * total);
        for (int r = 0; r < b; r++) {
            int[] prompt = group.get(r).prompt;
            int pad = total - prompt.length;
            for (int i = 0; i < prompt.length; i++) {
                ids.put(r * total + pad + i, prompt[i]);
                mask.put(r * total + pad + i, 1);
                pos.put(r * total + pad + i, i);
            }
        }
        Map<String, OnnxTensor> in = new HashMap<>();
        List<OnnxTensor> created = new ArrayList<>();
        try {
            put(in, created, spec.inputIds(), OnnxTensor.createTensor(env, ids, new long[] {b, total}));
            put(in, created, spec.attentionMask(), OnnxTensor.createTensor(env, mask, new long[] {b, total}));
            if (spec.positionIds() != null) put(in, created, spec.positionIds(), OnnxTensor.createTensor(env, pos, new long[] {b, total}));
            if (spec.useCacheBranch() != null) put(in, created, spec.useCacheBranch(), OnnxTensor.createTensor(env, new boolean[] {false}));
            for (int l = 0; l < spec.layers(); l++) {
                put(in, created, spec.pastKey(l), KvBlock.empty(env, spec, b));
                put(in, created, spec.pastValue(l), KvBlock.empty(env, spec, b));
            }
            OrtSession.Result result;
            try {
                result = session.run(in, outputs);
            } catch (OrtException | RuntimeException e) {
                LOG.warnf("A batched prefill of %d prompts failed (%s); prefilling them one by one", group.size(), e.getMessage());
                return false;
            }
            steps.incrementAndGet();
            OnnxTensor[] keys = new OnnxTensor[spec.layers()], values = new OnnxTensor[spec.layers()];
            for (int l = 0; l < spec.layers(); l++) {
                keys[l] = (OnnxTensor) result.get(spec.presentKey(l)).get();
                values[l] = (OnnxTensor) result.get(spec.presentValue(l)).get();
            }
            int[] holders = {b}; // the result is closed once every sequence has joined or left
            FloatBuffer logits = ((OnnxTensor) result.get(spec.logits()).get()).getFloatBuffer();
            int vocab = logits.capacity() / (b * total);
            for (int r = 0; r < b; r++) {
                Sequence s = group.get(r);
                s.ownKeys = keys;
                s.ownValues = values;
                s.ownRow = r;
                s.ownSpan = total;
                boolean[] released = {false};
                s.ownOwner = () -> {
                    if (!released[0]) {
                        released[0] = true;
                        if (--holders[0] == 0) result.close();
                    }
                };
                s.length = s.prompt.length;
            }
            for (int r = 0; r < b; r++) {
                float[] row = new float[vocab];
                logits.get((r * total + total - 1) * vocab, row, 0, vocab);
                group.get(r).onLogits(row);
            }
            return true;
        } finally {
            created.forEach(ContinuousBatchingEngine::closeQuietly);
        }
    }

    private void prefill(Sequence s, int n) throws OrtException {
        int start = s.length, total = start + n;
        LongBuffer ids = longs(n), mask = longs(total), pos = longs(n);
        for (int i = 0; i < n; i++) {
            ids.put(i, s.prompt[start + i]);
            pos.put(i, start + i);
        }
        for (int j = 0; j < total; j++) mask.put(j, 1);
        Map<String, OnnxTensor> in = new HashMap<>();
        List<OnnxTensor> created = new ArrayList<>();
        try {
            put(in, created, spec.inputIds(), OnnxTensor.createTensor(env, ids, new long[] {1, n}));
            put(in, created, spec.attentionMask(), OnnxTensor.createTensor(env, mask, new long[] {1, total}));
            if (spec.positionIds() != null) put(in, created, spec.positionIds(), OnnxTensor.createTensor(env, pos, new long[] {1, n}));
            if (spec.useCacheBranch() != null) put(in, created, spec.useCacheBranch(), OnnxTensor.createTensor(env, new boolean[] {start > 0}));
            for (int l = 0; l < spec.layers(); l++) {
                if (s.ownKeys == null) {
                    put(in, created, spec.pastKey(l), KvBlock.empty(env, spec, 1));
                    put(in, created, spec.pastValue(l), KvBlock.empty(env, spec, 1));
                } else {
                    in.put(spec.pastKey(l), s.ownKeys[l]);
                    in.put(spec.pastValue(l), s.ownValues[l]);
                }
            }
            OrtSession.Result result = session.run(in, outputs);
            steps.incrementAndGet();
            s.releaseOwnKv();
            s.ownOwner = result;
            s.ownRow = 0;
            s.ownSpan = total;
            s.ownKeys = new OnnxTensor[spec.layers()];
            s.ownValues = new OnnxTensor[spec.layers()];
            for (int l = 0; l < spec.layers(); l++) {
                s.ownKeys[l] = (OnnxTensor) result.get(spec.presentKey(l)).get();
                s.ownValues[l] = (OnnxTensor) result.get(spec.presentValue(l)).get();
            }
            s.length = total;
            if (total == s.prompt.length) {
                FloatBuffer logits = ((OnnxTensor) result.get(spec.logits()).get()).getFloatBuffer();
                int vocab = logits.capacity() / n;
                float[] row = new float[vocab];
                logits.get((n - 1) * vocab, row, 0, vocab);
                s.onLogits(row);
            }
        } finally {
            created.forEach(ContinuousBatchingEngine::closeQuietly);
        }
    }

    /** Rebuilds the batch KV without the leaving rows and with the joining ones, left-padded to the longest row. */
    private void repack(List<Sequence> leaving, List<Sequence> joining) throws OrtException {
        List<Sequence> keep = new ArrayList<>(rows.size());
        List<Integer> keepIndex = new ArrayList<>();
        for (int r = 0; r < rows.size(); r++) {
            Sequence s = rows.get(r);
            if (!s.done()) {
                keep.add(s);
                keepIndex.add(r);
            } else {
                // decided here, not from the caller's list: a client may cancel between the two looks,
                // and a row dropped without leave() would count as running forever
                s.leave();
            }
        }
        for (Sequence s : leaving) {
            s.leave();
        }
        List<Sequence> next = new ArrayList<>(keep);
        next.addAll(joining);
        int length = 0;
        for (Sequence s : next) length = Math.max(length, s.length);
        OnnxTensor[] keys = new OnnxTensor[spec.layers()], values = new OnnxTensor[spec.layers()];
        if (!next.isEmpty()) {
            List<OnnxTensor> made = new ArrayList<>();
            for (int l = 0; l < spec.layers(); l++) {
                keys[l] = repackLayer(true, l, keep, keepIndex, joining, next.size(), length);
                values[l] = repackLayer(false, l, keep, keepIndex, joining, next.size(), length);
                made.add(keys[l]);
                made.add(values[l]);
            }
            closeQuietly(pastOwner);
            pastOwner = () -> made.forEach(ContinuousBatchingEngine::closeQuietly);
        } else {
            closeQuietly(pastOwner);
            pastOwner = null;
        }
        for (Sequence s : joining) s.releaseOwnKv();
        pastKeys = keys;
        pastValues = values;
        batchLength = length;
        rows.clear();
        rows.addAll(next);
    }

    private OnnxTensor repackLayer(boolean key, int layer, List<Sequence> keep, List<Integer> keepIndex,
                                   List<Sequence> joining, int batch, int length) throws OrtException {
        ByteBuffer dst = KvBlock.allocate(spec, batch, length);
        int row = 0;
        if (!keep.isEmpty()) {
            Buffer src = KvBlock.read(key ? pastKeys[layer] : pastValues[layer], spec);
            for (int i = 0; i < keep.size(); i++) {
                KvBlock.copyRow(spec, src, keepIndex.get(i), batchLength, dst, row++, length, keep.get(i).length);
            }
        }
        Map<OnnxTensor, Buffer> read = new java.util.IdentityHashMap<>(); // sequences prefilled together share one tensor
        for (Sequence s : joining) {
            Buffer src = read.computeIfAbsent(key ? s.ownKeys[layer] : s.ownValues[layer], t -> KvBlock.read(t, spec));
            KvBlock.copyRow(spec, src, s.ownRow, s.ownSpan, dst, row++, length, s.length);
        }
        return KvBlock.tensor(env, spec, dst, batch, length);
    }

    private void adoptPresent(OrtSession.Result result) {
        OnnxTensor[] keys = new OnnxTensor[spec.layers()], values = new OnnxTensor[spec.layers()];
        for (int l = 0; l < spec.layers(); l++) {
            keys[l] = (OnnxTensor) result.get(spec.presentKey(l)).get();
            values[l] = (OnnxTensor) result.get(spec.presentValue(l)).get();
        }
        pastKeys = keys;
        pastValues = values;
        pastOwner = result;
    }

    /** A forward pass failed: the sequences in flight end with the error; the loop goes on with an empty batch. */
    private void failAll(Throwable e, List<Sequence> joining) {
        LOG.error("Engine step failed; failing the sequences in flight", e);
        EngineStepException failure = new EngineStepException("The model failed during generation: " + e.getMessage(), e);
        for (Sequence s : joining) {
            s.releaseOwnKv();
            s.fail(failure);
            s.leave();
        }
        for (Sequence s : rows) {
            s.fail(failure);
        }
        for (Sequence s : prefilling) {
            s.releaseOwnKv();
            s.fail(failure);
        }
        rows.forEach(Sequence::leave);
        prefilling.forEach(Sequence::leave);
        rows.clear();
        prefilling.clear();
        closeQuietly(pastOwner);
        pastOwner = null;
        batchLength = 0;
    }

    private void shutdown() {
        IllegalStateException stopped = new IllegalStateException("The engine shut down");
        lock.lock();
        try {
            for (Sequence s : queue) s.fail(stopped);
            queue.clear();
            waiting.set(0);
        } finally {
            lock.unlock();
        }
        for (Sequence s : rows) s.fail(stopped);
        for (Sequence s : prefilling) {
            s.releaseOwnKv();
            s.fail(stopped);
        }
        rows.clear();
        prefilling.clear();
        running.set(0);
        closeQuietly(pastOwner);
    }

    private static void put(Map<String, OnnxTensor> in, List<OnnxTensor> created, String name, OnnxTensor t) {
        in.put(name, t);
        created.add(t);
    }

    private static LongBuffer longs(int n) {
        return ByteBuffer.allocateDirect(n * Long.BYTES).order(ByteOrder.nativeOrder()).asLongBuffer();
    }

    private static void closeQuietly(AutoCloseable c) {
        if (c == null) return;
        try {
            c.close();
        } catch (Exception e) {
            LOG.debug("close failed", e);
        }
    }

    // ------------------------------------------------------------------ one sequence

    private final class Sequence {
        final GenerationRequest request;
        final int[] prompt;
        final SamplingParams params;
        final UnicastProcessor<TokenEvent> processor = UnicastProcessor.create();
        final Multi<TokenEvent> events;
        final TokenSampler sampler;
        final IncrementalDetokenizer detokenizer;
        final StopStringMatcher stops;
        final TokenConstraint.State constraint;
        final long admittedAt = System.nanoTime();
        final int maxTokens;
        volatile boolean cancelled;
        int length;          // tokens in this sequence's KV cache
        int lastToken;       // the token the next decode step feeds
        int generated;
        boolean finished;
        boolean left;
        OnnxTensor[] ownKeys;   // this sequence's KV before it joins the batch: row ownRow of [*, kv, ownSpan, d]
        OnnxTensor[] ownValues;
        int ownRow;
        int ownSpan;
        AutoCloseable ownOwner;

        Sequence(GenerationRequest request) {
            this.request = request;
            this.prompt = request.promptTokenIds();
            this.params = request.sampling();
            this.sampler = new TokenSampler(params, spec.eosIds(), spec.vocabSize(), prompt);
            this.detokenizer = new IncrementalDetokenizer(model.tokenizer(), prompt, params.skipSpecialTokens());
            this.stops = new StopStringMatcher(params.stop(), params.includeStopStrInOutput());
            this.constraint = params.constraint() == null ? null : params.constraint().start();
            this.maxTokens = Math.max(0, Math.min(params.maxTokens(), spec.maxModelLen() - prompt.length));
            this.events = processor.onCancellation().invoke(() -> cancelled = true);
        }

        boolean done() {
            return finished || cancelled;
        }

        /** The model's logits for this sequence's next token. */
        void onLogits(float[] logits) {
            if (done()) return;
            if (constraint != null) constraint.mask(logits);
            TokenSampler.Choice choice = sampler.next(logits, model.tokenizer());
            int token = choice.tokenId();
            generated++;
            lastToken = token;
            // under a grammar, end-of-sequence always ends the output: it is only allowed once the value is complete
            boolean eos = spec.eosIds().contains(token) && (!params.ignoreEos() || constraint != null);
            if (constraint != null && !eos) constraint.advance(token);
            boolean stopToken = params.stopTokenIds().contains(token);
            if (eos || stopToken) {
                String rest = stops.flush();
                emit(token, rest, choice.logprob(), FinishReason.STOP, stopToken && !eos ? Integer.valueOf(token) : null);
                return;
            }
            String text = stops.append(detokenizer.add(token));
            if (stops.matchedStop() != null) {
                emit(token, text, choice.logprob(), FinishReason.STOP, stops.matchedStop());
                return;
            }
            if (generated >= maxTokens) {
                emit(token, text + stops.flush(), choice.logprob(), FinishReason.LENGTH, null);
                return;
            }
            emit(token, text, choice.logprob(), null, null);
        }

        private void emit(int token, String text, TokenLogprob logprob, FinishReason finish, Object stopReason) {
            processor.onNext(new TokenEvent(token, text, logprob, finish, stopReason, prompt.length, generated));
            if (finish != null) {
                finished = true;
                leave();
                processor.onComplete();
            }
        }

        /** Gives the sequence's slot back in the running gauge, once. */
        void leave() {
            if (!left) {
                left = true;
                running.decrementAndGet();
            }
        }

        void finish(FinishReason reason) {
            if (!finished) {
                finished = true;
                processor.onComplete();
            }
        }

        void fail(Throwable e) {
            if (!finished) {
                finished = true;
                processor.onError(e);
            }
        }

        void releaseOwnKv() {
            closeQuietly(ownOwner);
            ownOwner = null;
            ownKeys = null;
            ownValues = null;
        }
    }
}
