package dev.ortserve.modelgen;

import ai.onnx.proto.OnnxMl;
import ai.onnx.proto.OnnxMl.AttributeProto;
import ai.onnx.proto.OnnxMl.GraphProto;
import ai.onnx.proto.OnnxMl.NodeProto;
import ai.onnx.proto.OnnxMl.TensorProto;
import ai.onnx.proto.OnnxMl.TensorShapeProto;
import ai.onnx.proto.OnnxMl.TypeProto;
import ai.onnx.proto.OnnxMl.ValueInfoProto;
import com.google.protobuf.ByteString;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.SplittableRandom;

/**
 * Builds a LLaMA-style decoder (RMSNorm, grouped-query attention with rotary positions, KV
 * cache, SwiGLU) as an ONNX graph with exactly the Hugging Face Optimum decoder-with-past
 * interface, from standard opset-17 operators. Weights are seeded normal(0, 0.02).
 *
 * Attention keeps the grouped-query layout instead of repeating K/V: queries are reshaped to
 * [batch, kv_heads, group, seq, head_dim] and MatMul broadcasts keys and values over the group.
 * Masks use a finite large negative, so left-padded rows never turn into NaN.
 */
final class LlamaOnnxWriter {

    private static final float NEG = -1.0e9f;
    private static final float RMS_EPS = 1e-6f;
    static final double ROPE_THETA = 10000.0;

    private final ModelSize size;
    private final SplittableRandom random;
    /** Attention as one com.microsoft GroupQueryAttention per layer (rotary inside it, no position_ids input). */
    private final boolean groupQueryAttention;
    /** Every weight an int4 rewrite quantizes drawn onto the int4 grid (see {@link Int4Grid}). */
    private final boolean int4Grid;
    private final GraphProto.Builder graph = GraphProto.newBuilder().setName("ortserve-llama");
    private int counter;
    /** Where weights go when written as external data (null: inside the model file). */
    private DataFile external;
    private String externalName;

    LlamaOnnxWriter(ModelSize size, long seed) {
        this(size, seed, false);
    }

    /**
     * @param groupQueryAttention write each layer's attention as onnxruntime's GroupQueryAttention, as the
     *                            genai model builder does (same weights, drawn in the same order, so the same
     *                            function): the engine serves such a graph right-padded
     */
    LlamaOnnxWriter(ModelSize size, long seed, boolean groupQueryAttention) {
        this(size, seed, groupQueryAttention, false);
    }

    /** @param int4Grid snap the MatMul weights and the embedding onto the int4 grid as drawn ({@link Int4Grid}) */
    LlamaOnnxWriter(ModelSize size, long seed, boolean groupQueryAttention, boolean int4Grid) {
        this.size = size;
        this.random = new SplittableRandom(seed);
        this.groupQueryAttention = groupQueryAttention;
        this.int4Grid = int4Grid;
    }

    /**
     * Builds the model with every weight written to {@code data} (named {@code dataName} beside the
     * model file) as it is drawn: models over protobuf's 2 GB limit are stored this way, and the
     * weights are never all in memory at once.
     */
    OnnxMl.ModelProto build(java.io.OutputStream data, String dataName) throws java.io.IOException {
        this.external = new DataFile(data);
        this.externalName = dataName;
        try {
            return build();
        } catch (java.io.UncheckedIOException e) {
            throw e.getCause();
        } finally {
            external.flush();
        }
    }

