package dev.ortserve.engine.rewrite;

import ai.onnx.proto.OnnxMl.AttributeProto;
import ai.onnx.proto.OnnxMl.NodeProto;
import ai.onnx.proto.OnnxMl.TensorProto;

import java.io.IOException;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * RMSNorm subgraphs as exports write them (x*x or Pow(x, 2) -> ReduceMean(last axis) -> Add(eps)
 * -> Sqrt -> Reciprocal or Div(1, .) -> Mul(x, .) [-> Cast(float), transformers' cast back to the input
 * dtype] -> Mul(weight); in float16 exports x is a Cast of the float16 input to float32 and the cast back
 * is to float16) become one
 * SimplifiedLayerNormalization, onnxruntime's fused kernel. onnxruntime's own session optimizer
 * fuses only the Div form, and only without the square written as a Mul; the generated models and
 * many exports use Reciprocal, so their seven small kernels per norm ran as seven.
 */
final class RmsNormFusion {

    private RmsNormFusion() {
    }

    /** Fuses every match; returns how many. */
    static int apply(Graph g) throws IOException {
        int fused = 0;
        Set<String> released = new HashSet<>();
        for (int i = 0; i < g.graph.getNodeCount(); i++) {
            NodeProto outMul = g.graph.getNode(i);
            if (!outMul.getOpType().equals("Mul") || outMul.getInputCount() != 2) continue;
            Match m = match(g, outMul);
            if (m == null) continue;
            NodeProto fusedNode = NodeProto.newBuilder().setOpType("SimplifiedLayerNormalization").setName(g.unique(outMul.getName() + "_rmsnorm"))
                    .addInput(m.x).addInput(m.weight).addOutput(outMul.getOutput(0))
                    .addAttribute(Graph.intAttribute("axis", -1))
                    .addAttribute(AttributeProto.newBuilder().setName("epsilon").setType(AttributeProto.AttributeType.FLOAT).setF(m.epsilon)).build();
            g.graph.setNode(i, fusedNode);
            // the subgraph's other nodes, where nothing else reads them
            for (int j = g.graph.getNodeCount() - 1; j >= 0; j--) {
                NodeProto n = g.graph.getNode(j);
                if (m.nodes.contains(n.getName()) && n.getOutputList().stream().allMatch(o -> g.consumers(o) == 0)) {
                    released.addAll(n.getInputList());
                    g.graph.removeNode(j);
                    if (j < i) i--;
                }
            }
            fused++;
        }
        // the constants the removed nodes read (epsilon, the exponent 2, ReduceMean's axes, the 1 of 1/x) where nothing else does
        g.removeInitializersIfUnread(released);
        return fused;
    }

    private record Match(String x, String weight, float epsilon, Set<String> nodes) {
    }

