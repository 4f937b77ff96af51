package dev.ortserve.engine.matmul;

import dev.ortserve.engine.load.NativeOps;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.util.Arrays;
import java.util.List;
import java.util.Random;

import static dev.ortserve.engine.matmul.QuantizedMatMul.NATIVE;
import static dev.ortserve.engine.matmul.QuantizedMatMul.ORT;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The native library's {@code dev.ortserve.MatMulNBits} against onnxruntime's com.microsoft.MatMulNBits (CPU,
 * accuracy_level 4 as the rewriter writes it) and against the exact product of x with the dequantized weights, one node
 * each on the same random weights (4- and 8-bit, blocks of 32, K a multiple of 32 or not; for VNNI's 4-bit octets,
 * whole groups of 8 blocks with and without blocks after them), steps of 1 to 16 rows (the kernels' tiles of 8 and 4 and
 * the rest), each kernel (the widest this CPU runs, AVX-512 VNNI where the CPU has it, else
 * AVX2 again, AVX2, portable C++).
 * <p>
 * The bound: the op quantizes each block of 32 values of x to int8 (d = the block's largest magnitude / 127, values
 * rounded to nearest), so each value moves by at most d / 2 and an output by at most sum over blocks of d / 2 x sum of
 * the block's |w|; the integer dot products are exact, and the float work (a scale product and an accumulation per
 * block) adds rounding of order 1e-6 x sum |x w|. Every kernel's output is held to the exact product within that bound;
 * onnxruntime's int8-activation path obeys the same bound (checked too). Closer still: x is quantized as onnxruntime
 * quantizes it (the same scales and rounding), so the op and onnxruntime's differ by float rounding alone (the order of
 * their sums): a served model's logits move by ~1e-6, not by the int8 bound.
 * A row's output does not depend on the other rows of the step (bit-equal alone and in a batch: batching never changes
 * a stream's tokens); a prompt's chunk (40 rows) is held to the same bound.
 */
class NativeMatMulTest {

    private static final List<String> KERNELS = List.of("", "vnni", "avx2", "portable");

    @BeforeAll
    static void libraryBuilt() {
        assertTrue(NativeOps.available(), "the build compiles src/main/native into the class path on Linux x86-64");
    }

    @ParameterizedTest(name = "{0}-bit, K {1}, N {2}, {3} rows")
    @CsvSource({"4, 64, 40, 1", "4, 1024, 96, 1", "4, 1024, 96, 5", "4, 80, 24, 3", "4, 256, 33, 16",
            // VNNI's octets of blocks followed by a pair and a lone block (352), and by a partial block (272); 8-row tiles
            "4, 352, 40, 9", "4, 272, 24, 8", "8, 352, 40, 9",
            "8, 64, 40, 1", "8, 1024, 96, 1", "8, 1024, 96, 5", "8, 80, 24, 3", "8, 256, 33, 16"})
    void withinTheActivationRoundingOfTheExactProduct(int bits, int k, int n, int rows) throws Exception {
        QuantizedMatMul.Weights w = QuantizedMatMul.Weights.random(k, n, bits, 7L * k + n + bits);
        float[] x = gaussian(rows * k, 11L * rows + k);
        double[][] bound = new double[rows][n];
        double[][] exact = exact(w, x, rows, bound);
        float[] ort;
        try (QuantizedMatMul op = new QuantizedMatMul(w, ORT, "", 2)) {
            ort = op.run(x, rows);
        }
        within(exact, bound, ort, 1.0, "onnxruntime's MatMulNBits");
        for (String kernel : KERNELS) {
            try (QuantizedMatMul op = new QuantizedMatMul(w, NATIVE, kernel, 2)) {
                float[] mine = op.run(x, rows);
                String name = kernel.isEmpty() ? "the widest kernel" : kernel;
                within(exact, bound, mine, 1.0, name);
                // so the two are within twice the bound of each other
                double[][] twice = new double[rows][n];
                for (int r = 0; r < rows; r++) for (int c = 0; c < n; c++) twice[r][c] = ort[r * n + c];
                within(twice, bound, mine, 2.0, name + " against onnxruntime's");
                // tighter: x is quantized exactly as onnxruntime's int8-activation path does it (same scales, same
                // rounding), so the two differ only by the order of their float sums
                within(twice, rounding(w, x, rows), mine, 1.0, name + " against onnxruntime's, float rounding only");
            }
        }
    }

    @ParameterizedTest(name = "{0}-bit")
    @CsvSource({"4", "8"})
    void aRowsOutputDoesNotDependOnTheOtherRows(int bits) throws Exception {
        int k = 512, n = 70, rows = 11; // a tile of 8 rows (VNNI's 4-bit) or two of 4, then 3
        QuantizedMatMul.Weights w = QuantizedMatMul.Weights.random(k, n, bits, 3);
        float[] x = gaussian(rows * k, 5);
        for (String kernel : KERNELS) {
            try (QuantizedMatMul op = new QuantizedMatMul(w, NATIVE, kernel, 2)) {
                float[] all = op.run(x, rows);
                for (int r = 0; r < rows; r++) {
                    float[] alone = op.run(Arrays.copyOfRange(x, r * k, (r + 1) * k), 1);
                    assertArrayEquals(alone, Arrays.copyOfRange(all, r * n, (r + 1) * n), kernel + ": row " + r + " alone and among " + rows);
                }
            }
        }
    }

