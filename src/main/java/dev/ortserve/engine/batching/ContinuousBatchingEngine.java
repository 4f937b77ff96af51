package dev.ortserve.engine.batching;

import dev.ortserve.engine.DecoderRunner;
import dev.ortserve.engine.DecoderSpec;
import dev.ortserve.engine.EngineListener;
import dev.ortserve.engine.EngineOptions;
import dev.ortserve.engine.EngineStepException;
import dev.ortserve.engine.GenerationEngine;
import dev.ortserve.engine.GenerationRequest;
import dev.ortserve.engine.KvAlignment;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.PrefixCacheStats;
import dev.ortserve.engine.TokenEvent;

import dev.ortserve.engine.ForwardPass;
import dev.ortserve.engine.runner.OrtDecoderRunner;
import dev.ortserve.engine.kv.KvBuffers;
import dev.ortserve.engine.kv.PendingKv;
import dev.ortserve.engine.kv.PrefixCache;
import dev.ortserve.engine.speculative.SpeculativeOptions;

import ai.onnxruntime.OrtException;
import io.smallrye.mutiny.Multi;
import org.jboss.logging.Logger;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One engine loop per model (iteration-level, "continuous" batching as vLLM does it). Each
 * iteration:
 * <ol>
 * <li>takes waiting sequences into free slots ({@link Scheduler}: admission queue, batch window),
 * looking up the longest cached prefix of each ({@link PrefixCache});</li>
 * <li>runs one decode step for all running rows in a single batched forward pass over the
 * batch's KV ({@link KvCache}: rows padded as the model's {@link dev.ortserve.engine.KvAlignment} says, present tensors fed back as the next past
 * without a copy);</li>
 * <li>prefills waiting prompts within the prefill budget: prompts that fit whole share one
 * padded pass, longer ones (and those continuing a cached prefix) are prefilled alone in
 * chunks, so a long prompt never freezes running streams;</li>
 * <li>repacks the batch when rows leave or join.</li>
 * </ol>
 * Every pass goes through the {@link DecoderRunner} ({@link ForwardPass} builds the inputs of
 * each kind of pass); each {@link Sequence} samples and emits its own tokens. A failed pass fails
 * the sequences in it and the loop goes on.
 */
public final class ContinuousBatchingEngine implements GenerationEngine {

    private static final Logger LOG = Logger.getLogger(ContinuousBatchingEngine.class);

    private final LoadedModel model;
    private final DecoderSpec spec;
    /** Whether a batched prefill may give rows pasts (not on CPU GroupQueryAttention graphs: see {@link #prefill}). */
    private final boolean pastsBatchTogether;
    private final EngineOptions options;
    private final DecoderRunner runner;
    private final Scheduler scheduler;
    private final KvCache kv;
    private final Thread thread;

    private final AtomicInteger running = new AtomicInteger();
    private final AtomicLong steps = new AtomicLong();
    private final AtomicLong draftTokens = new AtomicLong();
    private final AtomicLong acceptedTokens = new AtomicLong();
    /** Speculative decoding, or OFF where the graph cannot verify drafts (the KV not written in place). */
    private final SpeculativeOptions speculative;
    /** The draft model, or null. */
    private final DraftModel draft;
    private volatile EngineListener listener = EngineListener.NONE;

    // engine-thread state
    private final List<Sequence> prefilling = new ArrayList<>();
    private List<Sequence> rows = new ArrayList<>();

    public ContinuousBatchingEngine(LoadedModel model, EngineOptions options) {
        this(model, options, runner -> runner);
    }

    /** @param decorator wraps the runner of every forward pass (tests: fault injection) */
    public ContinuousBatchingEngine(LoadedModel model, EngineOptions options, DecoderRunner.Decorator decorator) {
        this(model, options, decorator, null);
    }

