package dev.ortserve.engine.rewrite;

import ai.onnx.proto.OnnxMl.NodeProto;
import ai.onnx.proto.OnnxMl.TensorProto;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * Constant-weight MatMuls (the head included) become onnxruntime's MatMulNBits with symmetric
 * block-wise quantization, blocks of 32 along K, as llama.cpp's Q8_0 / Q4_0 and onnxruntime's own
 * MatMulNBits quantizer do: per block the value of largest magnitude m gives scale m / -2^(bits-1),
 * q = round(w / scale) + 2^(bits-1) (the op's default zero point), 4-bit values packed two per byte,
 * low nibble first. accuracy_level 4 lets the CPU kernels run on int8 activations.
 */
final class BlockQuantizedWeights {

    static final int BLOCK = 32;

    private BlockQuantizedWeights() {
    }

    /** Quantizes every eligible MatMul; returns how many. */
    static int apply(Graph g, int bits) throws IOException {
        int done = 0;
        for (int i = 0; i < g.graph.getNodeCount(); i++) {
            NodeProto n = g.graph.getNode(i);
            if (!n.getOpType().equals("MatMul") || !n.getDomain().isEmpty()) continue;
            String weightName = n.getInput(1);
            TensorProto w = g.initializer(weightName);
            boolean transposed = false;
            if (w == null) {
                // tied heads: MatMul(hidden, Transpose(embedding))
                int p = g.producerIndex(weightName);
                if (p < 0) continue;
                NodeProto t = g.graph.getNode(p);
                if (!t.getOpType().equals("Transpose") || g.initializer(t.getInput(0)) == null) continue;
                w = g.initializer(t.getInput(0));
                transposed = true;
            }
            boolean half = w.getDataType() == TensorProto.DataType.FLOAT16_VALUE;
            if (w.getDataType() != TensorProto.DataType.FLOAT_VALUE && !half || w.getDimsCount() != 2) continue;
            int k = (int) w.getDims(transposed ? 1 : 0), cols = (int) w.getDims(transposed ? 0 : 1);
            if (k < BLOCK) continue;
            String base = n.getName().isEmpty() ? weightName : n.getName();
            String packed = g.unique(base + "_q" + bits), scales = g.unique(base + "_scales");
            int blocks = (k + BLOCK - 1) / BLOCK;
            // computed when written, one tensor at a time: the packed values and then (again) the scales,
            // so neither the float weights nor all the quantized ones are ever held at once
            TensorProto source = w;
            boolean t = transposed;
            Quantized[] memo = {null}; // kept from the packed values (written first) for the scales (written next), then dropped
            g.addComputed(TensorProto.newBuilder().setName(packed).setDataType(TensorProto.DataType.UINT8_VALUE)
                    .addDims(cols).addDims(blocks).addDims(BLOCK * bits / 8), () -> {
                        memo[0] = quantize(g, source, k, cols, t, bits);
                        return ByteBuffer.wrap(memo[0].packed);
                    });
            // an fp16 model's MatMulNBits takes fp16 activations and scales: it is quantized from its own precision
            g.addComputed(TensorProto.newBuilder().setName(scales).setDataType(half ? TensorProto.DataType.FLOAT16_VALUE : TensorProto.DataType.FLOAT_VALUE)
                    .addDims(cols).addDims(blocks), () -> {
                        Quantized q = memo[0] != null ? memo[0] : quantize(g, source, k, cols, t, bits);
                        memo[0] = null;
                        return scaleBytes(q.scales, half);
                    });
            g.graph.setNode(i, NodeProto.newBuilder().setOpType("MatMulNBits").setDomain("com.microsoft").setName(g.unique(base + "_nbits"))
                    .addInput(n.getInput(0)).addInput(packed).addInput(scales).addAllOutput(n.getOutputList())
                    .addAttribute(Graph.intAttribute("K", k)).addAttribute(Graph.intAttribute("N", cols))
                    .addAttribute(Graph.intAttribute("bits", bits)).addAttribute(Graph.intAttribute("block_size", BLOCK))
                    .addAttribute(Graph.intAttribute("accuracy_level", 4)).build());
            done++;
        }
        if (done > 0) {
            g.requireOpset("com.microsoft", 1);
            removeUnused(g);
        }
        return done;
    }

    /** Float weights no node reads any more (a tied embedding is still read by its Gather, so it stays). */
    private static void removeUnused(Graph g) {
        for (int i = g.graph.getNodeCount() - 1; i >= 0; i--) {
            NodeProto n = g.graph.getNode(i);
            if (n.getOpType().equals("Transpose") && n.getOutputCount() == 1 && g.consumers(n.getOutput(0)) == 0) g.graph.removeNode(i);
        }
        g.removeUnusedInitializers();
    }

    record Quantized(byte[] packed, float[] scales) {
    }

    /** One weight (float32 or float16, mapped or computed), quantized. */
    static Quantized quantize(Graph g, TensorProto w, int k, int cols, boolean transposed, int bits) throws IOException {
        java.nio.FloatBuffer values;
        if (w.getDataType() == TensorProto.DataType.FLOAT16_VALUE) {
            java.nio.ShortBuffer h = g.bytes(w).asShortBuffer();
            values = java.nio.FloatBuffer.allocate(h.remaining());
            for (int i = 0; i < h.remaining(); i++) values.put(i, halfToFloat(h.get(i)));
        } else {
            values = g.floatView(w);
        }
        return quantize(values, k, cols, transposed, bits);
    }

    static ByteBuffer scaleBytes(float[] scales, boolean half) {
        ByteBuffer s = ByteBuffer.allocate((half ? 2 : 4) * scales.length).order(ByteOrder.LITTLE_ENDIAN);
        for (float v : scales) {
            if (half) s.putShort(floatToHalf(v)); else s.putFloat(v);
        }
        return s.flip();
    }

    static float halfToFloat(short bits) {
        int h = bits & 0xffff, sign = (h >>> 15) << 31, exp = (h >>> 10) & 0x1f, mant = h & 0x3ff;
        if (exp == 0) {
            float v = mant * 0x1p-24f; // subnormal
            return (h >>> 15) != 0 ? -v : v;
        }
        if (exp == 31) return Float.intBitsToFloat(sign | 0x7f800000 | (mant << 13));
        return Float.intBitsToFloat(sign | ((exp - 15 + 127) << 23) | (mant << 13));
    }

    static short floatToHalf(float f) {
        int b = Float.floatToIntBits(f), sign = (b >>> 16) & 0x8000;
        float a = Math.abs(f);
        if (Float.isNaN(f)) return (short) (sign | 0x7e00);
        if (a >= 65520f) return (short) (sign | 0x7c00);
        if (a < 0x1p-14f) return (short) (sign | Math.round(a * 0x1p24f)); // subnormal
        int e = Math.getExponent(a);
        int mant = Math.round(a * (float) Math.pow(2, 10 - e)) - 1024; // round to nearest
        if (mant == 1024) { mant = 0; e++; }
        return (short) (sign | ((e + 15) << 10) | mant);
    }

    /**
     * Quantizes W [k, cols] (or its transpose, stored [cols, k]) column by column into
     * [cols][blocks][BLOCK * bits / 8] bytes and [cols][blocks] scales.
     */
    static Quantized quantize(java.nio.FloatBuffer w, int k, int cols, boolean transposed, int bits) {
        int blocks = (k + BLOCK - 1) / BLOCK, blob = BLOCK * bits / 8;
        int zero = 1 << (bits - 1), max = (1 << bits) - 1;
        byte[] packed = new byte[cols * blocks * blob];
        float[] scales = new float[cols * blocks];
        for (int n = 0; n < cols; n++) {
            for (int b = 0; b < blocks; b++) {
                float m = 0;
                for (int j = b * BLOCK; j < Math.min(k, b * BLOCK + BLOCK); j++) {
                    float v = transposed ? w.get(n * k + j) : w.get(j * cols + n);
                    if (Math.abs(v) > Math.abs(m)) m = v;
                }
                float scale = m == 0 ? 1f : m / -zero;
                scales[n * blocks + b] = scale;
                int base = (n * blocks + b) * blob;
                for (int j = 0; j < BLOCK; j++) {
                    int kk = b * BLOCK + j;
                    float v = kk < k ? (transposed ? w.get(n * k + kk) : w.get(kk * cols + n)) : 0f;
                    int q = (int) Math.max(0, Math.min(max, Math.rint(v / scale) + zero));
                    if (bits == 8) {
                        packed[base + j] = (byte) q;
                    } else if ((j & 1) == 0) {
                        packed[base + j / 2] = (byte) q;
                    } else {
                        packed[base + j / 2] |= (byte) (q << 4);
                    }
                }
            }
        }
        return new Quantized(packed, scales);
    }
}
