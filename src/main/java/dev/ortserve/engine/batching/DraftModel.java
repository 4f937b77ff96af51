package dev.ortserve.engine.batching;

import dev.ortserve.engine.DecoderRunner;
import dev.ortserve.engine.DecoderSpec;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.ModelLoadException;

import dev.ortserve.engine.KvAlignment;
import dev.ortserve.engine.kv.KvBlock;
import dev.ortserve.engine.kv.KvBuffers;
import dev.ortserve.engine.sampling.TokenSampler;
import dev.ortserve.engine.ForwardPass;
import dev.ortserve.engine.runner.OrtDecoderRunner;
import dev.ortserve.engine.speculative.Drafter;

import ai.onnxruntime.OrtException;
import org.jboss.logging.Logger;

import java.nio.Buffer;
import java.util.Arrays;
import java.util.List;

/**
 * A draft model for speculative decoding: a smaller model of the same tokenizer, or the served model's own weights at a
 * lower precision, that proposes each drafting sequence's next tokens greedily (a deterministic draft, verified by the
 * engine as the other drafts are). Each sequence that drafts has a {@link Session}: its KV in the draft model (one
 * in-place buffer per layer, as the engine's own, grown by 256 positions) and the tokens it holds. A session feeds the
 * tokens its KV lacks (the prompt once, then what the target accepted), keeps the positions that still agree with the
 * sequence and overwrites the rest, so a rejected draft costs nothing to take back. Engine thread.
 */
final class DraftModel implements AutoCloseable {

    private static final Logger LOG = Logger.getLogger(DraftModel.class);
    /** Tokens fed to the draft model in one pass (a prompt is fed in chunks of this many). */
    private static final int CHUNK = 512;

    private final LoadedModel model;
    private final DecoderSpec spec;
    private final DecoderRunner runner;

    /** @param model the draft, loaded; this owns it (closes it) */
    DraftModel(LoadedModel model) {
        if (model.spec().alignment() != KvAlignment.START) {
            throw new ModelLoadException("The draft model " + model.directory() + " does not run GroupQueryAttention (its attention was not"
                    + " rewritten on load): a draft keeps its KV in place, as the served model does");
        }
        this.model = model;
        this.spec = model.spec();
        this.runner = new OrtDecoderRunner(model);
        // onnxruntime's first runs of a session allocate and plan: done here, not in a request's first drafts
        try (Session warm = new Session()) {
            warm.propose(new int[] {0, 1, 2, 3}, 4, 2);
        }
    }

    LoadedModel model() {
        return model;
    }

    /**
     * A sequence's state in the draft model; nothing is allocated until it drafts, and then only once {@code reserve} has
     * granted its KV's bytes (at most {@code positions} positions) in the KV budget; {@code release} gives them back when
     * the session lets go of its KV.
     */
    Drafter.Source session(int positions, java.util.function.LongPredicate reserve, Runnable release) {
        return new Session(positions, reserve, release);
    }

    @Override
    public void close() {
        model.close();
    }

    private final class Session implements Drafter.Source {
        private final int positions;
        private final java.util.function.LongPredicate reserve;
        private final Runnable release;
        private boolean reserved;
        /** The sequence's KV in the draft model, one row, null until it drafts. */
        private KvBuffers kv;
        /** The tokens whose positions the KV holds, {@link #length} of them. */
        private int[] fed = new int[0];
        private int length;
        private boolean failed;

        Session(int positions, java.util.function.LongPredicate reserve, Runnable release) {
            this.positions = positions;
            this.reserve = reserve;
            this.release = release;
        }

        /** A session outside any budget (the warm-up). */
        Session() {
            this(0, bytes -> true, () -> { });
        }

