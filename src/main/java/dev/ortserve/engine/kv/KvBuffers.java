package dev.ortserve.engine.kv;

import dev.ortserve.engine.DecoderSpec;
import dev.ortserve.engine.KvAlignment;
import dev.ortserve.engine.memory.NativeBuffers;

import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtException;

import java.nio.Buffer;
import java.nio.ByteBuffer;

/**
 * KV buffers of the engine's own: per layer one key and one value buffer of {@link #rows} rows by {@link #span}
 * positions ([rows, kv_heads, span, head_dim], zeroed), each wrapped without a copy by the tensor that a pass binds as
 * its past, and as its present too when it writes in place. The one place such buffers are made, viewed and freed: the
 * batch's KV after a repack (the batching loop's KvCache), a sequence's own prefill buffers ({@link PendingKv#allocate})
 * and a draft model's KV for one sequence. Freed layer by layer ({@link #releaseLayer}), so that a repack holds the old
 * and the new layout one layer at a time, not whole; {@link #close} frees what is left. Engine thread only.
 */
public final class KvBuffers implements AutoCloseable {

    private final DecoderSpec spec;
    private final OrtEnvironment env;
    private final int rows;
    private final int span;
    private final ByteBuffer[] keyData;
    private final ByteBuffer[] valueData;
    private final OnnxTensor[] keys;
    private final OnnxTensor[] values;

    private KvBuffers(OrtEnvironment env, DecoderSpec spec, int rows, int span) {
        this.env = env;
        this.spec = spec;
        this.rows = rows;
        this.span = span;
        this.keyData = new ByteBuffer[spec.layers()];
        this.valueData = new ByteBuffer[spec.layers()];
        this.keys = new OnnxTensor[spec.layers()];
        this.values = new OnnxTensor[spec.layers()];
    }

    /** Every layer's buffers, allocated now (nothing is left allocated when this fails). */
    public static KvBuffers allocate(OrtEnvironment env, DecoderSpec spec, int rows, int span) throws OrtException {
        KvBuffers b = empty(env, spec, rows, span);
        try {
            for (int l = 0; l < spec.layers(); l++) {
                b.allocate(l, 0);
                b.allocate(l, 1);
            }
        } catch (OrtException | RuntimeException | OutOfMemoryError e) {
            b.close();
            throw e;
        }
        return b;
    }

    /** No buffer yet: each is allocated by {@link #allocate(int, int)} when it is filled (a repack, layer by layer). */
    public static KvBuffers empty(OrtEnvironment env, DecoderSpec spec, int rows, int span) {
        return new KvBuffers(env, spec, rows, span);
    }

    /** Allocates layer {@code layer}'s key ({@code kind} 0) or value buffer and its tensor; returns the buffer to fill. */
    public ByteBuffer allocate(int layer, int kind) throws OrtException {
        ByteBuffer data = KvBlock.allocate(spec, rows, span);
        OnnxTensor tensor;
        try {
            tensor = KvBlock.tensor(env, spec, data, rows, span);
        } catch (OrtException | RuntimeException e) {
            NativeBuffers.free(data);
            throw e;
        }
        (kind == 0 ? keyData : valueData)[layer] = data;
        (kind == 0 ? keys : values)[layer] = tensor;
        return data;
    }

    public int rows() {
        return rows;
    }

    public int span() {
        return span;
    }

    /** Per layer, the key tensors (an entry is null once its layer is released). */
    public OnnxTensor[] keys() {
        return keys;
    }

    public OnnxTensor[] values() {
        return values;
    }

    /** Layer {@code layer}'s key ({@code kind} 0) or value buffer, to be written. */
    public ByteBuffer data(int layer, int kind) {
        return kind == 0 ? keyData[layer] : valueData[layer];
    }

    /** Layer {@code layer}'s key ({@code kind} 0) or value elements, read where they are. */
    public Buffer view(int layer, int kind) {
        return KvBlock.view(data(layer, kind), spec);
    }

    /**
     * Rows {@code from} to {@code from + count - 1} as tensors of a batch of {@code count} over the same memory (each row
     * is one contiguous part of its buffer), for a pass of those rows alone that writes into them; these buffers' own
     * tensors when they are all the rows. Closing the view closes its tensors, never the buffers.
     */
    public View rows(int from, int count) throws OrtException {
        if (from == 0 && count == rows) return new View(keys, values, false);
        OnnxTensor[] k = new OnnxTensor[spec.layers()], v = new OnnxTensor[spec.layers()];
        View view = new View(k, v, true);
        try {
            int bytes = Math.toIntExact((long) spec.kvHeads() * span * spec.headDim() * spec.kvElementBytes());
            for (int l = 0; l < spec.layers(); l++) {
                k[l] = KvBlock.tensor(env, spec, keyData[l].slice(from * bytes, count * bytes).order(keyData[l].order()), count, span);
                v[l] = KvBlock.tensor(env, spec, valueData[l].slice(from * bytes, count * bytes).order(valueData[l].order()), count, span);
            }
        } catch (OrtException | RuntimeException e) {
            view.close();
            throw e;
        }
        return view;
    }

    /** Some rows' KV as tensors of a smaller batch (see {@link #rows}). */
    public record View(OnnxTensor[] keys, OnnxTensor[] values, boolean own) implements AutoCloseable {
        @Override
        public void close() {
            if (!own) return;
            for (OnnxTensor t : keys) if (t != null) t.close();
            for (OnnxTensor t : values) if (t != null) t.close();
        }
    }

    /**
     * New buffers of {@code newSpan} positions per row holding each row's first {@code keep} positions (rows placed from
     * their start, {@link KvAlignment#START}); these stay as they are (the caller closes them once the new ones are in
     * use), and nothing new is left allocated when this fails.
     */
    public KvBuffers grown(int newSpan, int keep) throws OrtException {
        if (spec.alignment() != KvAlignment.START) throw new IllegalStateException("grown buffers keep rows placed from their start");
        KvBuffers next = allocate(env, spec, rows, newSpan);
        try {
            for (int l = 0; l < spec.layers(); l++) {
                for (int kind = 0; kind < 2; kind++) {
                    for (int r = 0; r < rows && keep > 0; r++) KvBlock.copyRow(spec, view(l, kind), r, span, 0, next.data(l, kind), r, newSpan, 0, keep);
                }
            }
        } catch (RuntimeException e) {
            next.close();
            throw e;
        }
        return next;
    }

    /** Closes layer {@code layer}'s tensors and frees its buffers (idempotent): it has been read for the last time. */
    public void releaseLayer(int layer) {
        if (keys[layer] != null) keys[layer].close();
        if (values[layer] != null) values[layer].close();
        keys[layer] = null;
        values[layer] = null;
        if (keyData[layer] != null) NativeBuffers.free(keyData[layer]);
        if (valueData[layer] != null) NativeBuffers.free(valueData[layer]);
        keyData[layer] = null;
        valueData[layer] = null;
    }

    /** Frees every layer still held. */
    @Override
    public void close() {
        for (int l = 0; l < keys.length; l++) releaseLayer(l);
    }
}
