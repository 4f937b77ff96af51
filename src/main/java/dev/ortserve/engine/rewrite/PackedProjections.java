package dev.ortserve.engine.rewrite;

import ai.onnx.proto.OnnxMl.AttributeProto;
import ai.onnx.proto.OnnxMl.NodeProto;
import ai.onnx.proto.OnnxMl.OperatorSetIdProto;
import ai.onnx.proto.OnnxMl.TensorProto;
import com.google.protobuf.ByteString;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * MatMuls that read the same activations with constant weights (a layer's q, k and v projections, its
 * gate and up projections) become one MatMul over the weights concatenated along N, then a Split back
 * into the original outputs, as onnxruntime-genai's builder packs them: one kernel where there were two
 * or three, with more columns to share among the threads (a batch-1 matrix-vector product is short
 * enough that handing out the work costs about as much as doing it). Runs before block quantization,
 * which then quantizes the packed weight as one matrix: its blocks run along K, so every column keeps
 * the blocks and scales it had alone.
 */
final class PackedProjections {

    private PackedProjections() {
    }

    /** How many packed MatMuls replaced how many. */
    record Outcome(int packed, int replaced) {
    }

    /** Packs every group of two or more. */
    static Outcome apply(Graph g) throws IOException {
        Map<String, List<NodeProto>> byInput = new LinkedHashMap<>();
        for (NodeProto n : g.graph.getNodeList()) {
            if (!n.getOpType().equals("MatMul") || !n.getDomain().isEmpty() || n.getInputCount() != 2) continue;
            TensorProto w = g.initializer(n.getInput(1));
            if (w == null || elementBytes(w) == 0 || w.getDimsCount() != 2) continue;
            // one group per input and weight type: float32 graphs, and float16 ones (Optimum's, onnx-community's model_fp16.onnx)
            byInput.computeIfAbsent(n.getInput(0) + "\u0000" + w.getDataType(), k -> new ArrayList<>()).add(n);
        }
        boolean splitInput = defaultOpset(g) >= 13; // before opset 13, Split's sizes are an attribute
        Set<String> packed = new HashSet<>();
        Map<String, List<NodeProto>> replacements = new LinkedHashMap<>();
        for (List<NodeProto> group : byInput.values()) {
            if (group.size() < 2) continue;
            List<TensorProto> weights = group.stream().map(n -> g.initializer(n.getInput(1))).toList();
            long k = weights.get(0).getDims(0);
            if (weights.stream().anyMatch(w -> w.getDims(0) != k)) continue;
            NodeProto first = group.get(0);
            String base = first.getName().isEmpty() ? first.getOutput(0) : first.getName();
            String packedWeight = g.unique(base + "_packed_weight"), packedOut = g.unique(base + "_packed");
            int total = 0;
            for (TensorProto w : weights) total += (int) w.getDims(1);
            int rows = (int) k, columns = total;
            int size = elementBytes(weights.get(0));
            g.addComputed(TensorProto.newBuilder().setName(packedWeight).setDataType(weights.get(0).getDataType()).addDims(k).addDims(total),
                    () -> concatenateColumns(g, weights, rows, columns, size)); // computed when written or quantized
            NodeProto matMul = NodeProto.newBuilder().setOpType("MatMul").setName(g.unique(base + "_packed_matmul"))
                    .addInput(first.getInput(0)).addInput(packedWeight).addOutput(packedOut).build();
            NodeProto.Builder split = NodeProto.newBuilder().setOpType("Split").setName(g.unique(base + "_packed_split"))
                    .addInput(packedOut).addAttribute(Graph.intAttribute("axis", -1));
            if (splitInput) {
                ByteBuffer sizes = ByteBuffer.allocate(8 * group.size()).order(ByteOrder.LITTLE_ENDIAN);
                for (TensorProto w : weights) sizes.putLong(w.getDims(1));
                String sizesName = g.unique(base + "_packed_sizes");
                g.graph.addInitializer(TensorProto.newBuilder().setName(sizesName).setDataType(TensorProto.DataType.INT64_VALUE)
                        .addDims(group.size()).setRawData(ByteString.copyFrom(sizes.array())));
                split.addInput(sizesName);
            } else {
                AttributeProto.Builder sizes = AttributeProto.newBuilder().setName("split").setType(AttributeProto.AttributeType.INTS);
                for (TensorProto w : weights) sizes.addInts(w.getDims(1));
                split.addAttribute(sizes);
            }
            for (NodeProto n : group) split.addOutput(n.getOutput(0));
            // at the first member's place: every member reads the same input, so it is there already,
            // and every consumer of a member's output comes after that member (nodes are known by their
            // first output, which no other node writes)
            replacements.put(first.getOutput(0), List.of(matMul, split.build()));
            for (NodeProto n : group) packed.add(n.getOutput(0));
        }
        if (replacements.isEmpty()) return new Outcome(0, 0);
        List<NodeProto> nodes = new ArrayList<>();
        for (NodeProto n : g.graph.getNodeList()) {
            String output = n.getOutputCount() > 0 ? n.getOutput(0) : null;
            if (replacements.containsKey(output)) nodes.addAll(replacements.get(output));
            else if (!packed.contains(output)) nodes.add(n);
        }
        g.graph.clearNode().addAllNode(nodes);
        g.removeUnusedInitializers();
        return new Outcome(replacements.size(), packed.size());
    }

    /** Bytes per element of a weight this rewrite packs (float32, or float16 stored as raw bytes), else 0. */
    private static int elementBytes(TensorProto w) {
        if (w.getDataType() == TensorProto.DataType.FLOAT_VALUE) return 4;
        return w.getDataType() == TensorProto.DataType.FLOAT16_VALUE && w.getInt32DataCount() == 0 ? 2 : 0;
    }

    /** The weights [k, n_i] side by side as one [k, total] matrix of {@code size}-byte little-endian elements, values unchanged. */
    private static ByteBuffer concatenateColumns(Graph g, List<TensorProto> weights, int k, int total, int size) throws IOException {
        ByteBuffer out = ByteBuffer.allocate(size * k * total).order(ByteOrder.LITTLE_ENDIAN);
        int offset = 0;
        for (TensorProto w : weights) {
            ByteBuffer values = g.bytes(w);
            int n = (int) w.getDims(1);
            if (values.remaining() != (long) size * k * n) throw new IOException("weight " + w.getName() + " holds " + values.remaining() + " bytes, not " + k + " x " + n);
            for (int row = 0; row < k; row++) out.put((row * total + offset) * size, values, values.position() + row * n * size, n * size);
            offset += n;
        }
        return out;
    }

    private static long defaultOpset(Graph g) {
        for (OperatorSetIdProto o : g.model.getOpsetImportList()) {
            if (o.getDomain().isEmpty() || o.getDomain().equals("ai.onnx")) return o.getVersion();
        }
        return 1;
    }
}
