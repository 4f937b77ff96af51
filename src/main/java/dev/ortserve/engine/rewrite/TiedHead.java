package dev.ortserve.engine.rewrite;

import ai.onnx.proto.OnnxMl.NodeProto;
import ai.onnx.proto.OnnxMl.TensorProto;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

/**
 * A tied head served from the embedding's one copy. Exports of models whose head is the embedding
 * transposed (tie_word_embeddings: Qwen3, Gemma 3, Llama 3.2) either store that matrix a second
 * time (torch.onnx: an initializer [hidden, vocab] equal to the embedding [vocab, hidden]
 * transposed, 622 MB more at Qwen3-0.6B's size) or compute it with a Transpose of the embedding,
 * which onnxruntime folds into the same second copy while the session starts. Either way the head
 * becomes {@code com.microsoft.FusedMatMul(hidden, embedding, transB=1)} (onnxruntime's MatMul kernel with
 * a transposed B) and the embedding is listed among the graph's inputs as well, an overridable
 * initializer: onnxruntime then neither folds nor prepacks it, so the head reads the one mapped copy
 * the Gather reads (prepacked, it would be a second, anonymous copy beside the mapped one). At
 * Qwen3-0.6B's size the warm start peaks at 2.12 GB instead of 3.36 (0.88x the weights); decode is
 * the same at one stream and ~0.85-0.9x at four (the GEMM packs panels of the head as it goes).
 * Float32 heads only (a quantized head is a MatMulNBits of its own).
 */
final class TiedHead {

    static final String APPLIED = "tied head from the embedding";

    private TiedHead() {
    }

    /** @return the heads rewritten (0 or 1) */
    static int apply(Graph g) throws IOException {
        Set<String> embeddings = new HashSet<>();
        for (NodeProto n : g.graph.getNodeList()) {
            if (n.getOpType().equals("Gather") && n.getDomain().isEmpty()) {
                TensorProto t = g.initializer(n.getInput(0));
                if (t != null && t.getDataType() == TensorProto.DataType.FLOAT_VALUE && t.getDimsCount() == 2) embeddings.add(t.getName());
            }
        }
        if (embeddings.isEmpty()) return 0;
        for (int i = 0; i < g.graph.getNodeCount(); i++) {
            NodeProto n = g.graph.getNode(i);
            if (!n.getOpType().equals("MatMul") || !n.getDomain().isEmpty() || n.getInputCount() != 2) continue;
            String weight = n.getInput(1);
            String embedding = transposedEmbedding(g, weight, embeddings);
            if (embedding == null) continue;
            g.requireOpset("com.microsoft", 1);
            g.graph.setNode(i, NodeProto.newBuilder().setOpType("FusedMatMul").setDomain("com.microsoft").setName(n.getName())
                    .addInput(n.getInput(0)).addInput(embedding).addAllOutput(n.getOutputList())
                    .addAttribute(Graph.intAttribute("transB", 1)).build());
            overridable(g, g.initializer(embedding));
            int transpose = g.producerIndex(weight);
            if (transpose >= 0 && g.consumers(weight) == 0) g.graph.removeNode(transpose);
            g.removeInitializersIfUnread(Set.of(weight));
            return 1;
        }
        return 0;
    }

    /** Lists the tensor among the graph's inputs too (an overridable initializer): onnxruntime neither folds nor prepacks it. */
    static void overridable(Graph g, TensorProto t) {
        for (var in : g.graph.getInputList()) if (in.getName().equals(t.getName())) return;
        ai.onnx.proto.OnnxMl.TensorShapeProto.Builder shape = ai.onnx.proto.OnnxMl.TensorShapeProto.newBuilder();
        for (long d : t.getDimsList()) shape.addDim(ai.onnx.proto.OnnxMl.TensorShapeProto.Dimension.newBuilder().setDimValue(d));
        g.graph.addInput(ai.onnx.proto.OnnxMl.ValueInfoProto.newBuilder().setName(t.getName()).setType(ai.onnx.proto.OnnxMl.TypeProto.newBuilder()
                .setTensorType(ai.onnx.proto.OnnxMl.TypeProto.Tensor.newBuilder().setElemType(t.getDataType()).setShape(shape))));
    }

    /** The embedding that {@code weight} is the transpose of (a Transpose node of it, or a stored copy), else null. */
    private static String transposedEmbedding(Graph g, String weight, Set<String> embeddings) throws IOException {
        int p = g.producerIndex(weight);
        if (p >= 0) {
            NodeProto t = g.graph.getNode(p);
            boolean swap = t.getOpType().equals("Transpose") && t.getDomain().isEmpty() && t.getInputCount() == 1
                    && t.getAttributeList().stream().allMatch(a -> !a.getName().equals("perm") || a.getIntsList().equals(java.util.List.of(1L, 0L)));
            return swap && embeddings.contains(t.getInput(0)) ? t.getInput(0) : null;
        }
        TensorProto w = g.initializer(weight);
        if (w == null || w.getDataType() != TensorProto.DataType.FLOAT_VALUE || w.getDimsCount() != 2) return null;
        for (String name : embeddings) {
            TensorProto e = g.initializer(name);
            if (e.getDims(0) == w.getDims(1) && e.getDims(1) == w.getDims(0) && isTranspose(g, w, e, (int) e.getDims(0), (int) e.getDims(1))) {
                return name;
            }
        }
        return null;
    }