    OnnxMl.ModelProto build() {
        int h = size.hiddenSize, d = size.headDim(), kv = size.kvHeads, group = size.heads / size.kvHeads;
        graph.addInput(input("input_ids", TensorProto.DataType.INT64_VALUE, "batch_size", "sequence_length"));
        graph.addInput(input("attention_mask", TensorProto.DataType.INT64_VALUE, "batch_size", "total_sequence_length"));
        if (!groupQueryAttention) graph.addInput(input("position_ids", TensorProto.DataType.INT64_VALUE, "batch_size", "sequence_length"));
        for (int l = 0; l < size.layers; l++) {
            graph.addInput(input("past_key_values." + l + ".key", TensorProto.DataType.FLOAT_VALUE, "batch_size", String.valueOf(kv), "past_sequence_length", String.valueOf(d)));
            graph.addInput(input("past_key_values." + l + ".value", TensorProto.DataType.FLOAT_VALUE, "batch_size", String.valueOf(kv), "past_sequence_length", String.valueOf(d)));
        }
        graph.addOutput(input("logits", TensorProto.DataType.FLOAT_VALUE, "batch_size", "sequence_length", String.valueOf(size.vocabSize)));
        for (int l = 0; l < size.layers; l++) {
            graph.addOutput(input("present." + l + ".key", TensorProto.DataType.FLOAT_VALUE, "batch_size", String.valueOf(kv), "total_sequence_length", String.valueOf(d)));
            graph.addOutput(input("present." + l + ".value", TensorProto.DataType.FLOAT_VALUE, "batch_size", String.valueOf(kv), "total_sequence_length", String.valueOf(d)));
        }

        if (groupQueryAttention) return buildGroupQueryAttention();

        // constants
        String zeroF = constF("zero_f", 0f), negF = constF("neg_f", NEG), oneF = constF("one_f", 1f);
        String epsF = constF("eps_f", RMS_EPS), scaleF = constF("scale_f", (float) (1.0 / Math.sqrt(d)));
        String zeroI = constI("zero_i", 0L), oneI = constI("one_i", 1L);
        String qShape = constIs("q_shape", 0, 0, kv, group, d), kvShape = constIs("kv_shape", 0, 0, kv, d);
        String outShape = constIs("out_shape", 0, 0, (long) size.heads * d);

        // positions and masks
        String s = node("Gather", "seq_len", a -> a.addAttribute(attr("axis", 0)), node("Shape", "ids_shape", null, "input_ids"), oneI);
        String t = node("Gather", "total_len", a -> a.addAttribute(attr("axis", 0)), node("Shape", "mask_shape", null, "attention_mask"), oneI);
        String p = node("Sub", "past_len", null, t, s);
        String keyIdx = node("Range", "key_idx", null, zeroI, t, oneI);
        String qIdx = node("Unsqueeze", "q_idx_col", null, node("Range", "q_idx", null, p, t, oneI), constIs("ax1", 1));
        String causal = node("Where", "causal_bias", null, node("LessOrEqual", "causal_ok", null, keyIdx, qIdx), zeroF, negF);
        String causal5 = node("Unsqueeze", "causal5", null, causal, constIs("ax012", 0, 1, 2));
        String maskF = node("Cast", "mask_f", a -> a.addAttribute(attr("to", TensorProto.DataType.FLOAT_VALUE)), "attention_mask");
        String padBias = node("Mul", "pad_bias", null, node("Sub", "mask_inv", null, oneF, maskF), negF);
        String pad5 = node("Unsqueeze", "pad5", null, padBias, constIs("ax123", 1, 2, 3));
        String bias = node("Add", "attn_bias", null, pad5, causal5);

        float[][] rope = ropeTables(d, size.maxPositions);
        String cosTable = init("rope_cos", rope[0], size.maxPositions, d);
        String sinTable = init("rope_sin", rope[1], size.maxPositions, d);
        String cos = node("Gather", "cos", null, cosTable, "position_ids");
        String sin = node("Gather", "sin", null, sinTable, "position_ids");
        String cos4 = node("Unsqueeze", "cos4", null, cos, constIs("ax1b", 1));
        String sin4 = node("Unsqueeze", "sin4", null, sin, constIs("ax1c", 1));
        String cos5 = node("Unsqueeze", "cos5", null, cos, constIs("ax12", 1, 2));
        String sin5 = node("Unsqueeze", "sin5", null, sin, constIs("ax12b", 1, 2));

        String x = node("Gather", "embed", null, embedding(h), "input_ids");
        for (int l = 0; l < size.layers; l++) {
            String pre = "l" + l + ".";
            String hIn = rmsNorm(pre + "in_norm", x, epsF, h);
            String q = node("Reshape", pre + "q5", null, matmul(pre + "q", hIn, h, size.heads * d), qShape);
            q = node("Transpose", pre + "q5t", a -> a.addAttribute(ints("perm", 0, 2, 3, 1, 4)), q);
            String k = node("Reshape", pre + "k4", null, matmul(pre + "k", hIn, h, kv * d), kvShape);
            k = node("Transpose", pre + "k4t", a -> a.addAttribute(ints("perm", 0, 2, 1, 3)), k);
            String v = node("Reshape", pre + "v4", null, matmul(pre + "v", hIn, h, kv * d), kvShape);
            v = node("Transpose", pre + "v4t", a -> a.addAttribute(ints("perm", 0, 2, 1, 3)), v);
            q = rotary(pre + "q_rope", q, cos5, sin5);
            k = rotary(pre + "k_rope", k, cos4, sin4);
            node("Concat", "present." + l + ".key", a -> a.addAttribute(attr("axis", 2)), "past_key_values." + l + ".key", k);
            node("Concat", "present." + l + ".value", a -> a.addAttribute(attr("axis", 2)), "past_key_values." + l + ".value", v);
            String k5 = node("Unsqueeze", pre + "k5", null, "present." + l + ".key", constIs(pre + "ax2", 2));
            String v5 = node("Unsqueeze", pre + "v5", null, "present." + l + ".value", constIs(pre + "ax2v", 2));
            String kT = node("Transpose", pre + "kT", a -> a.addAttribute(ints("perm", 0, 1, 2, 4, 3)), k5);
            String scores = node("Add", pre + "scores", null, node("Mul", pre + "scaled", null, node("MatMul", pre + "qk", null, q, kT), scaleF), bias);
            String probs = node("Softmax", pre + "probs", a -> a.addAttribute(attr("axis", -1)), scores);
            String ctx = node("MatMul", pre + "ctx", null, probs, v5);
            ctx = node("Transpose", pre + "ctx_t", a -> a.addAttribute(ints("perm", 0, 3, 1, 2, 4)), ctx);
            ctx = node("Reshape", pre + "ctx_flat", null, ctx, outShape);
            x = node("Add", pre + "attn_res", null, x, matmul(pre + "o", ctx, size.heads * d, h));
            x = mlp(pre, x, epsF, h);
        }
        return finish(x, epsF, h, false);
    }

