package dev.ortserve.engine.rewrite;

import ai.onnx.proto.OnnxMl.AttributeProto;
import ai.onnx.proto.OnnxMl.NodeProto;
import ai.onnx.proto.OnnxMl.TensorProto;

import java.util.List;
import java.util.Set;

/**
 * Each com.microsoft.MatMulNBits that quantizes its activations to int8 (accuracy_level 4, as {@link BlockQuantizedWeights}
 * writes it) becomes {@code dev.ortserve.MatMulNBits}, the op of ortserve's native library (src/main/native/matmul_nbits.cc,
 * registered on the engine's sessions): the same inputs and attributes, x quantized per block of 32 exactly as
 * onnxruntime's int8-activation path quantizes it (so outputs differ by float rounding alone, NativeMatMulTest), integer
 * dot products over the same bytes, each weight block read once for a tile of rows. Why: on the 2-core AVX2 host,
 * int8 weights 1.08-1.18x onnxruntime 1.29's prepacked kernel for steps of 1-16 rows and 1.11x for a 64-row prompt
 * chunk; int4 even (0.95-1.03x); and the weights are no longer held twice while onnxruntime prepacks them
 * (docs/benchmarks.md, "Quantized MatMul, native"); with AVX-512 VNNI, the native VNNI kernel leads onnxruntime's at one
 * to four streams. Where onnxruntime runs a wider kernel than the library has, the server's default keeps it: the
 * rewrite is asked for where {@link #fasterOn} says so.
 * <p>
 * Only what the library computes is moved: float32 activations (float32 scales), 4 or 8 bits in blocks of 32, the
 * default zero point (no zero_points, g_idx or bias input), accuracy_level 4 (a node that asks for float activations
 * keeps onnxruntime's kernel: the library always quantizes them). Node by node: each MatMul is independent.
 */
final class NativeMatMul {

    static final String APPLIED = "native quantized MatMul";
    /** Attributes the library reads. */
    private static final Set<String> READ = Set.of("K", "N", "bits", "block_size", "accuracy_level");

    private NativeMatMul() {
    }

    /**
     * Whether the native op is the faster choice on this CPU, by default: where onnxruntime's own kernel is its AVX2 one
     * (x86-64 with AVX2 and FMA, no AVX-512 and no AVX-VNNI): there it measured 1.01-1.21x in the engine, prompts even.
     * With AVX-512 VNNI both run VNNI kernels; the native one (eight blocks a time) leads at one to four streams (int4
     * 1.03-1.24x, int8 1.14-1.27x) but loses on large steps (0.73-0.85x from 16 rows: prompts, bursts), and the 60-minute
     * soak with it served there saw two long requests of a burst run past the client's timeout, which three runs with
     * onnxruntime's kernel never did (docs/benchmarks.md): not a default until large steps are even. {@code cpuFlags}:
     * the "flags" of /proc/cpuinfo.
     */
    static boolean fasterOn(Set<String> cpuFlags) {
        return cpuFlags.contains("avx2") && cpuFlags.contains("fma") && !cpuFlags.contains("avx512f") && !cpuFlags.contains("avx_vnni");
    }

    /** This machine's CPU flags (Linux: /proc/cpuinfo's first "flags" line; none elsewhere). */
    static Set<String> cpuFlags() {
        try (java.util.stream.Stream<String> lines = java.nio.file.Files.lines(java.nio.file.Path.of("/proc/cpuinfo"))) {
            return lines.filter(l -> l.startsWith("flags")).findFirst()
                    .map(l -> Set.of(l.substring(l.indexOf(':') + 1).trim().split("\\s+"))).orElse(Set.of());
        } catch (java.io.IOException | RuntimeException e) {
            return Set.of();
        }
    }

    /** Moves every eligible node; returns how many. */
    static int apply(Graph g) {
        int done = 0;
        for (int i : g.nodesOf("com.microsoft", "MatMulNBits")) {
            NodeProto n = g.graph.getNode(i);
            if (!eligible(g, n)) continue;
            List<String> inputs = n.getInputList().subList(0, 3);
            g.graph.setNode(i, n.toBuilder().setDomain(NativeAttention.DOMAIN).clearInput().addAllInput(inputs));
            done++;
        }
        if (done > 0) g.requireOpset(NativeAttention.DOMAIN, 1);
        return done;
    }

    private static boolean eligible(Graph g, NodeProto n) {
        if (n.getInputCount() < 3 || n.getInputList().subList(3, n.getInputCount()).stream().anyMatch(s -> !s.isEmpty())) return false;
        long bits = 0, block = 0, accuracy = 0;
        for (AttributeProto a : n.getAttributeList()) {
            if (!READ.contains(a.getName())) return false;
            switch (a.getName()) {
                case "bits" -> bits = a.getI();
                case "block_size" -> block = a.getI();
                case "accuracy_level" -> accuracy = a.getI();
                default -> { }
            }
        }
        if (bits != 4 && bits != 8 || block != 32 || accuracy != 4) return false;
        TensorProto scales = g.initializer(n.getInput(2));
        return scales != null && scales.getDataType() == TensorProto.DataType.FLOAT_VALUE;
    }
}