    /** Bytes of the embedding read per band when both tensors are in the source's data files (tests make it small). */
    static volatile int bandBytes = 4 << 20;

    /**
     * w [cols, rows] is e [rows, cols] transposed, value for value. Tensors in the source's data files are
     * compared a band of the embedding's rows at a time (a few MB read, never a whole tensor: read whole,
     * the head and the embedding were 1.24 GB of heap at Qwen3-0.6B's size, the peak of a quantized cold start
     * on transformers' exports); others (inline, computed) through their views.
     */
    static boolean isTranspose(Graph g, TensorProto w, TensorProto e, int rows, int cols) throws IOException {
        OnnxModelFile.External xw = OnnxModelFile.external(w), xe = OnnxModelFile.external(e);
        if (xw == null || xe == null || g.computed.containsKey(w.getName()) || g.computed.containsKey(e.getName())) {
            return isTranspose(g.floatView(w), g.floatView(e), rows, cols);
        }
        long bytes = 4L * rows * cols;
        if ((xw.length() >= 0 && xw.length() != bytes) || (xe.length() >= 0 && xe.length() != bytes)) return false;
        Path fw = OnnxModelFile.dataFile(w, xw.location(), g.sourceDir), fe = OnnxModelFile.dataFile(e, xe.location(), g.sourceDir);
        // a cold start compares the same pair twice (the load check's segments, then the rewrite): 2 x 622 MB read at Qwen3-0.6B's size
        Map<String, Boolean> memo = ONE_LOAD.get();
        String key = fw.toAbsolutePath() + "@" + xw.offset() + " ~ " + fe.toAbsolutePath() + "@" + xe.offset() + " " + rows + "x" + cols;
        Boolean known = memo == null ? null : memo.get(key);
        if (known != null) return known;
        boolean same = compareInBands(fw, fe, xw, xe, bytes, rows, cols);
        if (memo != null) memo.put(key, same);
        return same;
    }

    /** The comparisons made within the current model load on this thread ({@link GraphRewriter#oneLoad}), else none kept. */
    static final ThreadLocal<Map<String, Boolean>> ONE_LOAD = new ThreadLocal<>();

    private static boolean compareInBands(Path fw, Path fe, OnnxModelFile.External xw, OnnxModelFile.External xe, long bytes, int rows, int cols)
            throws IOException {
        int band = (int) Math.max(1, Math.min(rows, bandBytes / (4L * cols)));
        ByteBuffer eb = ByteBuffer.allocate(band * cols * 4).order(ByteOrder.LITTLE_ENDIAN);
        ByteBuffer wb = ByteBuffer.allocate(band * cols * 4).order(ByteOrder.LITTLE_ENDIAN);
        try (FileChannel ce = FileChannel.open(fe, StandardOpenOption.READ); FileChannel cw = FileChannel.open(fw, StandardOpenOption.READ)) {
            if (xe.offset() + bytes > ce.size() || xw.offset() + bytes > cw.size()) return false;
            for (int r0 = 0; r0 < rows; r0 += band) {
                int n = Math.min(band, rows - r0);
                // e's rows r0.. (contiguous); w's columns r0.. of each of its rows, laid out as w's band [cols, n]
                eb.clear().limit(n * cols * 4);
                readFully(ce, eb, xe.offset() + 4L * r0 * cols);
                wb.clear();
                for (int c = 0; c < cols; c++) {
                    wb.limit((c + 1) * n * 4);
                    readFully(cw, wb, xw.offset() + 4L * ((long) c * rows + r0));
                }
                if (!isTranspose(wb.flip().asFloatBuffer(), eb.flip().asFloatBuffer(), n, cols)) return false;
            }
        }
        return true;
    }

    /** Fills b from its position to its limit, in chunks of at most 1 MiB (a heap read goes through a cached direct buffer of its size). */
    private static void readFully(FileChannel ch, ByteBuffer b, long at) throws IOException {
        int end = b.limit();
        while (b.position() < end) {
            b.limit(Math.min(end, b.position() + (1 << 20)));
            int n = ch.read(b, at);
            if (n < 0) throw new IOException("unexpected end of a data file");
            at += n;
        }
        b.limit(end);
    }

    /** w [cols, rows] is e [rows, cols] transposed, value for value (compared in tiles: both stay sequential enough). */
    static boolean isTranspose(FloatBuffer w, FloatBuffer e, int rows, int cols) {
        if (w.capacity() != (long) rows * cols || e.capacity() != (long) rows * cols) return false;
        final int tile = 64;
        for (int r0 = 0; r0 < rows; r0 += tile) {
            for (int c0 = 0; c0 < cols; c0 += tile) {
                for (int r = r0; r < Math.min(rows, r0 + tile); r++) {
                    for (int c = c0; c < Math.min(cols, c0 + tile); c++) {
                        if (Float.floatToRawIntBits(e.get(r * cols + c)) != Float.floatToRawIntBits(w.get(c * rows + r))) return false;
                    }
                }
            }
        }
        return true;
    }
}
