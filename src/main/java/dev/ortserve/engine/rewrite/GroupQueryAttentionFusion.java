package dev.ortserve.engine.rewrite;

import ai.onnx.proto.OnnxMl.AttributeProto;
import ai.onnx.proto.OnnxMl.GraphProto;
import ai.onnx.proto.OnnxMl.NodeProto;
import ai.onnx.proto.OnnxMl.OperatorSetIdProto;
import ai.onnx.proto.OnnxMl.TensorProto;
import ai.onnx.proto.OnnxMl.ValueInfoProto;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.google.protobuf.ByteString;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Explicit attention (Optimum and transformers' exports, the project's own generated models) becomes
 * onnxruntime's {@code com.microsoft.GroupQueryAttention}, as onnxruntime-genai's builder writes it, so
 * that the engine serves the graph right-padded with each layer's KV in one buffer it writes in place
 * (past_present_share_buffer) instead of concatenating the whole past into a new present every step.
 * <p>
 * Per layer it matches, from the graph's outputs back: {@code present.N.key = Concat(past, k, axis 2)}
 * and the same for the value; the scores {@code MatMul(q, ...present key)} (the key reached through
 * repeat-kv shape ops and its transpose), scaled by constants ({@code Mul} / {@code Div}), plus a mask
 * ({@code Add}), {@code Softmax} over the last axis, casts, {@code MatMul(., ...present value)}, then the
 * {@code Transpose} and {@code Reshape} to [batch, sequence, heads x head size]. That becomes
 * {@code GroupQueryAttention(q, k, v, past key, past value, seqlens_k, total_sequence_length)} with q,
 * k and v transposed and flattened as the op takes them (q in the context's own layout, so grouped
 * five-axis queries too), the scale the product of the constants, and the present outputs its own;
 * {@code seqlens_k} and {@code total_sequence_length} come from {@code attention_mask} (valid tokens
 * per row minus one, its width). The mask, repeat-kv and softmax nodes are then unread and dropped.
 * Sliding-window layers (config.json's {@code sliding_window}, per layer by {@code layer_types}: Gemma 3)
 * keep their window as the op's {@code local_window_size}. Every layer must match, else nothing changes
 * (with the reason): softcapping, attention sinks and anything else between the two MatMuls are left to
 * the exported graph.
 */
final class GroupQueryAttentionFusion {

    static final String APPLIED = "attention as GroupQueryAttention";
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Set<String> SHAPE_OPS = Set.of("Unsqueeze", "Expand", "Reshape", "Transpose", "Tile", "Identity", "Squeeze");

    private GroupQueryAttentionFusion() {
    }

    /** How many layers were fused (all or none), and why not when none. */
    record Outcome(int fused, String reason) {
    }

    private record Layer(String q, String k, String v, String pastKey, String pastValue, String presentKey, String presentValue,
                         String context, List<Long> perm, double scale, int reshapeIndex, int window) {
    }

    static Outcome apply(Graph g, String attentionMask) throws IOException {
        for (NodeProto n : g.graph.getNodeList()) if (n.getOpType().equals("GroupQueryAttention")) return new Outcome(0, "the graph runs GroupQueryAttention already");
        Path configFile = g.sourceDir.resolve("config.json");
        if (!Files.isRegularFile(configFile)) return new Outcome(0, "no config.json beside the model (head counts)");
        JsonNode config = JSON.readTree(configFile.toFile());
        JsonNode text = config.has("text_config") ? config.get("text_config") : config;
        int heads = text.path("num_attention_heads").asInt(0);
        int kvHeads = text.path("num_key_value_heads").asInt(heads);
        if (heads <= 0 || kvHeads <= 0 || heads % kvHeads != 0) return new Outcome(0, "no usable num_attention_heads / num_key_value_heads in config.json");
        // sliding-window layers keep their window as the op's local_window_size = sliding_window (transformers' ids on Gemma 3's
        // export with a window of 8 over 35-token sequences; sliding_window - 1 misses the load probe): layer_types says which
        // layers, else every layer when the window is on (Mistral); Qwen's use_sliding_window false turns it off
        int window = text.path("sliding_window").canConvertToInt() && text.path("use_sliding_window").asBoolean(true) ? text.path("sliding_window").asInt() : 0;
        List<Boolean> sliding = new ArrayList<>();
        if (window > 0 && text.path("layer_types").isArray()) {
            text.path("layer_types").forEach(t -> sliding.add(t.asText().equals("sliding_attention")));
        }
        if (g.graph.getInputList().stream().noneMatch(i -> i.getName().equals(attentionMask))) return new Outcome(0, "no " + attentionMask + " input");
        Map<String, Integer> producers = new HashMap<>();
        Map<String, List<Integer>> consumers = new HashMap<>();
        for (int i = 0; i < g.graph.getNodeCount(); i++) {
            NodeProto n = g.graph.getNode(i);
            for (String o : n.getOutputList()) producers.put(o, i);
            for (String in : n.getInputList()) consumers.computeIfAbsent(in, x -> new ArrayList<>()).add(i);
        }
        Set<String> inputs = new HashSet<>();
        for (ValueInfoProto v : g.graph.getInputList()) inputs.add(v.getName());
        Set<String> outputs = new HashSet<>();
        for (ValueInfoProto v : g.graph.getOutputList()) outputs.add(v.getName());
        List<Layer> layers = new ArrayList<>();
        for (ValueInfoProto out : g.graph.getOutputList()) {
            String presentKey = out.getName();
            if (!presentKey.startsWith("present") || !presentKey.contains("key")) continue;
            String presentValue = presentKey.replace("key", "value");
            if (!outputs.contains(presentValue)) return new Outcome(0, "no value output beside " + presentKey);
            String why = null;
            String[] kc = concatOfPast(g, producers, inputs, presentKey), vc = concatOfPast(g, producers, inputs, presentValue);
            if (kc == null || vc == null) return new Outcome(0, presentKey + " is not Concat(past, new) on the sequence axis");
            Integer scores = readerThroughShapes(g, consumers, presentKey);
            Integer mix = readerThroughShapes(g, consumers, presentValue);
            if (scores == null || mix == null) return new Outcome(0, "no attention MatMul reads " + presentKey + " / " + presentValue);
            // the scores' chain: [Mul|Div const]* Add(mask) Softmax(-1) Cast* -> the mixing MatMul
            double scale = 1;
            String t = g.graph.getNode(scores).getOutput(0);
            int at = sole(consumers, t);
            while (at >= 0 && (is(g, at, "Mul") || is(g, at, "Div"))) {
                NodeProto n = g.graph.getNode(at);
                String other = n.getInput(0).equals(t) ? n.getInput(1) : n.getInput(0);
                Double c = scalar(g, producers, other);
                if (c == null || (is(g, at, "Div") && !n.getInput(0).equals(t))) return new Outcome(0, "the scores of " + presentKey + " are scaled by a non-constant");
                scale = is(g, at, "Mul") ? scale * c : scale / c;
                t = n.getOutput(0);
                at = sole(consumers, t);
            }
            if (at < 0 || !is(g, at, "Add")) return new Outcome(0, "no mask Add after the scores of " + presentKey);
            t = g.graph.getNode(at).getOutput(0);
            at = sole(consumers, t);
            if (at < 0 || !is(g, at, "Softmax") || Graph.intAttribute(g.graph.getNode(at), "axis", -1) != -1 && Graph.intAttribute(g.graph.getNode(at), "axis", -1) != 3
                    && Graph.intAttribute(g.graph.getNode(at), "axis", -1) != 4) {
                return new Outcome(0, "no Softmax over the last axis after the scores of " + presentKey + " (softcapping, sinks ...)");
            }
            t = g.graph.getNode(at).getOutput(0);
            at = sole(consumers, t);
            while (at >= 0 && is(g, at, "Cast")) {
                t = g.graph.getNode(at).getOutput(0);
                at = sole(consumers, t);
            }
            if (at != mix || !g.graph.getNode(mix).getInput(0).equals(t)) return new Outcome(0, "the probabilities of " + presentKey + " do not go straight to the value MatMul");
            int transpose = sole(consumers, g.graph.getNode(mix).getOutput(0));
            if (transpose < 0 || !is(g, transpose, "Transpose")) return new Outcome(0, "no Transpose after the attention of " + presentKey);
            int reshape = sole(consumers, g.graph.getNode(transpose).getOutput(0));
            if (reshape < 0 || !is(g, reshape, "Reshape")) return new Outcome(0, "no Reshape after the attention of " + presentKey);
            List<Long> perm = null;
            for (AttributeProto a : g.graph.getNode(transpose).getAttributeList()) if (a.getName().equals("perm")) perm = a.getIntsList();
            if (perm == null || perm.size() < 4 || perm.get(0) != 0 || perm.get(1) != perm.size() - 2 || perm.get(perm.size() - 1) != perm.size() - 1) {
                return new Outcome(0, "the attention output of " + presentKey + " is not transposed to [batch, sequence, heads, head size]");
            }
            int layerWindow = 0;
            if (window > 0) {
                java.util.regex.Matcher m = java.util.regex.Pattern.compile("(\\d+)").matcher(presentKey);
                int index = m.find() ? Integer.parseInt(m.group(1)) : -1;
                if (sliding.isEmpty()) layerWindow = window;
                else if (index < 0 || index >= sliding.size()) return new Outcome(0, "no layer_types entry for " + presentKey);
                else if (sliding.get(index)) layerWindow = window;
            }
            layers.add(new Layer(g.graph.getNode(scores).getInput(0), kc[1], vc[1], kc[0], vc[0], presentKey, presentValue,
                    g.graph.getNode(reshape).getOutput(0), perm, scale, reshape, layerWindow));
        }
        if (layers.isEmpty()) return new Outcome(0, "no present key/value outputs");
        GraphProto before = g.graph.build();
        try {
            rewrite(g, layers, heads, kvHeads, attentionMask);
        } catch (RuntimeException e) {
            g.graph.clear().mergeFrom(before);
            return new Outcome(0, e.getMessage());
        }
        return new Outcome(layers.size(), null);
    }

    private static void rewrite(Graph g, List<Layer> layers, int heads, int kvHeads, String attentionMask) {
        g.requireOpset("com.microsoft", 1);
        long opset = 13;
        for (OperatorSetIdProto o : g.model.getOpsetImportList()) if (o.getDomain().isEmpty() || o.getDomain().equals("ai.onnx")) opset = o.getVersion();
        List<NodeProto> head = new ArrayList<>();
        // seqlens_k = valid tokens per row - 1 (int32), total_sequence_length = the mask's width (int32 scalar)
        String sum = g.unique("ortserve_gqa_mask_sum"), seqlens = g.unique("ortserve_gqa_seqlens_k"), total = g.unique("ortserve_gqa_total_length");
        String one = constant(g, "ortserve_gqa_one", TensorProto.DataType.INT64_VALUE, 1L, false);
        NodeProto.Builder reduce = NodeProto.newBuilder().setOpType("ReduceSum").setName(g.unique("ortserve_gqa_mask_reduce")).addInput(attentionMask)
                .addOutput(sum).addAttribute(Graph.intAttribute("keepdims", 0));
        if (opset >= 13) reduce.addInput(constant(g, "ortserve_gqa_axis1", TensorProto.DataType.INT64_VALUE, 1L, true));
        else reduce.addAttribute(AttributeProto.newBuilder().setName("axes").setType(AttributeProto.AttributeType.INTS).addInts(1));
        head.add(reduce.build());
        String minusOne = g.unique("ortserve_gqa_last_index");
        head.add(NodeProto.newBuilder().setOpType("Sub").setName(g.unique("ortserve_gqa_sub")).addInput(sum).addInput(one).addOutput(minusOne).build());
        head.add(NodeProto.newBuilder().setOpType("Cast").setName(g.unique("ortserve_gqa_seqlens_cast")).addInput(minusOne).addOutput(seqlens)
                .addAttribute(Graph.intAttribute("to", TensorProto.DataType.INT32_VALUE)).build());
        String shape = g.unique("ortserve_gqa_mask_shape"), width = g.unique("ortserve_gqa_mask_width");
        head.add(NodeProto.newBuilder().setOpType("Shape").setName(g.unique("ortserve_gqa_shape")).addInput(attentionMask).addOutput(shape).build());
        head.add(NodeProto.newBuilder().setOpType("Gather").setName(g.unique("ortserve_gqa_width")).addInput(shape).addInput(one).addOutput(width).build());
        head.add(NodeProto.newBuilder().setOpType("Cast").setName(g.unique("ortserve_gqa_total_cast")).addInput(width).addOutput(total)
                .addAttribute(Graph.intAttribute("to", TensorProto.DataType.INT32_VALUE)).build());
        String flat = constantInts(g, "ortserve_gqa_flat_shape", new long[] {0, 0, -1});
        Map<Integer, List<NodeProto>> insertBefore = new HashMap<>();
        Set<String> removeOutputs = new HashSet<>();
        for (Layer l : layers) {
            List<NodeProto> nodes = new ArrayList<>();
            String q = flatten(g, nodes, l.q(), l.perm(), flat);
            String k = flatten(g, nodes, l.k(), List.of(0L, 2L, 1L, 3L), flat);
            String v = flatten(g, nodes, l.v(), List.of(0L, 2L, 1L, 3L), flat);
            nodes.add(NodeProto.newBuilder().setOpType("GroupQueryAttention").setDomain("com.microsoft").setName(g.unique("ortserve_gqa"))
                    .addInput(q).addInput(k).addInput(v).addInput(l.pastKey()).addInput(l.pastValue()).addInput(seqlens).addInput(total)
                    .addOutput(l.context()).addOutput(l.presentKey()).addOutput(l.presentValue())
                    .addAttribute(Graph.intAttribute("num_heads", heads)).addAttribute(Graph.intAttribute("kv_num_heads", kvHeads))
                    .addAttribute(AttributeProto.newBuilder().setName("scale").setType(AttributeProto.AttributeType.FLOAT).setF((float) l.scale()))
                    .addAttribute(Graph.intAttribute("local_window_size", l.window() > 0 ? l.window() : -1)).build());
            insertBefore.put(l.reshapeIndex(), nodes);
            removeOutputs.add(l.context());
            removeOutputs.add(l.presentKey());
            removeOutputs.add(l.presentValue());
        }
        List<NodeProto> rebuilt = new ArrayList<>(head);
        for (int i = 0; i < g.graph.getNodeCount(); i++) {
            List<NodeProto> add = insertBefore.get(i);
            if (add != null) rebuilt.addAll(add);
            NodeProto n = g.graph.getNode(i);
            if (n.getOutputList().stream().anyMatch(removeOutputs::contains)) continue; // now GroupQueryAttention's outputs
            rebuilt.add(n);
        }
        g.graph.clearNode().addAllNode(rebuilt);
        removeDeadNodes(g);
        // nothing but the graph's outputs may read a present: in place it is the batch's whole buffer, longer than the sequence
        Set<String> presents = new HashSet<>();
        for (Layer l : layers) {
            presents.add(l.presentKey());
            presents.add(l.presentValue());
        }
        for (NodeProto n : g.graph.getNodeList()) {
            if (n.getOpType().equals("GroupQueryAttention")) continue;
            for (String in : n.getInputList()) if (presents.contains(in)) throw new IllegalStateException(n.getName() + " still reads " + in);
        }
        // every reader of a present output must now come after the op that writes it
        Set<String> produced = new HashSet<>();
        for (ValueInfoProto v : g.graph.getInputList()) produced.add(v.getName());
        for (TensorProto t : g.graph.getInitializerList()) produced.add(t.getName());
        produced.add("");
        for (NodeProto n : g.graph.getNodeList()) {
            for (String in : n.getInputList()) if (!produced.contains(in)) throw new IllegalStateException(n.getName() + " reads " + in + " before it is computed");
            produced.addAll(n.getOutputList());
        }
        g.removeUnusedInitializers();
    }

    /** Transpose(perm) then Reshape to [batch, sequence, -1]. */
    private static String flatten(Graph g, List<NodeProto> nodes, String x, List<Long> perm, String flat) {
        String t = g.unique(x + "_gqa_t"), r = g.unique(x + "_gqa_flat");
        nodes.add(NodeProto.newBuilder().setOpType("Transpose").setName(g.unique("ortserve_gqa_transpose")).addInput(x).addOutput(t)
                .addAttribute(AttributeProto.newBuilder().setName("perm").setType(AttributeProto.AttributeType.INTS).addAllInts(perm)).build());
        nodes.add(NodeProto.newBuilder().setOpType("Reshape").setName(g.unique("ortserve_gqa_reshape")).addInput(t).addInput(flat).addOutput(r).build());
        return r;
    }

    /** Drops nodes none of whose outputs is read (by a later node, a subgraph or the graph's outputs), in one backward pass. */
    static void removeDeadNodes(Graph g) {
        Set<String> used = new HashSet<>();
        for (ValueInfoProto o : g.graph.getOutputList()) used.add(o.getName());
        List<NodeProto> kept = new ArrayList<>();
        for (int i = g.graph.getNodeCount() - 1; i >= 0; i--) {
            NodeProto n = g.graph.getNode(i);
            if (n.getOutputList().stream().noneMatch(used::contains)) continue;
            kept.add(n);
            used.addAll(n.getInputList());
            for (AttributeProto a : n.getAttributeList()) {
                if (a.hasG()) a.getG().getNodeList().forEach(s -> used.addAll(s.getInputList()));
                for (GraphProto sub : a.getGraphsList()) sub.getNodeList().forEach(s -> used.addAll(s.getInputList()));
            }
        }
        java.util.Collections.reverse(kept);
        g.graph.clearNode().addAllNode(kept);
    }

    /** [past input, new tensor] of the Concat on the sequence axis that makes {@code present}, else null. */
    private static String[] concatOfPast(Graph g, Map<String, Integer> producers, Set<String> inputs, String present) {
        Integer p = producers.get(present);
        if (p == null) return null;
        NodeProto c = g.graph.getNode(p);
        if (!c.getOpType().equals("Concat") || c.getInputCount() != 2) return null;
        long axis = Graph.intAttribute(c, "axis", 0);
        if (axis != 2 && axis != -2) return null;
        String past = c.getInput(0);
        // torch sometimes passes the past through a one-input Concat or an Identity
        for (Integer q = producers.get(past); q != null; q = producers.get(past)) {
            NodeProto n = g.graph.getNode(q);
            if (!(n.getOpType().equals("Identity") || n.getOpType().equals("Concat") && n.getInputCount() == 1)) return null;
            past = n.getInput(0);
        }
        return inputs.contains(past) ? new String[] {past, c.getInput(1)} : null;
    }

    /** The MatMul reading {@code tensor} as its second input through shape ops only (repeat-kv, transposes), else null. */
    private static Integer readerThroughShapes(Graph g, Map<String, List<Integer>> consumers, String tensor) {
        Integer found = null;
        List<String> frontier = new ArrayList<>(List.of(tensor));
        Set<String> seen = new HashSet<>();
        while (!frontier.isEmpty()) {
            String t = frontier.remove(frontier.size() - 1);
            if (!seen.add(t)) continue;
            for (int i : consumers.getOrDefault(t, List.of())) {
                NodeProto n = g.graph.getNode(i);
                if (n.getOpType().equals("MatMul") && n.getInput(1).equals(t)) {
                    if (found != null && found != i) return null; // two readers: not one attention
                    found = i;
                } else if (SHAPE_OPS.contains(n.getOpType()) && n.getInput(0).equals(t)) {
                    frontier.add(n.getOutput(0));
                }
                // other readers (Shape of the present, for repeat-kv's target shape) do not carry its values
            }
        }
        return found;
    }

    private static int sole(Map<String, List<Integer>> consumers, String tensor) {
        List<Integer> c = consumers.getOrDefault(tensor, List.of());
        return c.size() == 1 ? c.get(0) : -1;
    }

    private static boolean is(Graph g, int node, String op) {
        NodeProto n = g.graph.getNode(node);
        return n.getOpType().equals(op) && n.getDomain().isEmpty();
    }

    /** The value of a one-element float constant (an initializer or a Constant node), else null. */
    private static Double scalar(Graph g, Map<String, Integer> producers, String name) throws IOException {
        TensorProto t = g.initializer(name);
        if (t == null) {
            Integer p = producers.get(name);
            if (p == null || !g.graph.getNode(p).getOpType().equals("Constant")) return null;
            for (AttributeProto a : g.graph.getNode(p).getAttributeList()) if (a.getName().equals("value") && a.hasT()) t = a.getT();
            if (t == null) return null;
        }
        long count = 1;
        for (long d : t.getDimsList()) count *= d;
        if (count != 1) return null;
        if (t.getDataType() == TensorProto.DataType.FLOAT_VALUE) {
            if (t.getFloatDataCount() == 1) return (double) t.getFloatData(0);
            return (double) g.bytes(t).getFloat(0);
        }
        if (t.getDataType() == TensorProto.DataType.DOUBLE_VALUE) return t.getDoubleDataCount() == 1 ? t.getDoubleData(0) : g.bytes(t).getDouble(0);
        // a float16 graph's constants are float16 (Optimum's and onnx-community's model_fp16.onnx): int32_data holds the bits
        if (t.getDataType() == TensorProto.DataType.FLOAT16_VALUE) {
            return (double) BlockQuantizedWeights.halfToFloat(t.getInt32DataCount() == 1 ? (short) t.getInt32Data(0) : g.bytes(t).getShort(0));
        }
        if (t.getDataType() == TensorProto.DataType.BFLOAT16_VALUE) {
            int bits = t.getInt32DataCount() == 1 ? t.getInt32Data(0) : g.bytes(t).getShort(0) & 0xffff;
            return (double) Float.intBitsToFloat(bits << 16);
        }
        return null;
    }

    private static String constant(Graph g, String base, int type, long value, boolean vector) {
        String name = g.unique(base);
        ByteBuffer b = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(value);
        TensorProto.Builder t = TensorProto.newBuilder().setName(name).setDataType(type).setRawData(ByteString.copyFrom(b.array()));
        if (vector) t.addDims(1);
        g.graph.addInitializer(t);
        return name;
    }

    private static String constantInts(Graph g, String base, long[] values) {
        String name = g.unique(base);
        ByteBuffer b = ByteBuffer.allocate(8 * values.length).order(ByteOrder.LITTLE_ENDIAN);
        for (long v : values) b.putLong(v);
        g.graph.addInitializer(TensorProto.newBuilder().setName(name).setDataType(TensorProto.DataType.INT64_VALUE).addDims(values.length)
                .setRawData(ByteString.copyFrom(b.array())));
        return name;
    }
}
