package dev.ortserve.engine.kv;

import dev.ortserve.engine.KvAlignment;

import dev.ortserve.engine.DecoderRunner;

import ai.onnxruntime.OnnxTensor;

/**
 * A sequence's KV before it joins the batch: row {@code row} of per-layer tensors
 * [*, kv_heads, span, head_dim], placed as the model's {@link KvAlignment} says. Several sequences prefilled in one pass share the
 * pass's outputs; the {@link Holder} frees them when the last one lets go.
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
    private boolean released;

    PendingKv(OnnxTensor[] keys, OnnxTensor[] values, int row, int span, Holder holder) {
        this.keys = keys;
        this.values = values;
        this.row = row;
        this.span = span;
        this.holder = holder;
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

    @Override
    public void close() {
        if (!released) {
            released = true;
            holder.release();
        }
    }
}
