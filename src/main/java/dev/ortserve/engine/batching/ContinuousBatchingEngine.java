package dev.ortserve.engine.batching;

import dev.ortserve.engine.DecoderRunner;
import dev.ortserve.engine.DecoderSpec;
import dev.ortserve.engine.DraftCheck;
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
 * <li>runs one decode step for all running rows over the batch's KV ({@link KvCache}: rows padded as the model's
 * {@link dev.ortserve.engine.KvAlignment} says), as the KV's layout runs it ({@link KvSteps}: written in place, one pass
 * per LoRA adapter or a speculative verification; or a present copied and adopted as the next past);</li>
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
    /** The passes whose shape depends on the KV's layout (in place or copying), picked once here. */
    private final KvSteps kvSteps;
    private final Thread thread;

    private final AtomicInteger running = new AtomicInteger();
    private final AtomicLong steps = new AtomicLong();
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
     * @param draft a draft model for speculative decoding (its tokenizer the model's: {@link DraftCheck#check}), owned by the engine
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
        this.draft = draft == null ? null : new DraftModel(draft);
        this.kvSteps = KvSteps.of(model, runner, kv, steps, () -> listener, options, this.draft);
        // a verification pass writes a row's drafted positions into its own part of the batch's buffers and takes back the
        // rejected ones by its length alone: that needs the KV written in place (right-padded rows)
        this.speculative = kvSteps.rowsRunAlone() ? options.speculative() : SpeculativeOptions.OFF;
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
        return kvSteps.draftTokens();
    }

    /** Draft tokens the model accepted so far. */
    public long acceptedDraftTokens() {
        return kvSteps.acceptedDraftTokens();
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
        return kvSteps.rowsRunAlone();
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

    // ------------------------------------------------------------------ the loop

    private void loop() {
        while (true) {
            List<Sequence> taken = scheduler.next(!rows.isEmpty() || !prefilling.isEmpty(),
                    options.maxSequences() - rows.size() - prefilling.size());
            if (taken == null) break;
            List<Sequence> joining = List.of();
            try {
                for (Sequence s : taken) start(s);
                if (!rows.isEmpty()) rows = kvSteps.decode(rows);
                joining = prefill();
                if (joining.isEmpty() && rows.stream().noneMatch(Sequence::done)) continue;
                rows = kv.repack(rows, joining);
                // what the batch holds now (zero once the last row has left)
                kvSteps.stepped(rows.size(), (long) rows.size() * kv.length());
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
            s.pending = kvSteps.assemble(prefix, s, reuse);
            s.length = reuse;
            s.cachedTokens = reuse;
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
                kvSteps.prefillChunk(s, n);
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