    /** The same decoder with GroupQueryAttention (seqlens from the mask, rotary from cos/sin caches inside the op). */
    private OnnxMl.ModelProto buildGroupQueryAttention() {
        int h = size.hiddenSize, d = size.headDim(), kv = size.kvHeads;
        String epsF = constF("eps_f", RMS_EPS);
        String oneI = constI("one_i", 1L);
        String sum = node("ReduceSum", "mask_sum", a -> a.addAttribute(attr("keepdims", 0)), "attention_mask", constIs("ax1_sum", 1));
        String seqlens = node("Cast", "seqlens_k", a -> a.addAttribute(attr("to", TensorProto.DataType.INT32_VALUE)),
                node("Sub", "mask_sum_minus_one", null, sum, oneI));
        String total = node("Cast", "total_sequence_length", a -> a.addAttribute(attr("to", TensorProto.DataType.INT32_VALUE)),
                node("Gather", "total_len", a -> a.addAttribute(attr("axis", 0)), node("Shape", "mask_shape", null, "attention_mask"), oneI));
        float[][] rope = ropeTables(d, size.maxPositions);
        float[] cosHalf = new float[size.maxPositions * d / 2], sinHalf = new float[size.maxPositions * d / 2];
        for (int pos = 0; pos < size.maxPositions; pos++) {
            System.arraycopy(rope[0], pos * d, cosHalf, pos * d / 2, d / 2);
            System.arraycopy(rope[1], pos * d, sinHalf, pos * d / 2, d / 2);
        }
        String cosCache = init("cos_cache", cosHalf, size.maxPositions, d / 2);
        String sinCache = init("sin_cache", sinHalf, size.maxPositions, d / 2);

        String x = node("Gather", "embed", null, embedding(h), "input_ids");
        for (int l = 0; l < size.layers; l++) {
            String pre = "l" + l + ".";
            String hIn = rmsNorm(pre + "in_norm", x, epsF, h);
            String q = matmul(pre + "q", hIn, h, size.heads * d);
            String k = matmul(pre + "k", hIn, h, kv * d);
            String v = matmul(pre + "v", hIn, h, kv * d);
            NodeProto.Builder gqa = NodeProto.newBuilder().setOpType("GroupQueryAttention").setDomain("com.microsoft").setName(pre + "gqa")
                    .addInput(q).addInput(k).addInput(v).addInput("past_key_values." + l + ".key").addInput("past_key_values." + l + ".value")
                    .addInput(seqlens).addInput(total).addInput(cosCache).addInput(sinCache)
                    .addOutput(pre + "attn").addOutput("present." + l + ".key").addOutput("present." + l + ".value")
                    .addAttribute(attr("num_heads", size.heads)).addAttribute(attr("kv_num_heads", kv))
                    .addAttribute(attr("do_rotary", 1)).addAttribute(attr("rotary_interleaved", 0));
            graph.addNode(gqa);
            x = node("Add", pre + "attn_res", null, x, matmul(pre + "o", pre + "attn", size.heads * d, h));
            x = mlp(pre, x, epsF, h);
        }
        return finish(x, epsF, h, true);
    }

