package dev.ortserve.engine.rewrite;

import ai.onnx.proto.OnnxMl.AttributeProto;
import ai.onnx.proto.OnnxMl.NodeProto;
import ai.onnx.proto.OnnxMl.OperatorSetIdProto;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * NativeMatMul on the real builder export's int4 graph (onnxruntime-genai's MatMulNBits: 4 bits, blocks of 32,
 * accuracy_level 4, no zero points) and on the rewriter's own int8 quantization of the fp32 export: every such node moves
 * to the dev.ortserve domain with its inputs and attributes as they were, and the domain's opset is imported. Node by
 * node: one that asks for float activations (accuracy_level 0), has a zero-points input, or another block size stays
 * onnxruntime's while the others move.
 */
class NativeMatMulGraphTest {

    private static final Path BUILDER = Path.of("src/test/resources/fixtures/builder-llama");

    @Test
    void theBuildersInt4MatMulsMove() throws Exception {
        Path dir = BUILDER.resolve("int4");
        Graph g = new Graph(OnnxModelFile.read(dir.resolve("model.onnx")), dir);
        List<Integer> before = g.nodesOf("com.microsoft", "MatMulNBits");
        assertTrue(before.size() > 0);
        List<NodeProto> was = before.stream().map(g.graph::getNode).toList();
        assertEquals(before.size(), NativeMatMul.apply(g));
        assertTrue(g.nodesOf("com.microsoft", "MatMulNBits").isEmpty());
        List<Integer> after = g.nodesOf(NativeAttention.DOMAIN, "MatMulNBits");
        assertEquals(before, after, "in place");
        for (int k = 0; k < after.size(); k++) {
            NodeProto n = g.graph.getNode(after.get(k));
            assertEquals(was.get(k).getInputList().subList(0, 3), n.getInputList(), n.getName());
            assertEquals(was.get(k).getAttributeList(), n.getAttributeList(), n.getName());
            assertEquals(was.get(k).getOutputList(), n.getOutputList(), n.getName());
        }
        assertTrue(g.model.getOpsetImportList().stream().map(OperatorSetIdProto::getDomain).anyMatch(NativeAttention.DOMAIN::equals));
    }

    @Test
    void theRewritersInt8QuantizationMoves() throws Exception {
        Path dir = BUILDER.resolve("fp32");
        Graph g = new Graph(OnnxModelFile.read(dir.resolve("model.onnx")), dir);
        int quantized = BlockQuantizedWeights.apply(g, 8);
        assertTrue(quantized > 0);
        assertEquals(quantized, NativeMatMul.apply(g));
        assertEquals(quantized, g.nodesOf(NativeAttention.DOMAIN, "MatMulNBits").size());
    }

    @Test
    void aNodeTheLibraryDoesNotComputeStaysOnnxRuntimes() throws Exception {
        Path dir = BUILDER.resolve("int4");
        Graph g = new Graph(OnnxModelFile.read(dir.resolve("model.onnx")), dir);
        List<Integer> nodes = g.nodesOf("com.microsoft", "MatMulNBits");
        // float activations asked for, a zero-points input, blocks of 64
        g.graph.setNode(nodes.get(0), withAttribute(g.graph.getNode(nodes.get(0)), "accuracy_level", 0));
        g.graph.setNode(nodes.get(1), g.graph.getNode(nodes.get(1)).toBuilder().addInput(g.graph.getNode(nodes.get(1)).getInput(1)).build());
        g.graph.setNode(nodes.get(2), withAttribute(g.graph.getNode(nodes.get(2)), "block_size", 64));
        assertEquals(nodes.size() - 3, NativeMatMul.apply(g));
        assertEquals(nodes.subList(0, 3), g.nodesOf("com.microsoft", "MatMulNBits"));
    }

    private static NodeProto withAttribute(NodeProto n, String name, long value) {
        NodeProto.Builder b = n.toBuilder().clearAttribute();
        for (AttributeProto a : n.getAttributeList()) if (!a.getName().equals(name)) b.addAttribute(a);
        return b.addAttribute(AttributeProto.newBuilder().setName(name).setType(AttributeProto.AttributeType.INT).setI(value)).build();
    }

    @Test
    void byDefaultTheNativeOpServesWhereOnnxruntimesKernelIsItsAvx2One() {
        // the 2026-12-02 morning host (AVX2, FMA, F16C): the native op measured 1.01-1.21x there
        assertTrue(NativeMatMul.fasterOn(java.util.Set.of("sse4_2", "avx", "avx2", "fma", "f16c")));
        // AVX-512 VNNI (the Zen 4 hosts; AVX-VNNI beside it): the native VNNI kernel leads at one to four streams but
        // loses on large steps (prompts, bursts: the 60-minute soak's burst timed out with it): onnxruntime's op
        assertFalse(NativeMatMul.fasterOn(java.util.Set.of("avx2", "fma", "avx512f", "avx512_vnni", "avx512vl", "avx_vnni")));
        // AVX-512 without VNNI, or AVX-VNNI without AVX-512: onnxruntime's kernel is the wider one
        assertFalse(NativeMatMul.fasterOn(java.util.Set.of("avx2", "fma", "avx512f", "avx512vl")));
        assertFalse(NativeMatMul.fasterOn(java.util.Set.of("avx2", "fma", "avx_vnni")));
        // no AVX2: the native library would run its portable kernel
        assertFalse(NativeMatMul.fasterOn(java.util.Set.of("sse4_2", "avx")));
        // this machine's flags are read (Linux)
        assertTrue(NativeMatMul.cpuFlags().isEmpty() || NativeMatMul.cpuFlags().contains("sse2"));
    }
}
