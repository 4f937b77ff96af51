package dev.ortserve.engine.rewrite;

import ai.onnx.proto.OnnxMl.AttributeProto;
import ai.onnx.proto.OnnxMl.NodeProto;
import ai.onnx.proto.OnnxMl.TensorProto;
import ai.onnx.proto.OnnxMl.TensorShapeProto;
import ai.onnx.proto.OnnxMl.ValueInfoProto;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.google.protobuf.ByteString;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;

/**
 * Each GroupQueryAttention's scale moves onto its query: {@code Mul(query, scale)} before the node and the node's
 * {@code scale} set to 1. The scores are the same product ((s q) . k = s (q . k); rotary is a rotation, softcap and
 * the local window come after the scale either way), only rounded once more. Why: onnxruntime's CPU kernel
 * (contrib_ops/cpu/bert/gqa_attention_base.h) computes each (row, query head)'s scores as one GEMM with the scale as
 * its alpha, and MLAS takes its matrix-vector path for a one-token query (no packing of the keys) only when alpha is
 * 1: with any other scale a decode step packs each KV head's keys once per query head before reading them (the value
 * side already runs at alpha 1). Measured (docs/benchmarks.md): the op 1.2-1.4x faster with float16 KV after 1,600
 * tokens, where the kernel converts a head to float32 first; about even with float32 KV, read from memory either way.
 * <p>
 * A packed query/key/value input (the model builder's: key and value empty) gets a per-channel constant: the scale
 * on the query heads' channels, 1 on the key's and value's; the head size comes from the past key's shape, and a
 * graph whose past key shape does not state it takes it from the model's config (the builder's genai_config.json), and
 * without one it is left as it is (with the reason).
 */
final class QueryScale {

    static final String APPLIED = "attention scale on the query";
    private static final ObjectMapper JSON = new ObjectMapper();

    /** Nodes rewritten, or why none (then nothing changed). */
    record Outcome(int nodes, String reason) {
    }

    private QueryScale() {
    }

    static Outcome apply(Graph g) {
        List<Integer> nodes = g.nodesOf("com.microsoft", "GroupQueryAttention");
        if (nodes.isEmpty()) return new Outcome(0, "the graph has no GroupQueryAttention");
        // check every node first: all of them or none
        List<float[]> factors = new ArrayList<>();
        List<Integer> types = new ArrayList<>();
        int[] configHeadSize = {-1}; // read from the config once, if a node needs it
        for (int i : nodes) {
            NodeProto n = g.graph.getNode(i);
            int heads = (int) Graph.intAttribute(n, "num_heads", 0), kvHeads = (int) Graph.intAttribute(n, "kv_num_heads", 0);
            ValueInfoProto past = n.getInputCount() > 3 ? input(g, n.getInput(3)) : null;
            if (past == null) return new Outcome(0, n.getName() + "'s past key is not a graph input");
            int type = past.getType().getTensorType().getElemType();
            if (type != TensorProto.DataType.FLOAT_VALUE && type != TensorProto.DataType.FLOAT16_VALUE) {
                return new Outcome(0, n.getName() + " runs in neither float32 nor float16");
            }
            TensorShapeProto shape = past.getType().getTensorType().getShape();
            int headSize = shape.getDimCount() == 4 && shape.getDim(3).hasDimValue() ? (int) shape.getDim(3).getDimValue() : 0;
            if (headSize <= 0) {
                if (configHeadSize[0] < 0) configHeadSize[0] = configHeadSize(g, heads);
                headSize = configHeadSize[0];
            }
            float scale = floatAttribute(n, "scale", 0f);
            if (scale == 0f) {
                if (headSize <= 0) return new Outcome(0, n.getName() + " has the default scale and neither its past key's shape nor the model's config states a head size");
                scale = (float) (1.0 / Math.sqrt(headSize));
            }
            boolean packed = n.getInputCount() < 3 || n.getInput(1).isEmpty();
            float[] factor;
            if (scale == 1f) {
                factor = null; // at scale 1 already: nothing to move
            } else if (!packed) {
                factor = new float[] {scale};
            } else {
                if (headSize <= 0) return new Outcome(0, n.getName() + " reads packed query/key/value and neither its past key's shape nor the model's config states a head size");
                factor = new float[(heads + 2 * kvHeads) * headSize];
                for (int c = 0; c < factor.length; c++) factor[c] = c < heads * headSize ? scale : 1f;
            }
            factors.add(factor);
            types.add(type);
        }
        int moved = (int) factors.stream().filter(f -> f != null).count();
        if (moved == 0) return new Outcome(0, "every GroupQueryAttention runs at scale 1 already");
        // insert from the last node back, so the earlier indexes stay valid
        for (int j = nodes.size() - 1; j >= 0; j--) {
            if (factors.get(j) == null) continue;
            int i = nodes.get(j);
            NodeProto n = g.graph.getNode(i);
            String constant = g.unique(n.getName() + "_query_scale"), scaled = g.unique(n.getInput(0) + "_scaled");
            g.graph.addInitializer(tensor(constant, factors.get(j), types.get(j)));
            NodeProto mul = NodeProto.newBuilder().setOpType("Mul").setName(g.unique(n.getName() + "_query_scale_mul"))
                    .addInput(n.getInput(0)).addInput(constant).addOutput(scaled).build();
            NodeProto.Builder b = n.toBuilder().setInput(0, scaled);
            for (int a = b.getAttributeCount() - 1; a >= 0; a--) if (b.getAttribute(a).getName().equals("scale")) b.removeAttribute(a);
            b.addAttribute(AttributeProto.newBuilder().setName("scale").setType(AttributeProto.AttributeType.FLOAT).setF(1f));
            g.graph.setNode(i, b.build());
            g.graph.addNode(i, mul);
        }
        return new Outcome(moved, null);
    }