    private static Match match(Graph g, NodeProto outMul) throws IOException {
        for (int w = 0; w < 2; w++) {
            String weight = outMul.getInput(w);
            TensorProto wt = g.initializer(weight);
            NodeProto identity = producer(g, weight, "Identity"); // torch's exporter shares equal weights through Identity nodes
            if (wt == null && identity != null) wt = g.initializer(identity.getInput(0));
            if (wt == null || wt.getDimsCount() != 1) continue;
            int type = wt.getDataType();
            if (type != TensorProto.DataType.FLOAT_VALUE && type != TensorProto.DataType.FLOAT16_VALUE) continue;
            boolean half = type == TensorProto.DataType.FLOAT16_VALUE;
            NodeProto normed = producer(g, outMul.getInput(1 - w), "Mul");
            // transformers' RMSNorm casts the normalised value back to the input's dtype (a float-to-float Cast in
            // fp32 exports; to float16 in fp16 ones, which compute the norm in float32 from a Cast of the input)
            NodeProto castBack = normed == null ? cast(g, outMul.getInput(1 - w), type) : null;
            if (castBack != null) normed = producer(g, castBack.getInput(0), "Mul");
            if (normed == null || half && castBack == null) continue;
            for (int k = 0; k < 2; k++) {
                String x = normed.getInput(k);
                NodeProto up = half ? cast(g, x, TensorProto.DataType.FLOAT_VALUE) : null;
                if (half && up == null) continue;
                NodeProto inv = producer(g, normed.getInput(1 - k), null);
                if (inv == null) continue;
                NodeProto sqrt;
                if (inv.getOpType().equals("Reciprocal")) {
                    sqrt = producer(g, inv.getInput(0), "Sqrt");
                } else if (inv.getOpType().equals("Div") && constant(g, inv.getInput(0)) != null && constant(g, inv.getInput(0)) == 1f) {
                    sqrt = producer(g, inv.getInput(1), "Sqrt");
                } else {
                    continue;
                }
                if (sqrt == null) continue;
                NodeProto add = producer(g, sqrt.getInput(0), "Add");
                if (add == null) continue;
                for (int e = 0; e < 2; e++) {
                    Float eps = constant(g, add.getInput(e));
                    NodeProto mean = producer(g, add.getInput(1 - e), "ReduceMean");
                    if (eps == null || mean == null || !lastAxis(g, mean)) continue;
                    NodeProto sq = producer(g, mean.getInput(0), null);
                    if (sq == null || !squares(g, sq, x)) continue;
                    Set<String> nodes = new HashSet<>(List.of(normed.getName(), inv.getName(), sqrt.getName(), add.getName(), mean.getName(), sq.getName()));
                    if (castBack != null) nodes.add(castBack.getName());
                    if (up != null) nodes.add(up.getName()); // removed only where nothing else reads the float32 copy
                    if (nodes.contains("")) return null; // unnamed nodes cannot be told apart for removal
                    // float16: the op reads the float16 input and scale and normalises in float32 (its stash type), as the subgraph did
                    return new Match(half ? up.getInput(0) : x, weight, eps, nodes);
                }
            }
        }
        return null;
    }

    private static boolean squares(Graph g, NodeProto sq, String x) throws IOException {
        if (sq.getOpType().equals("Mul")) return sq.getInput(0).equals(x) && sq.getInput(1).equals(x);
        if (sq.getOpType().equals("Pow")) {
            Float p = constant(g, sq.getInput(1));
            return sq.getInput(0).equals(x) && p != null && p == 2f;
        }
        return false;
    }

    private static boolean lastAxis(Graph g, NodeProto mean) throws IOException {
        if (Graph.intAttribute(mean, "keepdims", 1) != 1) return false;
        for (AttributeProto a : mean.getAttributeList()) {
            if (a.getName().equals("axes")) return a.getIntsCount() == 1 && a.getInts(0) == -1;
        }
        if (mean.getInputCount() > 1) { // opset 18: axes as an input
            TensorProto axes = g.initializer(mean.getInput(1));
            if (axes == null) return false;
            var b = OnnxModelFile.raw(axes, g.sourceDir).asReadOnlyByteBuffer().order(java.nio.ByteOrder.LITTLE_ENDIAN);
            return b.remaining() == 8 && b.getLong() == -1;
        }
        return false;
    }

    /** The Cast to {@code type} producing {@code output}, else null. */
    private static NodeProto cast(Graph g, String output, int type) {
        NodeProto cast = producer(g, output, "Cast");
        return cast != null && Graph.intAttribute(cast, "to", 0) == type ? cast : null;
    }

    /** The node producing {@code output}, if it is of {@code op} (any op when null). */
    private static NodeProto producer(Graph g, String output, String op) {
        int i = g.producerIndex(output);
        if (i < 0) return null;
        NodeProto n = g.graph.getNode(i);
        return op == null || n.getOpType().equals(op) ? n : null;
    }

    /** A scalar float constant (initializer or Constant node), else null. */
    private static Float constant(Graph g, String name) throws IOException {
        TensorProto t = g.initializer(name);
        if (t == null) {
            NodeProto c = producer(g, name, "Constant");
            if (c == null) return null;
            for (AttributeProto a : c.getAttributeList()) if (a.getName().equals("value")) t = a.getT();
            if (t == null) return null;
        }
        if (t.getDataType() != TensorProto.DataType.FLOAT_VALUE) return null;
        long n = 1;
        for (long d : t.getDimsList()) n *= d;
        if (n != 1) return null;
        float[] v = OnnxModelFile.floats(t, g.sourceDir);
        return v.length == 1 ? v[0] : null;
    }
}
