package dev.ortserve.engine;

/**
 * One generated token of one sequence. {@code textDelta} is the text that became final with this
 * token (possibly empty: text held back for a possible stop string, or half a UTF-8 character);
 * the last event of a sequence carries the finish reason.
 *
 * @param stopReason   the matched stop string, or the stop token id that ended it; null for EOS or length
 * @param cachedTokens prompt tokens whose KV was reused from the prefix cache
 */
public record TokenEvent(int tokenId, String textDelta, TokenLogprob logprob, FinishReason finishReason,
                         Object stopReason, int promptTokens, int generatedTokens, int cachedTokens) {

    public boolean isLast() {
        return finishReason != null;
    }
}