    /**
     * @param draft a draft model for speculative decoding (its tokenizer the model's: {@link #checkDraft}), owned by the engine
     *              from here (closed with it); null for none
     */
    public ContinuousBatchingEngine(LoadedModel model, EngineOptions options, DecoderRunner.Decorator decorator, LoadedModel draft) {
        this.model = model;
        this.spec = model.spec();
        this.pastsBatchTogether = !(spec.alignment() == KvAlignment.START && "cpu".equals(model.executionProvider()));
        this.options = options;
        this.runner = decorator.decorate(new OrtDecoderRunner(model));
        long available = EngineOptions.availableMemory();
        long kvBudget = options.kvCacheBytes(spec, available);
        long perToken = PrefixCache.bytesPerToken(spec);
        // the prefix cache lives inside the KV budget (Scheduler): its cap is at most the budget
        long prefixBytes = Math.min(options.prefixCacheBytes(spec), kvBudget);
        PrefixCache prefix = prefixBytes > 0 ? new PrefixCache(spec, model.environment(), prefixBytes) : null;
        this.scheduler = new Scheduler(options, spec.vocabSize(), model.lastPositionLogits(), kvBudget, perToken, prefix);
        LOG.infof("KV budget: %,d bytes (%s), %d bytes per token: %d tokens of running sequences (rows x the largest prompt + max_tokens among them)"
                        + " and of prefix-cache blocks (%s)",
                kvBudget, options.kvCacheBytes() >= 0 ? "as given"
                        : String.format("default: half of the %d MiB available, at most %d rows of the whole context", available >> 20, options.maxSequences()),
                perToken, kvBudget / perToken,
                prefix == null ? "prefix cache off" : String.format("prefix cache at most %,d bytes, evicted for running sequences", prefixBytes));
        this.kv = new KvCache(spec, model.environment(), prefix, options.kvInPlace(), scheduler::cacheRoom);
        if (options.kvInPlace()) {
            LOG.infof("KV in place: %s", kv.inPlace() ? "decode steps write each new position into the batch's buffers"
                    : "not for this graph (no GroupQueryAttention); decode steps copy the past as before");
        }
        // a verification pass writes a row's drafted positions into its own part of the batch's buffers and takes back the
        // rejected ones by its length alone: that needs the KV written in place (right-padded rows)
        this.speculative = kv.inPlace() ? options.speculative() : SpeculativeOptions.OFF;
        this.draft = draft == null ? null : new DraftModel(draft);
        if (options.speculative().enabled()) {
            SpeculativeOptions o = options.speculative();
            LOG.infof("Speculative decoding: %s", kv.inPlace()
                    ? String.format("up to %d draft tokens per pass from predicted outputs%s%s, while the batch has at most %d row(s)",
                            o.numSpeculativeTokens(), draft == null ? "" : ", the draft model " + draft.directory() + " (" + String.join(", ", draft.rewrites()) + ")",
                            o.promptLookup() ? String.format(" %s prompt lookup (%d-%d tokens)", draft == null ? "and" : "or", o.promptLookupMin(),
                                    o.promptLookupMax()) : "", o.maxBatch())
                    : "off for this graph (its KV is not written in place: no GroupQueryAttention, or kv-in-place off)");
        }
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
        return scheduler.waiting();
    }

    @Override
    public long steps() {
        return steps.get();
    }

    /** The prefix cache's state now, or null when it is off. */
    public PrefixCacheStats prefixCache() {
        PrefixCache p = kv.prefix();
        return p == null ? null : new PrefixCacheStats(p.bytes(), p.capBytes(), p.blocks(), p.lookups(), p.promptTokens(), p.hitTokens(),
                p.references(), p.unreferencedBytes(), p.evictions());
    }

    /** KV bytes reserved by the running sequences now, against {@link #kvBudgetBytes()}. */
    public long kvReservedBytes() {
        return scheduler.kvReservedBytes();
    }

    /**
     * KV bytes held against {@link #kvBudgetBytes()} now: the running sequences' reservations and
     * every prefix-cache block (exact when read on the engine thread, e.g. from an {@link EngineListener}).
     */
    public long kvHeldBytes() {
        return scheduler.kvHeldBytes();
    }

    public long kvBudgetBytes() {
        return scheduler.kvBudgetBytes();
    }

    /** Draft tokens verified so far (speculative decoding: predicted outputs and prompt lookup). */
    public long draftTokens() {
        return draftTokens.get();
    }

    /** Draft tokens the model accepted so far. */
    public long acceptedDraftTokens() {
        return acceptedTokens.get();
    }

    /** Requests failed unstarted for waiting longer than the queue timeout ({@link EngineOptions#queueTimeout()}). */
    public long queueTimeouts() {
        return scheduler.timedOut();
    }

