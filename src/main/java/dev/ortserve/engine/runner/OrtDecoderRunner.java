package dev.ortserve.engine.runner;

import dev.ortserve.engine.ForwardPass;

import dev.ortserve.engine.DecoderRunner;
import dev.ortserve.engine.DecoderSpec;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.kv.KvBlock;
import dev.ortserve.engine.memory.NativeBuffers;

import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtException;
import ai.onnxruntime.OrtSession;
import dev.ortserve.engine.rewrite.GraphRewriter;
import dev.ortserve.engine.rewrite.ImageEmbeddings;

import java.nio.ByteBuffer;
import java.nio.FloatBuffer;
import java.nio.LongBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Builds the ONNX inputs of a {@link ForwardPass} from the model's {@link DecoderSpec} and runs them:
 * on the served session, or through another {@link Executor} (the load probe runs an original
 * model one segment at a time).
 */
public final class OrtDecoderRunner implements DecoderRunner {

    /** What runs a pass's inputs: a session, or a model's segments one after another. */
    public interface Executor {
        /** The graph's input names. */
        Set<String> inputNames() throws OrtException;

        /**
         * Runs {@code in} for {@code outputs}; {@code pinned} outputs are written into the given tensors
         * (in-place KV: only a session takes them); {@code options} name the run's LoRA adapter (null: none).
         */
        Outputs run(Map<String, OnnxTensor> in, Set<String> outputs, Map<String, OnnxTensor> pinned, OrtSession.RunOptions options) throws OrtException;
    }

    /** A run's outputs, valid until closed. */
    public interface Outputs extends AutoCloseable {
        OnnxTensor get(String name);

        @Override
        void close();
    }

    /** A session as an {@link Executor}. */
    public static Executor of(OrtSession session) {
        return new Executor() {
            @Override
            public Set<String> inputNames() {
                return session.getInputNames();
            }

            @Override
            public Outputs run(Map<String, OnnxTensor> in, Set<String> outputs, Map<String, OnnxTensor> pinned, OrtSession.RunOptions options)
                    throws OrtException {
                OrtSession.Result result = options != null ? session.run(in, outputs, pinned, options)
                        : pinned.isEmpty() ? session.run(in, outputs) : session.run(in, outputs, pinned);
                return new Outputs() {
                    @Override
                    public OnnxTensor get(String name) {
                        return (OnnxTensor) result.get(name).orElseThrow(() -> new IllegalStateException("no output " + name));
                    }

                    @Override
                    public void close() {
                        result.close();
                    }
                };
            }
        };
    }

    private final DecoderSpec spec;
    private final OrtEnvironment env;
    private final Executor session;
    private final Set<String> outputs;
    private final Set<String> logitsOnly;
    /** The graph's head reads each row's last column from this input (right-padded graphs rewritten on load). */
    private final boolean lastColumnsInput;
    /** The graph takes image features for its image tokens (a vision-language model's embedding and decoder, composed on load). */
    private final boolean imageInputs;

    public OrtDecoderRunner(LoadedModel model) {
        this(model.spec(), model.environment(), model.session());
    }

    public OrtDecoderRunner(DecoderSpec spec, OrtEnvironment env, OrtSession session) {
        this(spec, env, of(session));
    }

    public OrtDecoderRunner(DecoderSpec spec, OrtEnvironment env, Executor session) {
        this.spec = spec;
        this.env = env;
        this.session = session;
        this.outputs = new LinkedHashSet<>(spec.outputNames());
        this.logitsOnly = Set.of(spec.logits());
        boolean last;
        boolean images;
        try {
            last = session.inputNames().contains(GraphRewriter.LAST_COLUMNS_INPUT);
            images = session.inputNames().contains(ImageEmbeddings.ROWS_INPUT);
        } catch (OrtException e) {
            throw new IllegalStateException("Cannot read the graph's inputs: " + e.getMessage(), e);
        }
        this.lastColumnsInput = last;
        this.imageInputs = images;
    }