    @Test
    void aPromptsChunkIsWithinTheBoundToo() throws Exception {
        // 40 rows: ten of the AVX2 kernel's tiles of 4 (a prompt's chunk is computed here too)
        for (int bits : new int[] {4, 8}) {
            QuantizedMatMul.Weights w = QuantizedMatMul.Weights.random(256, 48, bits, 9);
            int rows = 40;
            float[] x = gaussian(rows * 256, 13);
            double[][] bound = new double[rows][48];
            double[][] exact = exact(w, x, rows, bound);
            for (String kernel : KERNELS) {
                try (QuantizedMatMul op = new QuantizedMatMul(w, NATIVE, kernel, 2)) {
                    within(exact, bound, op.run(x, rows), 1.0, bits + "-bit, 40 rows, " + (kernel.isEmpty() ? "the widest kernel" : kernel));
                }
            }
        }
    }

    @Test
    void weightsSmallerThanTheNodeSaysAreAnErrorNotARead() throws Exception {
        // N says 48 columns, B and scales hold 40: the op refuses the step instead of reading past them
        QuantizedMatMul.Weights w = QuantizedMatMul.Weights.random(64, 40, 4, 1);
        ai.onnx.proto.OnnxMl.ModelProto m = QuantizedMatMul.model(w, NATIVE, "");
        ai.onnx.proto.OnnxMl.ModelProto.Builder b = m.toBuilder();
        ai.onnx.proto.OnnxMl.NodeProto.Builder node = b.getGraphBuilder().getNodeBuilder(0);
        for (int i = 0; i < node.getAttributeCount(); i++) {
            if (node.getAttribute(i).getName().equals("N")) node.setAttribute(i, node.getAttribute(i).toBuilder().setI(48));
        }
        ai.onnxruntime.OrtEnvironment env = ai.onnxruntime.OrtEnvironment.getEnvironment();
        ai.onnxruntime.OrtSession.SessionOptions so = new ai.onnxruntime.OrtSession.SessionOptions();
        so.registerCustomOpLibrary(NativeOps.library().orElseThrow().toString());
        try (ai.onnxruntime.OrtSession session = env.createSession(b.build().toByteArray(), so);
             ai.onnxruntime.OnnxTensor x = ai.onnxruntime.OnnxTensor.createTensor(env, java.nio.FloatBuffer.wrap(gaussian(64, 2)), new long[] {1, 64})) {
            ai.onnxruntime.OrtException e = org.junit.jupiter.api.Assertions.assertThrows(ai.onnxruntime.OrtException.class,
                    () -> session.run(java.util.Map.of("x", x)).close());
            assertTrue(e.getMessage().contains("do not match K, N and bits"), e.getMessage());
        }
    }

    /** Each output's float rounding alone: a product and an accumulation per block, at 2^-24 of up to sum |x w|. */
    private static double[][] rounding(QuantizedMatMul.Weights w, float[] x, int rows) {
        int k = w.k(), n = w.n(), blocks = (k + 31) / 32;
        double[][] r = new double[rows][n];
        for (int row = 0; row < rows; row++) {
            for (int c = 0; c < n; c++) {
                double magnitude = 0;
                for (int kk = 0; kk < k; kk++) magnitude += Math.abs(x[row * k + kk] * w.at(kk, c));
                r[row][c] = 4 * (blocks + 8) * 0x1p-24 * magnitude;
            }
        }
        return r;
    }

    /** The exact product in double, and each output's bound from quantizing x (sum over blocks of d / 2 x sum |w|). */
    private static double[][] exact(QuantizedMatMul.Weights w, float[] x, int rows, double[][] bound) {
        int k = w.k(), n = w.n(), blocks = (k + 31) / 32;
        double[][] y = new double[rows][n];
        for (int r = 0; r < rows; r++) {
            double[] d = new double[blocks];
            for (int kk = 0; kk < k; kk++) d[kk / 32] = Math.max(d[kk / 32], Math.abs(x[r * k + kk]) / 127.0);
            for (int c = 0; c < n; c++) {
                double sum = 0, b = 0, magnitude = 0;
                for (int kk = 0; kk < k; kk++) {
                    double wk = w.at(kk, c);
                    sum += x[r * k + kk] * wk;
                    b += d[kk / 32] / 2 * Math.abs(wk);
                    magnitude += Math.abs(x[r * k + kk] * wk);
                }
                y[r][c] = sum;
                // float work: a product and an accumulation per block, each rounding at 2^-24 of magnitudes up to sum |x w|
                bound[r][c] = b + 4 * (blocks + 8) * 0x1p-24 * magnitude;
            }
        }
        return y;
    }

    private static void within(double[][] expected, double[][] bound, float[] actual, double times, String what) {
        int n = expected[0].length;
        double worst = 0;
        for (int r = 0; r < expected.length; r++) {
            for (int c = 0; c < n; c++) {
                double error = Math.abs(actual[r * n + c] - expected[r][c]);
                worst = Math.max(worst, error / bound[r][c]);
                assertTrue(error <= times * bound[r][c], what + ": row " + r + " column " + c + ": " + actual[r * n + c] + " vs "
                        + expected[r][c] + " (bound " + times * bound[r][c] + ")");
            }
        }
        System.out.printf("%s: largest error %.3f of the bound%n", what, worst / times);
    }

    static float[] gaussian(int count, long seed) {
        Random random = new Random(seed);
        float[] x = new float[count];
        for (int i = 0; i < count; i++) x[i] = (float) random.nextGaussian();
        return x;
    }
}