    /**
     * The head size the model's config states (the model builder names its past keys' last axis {@code kv_cache_dim}):
     * genai_config.json's decoder head_size, else config.json's head_dim or hidden_size / num_attention_heads; 0 if none.
     */
    static int configHeadSize(Graph g, int heads) {
        try {
            java.nio.file.Path genai = g.sourceDir.resolve("genai_config.json"), config = g.sourceDir.resolve("config.json");
            if (java.nio.file.Files.isRegularFile(genai)) {
                JsonNode decoder = JSON.readTree(genai.toFile()).path("model").path("decoder");
                if (decoder.path("head_size").canConvertToInt()) return decoder.path("head_size").asInt();
                if (decoder.path("hidden_size").canConvertToInt() && heads > 0) return decoder.path("hidden_size").asInt() / heads;
            }
            if (java.nio.file.Files.isRegularFile(config)) {
                JsonNode c = JSON.readTree(config.toFile());
                JsonNode text = c.has("text_config") ? c.get("text_config") : c;
                if (text.path("head_dim").canConvertToInt()) return text.path("head_dim").asInt();
                if (text.path("hidden_size").canConvertToInt() && heads > 0) return text.path("hidden_size").asInt() / heads;
            }
        } catch (java.io.IOException e) {
            return 0;
        }
        return 0;
    }

    private static ValueInfoProto input(Graph g, String name) {
        for (ValueInfoProto v : g.graph.getInputList()) if (v.getName().equals(name)) return v;
        return null;
    }

    private static float floatAttribute(NodeProto n, String name, float otherwise) {
        for (AttributeProto a : n.getAttributeList()) if (a.getName().equals(name)) return a.getF();
        return otherwise;
    }

    private static TensorProto tensor(String name, float[] values, int type) {
        boolean half = type == TensorProto.DataType.FLOAT16_VALUE;
        ByteBuffer b = ByteBuffer.allocate(values.length * (half ? 2 : 4)).order(ByteOrder.LITTLE_ENDIAN);
        for (float v : values) {
            if (half) b.putShort(BlockQuantizedWeights.floatToHalf(v));
            else b.putFloat(v);
        }
        TensorProto.Builder t = TensorProto.newBuilder().setName(name).setDataType(type).setRawData(ByteString.copyFrom(b.array()));
        if (values.length > 1) t.addDims(values.length);
        return t.build();
    }
}