    /** A layer's SwiGLU MLP with its norm and residual. */
    private String mlp(String pre, String x, String epsF, int h) {
        String h2 = rmsNorm(pre + "post_norm", x, epsF, h);
        String gate = matmul(pre + "gate", h2, h, size.intermediateSize);
        String up = matmul(pre + "up", h2, h, size.intermediateSize);
        String act = node("Mul", pre + "swiglu", null, node("Mul", pre + "silu", null, gate, node("Sigmoid", pre + "sig", null, gate)), up);
        return node("Add", pre + "mlp_res", null, x, matmul(pre + "down", act, size.intermediateSize, h));
    }

    /** The final norm, the head (drawn last), and the model. */
    private OnnxMl.ModelProto finish(String x, String epsF, int h, boolean contribOps) {
        String last = rmsNorm("final_norm", x, epsF, h);
        float endBias = size.endOfTurnBias();
        graph.addNode(NodeProto.newBuilder().setOpType("MatMul").setName("lm_head").addInput(last)
                .addInput(size.tiedEmbeddings ? node("Transpose", "embed_tokens_t", a -> a.addAttribute(ints("perm", 1, 0)), "embed_tokens")
                        : initNormal("lm_head.weight", 0.02f, int4Grid ? size.vocabSize : 0, h, size.vocabSize)).addOutput(endBias == 0 ? "logits" : "lm_head_logits"));
        if (endBias != 0) {
            // a logit bias on <|im_end|> after the head (an Add the last-position rewrite passes through)
            float[] bias = new float[size.vocabSize];
            bias[ByteLevelBpeTokenizer.IM_END] = endBias;
            graph.addNode(NodeProto.newBuilder().setOpType("Add").setName("end_of_turn_bias").addInput("lm_head_logits")
                    .addInput(init("end_of_turn_bias", bias, size.vocabSize)).addOutput("logits"));
        }
        OnnxMl.ModelProto.Builder model = OnnxMl.ModelProto.newBuilder()
                .setIrVersion(8)
                .setProducerName("ortserve-modelgen")
                .addOpsetImport(OnnxMl.OperatorSetIdProto.newBuilder().setDomain("").setVersion(17));
        if (contribOps) model.addOpsetImport(OnnxMl.OperatorSetIdProto.newBuilder().setDomain("com.microsoft").setVersion(1));
        return model.setGraph(graph).build();
    }

    private String rmsNorm(String name, String x, String eps, int h) {
        String sq = node("Mul", name + ".sq", null, x, x);
        String mean = node("ReduceMean", name + ".mean", a -> a.addAttribute(ints("axes", -1)).addAttribute(attr("keepdims", 1)), sq);
        String inv = node("Reciprocal", name + ".inv", null, node("Sqrt", name + ".rms", null, node("Add", name + ".eps", null, mean, eps)));
        float[] ones = new float[h];
        java.util.Arrays.fill(ones, 1f);
        return node("Mul", name + ".out", null, node("Mul", name + ".normed", null, x, inv), init(name + ".weight", ones, h));
    }

