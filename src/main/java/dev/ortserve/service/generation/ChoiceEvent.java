package dev.ortserve.service.generation;

import dev.ortserve.engine.TokenEvent;

/**
 * One engine event of one choice of a multi-choice generation. Resources read it through the
 * accessors below, in the service's terms; {@link #event()} is for the services themselves.
 */
public record ChoiceEvent(int index, TokenEvent event) {

    public String textDelta() {
        return event.textDelta();
    }

    /** This token's logprob, or null when the call asked for none. */
    public Logprob logprob() {
        return Logprob.of(event.logprob());
    }

    /** How the choice ended; null until its last event. */
    public Finish finish() {
        return Finish.of(event.finishReason());
    }

    /** The stop string or token id that ended the choice, or null. */
    public Object stopReason() {
        return event.stopReason();
    }

    /** Whether this is the choice's last event. */
    public boolean isLast() {
        return event.isLast();
    }

    public int cachedTokens() {
        return event.cachedTokens();
    }

    /** Predicted Outputs: the choice's prediction tokens accepted so far (0 without a prediction). */
    public int acceptedPredictionTokens() {
        return event.drafts().predicted() ? (int) event.drafts().accepted() : 0;
    }

    /** Predicted Outputs: the choice's prediction tokens verified and not accepted so far (0 without a prediction). */
    public int rejectedPredictionTokens() {
        return event.drafts().predicted() ? (int) event.drafts().rejected() : 0;
    }
}
