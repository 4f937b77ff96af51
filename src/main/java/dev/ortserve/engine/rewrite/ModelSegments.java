package dev.ortserve.engine.rewrite;

import ai.onnx.proto.OnnxMl.AttributeProto;
import ai.onnx.proto.OnnxMl.GraphProto;
import ai.onnx.proto.OnnxMl.ModelProto;
import ai.onnx.proto.OnnxMl.NodeProto;
import ai.onnx.proto.OnnxMl.TensorProto;
import ai.onnx.proto.OnnxMl.TypeProto;
import ai.onnx.proto.OnnxMl.ValueInfoProto;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;

/**
 * A model cut, in its nodes' order, into segments whose weights stay within a size, so that it can
 * run one segment at a time: each segment is a model of its own (its nodes, the initializers they
 * read, the source's data files linked, never copied) whose inputs are the graph inputs it reads and
 * the tensors earlier segments computed, and whose outputs are what later segments or the graph's
 * outputs read. The load probe runs the original this way ({@code engine.load}), so a cold start with
 * a rewrite never maps the whole original: at most one segment's weights are resident at a time.
 * <p>
 * A head that is the embedding transposed is first read from the embedding ({@link TiedHead}, exact:
 * the same product), else onnxruntime would fold the Transpose into a second copy of the largest
 * tensor in the head's segment. A graph whose nodes are not in topological order stays one segment.
 */
public final class ModelSegments implements AutoCloseable {

    /** One segment: the tensors it reads from outside (graph inputs and earlier segments' outputs), those it hands on, its weights' bytes. */
    public record Segment(List<String> inputs, List<String> outputs, long weightBytes) {
    }

    /** A graph input: name, ONNX element type, dims (-1 where symbolic). */
    public record Port(String name, int elemType, long[] shape) {
    }

    private final Graph g;
    private final List<List<NodeProto>> nodes;
    private final List<Segment> segments;
    private final Path workDir;
    private final Map<String, ValueInfoProto> graphInputs = new HashMap<>();
    private final Map<String, ValueInfoProto> graphOutputs = new HashMap<>();

    private ModelSegments(Graph g, List<List<NodeProto>> nodes, List<Segment> segments, Path workDir) {
        this.g = g;
        this.nodes = nodes;
        this.segments = segments;
        this.workDir = workDir;
        for (ValueInfoProto v : g.graph.getInputList()) graphInputs.put(v.getName(), v);
        for (ValueInfoProto v : g.graph.getOutputList()) graphOutputs.put(v.getName(), v);
    }

    /**
     * Cuts {@code modelFile} into segments of at most {@code maxBytes} of weights each (a node whose own
     * weights are larger gets a segment to itself); segment files are written under {@code workDir}.
     */
    public static ModelSegments split(Path modelFile, long maxBytes, Path workDir) throws IOException {
        Graph g = new Graph(OnnxModelFile.read(modelFile), modelFile.getParent());
        TiedHead.apply(g);
        Map<String, TensorProto> initializers = new HashMap<>();
        for (TensorProto t : g.graph.getInitializerList()) initializers.put(t.getName(), t);
        Set<String> available = new HashSet<>(initializers.keySet());
        for (ValueInfoProto v : g.graph.getInputList()) available.add(v.getName());
        available.add("");
        List<List<NodeProto>> cut = new ArrayList<>();
        List<NodeProto> current = new ArrayList<>();
        Set<String> currentWeights = new HashSet<>();
        long currentBytes = 0;
        boolean sorted = true;
        for (NodeProto n : g.graph.getNodeList()) {
            Set<String> reads = reads(n);
            if (!available.containsAll(reads)) sorted = false;
            long added = 0;
            for (String r : reads) if (initializers.containsKey(r) && !currentWeights.contains(r)) added += bytes(initializers.get(r));
            if (!current.isEmpty() && currentBytes + added > maxBytes) {
                cut.add(current);
                current = new ArrayList<>();
                currentWeights.clear();
                currentBytes = 0;
                added = 0;
                for (String r : reads) if (initializers.containsKey(r)) added += bytes(initializers.get(r));
            }
            current.add(n);
            for (String r : reads) if (initializers.containsKey(r)) currentWeights.add(r);
            currentBytes += added;
            available.addAll(n.getOutputList());
        }
        if (!current.isEmpty()) cut.add(current);
        if (!sorted || cut.size() < 2) cut = List.of(new ArrayList<>(g.graph.getNodeList()));
        // what each segment reads from outside it and hands on to later ones (or to the graph's outputs)
        List<Set<String>> readsOf = new ArrayList<>(), producedBy = new ArrayList<>();
        for (List<NodeProto> segment : cut) {
            Set<String> reads = new LinkedHashSet<>(), produced = new HashSet<>();
            for (NodeProto n : segment) {
                for (String r : reads(n)) if (!r.isEmpty() && !produced.contains(r) && !initializers.containsKey(r)) reads.add(r);
                produced.addAll(n.getOutputList());
            }
            readsOf.add(reads);
            producedBy.add(produced);
        }
        Set<String> outputs = new HashSet<>();
        for (ValueInfoProto v : g.graph.getOutputList()) outputs.add(v.getName());
        List<Segment> segments = new ArrayList<>();
        for (int i = 0; i < cut.size(); i++) {
            List<String> handed = new ArrayList<>();
            for (NodeProto n : cut.get(i)) {
                for (String o : n.getOutputList()) {
                    if (o.isEmpty()) continue;
                    boolean later = outputs.contains(o);
                    for (int j = i + 1; j < cut.size() && !later; j++) later = readsOf.get(j).contains(o);
                    if (later) handed.add(o);
                }
            }
            long weights = 0;
            Set<String> seen = new HashSet<>();
            for (NodeProto n : cut.get(i)) for (String r : reads(n)) if (initializers.containsKey(r) && seen.add(r)) weights += bytes(initializers.get(r));
            segments.add(new Segment(List.copyOf(readsOf.get(i)), handed, weights));
        }
        return new ModelSegments(g, cut, segments, workDir);
    }

