package dev.ortserve.engine;

/**
 * One generated token of one sequence. {@code textDelta} is the text that became final with this
 * token (possibly empty: text held back for a possible stop string, or half a UTF-8 character);
 * the last event of a sequence carries the finish reason.
 *
 * @param stopReason   the matched stop string, or the stop token id that ended it; null for EOS or length
 * @param cachedTokens prompt tokens whose KV was reused from the prefix cache
 * @param drafts       the sequence's speculative decoding so far
 */
public record TokenEvent(int tokenId, String textDelta, TokenLogprob logprob, FinishReason finishReason,
                         Object stopReason, int promptTokens, int generatedTokens, int cachedTokens, Drafts drafts) {

    public TokenEvent(int tokenId, String textDelta, TokenLogprob logprob, FinishReason finishReason,
                      Object stopReason, int promptTokens, int generatedTokens, int cachedTokens) {
        this(tokenId, textDelta, logprob, finishReason, stopReason, promptTokens, generatedTokens, cachedTokens, Drafts.NONE);
    }

    /**
     * Speculative decoding of one sequence so far: draft tokens verified by the model and those it accepted.
     *
     * @param predicted the drafts came from the request's predicted output (else from prompt lookup)
     */
    public record Drafts(boolean predicted, long drafted, long accepted) {
        public static final Drafts NONE = new Drafts(false, 0, 0);

        /** Verified draft tokens the model did not accept. */
        public long rejected() {
            return drafted - accepted;
        }
    }

    public boolean isLast() {
        return finishReason != null;
    }
}
