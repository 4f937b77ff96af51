package dev.ortserve.engine.rewrite;

import ai.onnx.proto.OnnxMl.AttributeProto;
import ai.onnx.proto.OnnxMl.GraphProto;
import ai.onnx.proto.OnnxMl.ModelProto;
import ai.onnx.proto.OnnxMl.NodeProto;
import ai.onnx.proto.OnnxMl.TensorProto;
import ai.onnx.proto.OnnxMl.TypeProto;
import ai.onnx.proto.OnnxMl.ValueInfoProto;
import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtException;
import ai.onnxruntime.OrtSession;
import com.google.protobuf.ByteString;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.LongBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Rotary position subgraphs in the rotate_half form of transformers and of the generated models,
 * {@code x * cos + concat(-x2, x1) * sin} with x1, x2 the halves of x's last axis (Split, or two
 * Slices), become one com.microsoft RotaryEmbedding (non-interleaved) with cos/sin caches of
 * [positions, head_size / 2] as initializers, as onnxruntime-genai's builder writes them. The
 * cos/sin operands are recognised in two spellings:
 * <ul>
 * <li>rows of a [positions, head_size] table gathered by position_ids (whose two halves must be
 *     equal), unsqueezed to broadcast over the heads: the table's first half is the cache;</li>
 * <li>{@code Cos}/{@code Sin} of {@code concat(f, f)} with {@code f} computed from position_ids
 *     (transformers: {@code position * inv_freq}, optionally times attention scaling): {@code f} is
 *     evaluated by onnxruntime on the subgraph that computes it at positions 1 and the last one;
 *     it must be exactly linear in the position, and the cache is {@code cos((float) p * f(1))}
 *     for every position up to the model's context.</li>
 * </ul>
 * x must be [batch, heads, sequence, head_size] (used as is) or [batch, kv heads, group, sequence,
 * head_size] (reshaped to four axes around the op). The caller checks the result against the
 * original graph before serving it.
 */
final class RotaryFusion {

    /** Closure of the position subgraph evaluated by onnxruntime: larger ones are not evaluated. */
    private static final long MAX_EVALUATED_BYTES = 256L << 20;

    private RotaryFusion() {
    }

    /** How many were fused, or why none was. */
    record Outcome(int fused, String reason) {
    }

    private record Source(String table, String freq, float scale, int rank) {
    }

    private record Site(NodeProto add, String x, Source cos, Source sin) {
    }

    static Outcome apply(Graph g, String positionIds, int positions) throws IOException {
        if (positionIds == null || g.graph.getInputList().stream().noneMatch(i -> i.getName().equals(positionIds))) {
            return new Outcome(0, "the graph has no position_ids input");
        }
        Map<String, NodeProto> producers = new HashMap<>();
        for (NodeProto n : g.graph.getNodeList()) for (String o : n.getOutputList()) producers.put(o, n);
        List<Site> sites = new ArrayList<>();
        for (NodeProto n : g.graph.getNodeList()) {
            if (n.getOpType().equals("Add") && n.getInputCount() == 2 && n.getDomain().isEmpty()) {
                Site s = match(g, producers, n, positionIds);
                if (s != null) sites.add(s);
            }
        }
        if (sites.isEmpty()) return new Outcome(0, "no rotate_half subgraph of the known shapes");

        // the caches, one pair per distinct source
        Map<String, float[]> freqs = new HashMap<>();
        List<String> wanted = sites.stream().flatMap(s -> java.util.stream.Stream.of(s.cos(), s.sin())).filter(src -> src.freq() != null)
                .map(Source::freq).distinct().toList();
        if (!wanted.isEmpty()) {
            if (positions <= 1) return new Outcome(0, "the model's context length is unknown (needed for the cos/sin caches)");
            String why = evaluateFrequencies(g, producers, wanted, positionIds, positions, freqs);
            if (why != null) return new Outcome(0, why);
        }
        Map<String, String[]> caches = new HashMap<>();
        int fused = 0;
        for (Site s : sites) {
            String key = s.cos().table() != null ? "t:" + s.cos().table() + ":" + s.sin().table() + ":" + s.cos().scale() + ":" + s.sin().scale()
                    : "f:" + Arrays.toString(freqs.get(s.cos().freq())) + ":" + s.cos().scale() + ":" + s.sin().scale();
            String[] cache = caches.get(key);
            if (cache == null) {
                float[][] cs = s.cos().table() != null ? fromTables(g, s) : fromFrequencies(freqs.get(s.cos().freq()), s, positions);
                if (cs == null) continue;
                int half = (int) cs[2][0];
                String cosName = g.unique("rotary_cos_cache"), sinName = g.unique("rotary_sin_cache");
                g.graph.addInitializer(floatTensor(cosName, cs[0], cs[0].length / half, half));
                g.graph.addInitializer(floatTensor(sinName, cs[1], cs[1].length / half, half));
                cache = new String[] {cosName, sinName};
                caches.put(key, cache);
            }
            replace(g, s, positionIds, cache);
            fused++;
        }
        if (fused == 0) return new Outcome(0, "cos/sin tables are not of the rotate_half form (halves differ)");
        g.requireOpset("com.microsoft", 1);
        removeDeadNodes(g);
        return new Outcome(fused, null);
    }

