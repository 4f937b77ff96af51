package dev.ortserve.engine.rewrite;

import ai.onnx.proto.OnnxMl.AttributeProto;
import ai.onnx.proto.OnnxMl.NodeProto;
import ai.onnx.proto.OnnxMl.TensorProto;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * The token embedding held quantized when the weights are served quantized: {@code Gather(embedding,
 * input_ids)} becomes onnxruntime's {@code com.microsoft.GatherBlockQuantized}, which dequantizes
 * only the rows a step gathers. Always 8-bit, at int4 too: a step reads a few rows of the table, so
 * its bits cost no decode time, only memory, and 8-bit blocks keep the error a sixteenth of 4-bit
 * ones (on the random-weight test checkpoints, whose N(0, 1) embeddings and flat logits amplify any
 * rounding, a 4-bit embedding cut the int4 model's teacher-forced agreement with transformers from
 * 0.45 to 0.34 in LoraAdapterTest with BITS set to 4). The blocks are the MatMuls' (32 along the
 * hidden axis, symmetric, the op's default zero point 128), so an int8 tied head and its embedding
 * hold the same bytes (computed and written twice: MatMulNBits takes them 3-D, the Gather 2-D;
 * onnxruntime releases the head's copy once it has prepacked it); llama.cpp's Q8_0 files hold
 * token_embd the same way. At int4 the float32 embedding was the largest resident weight
 * of a 0.6B model (622 MB of its 1.0 GB; docs/benchmarks.md); 8-bit it is 175 MB.
 * Applied after {@link BlockQuantizedWeights}, so that a tied head no longer reads the float
 * embedding; an embedding anything else reads (a float head, a subgraph) stays as it is, as do
 * tables gathered by positions (rotary caches, learned positions): only a Gather of the graph input
 * {@value #TOKEN_INPUT} is taken.
 */
final class QuantizedEmbedding {

    static final String APPLIED = "quantized embedding";
    static final String TOKEN_INPUT = "input_ids";
    /** The embedding's bits, whatever the MatMuls' (see above). */
    static final int BITS = 8;

    private QuantizedEmbedding() {
    }

    /** Quantizes the token embedding to {@link #BITS}; returns how many Gathers now read it quantized (0 when none is eligible). */
    static int apply(Graph g) throws IOException {
        return apply(g, BITS);
    }

    /** Quantizes the token embedding to {@code bits} (4 or 8); returns how many Gathers now read it quantized. */
    static int apply(Graph g, int bits) throws IOException {
        boolean tokenInput = g.graph.getInputList().stream().anyMatch(i -> i.getName().equals(TOKEN_INPUT));
        if (!tokenInput) return 0;
        List<Integer> gathers = new ArrayList<>();
        String embedding = null;
        for (int i = 0; i < g.graph.getNodeCount(); i++) {
            NodeProto n = g.graph.getNode(i);
            if (!n.getOpType().equals("Gather") || !n.getDomain().isEmpty() || n.getInputCount() != 2 || !n.getInput(1).equals(TOKEN_INPUT)) continue;
            if (Graph.intAttribute(n, "axis", 0) != 0) continue;
            if (embedding != null && !embedding.equals(n.getInput(0))) return 0; // two token tables: not a decoder this knows
            embedding = n.getInput(0);
            gathers.add(i);
        }
        if (embedding == null) return 0;
        TensorProto e = g.initializer(embedding);
        if (e == null || e.getDimsCount() != 2) return 0;
        boolean half = e.getDataType() == TensorProto.DataType.FLOAT16_VALUE;
        if (e.getDataType() != TensorProto.DataType.FLOAT_VALUE && !half) return 0;
        int rows = (int) e.getDims(0), hidden = (int) e.getDims(1);
        if (hidden % BlockQuantizedWeights.BLOCK != 0) return 0;
        if (readsOutside(g, embedding, Set.copyOf(gathers))) return 0;

        String packed = g.unique(embedding + "_q" + bits), scales = g.unique(embedding + "_scales");
        int blocks = hidden / BlockQuantizedWeights.BLOCK;
        // row r of the embedding is column r of its transpose: the head's quantization of it, byte for byte
        BlockQuantizedWeights.Quantized[] memo = {null};
        g.addComputed(TensorProto.newBuilder().setName(packed).setDataType(TensorProto.DataType.UINT8_VALUE)
                .addDims(rows).addDims((long) hidden * bits / 8), () -> {
                    memo[0] = BlockQuantizedWeights.quantize(g, e, hidden, rows, true, bits);
                    return ByteBuffer.wrap(memo[0].packed());
                });
        g.addComputed(TensorProto.newBuilder().setName(scales).setDataType(e.getDataType()).addDims(rows).addDims(blocks), () -> {
            BlockQuantizedWeights.Quantized q = memo[0] != null ? memo[0] : BlockQuantizedWeights.quantize(g, e, hidden, rows, true, bits);
            memo[0] = null;
            return BlockQuantizedWeights.scaleBytes(q.scales(), half);
        });
        for (int i : gathers) {
            NodeProto n = g.graph.getNode(i);
            g.graph.setNode(i, NodeProto.newBuilder().setOpType("GatherBlockQuantized").setDomain("com.microsoft")
                    .setName(g.unique(n.getName().isEmpty() ? embedding + "_gather_q" : n.getName() + "_q"))
                    .addInput(packed).addInput(n.getInput(1)).addInput(scales).addAllOutput(n.getOutputList())
                    .addAttribute(Graph.intAttribute("gather_axis", 0)).addAttribute(Graph.intAttribute("quantize_axis", 1))
                    .addAttribute(Graph.intAttribute("block_size", BlockQuantizedWeights.BLOCK)).addAttribute(Graph.intAttribute("bits", bits))
                    .build());
        }
        g.requireOpset("com.microsoft", 1);
        g.removeInitializersIfUnread(Set.of(embedding));
        return gathers.size();
    }

    /** Whether anything but the given nodes reads {@code name}: another node, a subgraph, a graph output. */
    private static boolean readsOutside(Graph g, String name, Set<Integer> gathers) {
        for (var o : g.graph.getOutputList()) if (o.getName().equals(name)) return true;
        for (int i = 0; i < g.graph.getNodeCount(); i++) {
            NodeProto n = g.graph.getNode(i);
            if (gathers.contains(i)) {
                if (n.getInput(1).equals(name)) return true;
                continue;
            }
            if (reads(n, name)) return true;
        }
        return false;
    }

    private static boolean reads(NodeProto n, String name) {
        if (n.getInputList().contains(name)) return true;
        for (AttributeProto a : n.getAttributeList()) {
            if (a.hasG() && a.getG().getNodeList().stream().anyMatch(s -> reads(s, name))) return true;
            for (var sub : a.getGraphsList()) if (sub.getNodeList().stream().anyMatch(s -> reads(s, name))) return true;
        }
        return false;
    }
}
