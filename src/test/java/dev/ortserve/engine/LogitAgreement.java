package dev.ortserve.engine;

import dev.ortserve.engine.load.RewriteProbe;

import dev.ortserve.engine.runner.OrtDecoderRunner;

import ai.onnxruntime.OnnxTensor;
import ai.onnxruntime.OrtException;

import java.util.List;

/**
 * Two models' logits over the same tokens, one sequence, step by step through the engine's runner:
 * the prompt, then {@code steps} decode steps fed the reference model's greedy ids (teacher forcing,
 * so both see the same context however they part). Per step: cosine of the logits, largest absolute
 * difference, whether the arg max agrees.
 */
public final class LogitAgreement {

    /**
     * @param minCosine     the lowest step's logit cosine
     * @param meanCosine    the mean over the steps
     * @param maxAbsDiff    the largest |difference| of a logit over every step
     * @param maxAbsLogit   the largest |logit| of the reference (the scale of maxAbsDiff)
     * @param argMaxAgree   steps whose arg max is the same
     * @param steps         steps compared (prompt's last position included)
     * @param firstDisagree the first step whose arg max differs, -1 if none
     */
    public record Stats(double minCosine, double meanCosine, double maxAbsDiff, double maxAbsLogit, int argMaxAgree, int steps, int firstDisagree) {
        @Override
        public String toString() {
            return String.format("cosine min %.6f mean %.7f, max |diff| %.4g (largest |logit| %.3g), arg max agrees %d/%d%s", minCosine, meanCosine,
                    maxAbsDiff, maxAbsLogit, argMaxAgree, steps, firstDisagree < 0 ? "" : " (first differs at step " + firstDisagree + ")");
        }
    }

    private LogitAgreement() {
    }

    public static Stats compare(LoadedModel reference, LoadedModel other, int[] prompt, int steps) throws OrtException {
        Walk a = new Walk(reference), b = new Walk(other);
        try {
            double min = 1, sum = 0, maxDiff = 0, maxAbs = 0;
            int agree = 0, first = -1;
            int token = -1;
            for (int step = 0; step <= steps; step++) {
                float[] x = step == 0 ? a.prefill(prompt) : a.decode(token), y = step == 0 ? b.prefill(prompt) : b.decode(token);
                for (int i = 0; i < x.length; i++) {
                    maxDiff = Math.max(maxDiff, Math.abs(x[i] - y[i]));
                    maxAbs = Math.max(maxAbs, Math.abs(x[i]));
                }
                int ax = RewriteProbe.argMax(x), ay = RewriteProbe.argMax(y);
                double cosine = RewriteProbe.cosine(x, y);
                min = Math.min(min, cosine);
                sum += cosine;
                if (ax == ay) agree++;
                else if (first < 0) first = step;
                token = ax; // the reference's greedy id, fed to both
            }
            return new Stats(min, sum / (steps + 1), maxDiff, maxAbs, agree, steps + 1, first);
        } finally {
            a.close();
            b.close();
        }
    }

    /** One sequence through one model: each pass's present tensors are the next pass's past (its outputs kept open until then). */
    private static final class Walk {
        final LoadedModel model;
        final OrtDecoderRunner runner;
        DecoderRunner.Forward last;
        int length;

        Walk(LoadedModel model) {
            this.model = model;
            this.runner = new OrtDecoderRunner(model);
        }

        float[] prefill(int[] prompt) throws OrtException {
            return pass(ForwardPass.of(model.spec().alignment(), List.of(new ForwardPass.Row(prompt, 0, prompt.length, 0)), 0, null, null),
                    prompt.length);
        }

        float[] decode(int token) throws OrtException {
            int layers = model.spec().layers();
            OnnxTensor[] keys = new OnnxTensor[layers], values = new OnnxTensor[layers];
            for (int l = 0; l < layers; l++) {
                keys[l] = last.presentKey(l);
                values[l] = last.presentValue(l);
            }
            return pass(ForwardPass.of(model.spec().alignment(), List.of(ForwardPass.Row.decode(token, length)), length, keys, values), 1);
        }

        private float[] pass(ForwardPass pass, int added) throws OrtException {
            DecoderRunner.Forward f = runner.run(pass);
            float[] logits = new float[f.vocabSize()];
            f.lastLogits(0, logits);
            if (last != null) last.close();
            last = f;
            length += added;
            return logits;
        }

        void close() {
            if (last != null) last.close();
        }
    }
}