    // ---- matching

    private static Site match(Graph g, Map<String, NodeProto> p, NodeProto add, String positionIds) throws IOException {
        for (int a = 0; a < 2; a++) {
            NodeProto m1 = op(p, add.getInput(a), "Mul"), m2 = op(p, add.getInput(1 - a), "Mul");
            if (m1 == null || m2 == null) continue;
            for (int i = 0; i < 2; i++) {
                for (int j = 0; j < 2; j++) {
                    String x = m1.getInput(i);
                    NodeProto rot = op(p, m2.getInput(j), "Concat");
                    if (rot == null || rot.getInputCount() != 2) continue;
                    NodeProto neg = op(p, rot.getInput(0), "Neg");
                    if (neg == null) continue;
                    List<String> halves = halves(g, p, x, rot.getInput(1), neg.getInput(0));
                    if (halves == null) continue;
                    Source cos = trace(g, p, m1.getInput(1 - i), "Cos", positionIds);
                    Source sin = trace(g, p, m2.getInput(1 - j), "Sin", positionIds);
                    if (cos == null || sin == null || cos.rank() != sin.rank()) continue;
                    if ((cos.table() == null) != (sin.table() == null)) continue;
                    int rank = cos.rank();
                    if (!lastAxis(Graph.intAttribute(rot, "axis", Long.MIN_VALUE), rank)) continue;
                    if (!halvesOnLastAxis(g, p, halves, rank)) continue;
                    return new Site(add, x, cos, sin); // the replaced nodes go with the dead-node pass
                }
            }
        }
        return null;
    }

    /** The producers of x1, x2 when they are the two halves of x: one Split in two, or two Slices meeting at the same point. */
    private static List<String> halves(Graph g, Map<String, NodeProto> p, String x, String x1, String x2) throws IOException {
        NodeProto s1 = p.get(x1), s2 = p.get(x2);
        if (s1 == null || s2 == null) return null;
        if (s1 == s2 && s1.getOpType().equals("Split") && s1.getInput(0).equals(x) && s1.getOutputCount() == 2
                && s1.getOutput(0).equals(x1) && s1.getOutput(1).equals(x2)) {
            if (s1.getInputCount() > 1 && !s1.getInput(1).isEmpty()) {
                long[] sizes = longs(g, p, s1.getInput(1));
                if (sizes == null || sizes.length != 2 || sizes[0] != sizes[1]) return null;
            }
            for (AttributeProto at : s1.getAttributeList()) {
                if (at.getName().equals("split") && (at.getIntsCount() != 2 || at.getInts(0) != at.getInts(1))) return null;
            }
            return List.of(s1.getName());
        }
        if (s1.getOpType().equals("Slice") && s2.getOpType().equals("Slice") && s1.getInput(0).equals(x) && s2.getInput(0).equals(x)
                && s1.getInputCount() >= 4 && s2.getInputCount() >= 4) {
            long[] start1 = longs(g, p, s1.getInput(1)), end2 = longs(g, p, s2.getInput(2));
            if (start1 == null || start1.length != 1 || start1[0] != 0) return null;
            if (end2 == null || end2.length != 1 || end2[0] < Integer.MAX_VALUE) return null;
            if (!sameValue(g, p, s1.getInput(2), s2.getInput(1), 6)) return null;
            for (NodeProto s : List.of(s1, s2)) {
                if (s.getInputCount() > 4) {
                    long[] steps = longs(g, p, s.getInput(4));
                    if (steps == null || steps.length != 1 || steps[0] != 1) return null;
                }
            }
            return List.of(s1.getName(), s2.getName());
        }
        return null;
    }

