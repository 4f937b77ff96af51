package dev.ortserve.engine.kv;

import dev.ortserve.engine.KvAlignment;

import dev.ortserve.engine.DecoderSpec;
import dev.ortserve.engine.memory.NativeBuffers;

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
 * float16, used when a batch is repacked: rows are copied in, padded as the model's
 * {@link KvAlignment} says.
 */
public final class KvBlock {

    private KvBlock() {
    }

    /** An empty past: [batch, kvHeads, 0, headDim]. */
    public static OnnxTensor empty(OrtEnvironment env, DecoderSpec spec, int batch) throws OrtException {
        ByteBuffer none = ByteBuffer.allocateDirect(0).order(ByteOrder.nativeOrder());
        return OnnxTensor.createTensor(env, none, new long[] {batch, spec.kvHeads(), 0, spec.headDim()}, spec.kvType());
    }

    /** A tensor's elements, read where they are (valid until it is closed; see {@link NativeBuffers#view}). */
    public static Buffer read(OnnxTensor tensor, DecoderSpec spec) {
        return NativeBuffers.view(tensor);
    }

    /** The elements of a buffer this engine allocated, without a copy (in-place KV, whose tensors wrap it). */
    public static Buffer view(ByteBuffer data, DecoderSpec spec) {
        return spec.kvType() == OnnxJavaType.FLOAT ? data.asFloatBuffer() : data.asShortBuffer();
    }

    /** A zeroed direct buffer for [batch, kvHeads, length, headDim], to be given back with {@link NativeBuffers#free}. */
    public static ByteBuffer allocate(DecoderSpec spec, int batch, int length) {
        long elements = (long) batch * spec.kvHeads() * length * spec.headDim();
        return NativeBuffers.allocate(elements * spec.kvElementBytes());
    }

    /**
     * Copies {@code count} positions from {@code srcStart} of row {@code srcRow} of a [*, kv,
     * srcSpan, d] buffer to {@code dstStart} of row {@code dstRow} of a [*, kv, dstSpan, d] buffer
     * (the callers place rows as the model's {@link KvAlignment} says).
     */
    public static void copyRow(DecoderSpec spec, Buffer src, int srcRow, int srcSpan, int srcStart,
                        ByteBuffer dst, int dstRow, int dstSpan, int dstStart, int count) {
        int d = spec.headDim(), kv = spec.kvHeads();
        int elements = count * d;
        for (int h = 0; h < kv; h++) {
            int from = ((srcRow * kv + h) * srcSpan + srcStart) * d;
            int to = ((dstRow * kv + h) * dstSpan + dstStart) * d;
            if (src instanceof FloatBuffer f) {
                dst.asFloatBuffer().put(to, f, from, elements);
            } else {
                dst.asShortBuffer().put(to, (ShortBuffer) src, from, elements);
            }
        }
    }

    /** Copies a row's {@code length} positions between two padded buffers, each placed as {@code spec}'s alignment says. */
    public static void moveRow(DecoderSpec spec, Buffer src, int srcRow, int srcSpan, ByteBuffer dst, int dstRow, int dstSpan, int length) {
        KvAlignment a = spec.alignment();
        copyRow(spec, src, srcRow, srcSpan, a.start(srcSpan, length), dst, dstRow, dstSpan, a.start(dstSpan, length), length);
    }

    public static OnnxTensor tensor(OrtEnvironment env, DecoderSpec spec, ByteBuffer data, int batch, int length) throws OrtException {
        return OnnxTensor.createTensor(env, data, new long[] {batch, spec.kvHeads(), length, spec.headDim()}, spec.kvType());
    }
}
