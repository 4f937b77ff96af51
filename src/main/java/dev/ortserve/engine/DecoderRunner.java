package dev.ortserve.engine;

import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtException;

/**
 * Runs one forward pass of the decoder. The engine's only way to the model, and so the seam
 * where tests put a runner that fails a chosen step (a {@link Decorator}).
 */
public interface DecoderRunner {

    Forward run(ForwardPass pass) throws OrtException;

    /** Wraps the engine's runner (tests: fault injection). */
    @FunctionalInterface
    interface Decorator {
        DecoderRunner decorate(DecoderRunner runner);
    }

    /** A pass's outputs; closing frees them (unless a present tensor was adopted as a past: see {@code KvCache}). */
    interface Forward extends AutoCloseable {
        /** Logits of the last position of row {@code row} into {@code dst} (vocabulary-sized). */
        void lastLogits(int row, float[] dst);

        /**
         * Logits of column {@code index} of the {@link ForwardPass#logitColumns} columns of row {@code row} that end at its
         * last one (index {@code logitColumns - 1} is {@link #lastLogits}).
         */
        void logits(int row, int index, float[] dst);

        int vocabSize();

        OnnxTensor presentKey(int layer);

        OnnxTensor presentValue(int layer);

        @Override
        void close();
    }
}
