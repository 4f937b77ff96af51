package dev.ortserve.engine.kv;

import dev.ortserve.engine.KvAlignment;

import dev.ortserve.engine.DecoderRunner;
import dev.ortserve.engine.DecoderSpec;
import dev.ortserve.engine.memory.NativeBuffers;

import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtException;

import java.nio.Buffer;
import java.nio.ByteBuffer;

/**
 * A sequence's KV before it joins the batch: row {@code row} of per-layer tensors
 * [*, kv_heads, span, head_dim], placed as the model's {@link KvAlignment} says. Either a pass's present
 * tensors, which several sequences prefilled in one pass share (the {@link Holder} frees them when the last
 * one lets go), or buffers of the sequence's own ({@link #allocate}: one row, written in place by its prefill
 * chunks, freed layer by layer as the batch takes them in).
 */
public final class PendingKv implements AutoCloseable {

    /** Reference-counted owner of tensors that several pending KVs point into. */
    public static final class Holder {
        private final AutoCloseable owner;
        private int references;

        public Holder(AutoCloseable owner, int references) {
            this.owner = owner;
            this.references = references;
        }

        void release() {
            if (references <= 0) return;
            if (--references == 0) {
                try {
                    owner.close();
                } catch (Exception ignored) {
                    // a native release that fails leaves nothing for the engine to do
                }
            }
        }
    }

    public final OnnxTensor[] keys;
    public final OnnxTensor[] values;
    public final int row;
    public final int span;
    private final Holder holder;
    /** The sequence's own buffers behind {@link #keys} and {@link #values} ({@link #allocate}), else null. */
    private final KvBuffers own;
    private boolean released;

    PendingKv(OnnxTensor[] keys, OnnxTensor[] values, int row, int span, Holder holder) {
        this.keys = keys;
        this.values = values;
        this.row = row;
        this.span = span;
        this.holder = holder;
        this.own = null;
    }

    private PendingKv(KvBuffers own) {
        this.keys = own.keys();
        this.values = own.values();
        this.row = 0;
        this.span = own.span();
        this.holder = null;
        this.own = own;
    }

    /** Row {@code row} of a pass's present tensors, held by {@code holder}. */
    public static PendingKv fromPresent(DecoderRunner.Forward forward, int layers, int row, int span, Holder holder) {
        OnnxTensor[] k = new OnnxTensor[layers], v = new OnnxTensor[layers];
        for (int l = 0; l < layers; l++) {
            k[l] = forward.presentKey(l);
            v[l] = forward.presentValue(l);
        }
        return new PendingKv(k, v, row, span, holder);
    }

    /**
     * Zeroed buffers of one row of {@code span} positions, the sequence's own: a pass may bind them as past and present
     * ({@code ForwardPass.withPresentInPast}), so that its prefill chunks write their positions in place.
     */
    public static PendingKv allocate(OrtEnvironment env, DecoderSpec spec, int span) throws OrtException {
        return new PendingKv(KvBuffers.allocate(env, spec, 1, span));
    }

    /** Whether these are the sequence's own buffers ({@link #allocate}): written in place, freed layer by layer. */
    public boolean own() {
        return own != null;
    }

    /** Own buffers: layer {@code layer}'s key ({@code kind} 0) or value buffer, to be written (a prefix assembled into it). */
    public ByteBuffer data(int layer, int kind) {
        if (!own()) throw new IllegalStateException("not the sequence's own buffers");
        return own.data(layer, kind);
    }

    /** Layer {@code layer}'s key ({@code kind} 0) or value elements, read where they are. */
    public Buffer read(int layer, int kind) {
        if (own()) return own.view(layer, kind);
        return NativeBuffers.view(kind == 0 ? keys[layer] : values[layer]);
    }

    /**
     * Own buffers: layer {@code layer} has been read for the last time (the batch took it in), freed now, so that a
     * sequence joining the batch is never held twice whole. Pass outputs are shared and freed whole on {@link #close}.
     */
    public void releaseLayer(int layer) {
        if (own()) own.releaseLayer(layer);
    }

    @Override
    public void close() {
        if (released) return;
        released = true;
        if (own()) {
            own.close();
        } else {
            holder.release();
        }
    }
}
