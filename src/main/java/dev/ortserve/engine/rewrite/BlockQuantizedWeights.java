package dev.ortserve.engine.rewrite;

import ai.onnx.proto.OnnxMl.NodeProto;
import ai.onnx.proto.OnnxMl.TensorProto;
import com.google.protobuf.ByteString;

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
            if (w.getDataType() != TensorProto.DataType.FLOAT_VALUE || w.getDimsCount() != 2) continue;
            int k = (int) w.getDims(transposed ? 1 : 0), cols = (int) w.getDims(transposed ? 0 : 1);
            if (k < BLOCK) continue;
            float[] values = OnnxModelFile.floats(w, g.sourceDir);
            Quantized q = quantize(values, k, cols, transposed, bits);
            String base = n.getName().isEmpty() ? weightName : n.getName();
            String packed = g.unique(base + "_q" + bits), scales = g.unique(base + "_scales");
            int blocks = (k + BLOCK - 1) / BLOCK;
            g.graph.addInitializer(TensorProto.newBuilder().setName(packed).setDataType(TensorProto.DataType.UINT8_VALUE)
                    .addDims(cols).addDims(blocks).addDims(BLOCK * bits / 8).setRawData(ByteString.copyFrom(q.packed)));
            ByteBuffer s = ByteBuffer.allocate(4 * q.scales.length).order(ByteOrder.LITTLE_ENDIAN);
            for (float v : q.scales) s.putFloat(v);
            g.graph.addInitializer(TensorProto.newBuilder().setName(scales).setDataType(TensorProto.DataType.FLOAT_VALUE)
                    .addDims(cols).addDims(blocks).setRawData(ByteString.copyFrom(s.array())));
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

    /**
     * Quantizes W [k, cols] (or its transpose, stored [cols, k]) column by column into
     * [cols][blocks][BLOCK * bits / 8] bytes and [cols][blocks] scales.
     */
    static Quantized quantize(float[] w, int k, int cols, boolean transposed, int bits) {
        int blocks = (k + BLOCK - 1) / BLOCK, blob = BLOCK * bits / 8;
        int zero = 1 << (bits - 1), max = (1 << bits) - 1;
        byte[] packed = new byte[cols * blocks * blob];
        float[] scales = new float[cols * blocks];
        for (int n = 0; n < cols; n++) {
            for (int b = 0; b < blocks; b++) {
                float m = 0;
                for (int j = b * BLOCK; j < Math.min(k, b * BLOCK + BLOCK); j++) {
                    float v = transposed ? w[n * k + j] : w[j * cols + n];
                    if (Math.abs(v) > Math.abs(m)) m = v;
                }
                float scale = m == 0 ? 1f : m / -zero;
                scales[n * blocks + b] = scale;
                int base = (n * blocks + b) * blob;
                for (int j = 0; j < BLOCK; j++) {
                    int kk = b * BLOCK + j;
                    float v = kk < k ? (transposed ? w[n * k + kk] : w[kk * cols + n]) : 0f;
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
