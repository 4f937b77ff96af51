package dev.ortserve.engine;

/**
 * Restricts the tokens a sequence may produce, step by step (structured outputs). Applied to a
 * row's logits inside the engine's batched step, so constrained and unconstrained sequences
 * share one batch.
 */
public interface TokenConstraint {

    /** A fresh state for one sequence. */
    State start();

    interface State {
        /**
         * Sets the logit of every token that is not allowed now to negative infinity; the
         * end-of-sequence tokens are allowed exactly when the output so far is complete.
         */
        void mask(float[] logits);

        /** Moves past the chosen token. */
        void advance(int token);
    }
}
