package dev.ortserve.engine.batching;

import dev.ortserve.engine.DecoderSpec;

import dev.ortserve.engine.KvAlignment;
import dev.ortserve.engine.kv.KvBlock;
import dev.ortserve.engine.kv.PendingKv;
import dev.ortserve.engine.memory.NativeBuffers;

import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtException;

import java.nio.Buffer;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;

/**
 * The first positions of the pending KVs of several sequences gathered into one past, [rows,
 * kv_heads, length, head_dim] per layer, each row placed as the model's {@link KvAlignment} says, for a batched
 * prefill that continues them. Null tensors when no row has a past. Closing frees the gathered copy.
 */
final class KvRows implements AutoCloseable {

    private final OnnxTensor[] keys;
    private final OnnxTensor[] values;
    private final List<OnnxTensor> made;
    private final List<ByteBuffer> allocated;

    private KvRows(OnnxTensor[] keys, OnnxTensor[] values, List<OnnxTensor> made, List<ByteBuffer> allocated) {
        this.keys = keys;
        this.values = values;
        this.made = made;
        this.allocated = allocated;
    }

    /** @param keep per row, how many of the sequence's first positions to take */
    static KvRows gather(DecoderSpec spec, OrtEnvironment env, List<Sequence> rows, int[] keep, int length) throws OrtException {
        if (length == 0) return new KvRows(null, null, List.of(), List.of());
        OnnxTensor[] keys = new OnnxTensor[spec.layers()], values = new OnnxTensor[spec.layers()];
        List<OnnxTensor> made = new ArrayList<>();
        List<ByteBuffer> allocated = new ArrayList<>();
        try {
            for (int l = 0; l < spec.layers(); l++) {
                for (int kind = 0; kind < 2; kind++) {
                    ByteBuffer dst = KvBlock.allocate(spec, rows.size(), length);
                    allocated.add(dst);
                    Map<OnnxTensor, Buffer> read = new IdentityHashMap<>();
                    for (int r = 0; r < rows.size(); r++) {
                        Sequence s = rows.get(r);
                        PendingKv p = s.pending;
                        if (p == null || keep[r] == 0) continue;
                        final int layer = l, k = kind;
                        Buffer src = read.computeIfAbsent(kind == 0 ? p.keys[l] : p.values[l], t -> p.read(layer, k));
                        // the sequence's first keep[r] positions, from where its s.length positions start in p.span
                        KvAlignment a = spec.alignment();
                        KvBlock.copyRow(spec, src, p.row, p.span, a.start(p.span, s.length), dst, r, length, a.start(length, keep[r]), keep[r]);
                    }
                    OnnxTensor t = KvBlock.tensor(env, spec, dst, rows.size(), length);
                    made.add(t);
                    if (kind == 0) keys[l] = t; else values[l] = t;
                }
            }
        } catch (OrtException | RuntimeException | OutOfMemoryError e) {
            made.forEach(OnnxTensor::close);
            allocated.forEach(NativeBuffers::free);
            throw e;
        }
        return new KvRows(keys, values, made, allocated);
    }

    OnnxTensor[] keys() {
        return keys;
    }

    OnnxTensor[] values() {
        return values;
    }

    @Override
    public void close() {
        made.forEach(OnnxTensor::close);
        allocated.forEach(NativeBuffers::free);
    }
}
