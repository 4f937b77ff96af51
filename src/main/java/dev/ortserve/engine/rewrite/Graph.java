package dev.ortserve.engine.rewrite;

import ai.onnx.proto.OnnxMl.AttributeProto;
import ai.onnx.proto.OnnxMl.GraphProto;
import ai.onnx.proto.OnnxMl.ModelProto;
import ai.onnx.proto.OnnxMl.NodeProto;
import ai.onnx.proto.OnnxMl.OperatorSetIdProto;
import ai.onnx.proto.OnnxMl.TensorProto;

import java.io.IOException;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.file.Path;
import java.util.List;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;

/**
 * A decoder graph being rewritten: the model, where its external data lives (the source model's
 * directory: external locations are relative to it), the tensors the rewrites made (computed when
 * written or read, one at a time, never all held at once) and lookups the rewrites share.
 */
final class Graph {

    final ModelProto.Builder model;
    final GraphProto.Builder graph;
    /** The source model's directory, which its external data locations are relative to. */
    final Path sourceDir;
    /** Tensors the rewrites made: their initializer in the graph has no data, these compute it. */
    final Map<String, OnnxModelFile.Computed> computed = new LinkedHashMap<>();
    private final Set<String> names = new HashSet<>();

    Graph(ModelProto source, Path sourceDir) {
        this.model = source.toBuilder();
        this.graph = model.getGraphBuilder();
        this.sourceDir = sourceDir;
        for (NodeProto n : graph.getNodeList()) {
            names.add(n.getName());
            names.addAll(n.getOutputList());
        }
        for (TensorProto t : graph.getInitializerList()) names.add(t.getName());
    }

    /** A name no node, output or initializer of the graph has yet. */
    String unique(String base) {
        String name = base;
        for (int i = 1; names.contains(name); i++) name = base + "_" + i;
        names.add(name);
        return name;
    }

    /** Adds an initializer (header only: name, type, dims) whose bytes {@code data} computes when needed. */
    void addComputed(TensorProto.Builder header, OnnxModelFile.Computed data) {
        TensorProto t = header.build();
        graph.addInitializer(t);
        computed.put(t.getName(), data);
    }

    /** A float32 tensor's values as a view: computed now for a tensor a rewrite made, mapped for an external one. */
    FloatBuffer floatView(TensorProto t) throws IOException {
        OnnxModelFile.Computed c = computed.get(t.getName());
        if (c != null) return c.bytes().order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer();
        return OnnxModelFile.floatView(t, sourceDir);
    }

    /** A tensor's raw bytes (a view; computed now for a tensor a rewrite made). */
    java.nio.ByteBuffer bytes(TensorProto t) throws IOException {
        OnnxModelFile.Computed c = computed.get(t.getName());
        if (c != null) return c.bytes().order(ByteOrder.LITTLE_ENDIAN);
        return OnnxModelFile.raw(t, sourceDir).asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN);
    }

    int initializerIndex(String name) {
        for (int i = 0; i < graph.getInitializerCount(); i++) {
            if (graph.getInitializer(i).getName().equals(name)) return i;
        }
        return -1;
    }

    TensorProto initializer(String name) {
        int i = initializerIndex(name);
        return i < 0 ? null : graph.getInitializer(i);
    }

    int producerIndex(String output) {
        for (int i = 0; i < graph.getNodeCount(); i++) {
            if (graph.getNode(i).getOutputList().contains(output)) return i;
        }
        return -1;
    }

    /** The indexes of the nodes of one op type in one domain, in node order. */
    List<Integer> nodesOf(String domain, String opType) {
        List<Integer> out = new java.util.ArrayList<>();
        for (int i = 0; i < graph.getNodeCount(); i++) {
            NodeProto n = graph.getNode(i);
            if (n.getOpType().equals(opType) && n.getDomain().equals(domain)) out.add(i);
        }
        return out;
    }

    int consumers(String name) {
        int count = 0;
        for (NodeProto n : graph.getNodeList()) {
            for (String in : n.getInputList()) if (in.equals(name)) count++;
        }
        for (var o : graph.getOutputList()) if (o.getName().equals(name)) count++;
        return count;
    }

    /** Drops initializers no node or output reads any more (and their graph-input entries, which old exports add). */
    void removeUnusedInitializers() {
        Set<String> read = new HashSet<>();
        for (NodeProto n : graph.getNodeList()) read.addAll(n.getInputList());
        for (var o : graph.getOutputList()) read.add(o.getName());
        for (int i = graph.getInitializerCount() - 1; i >= 0; i--) {
            String name = graph.getInitializer(i).getName();
            if (read.contains(name)) continue;
            graph.removeInitializer(i); // (a computed tensor stays computable: another may be computed from it)
            // an input without its initializer would become required
            for (int j = graph.getInputCount() - 1; j >= 0; j--) if (graph.getInput(j).getName().equals(name)) graph.removeInput(j);
        }
    }

    /**
     * Drops those of {@code candidates} that are initializers nothing reads any more: no node of the graph or of
     * its subgraphs (an If's branches read outer initializers), no output. onnxruntime would drop them too, with a
     * warning per initializer at every session start.
     */
    void removeInitializersIfUnread(Set<String> candidates) {
        if (candidates.isEmpty()) return;
        Set<String> read = new HashSet<>();
        for (var o : graph.getOutputList()) read.add(o.getName());
        collectReads(graph.getNodeList(), read);
        for (int i = graph.getInitializerCount() - 1; i >= 0; i--) {
            String name = graph.getInitializer(i).getName();
            if (!candidates.contains(name) || read.contains(name)) continue;
            graph.removeInitializer(i);
            for (int j = graph.getInputCount() - 1; j >= 0; j--) if (graph.getInput(j).getName().equals(name)) graph.removeInput(j);
        }
    }

    private static void collectReads(List<NodeProto> nodes, Set<String> read) {
        for (NodeProto n : nodes) {
            read.addAll(n.getInputList());
            for (AttributeProto a : n.getAttributeList()) {
                if (a.hasG()) collectReads(a.getG().getNodeList(), read);
                for (var sub : a.getGraphsList()) collectReads(sub.getNodeList(), read);
            }
        }
    }

    void requireOpset(String domain, long version) {
        for (OperatorSetIdProto o : model.getOpsetImportList()) if (o.getDomain().equals(domain)) return;
        model.addOpsetImport(OperatorSetIdProto.newBuilder().setDomain(domain).setVersion(version));
    }

    static AttributeProto intAttribute(String name, long value) {
        return AttributeProto.newBuilder().setName(name).setType(AttributeProto.AttributeType.INT).setI(value).build();
    }

    static long intAttribute(NodeProto node, String name, long otherwise) {
        for (AttributeProto a : node.getAttributeList()) if (a.getName().equals(name)) return a.getI();
        return otherwise;
    }
}