        @Override
        public int[] propose(int[] tokens, int n, int count) {
            if (failed || n + count > spec.maxModelLen()) return new int[0];
            if (!reserved) {
                // the draft's KV for the whole sequence, counted in the KV budget before anything is allocated
                if (!reserve.test(spec.kvBytesPerToken() * Math.max(positions, n + count))) return new int[0];
                reserved = true;
            }
            try {
                int valid = 0;
                while (valid < length && valid < n && fed[valid] == tokens[valid]) valid++;
                // at least the last token is fed: its logits give the first draft token
                length = Math.min(valid, n - 1);
                ensure(n + count - 1);
                int[] draft = new int[count];
                draft[0] = feed(tokens, n);
                int[] one = new int[1];
                int[] held = Arrays.copyOf(tokens, n + count);
                for (int i = 1; i < count; i++) {
                    held[n + i - 1] = draft[i - 1];
                    one[0] = draft[i - 1];
                    draft[i] = step(one);
                }
                held[n + count - 1] = draft[count - 1];
                fed = held; // positions up to n + count - 1 hold the sequence's tokens and the draft (the last draft token is not fed)
                return draft;
            } catch (OrtException | RuntimeException e) {
                // a draft model that fails leaves the sequence decoding without drafts; the target's output is unaffected
                LOG.warnf("The draft model failed (%s); this sequence decodes without drafts", e.getMessage());
                failed = true;
                close();
                return new int[0];
            }
        }

        /** Feeds {@code tokens[length..n)} (in chunks), returns the greedy next token after them. */
        private int feed(int[] tokens, int n) throws OrtException {
            int next = -1;
            while (length < n) {
                int m = Math.min(CHUNK, n - length);
                next = length == 0 ? first(tokens, m) : pass(tokens, length, m);
            }
            return next;
        }

        private int step(int[] token) throws OrtException {
            return pass(token, 0, 1, length);
        }

        private int pass(int[] tokens, int from, int m) throws OrtException {
            return pass(tokens, from, m, length);
        }

        /** {@code m} tokens from {@code from} after the KV's {@code past} positions, written in place. */
        private int pass(int[] tokens, int from, int m, int past) throws OrtException {
            ForwardPass p = ForwardPass.of(KvAlignment.START, List.of(new ForwardPass.Row(tokens, from, m, past)), kv.span() - m, kv.keys(), kv.values())
                    .withPresentInPast();
            try (DecoderRunner.Forward out = runner.run(p)) {
                length = past + m;
                return argmax(out);
            }
        }

        /** The first chunk, without a past: its present tensors are copied into the buffers. */
        private int first(int[] tokens, int m) throws OrtException {
            ForwardPass p = ForwardPass.of(KvAlignment.START, List.of(new ForwardPass.Row(tokens, 0, m, 0)), 0, null, null);
            try (DecoderRunner.Forward out = runner.run(p)) {
                for (int l = 0; l < spec.layers(); l++) {
                    Buffer k = KvBlock.read(out.presentKey(l), spec), v = KvBlock.read(out.presentValue(l), spec);
                    KvBlock.copyRow(spec, k, 0, m, 0, kv.data(l, 0), 0, kv.span(), 0, m);
                    KvBlock.copyRow(spec, v, 0, m, 0, kv.data(l, 1), 0, kv.span(), 0, m);
                }
                length = m;
                return argmax(out);
            }
        }

        private int argmax(DecoderRunner.Forward out) {
            float[] logits = new float[out.vocabSize()];
            out.lastLogits(0, logits);
            return TokenSampler.argmax(logits);
        }

        /** Buffers of at least {@code positions} + 1 positions (rounded up), keeping the first {@link #length}. */
        private void ensure(int positions) throws OrtException {
            if (kv != null && positions + 1 <= kv.span()) return;
            // the rotary caches end at the context: the buffers never go past it (positions + 1 <= the context here)
            int newSpan = KvCache.roundedSpan(positions, spec.maxModelLen());
            // the old buffers are let go once the new ones hold their positions (the reservation covers both)
            KvBuffers grown = kv == null ? KvBuffers.allocate(model.environment(), spec, 1, newSpan) : kv.grown(newSpan, length);
            if (kv == null) length = 0;
            else kv.close();
            kv = grown;
        }

        @Override
        public void close() {
            if (reserved) {
                reserved = false;
                release.run();
            }
            if (kv != null) kv.close();
            kv = null;
            length = 0;
        }
    }
}