    private static boolean halvesOnLastAxis(Graph g, Map<String, NodeProto> p, List<String> halves, int rank) throws IOException {
        for (NodeProto n : g.graph.getNodeList()) {
            if (!halves.contains(n.getName())) continue;
            if (n.getOpType().equals("Split")) {
                if (!lastAxis(Graph.intAttribute(n, "axis", 0), rank)) return false;
            } else {
                long[] axes = longs(g, p, n.getInput(3));
                if (axes == null || axes.length != 1 || !lastAxis(axes[0], rank)) return false;
            }
        }
        return true;
    }

    private static boolean lastAxis(long axis, int rank) {
        return axis == -1 || axis == rank - 1;
    }

    /**
     * Where a cos or sin operand comes from: Unsqueezes, Identity, Casts to float, a scalar Mul, then {@code fn} of
     * concat(f, f), or (with no fn) a table gathered by position_ids. The operand must be
     * [batch, 1 (x k), sequence, head_size]: its rank is returned with the source.
     */
    private static Source trace(Graph g, Map<String, NodeProto> p, String name, String fn, String positionIds) throws IOException {
        List<long[]> unsqueezes = new ArrayList<>();
        float scale = 1f;
        boolean sawFn = false;
        for (int depth = 0; depth < 12; depth++) {
            NodeProto n = p.get(name);
            if (n == null || !n.getDomain().isEmpty()) return null;
            switch (n.getOpType()) {
                case "Unsqueeze" -> {
                    long[] axes = null;
                    for (AttributeProto at : n.getAttributeList()) {
                        if (at.getName().equals("axes")) axes = at.getIntsList().stream().mapToLong(Long::longValue).toArray();
                    }
                    if (axes == null && n.getInputCount() > 1) axes = longs(g, p, n.getInput(1));
                    if (axes == null) return null;
                    unsqueezes.add(0, axes);
                    name = n.getInput(0);
                }
                case "Identity" -> name = n.getInput(0);
                // transformers casts cos/sin back to the query's dtype: on a float32 graph a float-to-float
                // no-op (the Mul it feeds takes float only, so its source is float too)
                case "Cast" -> {
                    if (Graph.intAttribute(n, "to", -1) != TensorProto.DataType.FLOAT_VALUE) return null;
                    name = n.getInput(0);
                }
                case "Mul" -> {
                    Float c0 = scalar(g, p, n.getInput(0)), c1 = scalar(g, p, n.getInput(1));
                    if ((c0 == null) == (c1 == null)) return null;
                    scale *= c0 != null ? c0 : c1;
                    name = c0 != null ? n.getInput(1) : n.getInput(0);
                }
                case "Cos", "Sin" -> {
                    if (sawFn || !n.getOpType().equals(fn)) return null;
                    sawFn = true;
                    name = n.getInput(0);
                }
                case "Gather" -> {
                    if (sawFn || Graph.intAttribute(n, "axis", 0) != 0 || !n.getInput(1).equals(positionIds)) return null;
                    TensorProto t = g.initializer(n.getInput(0));
                    if (t == null || t.getDataType() != TensorProto.DataType.FLOAT_VALUE || t.getDimsCount() != 2 || t.getDims(1) % 2 != 0) return null;
                    int rank = rank(unsqueezes);
                    return rank < 0 ? null : new Source(t.getName(), null, scale, rank);
                }
                case "Concat" -> {
                    if (!sawFn || n.getInputCount() != 2 || !n.getInput(0).equals(n.getInput(1))) return null;
                    long axis = Graph.intAttribute(n, "axis", Long.MIN_VALUE);
                    if (axis != -1 && axis != 2) return null;
                    int rank = rank(unsqueezes);
                    return rank < 0 ? null : new Source(null, n.getInput(0), scale, rank);
                }
                default -> {
                    return null;
                }
            }
        }
        return null;
    }

