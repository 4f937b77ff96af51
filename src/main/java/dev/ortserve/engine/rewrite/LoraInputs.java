package dev.ortserve.engine.rewrite;

import ai.onnx.proto.OnnxMl.NodeProto;
import ai.onnx.proto.OnnxMl.TensorProto;
import ai.onnx.proto.OnnxMl.TensorShapeProto;
import ai.onnx.proto.OnnxMl.TypeProto;
import ai.onnx.proto.OnnxMl.ValueInfoProto;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * LoRA inputs on a decoder's projections (issue 34): each targeted projection {@code y = x W} becomes
 * {@code y = x W + (x A) B} with A [in, r] and B [r, out] graph inputs whose defaults are empty (r = 0: the
 * projection's own output, to the bit), so a run without an adapter is the base model and a run with one
 * ({@code OrtLoraAdapter} in its run options) feeds A and B (B already scaled by alpha / r). Inputs are named as
 * onnxruntime-genai's model builder names them ({@code model.layers.<i>.attn.q_proj.lora_A.MatMul.weight}, {@code
 * ...mlp.down_proj.lora_B.MatMul.weight}), so its adapter files fit. Projections are found by the names the
 * exporters give their MatMuls ({@link #projection}) before any other rewrite, and the side path is added after the
 * others (packing, quantization), at the projection's output, which those keep: the LoRA MatMuls stay float.
 */
final class LoraInputs {

    static final String APPLIED = "LoRA inputs";

    /** A projection of the graph: its layer, canonical module name and output. */
    record Projection(int layer, String module, String output) {
        /** The prefix of its LoRA inputs' names. */
        String prefix() { // as PeftAdapter.prefix names them (the two libraries import nothing of each other)
            return prefix(layer, module);
        }

        static String prefix(int layer, String module) {
            return "model.layers." + layer + "." + (module.equals("o_proj") || module.startsWith("q") || module.startsWith("k_")
                    || module.startsWith("v_") ? "attn" : "mlp") + "." + module;
        }
    }

    /** Optimum (/model/model/layers.0/self_attn/q_proj/MatMul) and onnxruntime-genai's builder (/model/layers.0/attn/qkv_proj/MatMul_Q4). */
    private static final Pattern EXPORTED = Pattern.compile(
            "layers\\.(\\d+)/(?:self_attn|attn|attention|mlp)/(q_proj|k_proj|v_proj|o_proj|qkv_proj|gate_proj|up_proj|down_proj|gate_up_proj)/MatMul(?:_Q\\d)?$");
    /** The reference decoder's export (/layers.0/q/MatMul ... /layers.0/dn/MatMul). */
    private static final Pattern REFERENCE = Pattern.compile("^/layers\\.(\\d+)/(q|k|v|o|g|u|dn)/MatMul$");
    /** ortserve's generated models (l0.q.proj#23 ... l0.down.proj#61: the output, then the node's number). */
    private static final Pattern GENERATED = Pattern.compile("^l(\\d+)\\.(q|k|v|o|gate|up|down)\\.proj(?:#\\d+)?$");
    private static final Map<String, String> SHORT = Map.of("q", "q_proj", "k", "k_proj", "v", "v_proj", "o", "o_proj", "g", "gate_proj",
            "gate", "gate_proj", "u", "up_proj", "up", "up_proj", "dn", "down_proj", "down", "down_proj");

    private LoraInputs() {
    }

    /** The projection a MatMul node is, by its name; null for any other node. */
    static Projection projection(NodeProto n) {
        if (n.getOutputCount() != 1 || !(n.getOpType().equals("MatMul") && n.getDomain().isEmpty()
                || n.getOpType().equals("MatMulNBits") && n.getDomain().equals("com.microsoft"))) return null;
        Matcher m = EXPORTED.matcher(n.getName());
        if (m.find()) return new Projection(Integer.parseInt(m.group(1)), m.group(2), n.getOutput(0));
        for (Pattern p : List.of(REFERENCE, GENERATED)) {
            m = p.matcher(n.getName());
            if (m.find()) return new Projection(Integer.parseInt(m.group(1)), SHORT.get(m.group(2)), n.getOutput(0));
        }
        return null;
    }

    /** The projections of the targeted modules, found before the other rewrites rename their nodes. */
    static List<Projection> find(Graph g, Set<String> modules) {
        List<Projection> found = new ArrayList<>();
        for (NodeProto n : g.graph.getNodeList()) {
            Projection p = projection(n);
            if (p == null) continue;
            // a packed projection serves its parts: q/k/v through qkv_proj, gate/up through gate_up_proj
            boolean wanted = modules.contains(p.module()) || p.module().equals("qkv_proj") && (modules.contains("q_proj") || modules.contains("k_proj")
                    || modules.contains("v_proj")) || p.module().equals("gate_up_proj") && (modules.contains("gate_proj") || modules.contains("up_proj"));
            if (wanted) found.add(p);
        }
        return found;
    }

    /** Adds the side path to every projection found (after the other rewrites); returns how many got one. */
    static int apply(Graph g, List<Projection> projections) {
        Map<String, Integer> producers = new LinkedHashMap<>();
        for (int i = 0; i < g.graph.getNodeCount(); i++) {
            for (String o : g.graph.getNode(i).getOutputList()) producers.put(o, i);
        }
        List<NodeProto> nodes = new ArrayList<>(g.graph.getNodeList());
        Map<Integer, List<NodeProto>> after = new LinkedHashMap<>();
        // inputs the graph has already (the builder's own LoRA graphs) or two nodes named alike: never a second pair
        java.util.Set<String> taken = new java.util.HashSet<>();
        g.graph.getInputList().forEach(i -> taken.add(i.getName()));
        g.graph.getInitializerList().forEach(i -> taken.add(i.getName()));
        int done = 0;
        for (Projection p : projections) {
            if (!taken.add(p.prefix() + ".lora_A.MatMul.weight")) continue;
            Integer at = producers.get(p.output());
            if (at == null) continue;
            NodeProto producer = nodes.get(at);
            // the MatMul that computes it now: itself (maybe quantized), or the packed MatMul before a Split
            NodeProto matMul = producer;
            if (producer.getOpType().equals("Split")) {
                Integer packed = producers.get(producer.getInput(0));
                if (packed == null) continue;
                matMul = nodes.get(packed);
            }
            long[] inOut = inOut(g, matMul, producer, p.output());
            if (inOut == null) continue;
            int type = elementType(g, matMul);
            String x = matMul.getInput(0);
            String base = g.unique(p.output() + "_base");
            String a = p.prefix() + ".lora_A.MatMul.weight", b = p.prefix() + ".lora_B.MatMul.weight";
            String rank = "lora_rank_" + p.layer() + "_" + p.module();
            NodeProto.Builder renamed = producer.toBuilder();
            for (int o = 0; o < renamed.getOutputCount(); o++) if (renamed.getOutput(o).equals(p.output())) renamed.setOutput(o, base);
            producer = renamed.build();
            nodes.set(at, producer);
            String xa = g.unique(p.output() + "_lora_a"), xab = g.unique(p.output() + "_lora_b");
            String name = "/" + p.prefix().replace('.', '/');
            List<NodeProto> side = after.computeIfAbsent(at, k -> new ArrayList<>());
            side.add(NodeProto.newBuilder().setOpType("MatMul").setName(g.unique(name + "/lora_A/MatMul")).addInput(x).addInput(a).addOutput(xa).build());
            side.add(NodeProto.newBuilder().setOpType("MatMul").setName(g.unique(name + "/lora_B/MatMul")).addInput(xa).addInput(b).addOutput(xab).build());
            side.add(NodeProto.newBuilder().setOpType("Add").setName(g.unique(name + "/lora/Add")).addInput(base).addInput(xab).addOutput(p.output()).build());
            // inputs with empty defaults: overridable initializers, fed by an adapter, rank 0 without one
            g.graph.addInput(input(a, type, inOut[0], null, rank));
            g.graph.addInput(input(b, type, -1, rank, inOut[1]));
            g.graph.addInitializer(TensorProto.newBuilder().setName(a).setDataType(type).addDims(inOut[0]).addDims(0));
            g.graph.addInitializer(TensorProto.newBuilder().setName(b).setDataType(type).addDims(0).addDims(inOut[1]));
            done++;
        }
        if (done == 0) return 0;
        List<NodeProto> ordered = new ArrayList<>();
        for (int i = 0; i < nodes.size(); i++) {
            ordered.add(nodes.get(i));
            ordered.addAll(after.getOrDefault(i, List.of()));
        }
        g.graph.clearNode().addAllNode(ordered);
        return done;
    }

    /** [in, out] of the projection's output: the MatMul's K, and N (or, after a Split, the part's columns). */
    private static long[] inOut(Graph g, NodeProto matMul, NodeProto producer, String output) {
        long k, n;
        if (matMul.getOpType().equals("MatMulNBits")) {
            k = Graph.intAttribute(matMul, "K", -1);
            n = Graph.intAttribute(matMul, "N", -1);
        } else {
            TensorProto w = g.initializer(matMul.getInput(1));
            if (w == null || w.getDimsCount() != 2) return null;
            k = w.getDims(0);
            n = w.getDims(1);
        }
        if (k <= 0 || n <= 0) return null;
        if (producer != matMul) { // a part of a Split: its columns, from the Split's sizes
            long[] sizes = splitSizes(g, producer);
            if (sizes == null) return null;
            int part = producer.getOutputList().indexOf(output);
            n = part < 0 ? -1 : sizes[part];
        }
        return n <= 0 ? null : new long[] {k, n};
    }

    private static long[] splitSizes(Graph g, NodeProto split) {
        if (split.getInputCount() > 1) {
            TensorProto t = g.initializer(split.getInput(1));
            if (t == null || t.getRawData().isEmpty()) return null;
            java.nio.LongBuffer b = t.getRawData().asReadOnlyByteBuffer().order(java.nio.ByteOrder.LITTLE_ENDIAN).asLongBuffer();
            long[] sizes = new long[b.remaining()];
            b.get(sizes);
            return sizes;
        }
        for (var a : split.getAttributeList()) {
            if (a.getName().equals("split")) return a.getIntsList().stream().mapToLong(Long::longValue).toArray();
        }
        return null;
    }

    /** The activations' element type: the weight's (float16 exports), or a MatMulNBits' scales'. */
    private static int elementType(Graph g, NodeProto matMul) {
        TensorProto t = g.initializer(matMul.getInput(matMul.getOpType().equals("MatMulNBits") ? 2 : 1));
        return t != null && t.getDataType() == TensorProto.DataType.FLOAT16_VALUE ? TensorProto.DataType.FLOAT16_VALUE : TensorProto.DataType.FLOAT_VALUE;
    }

    private static ValueInfoProto input(String name, int type, long rows, String rowParam, Object columns) {
        TensorShapeProto.Builder shape = TensorShapeProto.newBuilder();
        shape.addDim(rowParam != null ? TensorShapeProto.Dimension.newBuilder().setDimParam(rowParam) : TensorShapeProto.Dimension.newBuilder().setDimValue(rows));
        shape.addDim(columns instanceof String s ? TensorShapeProto.Dimension.newBuilder().setDimParam(s)
                : TensorShapeProto.Dimension.newBuilder().setDimValue((Long) columns));
        return ValueInfoProto.newBuilder().setName(name)
                .setType(TypeProto.newBuilder().setTensorType(TypeProto.Tensor.newBuilder().setElemType(type).setShape(shape))).build();
    }
}
