package dev.ortserve.engine.rewrite;

import ai.onnx.proto.OnnxMl.AttributeProto;
import ai.onnx.proto.OnnxMl.NodeProto;
import ai.onnx.proto.OnnxMl.TensorProto;
import ai.onnx.proto.OnnxMl.ValueInfoProto;

import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Each com.microsoft.GroupQueryAttention becomes {@code dev.ortserve.GroupQueryAttention}, the op of ortserve's native
 * library (src/main/native, registered on the engine's sessions): the same inputs, outputs and attributes; a step of one
 * position per row (decode) is computed by the library, each KV head read once for all the query heads that share it,
 * and every other step is onnxruntime's own kernel, invoked by the library. Why: onnxruntime 1.29's CPU kernel reads a
 * KV head once per query head (and with float16 KV widens it once per query head), which after 1,600 tokens made
 * attention ~44% of a 4-row decode step (docs/benchmarks.md, "decode attention, native").
 * <p>
 * Only what the library computes is moved: query, key, value (or a packed query with key and value empty), past and
 * present KV, seqlens_k, total_sequence_length and the rotary caches (no position_ids, attention bias or head sink; no
 * attention-scores output), float32 or float16, and only the attributes it reads (the others unset or at their
 * defaults). Checked for every node first: all of them move, or none (with the reason). Runs last, after the rewrites
 * that match the op by its com.microsoft domain (float16 KV, the query scale).
 */
final class NativeAttention {

    static final String APPLIED = "native decode attention";
    static final String DOMAIN = "dev.ortserve";
    /** The library's op's inputs: query ... sin_cache. */
    private static final int MAX_INPUTS = 9;
    /** Attributes the library reads; any other must be absent or at its default (0). */
    private static final Set<String> READ = Set.of("num_heads", "kv_num_heads", "local_window_size", "do_rotary", "rotary_interleaved", "scale", "softcap");

    record Outcome(int nodes, String reason) {
    }

    private NativeAttention() {
    }

    static Outcome apply(Graph g) {
        List<Integer> nodes = g.nodesOf("com.microsoft", "GroupQueryAttention");
        if (nodes.isEmpty()) return new Outcome(0, "the graph has no GroupQueryAttention");
        Map<String, ValueInfoProto> inputs = new java.util.HashMap<>();
        for (ValueInfoProto v : g.graph.getInputList()) inputs.put(v.getName(), v);
        for (int i : nodes) {
            NodeProto n = g.graph.getNode(i);
            if (n.getInputCount() > MAX_INPUTS && n.getInputList().subList(MAX_INPUTS, n.getInputCount()).stream().anyMatch(s -> !s.isEmpty())) {
                return new Outcome(0, n.getName() + " reads position_ids, an attention bias or a head sink");
            }
            if (n.getOutputCount() > 3 && n.getOutputList().subList(3, n.getOutputCount()).stream().anyMatch(s -> !s.isEmpty())) {
                return new Outcome(0, n.getName() + " also outputs its attention scores");
            }
            if (n.getInputCount() < 7) return new Outcome(0, n.getName() + " has no past KV, seqlens_k or total_sequence_length");
            for (AttributeProto a : n.getAttributeList()) {
                boolean atDefault = a.getType() == AttributeProto.AttributeType.INT ? a.getI() == 0
                        : a.getType() == AttributeProto.AttributeType.FLOAT && a.getF() == 0f;
                if (!READ.contains(a.getName()) && !atDefault) return new Outcome(0, n.getName() + " sets " + a.getName());
            }
            ValueInfoProto past = inputs.get(n.getInput(3));
            int type = past == null ? 0 : past.getType().getTensorType().getElemType();
            if (type != TensorProto.DataType.FLOAT_VALUE && type != TensorProto.DataType.FLOAT16_VALUE) {
                return new Outcome(0, n.getName() + "'s past key is not a float32 or float16 graph input");
            }
        }
        for (int i : nodes) {
            NodeProto n = g.graph.getNode(i);
            // the unused trailing inputs and outputs (empty names, as the builder writes them) are dropped: the library's op has 9 / 3
            NodeProto.Builder b = n.toBuilder().setDomain(DOMAIN).clearInput().clearOutput()
                    .addAllInput(n.getInputList().subList(0, Math.min(n.getInputCount(), MAX_INPUTS)))
                    .addAllOutput(n.getOutputList().subList(0, Math.min(n.getOutputCount(), 3)));
            g.graph.setNode(i, b);
        }
        g.requireOpset(DOMAIN, 1);
        return new Outcome(nodes.size(), null);
    }
}