    /** Rank after the Unsqueezes of a [batch, sequence, head_size] tensor, if they only put axes between batch and sequence; else -1. */
    private static int rank(List<long[]> unsqueezes) {
        List<String> dims = new ArrayList<>(List.of("b", "s", "d"));
        for (long[] axes : unsqueezes) {
            int r = dims.size() + axes.length;
            long[] sorted = Arrays.stream(axes).map(a -> a < 0 ? a + r : a).sorted().toArray();
            for (long a : sorted) {
                if (a < 0 || a > dims.size()) return -1;
                dims.add((int) a, "1");
            }
        }
        int r = dims.size();
        if (r != 4 && r != 5) return -1;
        if (!dims.get(0).equals("b") || !dims.get(r - 2).equals("s") || !dims.get(r - 1).equals("d")) return -1;
        return r;
    }

    // ---- the caches

    /** cos and sin caches [rows * half] from gathered tables, and {half} as the third element; null when the halves differ. */
    private static float[][] fromTables(Graph g, Site s) throws IOException {
        TensorProto ct = g.initializer(s.cos().table()), st = g.initializer(s.sin().table());
        if (!ct.getDimsList().equals(st.getDimsList())) return null;
        int rows = (int) ct.getDims(0), d = (int) ct.getDims(1), half = d / 2;
        float[] c = OnnxModelFile.floats(ct, g.sourceDir), sn = OnnxModelFile.floats(st, g.sourceDir);
        float[] cos = new float[rows * half], sin = new float[rows * half];
        for (int r = 0; r < rows; r++) {
            for (int i = 0; i < half; i++) {
                if (c[r * d + i] != c[r * d + half + i] || sn[r * d + i] != sn[r * d + half + i]) return null;
                cos[r * half + i] = c[r * d + i] * s.cos().scale();
                sin[r * half + i] = sn[r * d + i] * s.sin().scale();
            }
        }
        return new float[][] {cos, sin, {half}};
    }

    private static float[][] fromFrequencies(float[] inv, Site s, int positions) {
        int half = inv.length;
        float[] cos = new float[positions * half], sin = new float[positions * half];
        for (int pos = 0; pos < positions; pos++) {
            for (int i = 0; i < half; i++) {
                float angle = (float) pos * inv[i]; // as the graph computes it: float position times float frequency
                cos[pos * half + i] = (float) Math.cos(angle) * s.cos().scale();
                sin[pos * half + i] = (float) Math.sin(angle) * s.sin().scale();
            }
        }
        return new float[][] {cos, sin, {half}};
    }

