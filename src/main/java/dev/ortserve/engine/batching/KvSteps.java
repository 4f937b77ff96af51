package dev.ortserve.engine.batching;

import dev.ortserve.engine.DecoderRunner;
import dev.ortserve.engine.DecoderSpec;
import dev.ortserve.engine.EngineListener;
import dev.ortserve.engine.EngineOptions;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.speculative.SpeculativeOptions;
import dev.ortserve.engine.kv.PendingKv;
import dev.ortserve.engine.kv.PrefixCache;

import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtException;

import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

import org.jboss.logging.Logger;

/**
 * The passes whose shape depends on how the batch's KV is laid out, one implementation per layout, picked once when the
 * engine starts ({@link #of}); the engine's loop, scheduling, batched prefill and repacks are the same for both.
 * <ul>
 * <li>{@link InPlaceKvSteps}: GroupQueryAttention graphs (onnxruntime-genai builder exports, and Optimum / transformers
 * exports whose attention {@code fuse-attention} rewrote on load) with {@code kv-in-place}: each layer's KV is one
 * buffer per batch that a pass binds as its past and its present, so every row writes only its own part. That is what
 * lets a row run a pass alone: LoRA adapters (a pass per adapter), speculative verification, halving retries.</li>
 * <li>{@link CopyingKvSteps}: the graphs whose attention is served as exported (left-padded explicit attention: softcapping,
 * attention sinks, a computed scale, or {@code fuse-attention} / {@code kv-in-place} off). A step's present tensors are
 * a new copy of the whole past, adopted as the next past; no row can run alone, so no adapters and no drafts.</li>
 * </ul>
 * Engine thread only.
 */
abstract class KvSteps {

    private static final Logger LOG = Logger.getLogger(KvSteps.class);

    final DecoderSpec spec;
    final OrtEnvironment env;
    final DecoderRunner runner;
    final KvCache kv;
    /** Forward passes run (the engine's count). */
    final AtomicLong steps;
    private final Supplier<EngineListener> listener;
    private final long capacity;

    KvSteps(DecoderSpec spec, OrtEnvironment env, DecoderRunner runner, KvCache kv, AtomicLong steps, Supplier<EngineListener> listener,
            int maxSequences) {
        this.spec = spec;
        this.env = env;
        this.runner = runner;
        this.kv = kv;
        this.steps = steps;
        this.listener = listener;
        this.capacity = (long) maxSequences * spec.maxModelLen();
    }

    /** The layout {@code kv} was made for: in place when it writes in place, else copying; said in the log. */
    static KvSteps of(LoadedModel model, DecoderRunner runner, KvCache kv, AtomicLong steps, Supplier<EngineListener> listener,
                      EngineOptions options, DraftModel draft) {
        DecoderSpec spec = model.spec();
        if (options.kvInPlace()) {
            LOG.infof("KV in place: %s", kv.inPlace() ? "decode steps write each new position into the batch's buffers"
                    : "not for this graph (no GroupQueryAttention); decode steps copy the past as before");
        }
        SpeculativeOptions o = options.speculative();
        if (o.enabled()) {
            LOG.infof("Speculative decoding: %s", kv.inPlace()
                    ? String.format("up to %d draft tokens per pass from predicted outputs%s%s, while the batch has at most %d row(s)",
                            o.numSpeculativeTokens(), draft == null ? "" : ", the draft model " + draft.model().directory() + " ("
                                    + String.join(", ", draft.model().rewrites()) + ")",
                            o.promptLookup() ? String.format(" %s prompt lookup (%d-%d tokens)", draft == null ? "and" : "or", o.promptLookupMin(),
                                    o.promptLookupMax()) : "", o.maxBatch())
                    : "off for this graph (its KV is not written in place: no GroupQueryAttention, or kv-in-place off)");
        }
        return kv.inPlace() ? new InPlaceKvSteps(spec, model.environment(), runner, kv, steps, listener, options.maxSequences(), o, draft)
                : new CopyingKvSteps(spec, model.environment(), runner, kv, steps, listener, options.maxSequences());
    }

    /** One decode step for every running row; the batch's rows afterwards (a repack that grows the buffers lets finished ones go). */
    abstract List<Sequence> decode(List<Sequence> rows) throws OrtException;

    /** The next {@code n} prompt tokens of one sequence over its own past. */
    abstract void prefillChunk(Sequence s, int n) throws OrtException;

    /** A sequence's cached prefix of {@code reuse} tokens as the KV its prefill continues. */
    abstract PendingKv assemble(PrefixCache prefix, Sequence s, int reuse) throws OrtException;

    /** Whether a row can run a pass of its own (LoRA adapters, speculative decoding): only where each row writes its own part. */
    abstract boolean rowsRunAlone();

    /** Draft tokens verified so far, and of them accepted (speculative decoding). */
    long draftTokens() {
        return 0;
    }

    long acceptedDraftTokens() {
        return 0;
    }

    /** Tells the listener what the batch holds after a step ({@code positions} of KV over its rows). */
    void stepped(int rows, long positions) {
        listener.get().stepped(rows, positions, capacity);
    }

    /** Tells the listener a decode step is done: its forward time, and its whole time since {@code started}. */
    void decoded(int rows, long forwardNanos, long started) {
        listener.get().decoded(rows, forwardNanos, System.nanoTime() - started);
    }

    /** Rows {@code from} to {@code to - 1} of the batch decoded in {@code out} (its rows 0, 1, ...): each takes its logits, one more token. */
    static void takeLogits(DecoderRunner.Forward out, List<Sequence> rows, int from, int to) {
        float[] logits = new float[out.vocabSize()];
        for (int r = from; r < to; r++) {
            Sequence s = rows.get(r);
            out.lastLogits(r - from, logits);
            s.length++;
            s.onLogits(logits);
        }
    }

    /** The last position's logits of a prompt's final chunk: its first generated token. */
    static void promptDone(Sequence s, DecoderRunner.Forward out, int row) {
        if (s.length != s.prompt.length) return;
        float[] logits = new float[out.vocabSize()];
        out.lastLogits(row, logits);
        s.onLogits(logits);
    }
}