    private String rotary(String name, String x, String cos, String sin) {
        NodeProto.Builder split = NodeProto.newBuilder().setOpType("Split").setName(name + ".split").addInput(x)
                .addOutput(name + ".x1").addOutput(name + ".x2").addAttribute(attr("axis", -1));
        graph.addNode(split);
        String rotated = node("Concat", name + ".rot", a -> a.addAttribute(attr("axis", -1)),
                node("Neg", name + ".neg", null, name + ".x2"), name + ".x1");
        return node("Add", name + ".out", null, node("Mul", name + ".c", null, x, cos), node("Mul", name + ".s", null, rotated, sin));
    }

    private String matmul(String name, String x, int in, int out) {
        return node("MatMul", name + ".proj", null, x, initNormal(name + ".weight", 0.02f, int4Grid ? out : 0, in, out));
    }

    /**
     * The token embedding [vocab, hidden]; the int4 rewrite quantizes it by rows (GatherBlockQuantized), as a tied
     * head reads it transposed: its blocks run along each row.
     */
    private String embedding(int h) {
        if (int4Grid && h % Int4Grid.BLOCK != 0) throw new IllegalArgumentException("hidden " + h + " is not whole int4 blocks");
        return initNormal("embed_tokens", 0.02f, int4Grid ? 1 : 0, size.vocabSize, h);
    }

    static float[][] ropeTables(int d, int maxPositions) {
        float[] cos = new float[maxPositions * d], sin = new float[maxPositions * d];
        int half = d / 2;
        for (int pos = 0; pos < maxPositions; pos++) {
            for (int i = 0; i < half; i++) {
                double invFreq = 1.0 / Math.pow(ROPE_THETA, (2.0 * i) / d);
                double angle = pos * invFreq;
                float c = (float) Math.cos(angle), s = (float) Math.sin(angle);
                cos[pos * d + i] = c;
                cos[pos * d + half + i] = c;
                sin[pos * d + i] = s;
                sin[pos * d + half + i] = s;
            }
        }
        return new float[][] {cos, sin};
    }

    private float[] normal(int n, float std) {
        float[] out = new float[n];
        for (int i = 0; i < n; i += 2) {
            // Box-Muller on the seeded generator: deterministic for a given seed
            double u1 = Math.max(random.nextDouble(), 1e-12), u2 = random.nextDouble();
            double r = Math.sqrt(-2 * Math.log(u1));
            out[i] = (float) (r * Math.cos(2 * Math.PI * u2) * std);
            if (i + 1 < n) out[i + 1] = (float) (r * Math.sin(2 * Math.PI * u2) * std);
        }
        return out;
    }

    private String init(String name, float[] values, long... dims) {
        ByteBuffer bytes = ByteBuffer.allocate(values.length * 4).order(ByteOrder.LITTLE_ENDIAN);
        bytes.asFloatBuffer().put(values);
        return tensor(name, dims, out -> out.write(bytes.array()));
    }

    /** A normal(0, std) weight, drawn and written in chunks (same values as one draw: chunks are even). */
    private String initNormal(String name, float std, long... dims) {
        return initNormal(name, std, 0, dims);
    }

    /**
     * @param gridStride 0: as drawn; else each block of {@link Int4Grid#BLOCK} values {@code gridStride} apart
     *                   is snapped onto the int4 grid (chunks are then whole blocks: the same draws, snapped)
     */
    private String initNormal(String name, float std, int gridStride, long... dims) {
        long n = 1;
        for (long dim : dims) n *= dim;
        long total = n;
        int span = Int4Grid.BLOCK * Math.max(1, gridStride);
        int chunkLength = gridStride == 0 ? CHUNK : Math.max(1, CHUNK / span) * span;
        return tensor(name, dims, out -> {
            ByteBuffer chunk = ByteBuffer.allocate(4 * chunkLength).order(ByteOrder.LITTLE_ENDIAN);
            for (long done = 0; done < total; done += chunkLength) {
                float[] values = normal((int) Math.min(chunkLength, total - done), std);
                if (gridStride > 0) Int4Grid.snap(values, gridStride);
                chunk.clear();
                chunk.asFloatBuffer().put(values);
                out.write(chunk.array(), 0, 4 * values.length);
            }
        });
    }

    private static final int CHUNK = 1 << 20; // even: Box-Muller pairs never straddle two chunks