    /**
     * Runs the subgraph computing each {@code f} on position_ids [[1, positions - 1]] (one row of
     * two tokens, no past) and keeps f(1) when f(last) = (float) last * f(1) exactly, i.e. f is the
     * position times a constant vector. Null when all are, else why not.
     */
    private static String evaluateFrequencies(Graph g, Map<String, NodeProto> p, List<String> targets, String positionIds, int positions,
                                              Map<String, float[]> out) throws IOException {
        Set<NodeProto> closure = new HashSet<>();
        Set<String> inputs = new HashSet<>(), initializers = new HashSet<>();
        ArrayDeque<String> todo = new ArrayDeque<>(targets);
        Set<String> seen = new HashSet<>();
        while (!todo.isEmpty()) {
            String name = todo.pop();
            if (name.isEmpty() || !seen.add(name)) continue;
            NodeProto n = p.get(name);
            if (n != null) {
                if (closure.add(n)) todo.addAll(n.getInputList());
                for (AttributeProto at : n.getAttributeList()) if (at.hasG() || at.getGraphsCount() > 0) return "the position subgraph has control flow";
            } else if (g.initializer(name) != null) {
                initializers.add(name);
            } else {
                inputs.add(name);
            }
        }
        if (!inputs.contains(positionIds)) return "the cos/sin operands do not depend on position_ids";
        GraphProto.Builder sub = GraphProto.newBuilder().setName("rotary-frequencies");
        for (NodeProto n : g.graph.getNodeList()) if (closure.contains(n)) sub.addNode(n);
        long bytes = 0;
        for (String name : initializers) {
            TensorProto t = g.initializer(name);
            if (t.getDataLocation() != TensorProto.DataLocation.EXTERNAL) {
                sub.addInitializer(t);
                bytes += t.getSerializedSize();
            } else {
                ByteString raw = OnnxModelFile.raw(t, g.sourceDir);
                bytes += raw.size();
                sub.addInitializer(t.toBuilder().clearExternalData().clearDataLocation().setRawData(raw));
            }
            if (bytes > MAX_EVALUATED_BYTES) return "the subgraph computing the rotary angles holds more than 256 MB of weights";
        }
        List<ValueInfoProto> graphInputs = new ArrayList<>();
        for (ValueInfoProto in : g.graph.getInputList()) if (inputs.contains(in.getName())) graphInputs.add(in);
        if (graphInputs.size() != inputs.size()) return "the position subgraph reads a value that is neither an input nor computed";
        sub.addAllInput(graphInputs);
        for (String t : targets) {
            sub.addOutput(ValueInfoProto.newBuilder().setName(t).setType(TypeProto.newBuilder()
                    .setTensorType(TypeProto.Tensor.newBuilder().setElemType(TensorProto.DataType.FLOAT_VALUE))));
        }
        // not a clone of the whole model: exports under 2 GB hold their weights inline
        ModelProto model = ModelProto.newBuilder().setIrVersion(g.model.getIrVersion()).addAllOpsetImport(g.model.getOpsetImportList())
                .setGraph(sub).build();
        OrtEnvironment env = OrtEnvironment.getEnvironment();
        long last = positions - 1;
        List<OnnxTensor> feeds = new ArrayList<>();
        try (OrtSession.SessionOptions so = new OrtSession.SessionOptions()) {
            so.setIntraOpNumThreads(1);
            try (OrtSession session = env.createSession(model.toByteArray(), so)) {
                Map<String, OnnxTensor> in = new LinkedHashMap<>();
                for (ValueInfoProto v : graphInputs) {
                    int type = v.getType().getTensorType().getElemType();
                    var dims = v.getType().getTensorType().getShape().getDimList();
                    OnnxTensor t;
                    if (v.getName().equals(positionIds)) {
                        t = OnnxTensor.createTensor(env, LongBuffer.wrap(new long[] {1, last}), new long[] {1, 2});
                    } else if (type == TensorProto.DataType.INT64_VALUE && dims.size() == 2) {
                        t = OnnxTensor.createTensor(env, LongBuffer.wrap(new long[] {1, 1}), new long[] {1, 2}); // input ids, attention mask
                    } else if (type == TensorProto.DataType.FLOAT_VALUE) { // an empty past
                        long[] shape = new long[dims.size()];
                        for (int d = 0; d < shape.length; d++) shape[d] = dims.get(d).hasDimValue() ? dims.get(d).getDimValue() : d == 0 ? 1 : 0;
                        t = OnnxTensor.createTensor(env, FloatBuffer.allocate(0), shape);
                    } else {
                        return "cannot feed input " + v.getName() + " to the position subgraph";
                    }
                    feeds.add(t);
                    in.put(v.getName(), t);
                }
                try (OrtSession.Result r = session.run(in)) {
                    for (int k = 0; k < targets.size(); k++) {
                        OnnxTensor f = (OnnxTensor) r.get(k);
                        long[] shape = f.getInfo().getShape();
                        float[] v = new float[f.getFloatBuffer().remaining()];
                        f.getFloatBuffer().get(v);
                        if (shape.length != 3 || shape[0] != 1 || shape[1] != 2) return "rotary angles of shape " + Arrays.toString(shape) + ", not [batch, sequence, half]";
                        int half = (int) shape[2];
                        float[] inv = Arrays.copyOf(v, half);
                        for (int i = 0; i < half; i++) {
                            if (v[half + i] != (float) last * inv[i]) return "the rotary angles are not the position times a constant (scaled or dynamic rope)";
                        }
                        out.put(targets.get(k), inv);
                    }
                }
            }
        } catch (OrtException e) {
            return "cannot evaluate the rotary angles: " + e.getMessage();
        } finally {
            feeds.forEach(OnnxTensor::close);
        }
        return null;
    }