    /** Times a waiting request stayed in the queue because the KV budget was taken. */
    public long kvBudgetWaits() {
        return scheduler.kvWaits();
    }

    /** Sets who hears about scheduling and steps (metrics). */
    public void listener(EngineListener listener) {
        this.listener = listener == null ? EngineListener.NONE : listener;
    }

    @Override
    public Multi<TokenEvent> generate(GenerationRequest request) {
        return generateAll(List.of(request)).get(0);
    }

    /**
     * Whether it runs LoRA adapters: each adapter's rows run in a pass of their own over their part of the batch's
     * buffers, which needs the KV written in place (GroupQueryAttention graphs).
     */
    public boolean runsAdapters() {
        return kv.inPlace();
    }

    @Override
    public List<Multi<TokenEvent>> generateAll(List<GenerationRequest> requests) {
        for (GenerationRequest r : requests) {
            if (r.adapter() != null && !runsAdapters()) {
                throw new IllegalArgumentException("this model's engine runs no LoRA adapters (its KV is not written in place)");
            }
        }
        List<Sequence> admitted = new ArrayList<>(requests.size());
        for (GenerationRequest r : requests) {
            admitted.add(new Sequence(r, model, speculative,
                    draft == null ? s -> null : s -> draft.session(s.maxPositions(), bytes -> scheduler.reserveDraft(s, bytes), () -> scheduler.releaseDraft(s)),
                    s -> running.decrementAndGet(), scheduler::retired));
        }
        scheduler.admit(admitted);
        return admitted.stream().map(s -> s.events).toList();
    }

