package dev.ortserve.engine.batching;

import dev.ortserve.engine.DecoderRunner;
import dev.ortserve.engine.DecoderSpec;
import dev.ortserve.engine.EngineListener;
import dev.ortserve.engine.EngineStepException;
import dev.ortserve.engine.ForwardPass;
import dev.ortserve.engine.kv.KvBuffers;
import dev.ortserve.engine.kv.PendingKv;
import dev.ortserve.engine.kv.PrefixCache;
import dev.ortserve.engine.speculative.SpeculativeOptions;

import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtException;
import org.jboss.logging.Logger;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

/**
 * The passes of a GroupQueryAttention graph whose KV is written in place ({@link KvSteps}, {@link KvCache}): a decode
 * step binds the batch's buffers as its past and its present and the op writes each row's new position into its own
 * part, so one adapter's rows, one drafting row or half a batch that ran out of memory can run a pass alone over their
 * part. A prefill chunk writes into buffers of the sequence's own that hold its whole prompt.
 */
final class InPlaceKvSteps extends KvSteps {

    private static final Logger LOG = Logger.getLogger(InPlaceKvSteps.class);

    private final SpeculativeOptions speculative;
    /** The draft model, or null. */
    private final DraftModel draft;
    private final AtomicLong draftTokens = new AtomicLong();
    private final AtomicLong acceptedTokens = new AtomicLong();

    InPlaceKvSteps(DecoderSpec spec, OrtEnvironment env, DecoderRunner runner, KvCache kv, AtomicLong steps, Supplier<EngineListener> listener,
                   int maxSequences, SpeculativeOptions speculative, DraftModel draft) {
        super(spec, env, runner, kv, steps, listener, maxSequences);
        this.speculative = speculative;
        this.draft = draft;
    }

    @Override
    boolean rowsRunAlone() {
        return true;
    }

    @Override
    long draftTokens() {
        return draftTokens.get();
    }

    @Override
    long acceptedDraftTokens() {
        return acceptedTokens.get();
    }

    @Override
    PendingKv assemble(PrefixCache prefix, Sequence s, int reuse) throws OrtException {
        // into the sequence's own buffers, which its prefill chunks then write on
        return prefix.assemble(s.hold, reuse, kv.spanFor(s.prompt.length, s.maxPositions()));
    }

    /**
     * A decode step that writes into the batch's buffers: the pass's past is the whole buffer and its mask spans it, each
     * row's mask sums to its own length plus one.
     */
    @Override
    List<Sequence> decode(List<Sequence> rows) throws OrtException {
        if (!kv.hasRoomForStep()) rows = kv.repack(rows, List.of()); // the buffers grow (rows done by now leave)
        int b = rows.size();
        if (b == 0) return rows;
        if (speculative.enabled() && b <= speculative.maxBatch() && speculativeStep(rows)) return rows;
        if (draft != null && b > speculative.maxBatch()) {
            for (Sequence s : rows) if (s.drafter != null) s.drafter.close(); // not drafting now: the draft model's KV is let go
        }
        long started = System.nanoTime(), forward = 0;
        // one pass per LoRA adapter (onnxruntime applies one adapter set per run): the repack keeps each adapter's rows
        // together, so each pass runs over its own contiguous part of the batch's buffers; one pass when all share one
        for (int from = 0; from < b; ) {
            int to = from + 1;
            while (to < b && rows.get(to).adapter == rows.get(from).adapter) to++;
            forward += decodeRows(rows, from, to);
            from = to;
        }
        kv.advance();
        stepped(b, (long) b * kv.length());
        decoded(b, forward, started);
        return rows;
    }

    /**
     * One decode pass for rows {@code from} to {@code to - 1} (one adapter's) of the batch; returns its forward time. A
     * pass that runs out of memory (the JVM's direct memory, or onnxruntime's allocator) is retried as two passes of half
     * the rows each (each row writes only its own part of the buffers, so a retry rewrites the same positions), down to
     * one row: only a row that fails alone fails, never the batch.
     */
    private long decodeRows(List<Sequence> rows, int from, int to) throws OrtException {
        int b = rows.size();
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
                    takeLogits(result, rows, from, to);
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
        return decodeRows(rows, from, mid) + decodeRows(rows, mid, to);
    }

    /** A failure to allocate: the JVM's direct memory, or onnxruntime's allocator (its arena's or the C++ runtime's). */
    static boolean outOfMemory(Throwable e) {
        if (e instanceof OutOfMemoryError) return true;
        String m = String.valueOf(e.getMessage()).toLowerCase(java.util.Locale.ROOT);
        return m.contains("failed to allocate") || m.contains("bad_alloc") || m.contains("out of memory");
    }

    /**
     * Speculative decoding: each row with a draft ({@link Sequence#draft}) is fed its last token and the draft in a pass of
     * its own over its part of the batch's buffers, which writes their positions in place; the logits of every column are
     * sampled in order, as long as each sampled token is the drafted one ({@link Sequence#verify}), and the row's length
     * takes back the positions past the last accepted one (the next pass overwrites them; nothing past a row's length
     * enters the prefix cache). Rows without a draft get a pass of one token. False when no row has a draft: nothing ran,
     * the batched decode step runs instead.
     */
    private boolean speculativeStep(List<Sequence> rows) throws OrtException {
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
                int[] drafted = drafts[r];
                int[] tokens = new int[drafted.length + 1];
                tokens[0] = s.lastToken;
                System.arraycopy(drafted, 0, tokens, 1, drafted.length);
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
                        s.length += s.verify(out, drafted, logits);
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
        stepped(b, (long) b * kv.length());
        decoded(b, forward, started);
        return true;
    }

    /**
     * The next {@code n} prompt tokens of one sequence, written in place into buffers of its own that hold its whole
     * prompt (and room to decode, as the batch's rows have): the pass binds them as its past and its present, as a decode
     * step binds the batch's (a row of one: onnxruntime's CPU GroupQueryAttention takes several new tokens after a past
     * only then). So a chunk never holds the past it reads beside a present it writes, and the join copies the prompt's
     * KV into the batch layer by layer, freeing each of these layers as it goes ({@link KvCache#repack}).
     */
    @Override
    void prefillChunk(Sequence s, int n) throws OrtException {
        PendingKv own = s.pending;
        if (own == null) s.pending = own = PendingKv.allocate(env, spec, kv.spanFor(s.prompt.length, s.maxPositions()));
        // a cached prefix was assembled into own buffers of this span (start); a batched prefill finishes its prompts
        if (!own.own()) throw new IllegalStateException("a prefill chunk in place over a past that is not the sequence's own");
        ForwardPass pass = ForwardPass.of(spec.alignment(), List.of(new ForwardPass.Row(s.prompt, s.length, n, s.length, s.images)), own.span - n,
                own.keys, own.values).withPresentInPast().withAdapter(s.adapter);
        try (DecoderRunner.Forward out = runner.run(pass)) {
            steps.incrementAndGet();
            s.length += n;
            promptDone(s, out, 0);
        }
    }
}