    // ---- the rewrite

    private static void replace(Graph g, Site s, String positionIds, String[] cache) {
        String out = s.add().getOutput(0);
        int at = indexOf(g, s.add());
        List<NodeProto> nodes = new ArrayList<>();
        String base = s.add().getName().isEmpty() ? "rotary" : s.add().getName();
        String x = s.x(), rotated = out;
        if (s.cos().rank() == 5) { // [b, kv, group, s, d] -> [b, kv * group, s, d] around the op, and back
            String shape = g.unique(base + "_shape"), four = g.unique(base + "_shape4");
            String head = g.unique(base + "_shape_b"), tail = g.unique(base + "_shape_sd");
            nodes.add(node("Shape", base + "_shape", List.of(x), shape, g));
            nodes.add(node("Slice", base + "_b", List.of(shape, constant(g, base + "_0", 0), constant(g, base + "_1", 1)), head, g));
            nodes.add(node("Slice", base + "_sd", List.of(shape, constant(g, base + "_m2", -2), constant(g, base + "_big", Long.MAX_VALUE)), tail, g));
            nodes.add(NodeProto.newBuilder().setOpType("Concat").setName(g.unique(base + "_concat4")).addInput(head)
                    .addInput(constant(g, base + "_m1", -1)).addInput(tail).addOutput(four).addAttribute(Graph.intAttribute("axis", 0)).build());
            String x4 = g.unique(base + "_x4");
            nodes.add(node("Reshape", base + "_reshape4", List.of(x, four), x4, g));
            x = x4;
            rotated = g.unique(base + "_rotated4");
            nodes.add(rotary(g, base, x, positionIds, cache, rotated));
            nodes.add(node("Reshape", base + "_reshape5", List.of(rotated, shape), out, g));
        } else {
            nodes.add(rotary(g, base, x, positionIds, cache, out));
        }
        g.graph.removeNode(at);
        for (int i = nodes.size() - 1; i >= 0; i--) g.graph.addNode(at, nodes.get(i));
    }

    private static NodeProto rotary(Graph g, String base, String x, String positionIds, String[] cache, String out) {
        return NodeProto.newBuilder().setOpType("RotaryEmbedding").setDomain("com.microsoft").setName(g.unique(base + "_rotary"))
                .addInput(x).addInput(positionIds).addInput(cache[0]).addInput(cache[1]).addOutput(out)
                .addAttribute(Graph.intAttribute("interleaved", 0)).build();
    }

    private static NodeProto node(String op, String name, List<String> inputs, String output, Graph g) {
        return NodeProto.newBuilder().setOpType(op).setName(g.unique(name)).addAllInput(inputs).addOutput(output).build();
    }

    private static String constant(Graph g, String base, long value) {
        String name = g.unique(base);
        g.graph.addInitializer(TensorProto.newBuilder().setName(name).setDataType(TensorProto.DataType.INT64_VALUE).addDims(1).addInt64Data(value));
        return name;
    }

    private static TensorProto floatTensor(String name, float[] values, int rows, int cols) {
        ByteBuffer b = ByteBuffer.allocate(values.length * 4).order(ByteOrder.LITTLE_ENDIAN);
        for (float v : values) b.putFloat(v);
        return TensorProto.newBuilder().setName(name).setDataType(TensorProto.DataType.FLOAT_VALUE).addDims(rows).addDims(cols)
                .setRawData(ByteString.copyFrom(b.array())).build();
    }

    private static int indexOf(Graph g, NodeProto n) {
        for (int i = 0; i < g.graph.getNodeCount(); i++) if (g.graph.getNode(i).equals(n)) return i;
        throw new IllegalStateException("node " + n.getName() + " is gone");
    }