    private interface Bytes {
        void writeTo(java.io.OutputStream out) throws java.io.IOException;
    }

    /**
     * A float32 initializer: inline, or (with an external data sink) written straight to the data
     * file at a page-aligned offset, so no more than one chunk of weights is ever held in memory.
     */
    private String tensor(String name, long[] dims, Bytes bytes) {
        TensorProto.Builder t = TensorProto.newBuilder().setName(name).setDataType(TensorProto.DataType.FLOAT_VALUE);
        for (long dim : dims) t.addDims(dim);
        try {
            if (external == null) {
                ByteString.Output out = ByteString.newOutput();
                bytes.writeTo(out);
                t.setRawData(out.toByteString());
            } else {
                external.align(4096);
                long offset = external.written;
                bytes.writeTo(external);
                t.setDataLocation(TensorProto.DataLocation.EXTERNAL)
                        .addExternalData(entry("location", externalName))
                        .addExternalData(entry("offset", Long.toString(offset)))
                        .addExternalData(entry("length", Long.toString(external.written - offset)));
            }
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
        graph.addInitializer(t);
        return name;
    }

    private static OnnxMl.StringStringEntryProto entry(String key, String value) {
        return OnnxMl.StringStringEntryProto.newBuilder().setKey(key).setValue(value).build();
    }

    /** The external data file being written, counting its bytes. */
    static final class DataFile extends java.io.FilterOutputStream {
        long written;

        DataFile(java.io.OutputStream out) {
            super(new java.io.BufferedOutputStream(out, 1 << 20));
        }

        @Override
        public void write(int b) throws java.io.IOException {
            out.write(b);
            written++;
        }

        @Override
        public void write(byte[] b, int off, int len) throws java.io.IOException {
            out.write(b, off, len);
            written += len;
        }

        void align(int to) throws java.io.IOException {
            int pad = (int) ((to - written % to) % to);
            if (pad > 0) write(new byte[pad], 0, pad);
        }
    }

    private String constF(String name, float value) {
        graph.addInitializer(TensorProto.newBuilder().setName(name).setDataType(TensorProto.DataType.FLOAT_VALUE).addFloatData(value));
        return name;
    }

    private String constI(String name, long value) {
        graph.addInitializer(TensorProto.newBuilder().setName(name).setDataType(TensorProto.DataType.INT64_VALUE).addInt64Data(value));
        return name;
    }

    private String constIs(String name, long... values) {
        TensorProto.Builder t = TensorProto.newBuilder().setName(name).setDataType(TensorProto.DataType.INT64_VALUE).addDims(values.length);
        for (long v : values) t.addInt64Data(v);
        graph.addInitializer(t);
        return name;
    }

    private String node(String op, String output, java.util.function.Consumer<NodeProto.Builder> attrs, String... inputs) {
        NodeProto.Builder n = NodeProto.newBuilder().setOpType(op).setName(output + "#" + (counter++)).addOutput(output);
        for (String in : inputs) n.addInput(in);
        if (attrs != null) attrs.accept(n);
        graph.addNode(n);
        return output;
    }

    private static AttributeProto attr(String name, long value) {
        return AttributeProto.newBuilder().setName(name).setType(AttributeProto.AttributeType.INT).setI(value).build();
    }

    private static AttributeProto ints(String name, long... values) {
        AttributeProto.Builder a = AttributeProto.newBuilder().setName(name).setType(AttributeProto.AttributeType.INTS);
        for (long v : values) a.addInts(v);
        return a.build();
    }

    private static ValueInfoProto input(String name, int elemType, String... dims) {
        TensorShapeProto.Builder shape = TensorShapeProto.newBuilder();
        for (String dim : dims) {
            TensorShapeProto.Dimension.Builder b = TensorShapeProto.Dimension.newBuilder();
            if (dim.chars().allMatch(Character::isDigit)) b.setDimValue(Long.parseLong(dim));
            else b.setDimParam(dim);
            shape.addDim(b);
        }
        return ValueInfoProto.newBuilder().setName(name)
                .setType(TypeProto.newBuilder().setTensorType(TypeProto.Tensor.newBuilder().setElemType(elemType).setShape(shape)))
                .build();
    }
}