    public List<Segment> segments() {
        return segments;
    }

    /** The graph's inputs (initializers listed as inputs too are left out: they have their values). */
    public List<Port> inputs() {
        Set<String> initializers = new HashSet<>();
        for (TensorProto t : g.graph.getInitializerList()) initializers.add(t.getName());
        List<Port> out = new ArrayList<>();
        for (ValueInfoProto v : g.graph.getInputList()) {
            if (initializers.contains(v.getName())) continue;
            TypeProto.Tensor t = v.getType().getTensorType();
            long[] shape = new long[t.getShape().getDimCount()];
            for (int d = 0; d < shape.length; d++) shape[d] = t.getShape().getDim(d).hasDimValue() ? t.getShape().getDim(d).getDimValue() : -1;
            out.add(new Port(v.getName(), t.getElemType(), shape));
        }
        return out;
    }

    /** The graph's output names. */
    public List<String> outputs() {
        return g.graph.getOutputList().stream().map(ValueInfoProto::getName).toList();
    }

    /**
     * Writes segment {@code i} as a model of its own and returns its file.
     *
     * @param elemTypes the ONNX element type of each of its inputs that earlier segments computed
     */
    public Path write(int i, Map<String, Integer> elemTypes) throws IOException {
        Segment s = segments.get(i);
        ModelProto.Builder model = g.model.build().toBuilder();
        GraphProto.Builder graph = model.getGraphBuilder();
        graph.clearNode().clearInitializer().clearInput().clearOutput().clearValueInfo().clearSparseInitializer();
        graph.addAllNode(nodes.get(i));
        Set<String> read = new HashSet<>();
        for (NodeProto n : nodes.get(i)) read.addAll(reads(n));
        for (TensorProto t : g.graph.getInitializerList()) {
            if (!read.contains(t.getName())) continue;
            graph.addInitializer(t);
            ValueInfoProto overridable = graphInputs.get(t.getName());
            if (overridable != null) graph.addInput(overridable);
        }
        for (String in : s.inputs()) {
            ValueInfoProto v = graphInputs.get(in);
            if (v == null) {
                Integer type = elemTypes.get(in);
                if (type == null) throw new IllegalArgumentException("segment " + i + ": no element type for its input " + in);
                v = ValueInfoProto.newBuilder().setName(in).setType(TypeProto.newBuilder().setTensorType(TypeProto.Tensor.newBuilder().setElemType(type))).build();
            }
            graph.addInput(v);
        }
        for (String out : s.outputs()) {
            ValueInfoProto v = graphOutputs.get(out);
            graph.addOutput(v != null ? v : ValueInfoProto.newBuilder().setName(out).build()); // onnxruntime infers the type
        }
        Path dir = workDir.resolve("segment-" + i);
        deleteTree(dir);
        Files.createDirectories(dir);
        OnnxModelFile.write(model.build(), g.sourceDir, dir, g.computed, false); // linked, never a copy of the weights per segment
        return dir.resolve("model.onnx");
    }

    /** Deletes segment {@code i}'s files (links and its own small tensors). */
    public void release(int i) throws IOException {
        deleteTree(workDir.resolve("segment-" + i));
    }

    @Override
    public void close() throws IOException {
        deleteTree(workDir);
    }

    /** Names a node reads: its inputs and what its subgraphs (an If's branches) read from outside them. */
    private static Set<String> reads(NodeProto n) {
        Set<String> reads = new LinkedHashSet<>(n.getInputList());
        for (AttributeProto a : n.getAttributeList()) {
            if (a.hasG()) outerReads(a.getG(), reads);
            for (GraphProto sub : a.getGraphsList()) outerReads(sub, reads);
        }
        reads.remove("");
        return reads;
    }

    private static void outerReads(GraphProto sub, Set<String> reads) {
        Set<String> inner = new HashSet<>();
        for (TensorProto t : sub.getInitializerList()) inner.add(t.getName());
        for (ValueInfoProto v : sub.getInputList()) inner.add(v.getName());
        for (NodeProto n : sub.getNodeList()) {
            for (String r : reads(n)) if (!inner.contains(r)) reads.add(r);
            inner.addAll(n.getOutputList());
        }
    }

    /** A tensor's bytes (external length, else element count x element size). */
    static long bytes(TensorProto t) throws IOException {
        OnnxModelFile.External x = OnnxModelFile.external(t);
        if (x != null && x.length() >= 0) return x.length();
        long count = 1;
        for (long d : t.getDimsList()) count *= d;
        return count * switch (t.getDataType()) {
            case TensorProto.DataType.DOUBLE_VALUE, TensorProto.DataType.INT64_VALUE, TensorProto.DataType.UINT64_VALUE -> 8;
            case TensorProto.DataType.FLOAT16_VALUE, TensorProto.DataType.BFLOAT16_VALUE, TensorProto.DataType.INT16_VALUE,
                 TensorProto.DataType.UINT16_VALUE -> 2;
            case TensorProto.DataType.INT8_VALUE, TensorProto.DataType.UINT8_VALUE, TensorProto.DataType.BOOL_VALUE -> 1;
            default -> 4;
        };
    }

    private static void deleteTree(Path dir) throws IOException {
        if (!Files.exists(dir)) return;
        try (Stream<Path> all = Files.walk(dir)) {
            for (Path p : all.sorted(Comparator.reverseOrder()).toList()) Files.deleteIfExists(p);
        }
    }
}