    @Override
    public void close() {
        IllegalStateException stopped = new IllegalStateException("The engine shut down");
        for (Sequence s : scheduler.close()) s.fail(stopped);
        try {
            thread.join(10_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (draft != null) draft.close();
    }

    /**
     * Whether {@code draft} can draft for {@code model}: the same tokenizer (the same vocabulary size and the same ids for a
     * probe text), KV written in place (GroupQueryAttention), no more logits; null when it can, else why not (naming both).
     */
    public static String checkDraft(LoadedModel model, LoadedModel draft) {
        String probe = "Speculative decoding: def f(x):\n    return {\"a\": [1, 2.5e3]} # ünïcödé 漢字 🙂";
        int a = model.tokenizer().vocabSize(), b = draft.tokenizer().vocabSize();
        if (a != b) return "the draft model " + draft.directory() + " has a vocabulary of " + b + " tokens, the served model " + model.directory() + " " + a;
        if (!java.util.Arrays.equals(model.tokenizer().encode(probe), draft.tokenizer().encode(probe))) {
            return "the draft model " + draft.directory() + " tokenizes text differently from the served model " + model.directory();
        }
        if (draft.spec().alignment() != dev.ortserve.engine.KvAlignment.START) {
            return "the draft model " + draft.directory() + " does not run GroupQueryAttention (its attention was not rewritten on load):"
                    + " a draft keeps its KV in place, as the served model " + model.directory() + " does";
        }
        if (draft.spec().vocabSize() > model.spec().vocabSize()) {
            return "the draft model " + draft.directory() + " has " + draft.spec().vocabSize() + " logits, more than the served model's "
                    + model.spec().vocabSize();
        }
        return null;
    }

    // ------------------------------------------------------------------ the loop

    private void loop() {
        while (true) {
            List<Sequence> taken = scheduler.next(!rows.isEmpty() || !prefilling.isEmpty(),
                    options.maxSequences() - rows.size() - prefilling.size());
            if (taken == null) break;
            List<Sequence> joining = List.of();
            try {
                for (Sequence s : taken) start(s);
                if (!rows.isEmpty()) decodeStep();
                joining = prefill();
                if (joining.isEmpty() && rows.stream().noneMatch(Sequence::done)) continue;
                rows = kv.repack(rows, joining);
                // what the batch holds now (zero once the last row has left)
                listener.stepped(rows.size(), (long) rows.size() * kv.length(), (long) options.maxSequences() * spec.maxModelLen());
            } catch (Throwable e) {
                failAll(e, joining);
            }
        }
        shutdown();
    }

    /**
     * A sequence left the queue: it counts as running, and reuses the longest cached prefix of its
     * prompt (looked up and referenced by the {@link Scheduler} as it left the queue).
     */
    private void start(Sequence s) throws OrtException {
        running.incrementAndGet();
        prefilling.add(s);
        listener.scheduled(System.nanoTime() - s.admittedAt);
        PrefixCache prefix = kv.prefix();
        if (prefix == null || s.hold == null) return;
        int reuse = PrefixCache.reusable(s.hold, s.prompt.length);
        if (reuse > 0) {
            // in place: into the sequence's own buffers, which its prefill chunks then write on
            s.pending = kv.inPlace() ? prefix.assemble(s.hold, reuse, kv.spanFor(s.prompt.length, s.maxPositions())) : prefix.assemble(s.hold, reuse);
            s.length = reuse;
            s.cachedTokens = reuse;
        }
    }

    /** One batched decode step for every running row. */
    private void decodeStep() throws OrtException {
        if (kv.inPlace()) {
            decodeStepInPlace();
            return;
        }
        int b = rows.size();
        long started = System.nanoTime();
        List<ForwardPass.Row> in = new ArrayList<>(b);
        for (Sequence s : rows) in.add(ForwardPass.Row.decode(s.lastToken, s.length));
        ForwardPass pass = ForwardPass.of(spec.alignment(), in, kv.length(), kv.keys(), kv.values());
        long forwardStart = System.nanoTime();
        DecoderRunner.Forward out = runner.run(pass);
        long forward = System.nanoTime() - forwardStart;
        steps.incrementAndGet();
        kv.adopt(out, pass.totalLength());
        listener.stepped(b, (long) b * pass.totalLength(), (long) options.maxSequences() * spec.maxModelLen());
        sampleRows(out, b);
        listener.decoded(b, forward, System.nanoTime() - started);
    }

    /**
     * A decode step that writes into the batch's buffers ({@link KvCache}, in place): the pass's past
     * is the whole buffer and its mask spans it, each row's mask sums to its own length plus one.
     */
    private void decodeStepInPlace() throws OrtException {
        if (!kv.hasRoomForStep()) rows = kv.repack(rows, List.of()); // the buffers grow (rows done by now leave)
        int b = rows.size();
        if (b == 0) return;
        if (speculative.enabled() && b <= speculative.maxBatch() && speculativeStep()) return;
        if (draft != null && b > speculative.maxBatch()) {
            for (Sequence s : rows) if (s.drafter != null) s.drafter.close(); // not drafting now: the draft model's KV is let go
        }
        long started = System.nanoTime(), forward = 0;
        // one pass per LoRA adapter (onnxruntime applies one adapter set per run): the repack keeps each adapter's rows
        // together, so each pass runs over its own contiguous part of the batch's buffers; one pass when all share one
        for (int from = 0; from < b; ) {
            int to = from + 1;
            while (to < b && rows.get(to).adapter == rows.get(from).adapter) to++;
            forward += decodeRows(from, to, b);
            from = to;
        }
        kv.advance();
        listener.stepped(b, (long) b * kv.length(), (long) options.maxSequences() * spec.maxModelLen());
        listener.decoded(b, forward, System.nanoTime() - started);
    }

    /**
     * One in-place decode pass for rows {@code from} to {@code to - 1} (one adapter's) of the batch's {@code b}; returns its
     * forward time. A pass that runs out of memory (the JVM's direct memory, or onnxruntime's allocator) is retried as two
     * passes of half the rows each (each row writes only its own part of the buffers, so a retry rewrites the same
     * positions), down to one row: only a row that fails alone fails, never the batch.
     */
    private long decodeRows(int from, int to, int b) throws OrtException {
        List<ForwardPass.Row> in = new ArrayList<>(to - from);
        for (int r = from; r < to; r++) in.add(ForwardPass.Row.decode(rows.get(r).lastToken, rows.get(r).length));
        Throwable outOfMemory = null;
        long forward = 0;
        try (KvBuffers.View view = kv.rows(from, to - from, b)) {
            ForwardPass pass = ForwardPass.of(spec.alignment(), in, kv.span() - 1, view.keys(), view.values()).withPresentInPast()
                    .withAdapter(rows.get(from).adapter);
            long forwardStart = System.nanoTime();
            DecoderRunner.Forward out = null;
            try {
                out = runner.run(pass);
            } catch (OutOfMemoryError | OrtException e) {
                if (!outOfMemory(e)) throw e;
                outOfMemory = e;
            }
            if (out != null) {
                try (DecoderRunner.Forward result = out) {
                    forward = System.nanoTime() - forwardStart;
                    steps.incrementAndGet();
                    float[] logits = new float[result.vocabSize()];
                    for (int r = from; r < to; r++) {
                        Sequence s = rows.get(r);
                        result.lastLogits(r - from, logits);
                        s.length++;
                        s.onLogits(logits);
                    }
                }
                return forward;
            }
        }
        if (to - from == 1) {
            LOG.warnf("A decode pass of one sequence ran out of memory (%s); failing that sequence, the batch goes on", outOfMemory.getMessage());
            rows.get(from).fail(new EngineStepException("The server ran out of memory for this sequence: " + outOfMemory.getMessage(), outOfMemory));
            return 0;
        }
        LOG.warnf("A decode pass of %d rows ran out of memory (%s); retrying as two passes of fewer rows", to - from, outOfMemory.getMessage());
        int mid = (from + to) >>> 1;
        return decodeRows(from, mid, b) + decodeRows(mid, to, b);
    }

    /** A failure to allocate: the JVM's direct memory, or onnxruntime's allocator (its arena's or the C++ runtime's). */
    static boolean outOfMemory(Throwable e) {
        if (e instanceof OutOfMemoryError) return true;
        String m = String.valueOf(e.getMessage()).toLowerCase(java.util.Locale.ROOT);
        return m.contains("failed to allocate") || m.contains("bad_alloc") || m.contains("out of memory");
    }

    /**
     * Speculative decoding (in place): each row with a draft ({@link Sequence#draft}) is fed its last token and the draft
     * in a pass of its own over its part of the batch's buffers, which writes their positions in place; the logits of
     * every column are sampled in order, as long as each sampled token is the drafted one ({@link Sequence#verify}), and
     * the row's length takes back the positions past the last accepted one (the next pass overwrites them; nothing past
     * a row's length enters the prefix cache). Rows without a draft get a pass of one token. False when no row has a
     * draft: nothing ran, the batched decode step runs instead.
     */
    private boolean speculativeStep() throws OrtException {
        int b = rows.size();
        int[][] drafts = new int[b][];
        boolean any = false;
        for (int r = 0; r < b; r++) {
            Sequence s = rows.get(r);
            // positions after the last token's: within the buffers (rounded up past the longest row) and the context
            int room = Math.min(kv.span(), spec.maxModelLen()) - s.length - 1;
            drafts[r] = s.draft(room);
            any |= drafts[r].length > 0;
        }
        if (!any) return false;
        long started = System.nanoTime(), forward = 0;
        float[] logits = null;
        int longest = 0;
        for (int r = 0; r < b; r++) {
            Sequence s = rows.get(r);
            if (!s.done()) {
                int[] draft = drafts[r];
                int[] tokens = new int[draft.length + 1];
                tokens[0] = s.lastToken;
                System.arraycopy(draft, 0, tokens, 1, draft.length);
                try (KvBuffers.View view = kv.row(r, b)) {
                    ForwardPass pass = ForwardPass.of(spec.alignment(), List.of(new ForwardPass.Row(tokens, 0, tokens.length, s.length)),
                            kv.span() - tokens.length, view.keys(), view.values()).withPresentInPast().withLogitColumns(tokens.length)
                            .withAdapter(s.adapter);
                    long forwardStart = System.nanoTime();
                    try (DecoderRunner.Forward out = runner.run(pass)) {
                        forward += System.nanoTime() - forwardStart;
                        steps.incrementAndGet();
                        if (logits == null) logits = new float[out.vocabSize()];
                        long draftedBefore = s.drafter == null ? 0 : s.drafter.drafted();
                        long acceptedBefore = s.drafter == null ? 0 : s.drafter.accepted();
                        s.length += s.verify(out, draft, logits);
                        if (s.drafter != null) {
                            draftTokens.addAndGet(s.drafter.drafted() - draftedBefore);
                            acceptedTokens.addAndGet(s.drafter.accepted() - acceptedBefore);
                        }
                    }
                }
            }
            longest = Math.max(longest, s.length);
        }
        kv.advanceTo(longest);
        listener.stepped(b, (long) b * kv.length(), (long) options.maxSequences() * spec.maxModelLen());
        listener.decoded(b, forward, System.nanoTime() - started);
        return true;
    }

    /** Each decoded row takes its last position's logits: one more token in its sequence. */
    private void sampleRows(DecoderRunner.Forward out, int b) {
        float[] logits = new float[out.vocabSize()];
        for (int r = 0; r < b; r++) {
            Sequence s = rows.get(r);
            out.lastLogits(r, logits);
            s.length++;
            s.onLogits(logits);
        }
    }

    /** Prefills waiting prompts within the budget; returns those whose prompt is done (to join or leave). */
    private List<Sequence> prefill() throws OrtException {
        List<Sequence> ready = new ArrayList<>();
        int budget = scheduler.budget();
        // onnxruntime's CPU GroupQueryAttention runs one row when new tokens follow a past ("batch_size must be 1 when
        // sequence_length > 1 and past context is given"): there, prompts continuing a cached prefix are prefilled alone
        // rather than tried in a batch that fails
        List<Sequence> batchable = !pastsBatchTogether ? prefilling.stream().filter(s -> s.length == 0).toList() : prefilling;
        // one LoRA adapter per pass: the first waiting prompt's
        if (!batchable.isEmpty()) {
            dev.ortserve.engine.LoraAdapter first = batchable.get(0).adapter;
            batchable = batchable.stream().filter(s -> s.adapter == first).toList();
        }
        List<Sequence> group = scheduler.batchedPrefill(batchable, !rows.isEmpty());
        if (!group.isEmpty()) {
            int cost = group.size() * group.stream().mapToInt(s -> s.prompt.length - s.length).max().orElse(0);
            if (prefillBatch(group)) {
                prefilling.removeAll(group);
                ready.addAll(group);
                budget -= cost;
            }
        }
        for (int i = 0; i < prefilling.size() && budget > 0; i++) {
            Sequence s = prefilling.get(i);
            if (s.cancelled()) {
                s.finish();
                prefilling.remove(i--);
                s.retire();
                continue;
            }
            int n = Math.min(budget, s.prompt.length - s.length);
            budget -= n;
            try {
                prefillChunk(s, n);
            } catch (OrtException | RuntimeException e) {
                // a prompt the model cannot run fails alone; the batch and the other prompts go on
                LOG.error("Prefill failed for one sequence", e);
                s.fail(new EngineStepException("The model failed on this prompt: " + e.getMessage(), e));
                prefilling.remove(i--);
                s.retire();
                continue;
            }
            if (s.length == s.prompt.length) {
                prefilling.remove(i--);
                ready.add(s);
            }
        }
        return ready;
    }

    /**
     * One pass for the rest of several prompts, each over its own past (a cached prefix) or none.
     * Every row that continues a past gets the same number of new tokens (the longest rest), by
     * running again the last cached positions it would otherwise have had to pad: padding between
     * a row's past and its new tokens would break the right alignment of its KV (left padding; with
     * right padding the re-run is not needed, and harmless). Rows without a past are padded as usual. False when ONNX Runtime failed it: then no sequence was touched.
     */
    private boolean prefillBatch(List<Sequence> group) throws OrtException {
        int n = 0;
        for (Sequence s : group) n = Math.max(n, s.prompt.length - s.length);
        List<ForwardPass.Row> in = new ArrayList<>(group.size());
        int[] keep = new int[group.size()];
        int pastLength = 0;
        for (int r = 0; r < group.size(); r++) {
            Sequence s = group.get(r);
            keep[r] = s.length == 0 ? 0 : Math.max(0, s.prompt.length - n);
            in.add(new ForwardPass.Row(s.prompt, keep[r], s.prompt.length - keep[r], keep[r], s.images));
            pastLength = Math.max(pastLength, keep[r]);
        }
        try (KvRows past = KvRows.gather(spec, model.environment(), group, keep, pastLength)) {
            ForwardPass pass = ForwardPass.of(spec.alignment(), in, pastLength, past.keys(), past.values()).withAdapter(group.get(0).adapter);
            DecoderRunner.Forward out;
            try {
                out = runner.run(pass);
            } catch (OrtException | RuntimeException e) {
                LOG.warnf("A batched prefill of %d prompts failed (%s); prefilling them one by one", group.size(), e.getMessage());
                return false;
            }
            steps.incrementAndGet();
            PendingKv.Holder holder = new PendingKv.Holder(out, group.size()); // freed once every sequence has joined or left
            for (int r = 0; r < group.size(); r++) {
                Sequence s = group.get(r);
                s.closePending();
                s.pending = PendingKv.fromPresent(out, spec.layers(), r, pass.totalLength(), holder);
                s.length = s.prompt.length;
            }
            float[] logits = new float[out.vocabSize()];
            for (int r = 0; r < group.size(); r++) {
                out.lastLogits(r, logits);
                group.get(r).onLogits(logits);
            }
            return true;
        }
    }

    /** The next {@code n} prompt tokens of one sequence over its own past. */
    private void prefillChunk(Sequence s, int n) throws OrtException {
        if (kv.inPlace()) {
            prefillChunkInPlace(s, n);
            return;
        }
        PendingKv past = s.pending;
        ForwardPass pass = ForwardPass.of(spec.alignment(), List.of(new ForwardPass.Row(s.prompt, s.length, n, s.length, s.images)), s.length,
                past == null ? null : past.keys, past == null ? null : past.values).withAdapter(s.adapter);
        DecoderRunner.Forward out = runner.run(pass);
        steps.incrementAndGet();
        s.closePending();
        s.pending = PendingKv.fromPresent(out, spec.layers(), 0, pass.totalLength(), new PendingKv.Holder(out, 1));
        s.length = pass.totalLength();
        if (s.length == s.prompt.length) {
            float[] logits = new float[out.vocabSize()];
            out.lastLogits(0, logits);
            s.onLogits(logits);
        }
    }

    /**
     * The next {@code n} prompt tokens of one sequence, written in place into buffers of its own that hold its whole
     * prompt (and room to decode, as the batch's rows have): the pass binds them as its past and its present, as a decode
     * step binds the batch's (a row of one: onnxruntime's CPU GroupQueryAttention takes several new tokens after a past
     * only then). So a chunk never holds the past it reads beside a present it writes, and the join copies the prompt's
     * KV into the batch layer by layer, freeing each of these layers as it goes ({@link KvCache#repack}).
     */
    private void prefillChunkInPlace(Sequence s, int n) throws OrtException {
        PendingKv own = s.pending;
        if (own == null) s.pending = own = PendingKv.allocate(model.environment(), spec, kv.spanFor(s.prompt.length, s.maxPositions()));
        // a cached prefix was assembled into own buffers of this span (start); a batched prefill finishes its prompts
        if (!own.own()) throw new IllegalStateException("a prefill chunk in place over a past that is not the sequence's own");
        ForwardPass pass = ForwardPass.of(spec.alignment(), List.of(new ForwardPass.Row(s.prompt, s.length, n, s.length, s.images)), own.span - n,
                own.keys, own.values).withPresentInPast().withAdapter(s.adapter);
        try (DecoderRunner.Forward out = runner.run(pass)) {
            steps.incrementAndGet();
            s.length += n;
            if (s.length == s.prompt.length) {
                float[] logits = new float[out.vocabSize()];
                out.lastLogits(0, logits);
                s.onLogits(logits);
            }
        }
    }

    /** A forward pass failed: the sequences in flight end with the error; the loop goes on with an empty batch. */
    private void failAll(Throwable e, List<Sequence> joining) {
        LOG.error("Engine step failed; failing the sequences in flight", e);
        EngineStepException failure = new EngineStepException("The model failed during generation: " + e.getMessage(), e);
        List<Sequence> all = new ArrayList<>(joining);
        all.addAll(rows);
        all.addAll(prefilling);
        for (Sequence s : all) {
            s.fail(failure);
            s.retire();
        }
        rows = new ArrayList<>();
        prefilling.clear();
        kv.release();
    }

    private void shutdown() {
        IllegalStateException stopped = new IllegalStateException("The engine shut down");
        List<Sequence> all = new ArrayList<>(rows);
        all.addAll(prefilling);
        for (Sequence s : all) {
            s.fail(stopped);
            s.retire();
        }
        rows = new ArrayList<>();
        prefilling.clear();
        running.set(0);
        kv.close();
    }
}