    @Override
    public Forward run(ForwardPass pass) throws OrtException {
        int b = pass.batch(), n = pass.newLength(), total = pass.totalLength();
        Map<String, OnnxTensor> in = new HashMap<>();
        List<OnnxTensor> created = new ArrayList<>();
        List<ByteBuffer> inputs = new ArrayList<>(); // the inputs' direct buffers, freed with their tensors
        try {
            put(in, created, spec.inputIds(), OnnxTensor.createTensor(env, longs(pass.ids(), inputs), new long[] {b, n}));
            put(in, created, spec.attentionMask(), OnnxTensor.createTensor(env, longs(pass.mask(), inputs), new long[] {b, total}));
            if (spec.positionIds() != null) {
                put(in, created, spec.positionIds(), OnnxTensor.createTensor(env, longs(pass.positions(), inputs), new long[] {b, n}));
            }
            int m = pass.logitColumns();
            if (lastColumnsInput) {
                long[] last = new long[b * m];
                for (int r = 0; r < b; r++) {
                    for (int j = 0; j < m; j++) last[r * m + j] = pass.lastColumns()[r] - m + 1 + j;
                }
                put(in, created, GraphRewriter.LAST_COLUMNS_INPUT, OnnxTensor.createTensor(env, longs(last, inputs), new long[] {b, m, 1}));
            }
            if (imageInputs) {
                // features flat (the graph knows its hidden size): a pass without images feeds none
                ForwardPass.ImageRows images = pass.images();
                put(in, created, ImageEmbeddings.ROWS_INPUT, OnnxTensor.createTensor(env, longs(images.rows(), inputs), new long[] {images.rows().length, 1}));
                put(in, created, ImageEmbeddings.FEATURES_INPUT, OnnxTensor.createTensor(env, floats(images.features(), inputs),
                        new long[] {images.features().length}));
            }
            if (spec.useCacheBranch() != null) {
                put(in, created, spec.useCacheBranch(), OnnxTensor.createTensor(env, new boolean[] {pass.pastLength() > 0}));
            }
            for (int l = 0; l < spec.layers(); l++) {
                if (pass.pastKeys() == null) {
                    put(in, created, spec.pastKey(l), KvBlock.empty(env, spec, b));
                    put(in, created, spec.pastValue(l), KvBlock.empty(env, spec, b));
                } else {
                    in.put(spec.pastKey(l), pass.pastKeys()[l]);
                    in.put(spec.pastValue(l), pass.pastValues()[l]);
                }
            }
            OrtSession.RunOptions options = pass.adapter() == null ? null : pass.adapter().runOptions();
            if (!pass.inPlace()) return new OrtForward(session.run(in, outputs, Map.of(), options), pass, Map.of());
            // present = the past's own tensors: GroupQueryAttention sees one buffer (past_present_share_buffer) and
            // writes the new columns into it; the result does not own them
            Map<String, OnnxTensor> pinned = new HashMap<>();
            for (int l = 0; l < spec.layers(); l++) {
                pinned.put(spec.presentKey(l), pass.pastKeys()[l]);
                pinned.put(spec.presentValue(l), pass.pastValues()[l]);
            }
            return new OrtForward(session.run(in, logitsOnly, pinned, options), pass, pinned);
        } finally {
            for (OnnxTensor t : created) t.close();
            inputs.forEach(NativeBuffers::free);
        }
    }

    private static void put(Map<String, OnnxTensor> in, List<OnnxTensor> created, String name, OnnxTensor t) {
        in.put(name, t);
        created.add(t);
    }

    private static FloatBuffer floats(float[] values, List<ByteBuffer> allocated) {
        ByteBuffer bytes = NativeBuffers.allocate((long) values.length * Float.BYTES);
        allocated.add(bytes);
        FloatBuffer b = bytes.asFloatBuffer();
        b.put(values).flip();
        return b;
    }

    private static LongBuffer longs(long[] values, List<ByteBuffer> allocated) {
        ByteBuffer bytes = NativeBuffers.allocate((long) values.length * Long.BYTES);
        allocated.add(bytes);
        LongBuffer b = bytes.asLongBuffer();
        b.put(values).flip();
        return b;
    }

    private final class OrtForward implements Forward {
        private final Outputs result;
        private final ForwardPass pass;
        private final Map<String, OnnxTensor> pinned;
        private FloatBuffer logits;
        private int columns;
        private int vocab;

        OrtForward(Outputs result, ForwardPass pass, Map<String, OnnxTensor> pinned) {
            this.result = result;
            this.pass = pass;
            this.pinned = pinned;
        }

        /**
         * [rows, columns, vocab]: columns is the pass's new positions (the head ran on every one), or the pass's
         * logit columns (the head ran on those only: 1 when its last position is a constant).
         */
        private FloatBuffer logits() {
            if (logits == null) {
                OnnxTensor t = result.get(spec.logits());
                long[] shape = t.getInfo().getShape();
                vocab = (int) shape[shape.length - 1];
                columns = shape.length == 3 ? (int) shape[1] : 1;
                logits = NativeBuffers.floats(t); // read in place while the pass's outputs are open
            }
            return logits;
        }

        @Override
        public int vocabSize() {
            logits();
            return vocab;
        }

        @Override
        public void lastLogits(int row, float[] dst) {
            logits(row, pass.logitColumns() - 1, dst);
        }

        @Override
        public void logits(int row, int index, float[] dst) {
            FloatBuffer all = logits();
            int m = pass.logitColumns();
            int column;
            if (columns == pass.newLength()) {
                column = pass.lastColumns()[row] - m + 1 + index; // every column of the pass: the row's own (where its padding puts them)
            } else if (columns == m) {
                column = index; // the head ran on the asked columns only
            } else {
                throw new IllegalStateException("the graph's logits hold " + columns + " columns per row, not the " + m + " this pass reads");
            }
            all.get((row * columns + column) * vocab, dst, 0, vocab);
        }

        @Override
        public OnnxTensor presentKey(int layer) {
            OnnxTensor t = pinned.get(spec.presentKey(layer));
            return t != null ? t : result.get(spec.presentKey(layer));
        }

        @Override
        public OnnxTensor presentValue(int layer) {
            OnnxTensor t = pinned.get(spec.presentValue(layer));
            return t != null ? t : result.get(spec.presentValue(layer));
        }

        @Override
        public void close() {
            result.close();
        }
    }
}
