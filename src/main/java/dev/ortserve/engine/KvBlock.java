package dev.ortserve.engine;

import ai.onnxruntime.OnnxJavaType;
import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtException;

import java.nio.Buffer;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.ShortBuffer;

/**
 * Host-side KV tensors in the decoder's layout [batch, kv_heads, length, head_dim], float32 or
 * float16, used when a batch is repacked: rows are copied in with left padding so every row
 * ends at the last position.
 */
final class KvBlock {

    private KvBlock() {
    }

    /** An empty past: [batch, kvHeads, 0, headDim]. */
    static OnnxTensor empty(OrtEnvironment env, DecoderSpec spec, int batch) throws OrtException {
        ByteBuffer none = ByteBuffer.allocateDirect(0).order(ByteOrder.nativeOrder());
        return OnnxTensor.createTensor(env, none, new long[] {batch, spec.kvHeads(), 0, spec.headDim()}, spec.kvType());
    }

    /** A copy of a tensor's contents (one copy, at repack time only). */
    static Buffer read(OnnxTensor tensor, DecoderSpec spec) {
        return spec.kvType() == OnnxJavaType.FLOAT ? tensor.getFloatBuffer() : tensor.getShortBuffer();
    }

    /** A zeroed direct buffer for [batch, kvHeads, length, headDim]. */
    static ByteBuffer allocate(DecoderSpec spec, int batch, int length) {
        long elements = (long) batch * spec.kvHeads() * length * spec.headDim();
        return ByteBuffer.allocateDirect((int) (elements * spec.kvElementBytes())).order(ByteOrder.nativeOrder());
    }

    /**
     * Copies the last {@code rowLength} positions of row {@code srcRow} of a [*, kv, srcLength, d]
     * buffer into row {@code dstRow} of a [*, kv, dstLength, d] buffer, right-aligned.
     */
    static void copyRow(DecoderSpec spec, Buffer src, int srcRow, int srcLength, ByteBuffer dst, int dstRow, int dstLength, int rowLength) {
        copyRow(spec, src, srcRow, srcLength, srcLength, dst, dstRow, dstLength, rowLength);
    }

    /** As above, for the {@code rowLength} positions that end at {@code srcEnd} (not at the row's end). */
    static void copyRow(DecoderSpec spec, Buffer src, int srcRow, int srcLength, int srcEnd, ByteBuffer dst, int dstRow, int dstLength, int rowLength) {
        int d = spec.headDim(), kv = spec.kvHeads();
        int count = rowLength * d;
        for (int h = 0; h < kv; h++) {
            int from = ((srcRow * kv + h) * srcLength + (srcEnd - rowLength)) * d;
            int to = ((dstRow * kv + h) * dstLength + (dstLength - rowLength)) * d;
            if (src instanceof FloatBuffer f) {
                dst.asFloatBuffer().put(to, f, from, count);
            } else {
                dst.asShortBuffer().put(to, (ShortBuffer) src, from, count);
            }
        }
    }

    static OnnxTensor tensor(OrtEnvironment env, DecoderSpec spec, ByteBuffer data, int batch, int length) throws OrtException {
        return OnnxTensor.createTensor(env, data, new long[] {batch, spec.kvHeads(), length, spec.headDim()}, spec.kvType());
    }
}
