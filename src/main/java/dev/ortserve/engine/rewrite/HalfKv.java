package dev.ortserve.engine.rewrite;

import ai.onnx.proto.OnnxMl.NodeProto;
import ai.onnx.proto.OnnxMl.TensorProto;
import ai.onnx.proto.OnnxMl.ValueInfoProto;

import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * float16 KV for a float32 graph whose attention is com.microsoft GroupQueryAttention (the
 * onnxruntime-genai builder's layout, and the generator's): each GroupQueryAttention node runs in
 * float16. Its float inputs (query, key, value; the cos/sin caches of do_rotary, an attention bias, a
 * head sink) pass through a {@code Cast(to=FLOAT16)} (one per distinct tensor: the layers share the
 * rotary caches), its past_key/past_value graph inputs and present_key/present_value graph outputs
 * become float16, and its attention output is cast back to float32 under its old name, so the rest of
 * the graph is unchanged. onnxruntime's CPU kernel for the op is registered for float and MLFloat16
 * with every T input of one type, which is why the whole node moves and not the KV alone. The KV then
 * takes half the bytes per token (the engine's KV buffers, the prefix cache and the KV budget follow
 * the session's input type); the attention arithmetic is float16's, so logits move slightly (the load
 * probe holds them to a cosine bound, see RewriteProbe).
 */
final class HalfKv {

    static final String APPLIED = "float16 KV";
    private static final int FLOAT = TensorProto.DataType.FLOAT_VALUE;
    private static final int FLOAT16 = TensorProto.DataType.FLOAT16_VALUE;
    /** GroupQueryAttention's inputs of type T other than past_key/past_value: query, key, value, cos_cache, sin_cache, attention_bias, head_sink. */
    private static final Set<Integer> T_INPUTS = Set.of(0, 1, 2, 7, 8, 10, 11);
    private static final int PAST_KEY = 3, PAST_VALUE = 4;

    /** What the rewrite did: nodes moved to float16, or why it does not apply (then nothing changed). */
    record Outcome(int nodes, String reason) {
    }

    private HalfKv() {
    }

    static Outcome apply(Graph g) {
        List<Integer> nodes = g.nodesOf("com.microsoft", "GroupQueryAttention");
        if (nodes.isEmpty()) return new Outcome(0, "the graph has no GroupQueryAttention (explicit attention: its KV stays as exported)");
        Map<String, Integer> inputs = new HashMap<>(), outputs = new HashMap<>();
        for (int i = 0; i < g.graph.getInputCount(); i++) inputs.put(g.graph.getInput(i).getName(), i);
        for (int i = 0; i < g.graph.getOutputCount(); i++) outputs.put(g.graph.getOutput(i).getName(), i);
        // check every node first: the rewrite applies to all of them or to none
        Set<String> kvInputs = new HashSet<>(), kvOutputs = new HashSet<>();
        for (int i : nodes) {
            NodeProto n = g.graph.getNode(i);
            if (n.getInputCount() <= PAST_VALUE || n.getOutputCount() < 3) return new Outcome(0, n.getName() + " has no past/present KV");
            if (n.getOutputCount() > 3 && !n.getOutput(3).isEmpty()) return new Outcome(0, n.getName() + " also outputs its attention scores");
            for (int k : new int[] {PAST_KEY, PAST_VALUE}) {
                String past = n.getInput(k);
                Integer in = inputs.get(past);
                if (in == null) return new Outcome(0, n.getName() + "'s past '" + past + "' is not a graph input");
                int type = elemType(g.graph.getInput(in));
                if (type == FLOAT16) return new Outcome(0, "the KV is float16 already");
                if (type != FLOAT) return new Outcome(0, "the KV input '" + past + "' is not float32");
                if (g.consumers(past) != 1) return new Outcome(0, "the KV input '" + past + "' is read by more than its GroupQueryAttention");
                kvInputs.add(past);
            }
            for (int k = 1; k <= 2; k++) {
                String present = n.getOutput(k);
                if (!outputs.containsKey(present)) return new Outcome(0, n.getName() + "'s present '" + present + "' is not a graph output");
                if (g.consumers(present) != 1) return new Outcome(0, "the present '" + present + "' is read inside the graph too");
                kvOutputs.add(present);
            }
        }
        // the rewrite: casts in (each right after its tensor's producer, or first for an initializer or graph input:
        // before every reader), float16 KV, a cast out right after the node
        Map<String, String> halves = new HashMap<>();
        for (int i = 0; i < g.graph.getNodeCount(); i++) {
            NodeProto n = g.graph.getNode(i);
            if (!n.getOpType().equals("GroupQueryAttention") || !n.getDomain().equals("com.microsoft")) continue;
            NodeProto.Builder b = n.toBuilder();
            for (int k = 0; k < n.getInputCount(); k++) {
                String in = n.getInput(k);
                if (in.isEmpty() || !T_INPUTS.contains(k)) continue;
                String half = halves.get(in);
                if (half == null) {
                    half = g.unique(in + "_fp16");
                    halves.put(in, half);
                    int producer = g.producerIndex(in);
                    g.graph.addNode(producer < 0 ? 0 : producer + 1, cast(g, in, half, FLOAT16));
                    i++; // inserted before this node
                }
                b.setInput(k, half);
            }
            String output = n.getOutput(0), halfOutput = g.unique(output + "_fp16");
            b.setOutput(0, halfOutput);
            g.graph.setNode(i, b.build());
            g.graph.addNode(++i, cast(g, halfOutput, output, FLOAT));
        }
        for (int i = 0; i < g.graph.getInputCount(); i++) {
            if (kvInputs.contains(g.graph.getInput(i).getName())) g.graph.setInput(i, half(g.graph.getInput(i)));
        }
        for (int i = 0; i < g.graph.getOutputCount(); i++) {
            if (kvOutputs.contains(g.graph.getOutput(i).getName())) g.graph.setOutput(i, half(g.graph.getOutput(i)));
        }
        for (int i = 0; i < g.graph.getValueInfoCount(); i++) { // an annotated type would contradict the new one
            String name = g.graph.getValueInfo(i).getName();
            if (kvInputs.contains(name) || kvOutputs.contains(name)) g.graph.setValueInfo(i, half(g.graph.getValueInfo(i)));
        }
        return new Outcome(nodes.size(), null);
    }

    private static NodeProto cast(Graph g, String from, String to, int type) {
        return NodeProto.newBuilder().setOpType("Cast").setName(g.unique(to + "_cast")).addInput(from).addOutput(to)
                .addAttribute(Graph.intAttribute("to", type)).build();
    }

    private static int elemType(ValueInfoProto v) {
        return v.getType().getTensorType().getElemType();
    }

    private static ValueInfoProto half(ValueInfoProto v) {
        ValueInfoProto.Builder b = v.toBuilder();
        b.getTypeBuilder().getTensorTypeBuilder().setElemType(FLOAT16);
        return b.build();
    }
}