    /** Removes nodes nothing reads any more (the old rotary and position subgraphs), and initializers nothing reads. */
    static void removeDeadNodes(Graph g) {
        boolean changed = true;
        while (changed) {
            changed = false;
            Map<String, Integer> reads = new HashMap<>();
            for (NodeProto n : g.graph.getNodeList()) for (String in : n.getInputList()) reads.merge(in, 1, Integer::sum);
            for (var o : g.graph.getOutputList()) reads.merge(o.getName(), 1, Integer::sum);
            for (int i = g.graph.getNodeCount() - 1; i >= 0; i--) {
                NodeProto n = g.graph.getNode(i);
                if (n.getOutputCount() > 0 && n.getOutputList().stream().allMatch(o -> o.isEmpty() || !reads.containsKey(o))) {
                    g.graph.removeNode(i);
                    changed = true;
                }
            }
        }
        Set<String> read = new HashSet<>();
        for (NodeProto n : g.graph.getNodeList()) read.addAll(n.getInputList());
        for (var o : g.graph.getOutputList()) read.add(o.getName());
        for (var in : g.graph.getInputList()) read.add(in.getName()); // old exports list initializers as inputs too
        for (int i = g.graph.getInitializerCount() - 1; i >= 0; i--) {
            if (!read.contains(g.graph.getInitializer(i).getName())) g.graph.removeInitializer(i);
        }
    }

    // ---- constants

    private static NodeProto op(Map<String, NodeProto> p, String output, String type) {
        NodeProto n = p.get(output);
        return n != null && n.getOpType().equals(type) && n.getDomain().isEmpty() ? n : null;
    }

    private static TensorProto constantTensor(Graph g, Map<String, NodeProto> p, String name) {
        TensorProto t = g.initializer(name);
        if (t != null) return t;
        NodeProto c = op(p, name, "Constant");
        if (c == null) return null;
        for (AttributeProto a : c.getAttributeList()) if (a.getName().equals("value")) return a.getT();
        return null;
    }

    /** An int64 constant (initializer or Constant node) as longs, else null. */
    private static long[] longs(Graph g, Map<String, NodeProto> p, String name) throws IOException {
        TensorProto t = constantTensor(g, p, name);
        if (t == null || t.getDataType() != TensorProto.DataType.INT64_VALUE) return null;
        if (t.getInt64DataCount() > 0) return t.getInt64DataList().stream().mapToLong(Long::longValue).toArray();
        ByteBuffer b = OnnxModelFile.raw(t, g.sourceDir).asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN);
        long[] v = new long[b.remaining() / 8];
        for (int i = 0; i < v.length; i++) v[i] = b.getLong();
        return v;
    }

    private static Float scalar(Graph g, Map<String, NodeProto> p, String name) throws IOException {
        TensorProto t = constantTensor(g, p, name);
        if (t == null || t.getDataType() != TensorProto.DataType.FLOAT_VALUE) return null;
        long n = 1;
        for (long d : t.getDimsList()) n *= d;
        if (n != 1) return null;
        float[] v = OnnxModelFile.floats(t, g.sourceDir);
        return v.length == 1 ? v[0] : null;
    }

    /** Two names hold the same value: the same name, equal constants, or the same op with the same attributes on inputs of the same value. */
    private static boolean sameValue(Graph g, Map<String, NodeProto> p, String a, String b, int depth) throws IOException {
        if (a.equals(b)) return true;
        if (depth == 0) return false;
        TensorProto ta = constantTensor(g, p, a), tb = constantTensor(g, p, b);
        if (ta != null || tb != null) {
            if (ta == null || tb == null || ta.getDataType() != tb.getDataType() || !ta.getDimsList().equals(tb.getDimsList())) return false;
            if (ta.getDataType() == TensorProto.DataType.INT64_VALUE) return Arrays.equals(longs(g, p, a), longs(g, p, b));
            return OnnxModelFile.raw(ta, g.sourceDir).equals(OnnxModelFile.raw(tb, g.sourceDir));
        }
        NodeProto na = p.get(a), nb = p.get(b);
        if (na == null || nb == null || !na.getOpType().equals(nb.getOpType()) || !na.getDomain().equals(nb.getDomain())
                || na.getOutputCount() != 1 || nb.getOutputCount() != 1 || na.getInputCount() != nb.getInputCount()
                || !na.getAttributeList().equals(nb.getAttributeList())) {
            return false;
        }
        for (int i = 0; i < na.getInputCount(); i++) if (!sameValue(g, p, na.getInput(i), nb.getInput(i), depth - 1)) return false;
        return true;
    }
}
