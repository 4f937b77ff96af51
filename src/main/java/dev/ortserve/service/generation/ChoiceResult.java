package dev.ortserve.service.generation;

import dev.ortserve.engine.TokenEvent;
import dev.ortserve.engine.TokenLogprob;

import java.util.ArrayList;
import java.util.List;

/**
 * One finished choice: its text (the concatenation of its stream deltas), tokens and logprobs.
 *
 * @param acceptedPredictionTokens Predicted Outputs: prediction tokens the model accepted (0 without a prediction)
 * @param rejectedPredictionTokens Predicted Outputs: prediction tokens verified and not accepted
 */
public record ChoiceResult(String text, List<Integer> tokenIds, List<Logprob> logprobs, Finish finishReason,
                           Object stopReason, int promptTokens, int generatedTokens, int cachedTokens,
                           int acceptedPredictionTokens, int rejectedPredictionTokens) {

    static List<Accumulator> accumulators(int n) {
        List<Accumulator> list = new ArrayList<>(n);
        for (int i = 0; i < n; i++) list.add(new Accumulator());
        return list;
    }

    static final class Accumulator {
        private final StringBuilder text = new StringBuilder();
        private final List<Integer> tokens = new ArrayList<>();
        private final List<TokenLogprob> logprobs = new ArrayList<>();
        private TokenEvent last;

        void add(TokenEvent e) {
            text.append(e.textDelta());
            tokens.add(e.tokenId());
            if (e.logprob() != null) logprobs.add(e.logprob());
            last = e;
        }

        ChoiceResult result() {
            return new ChoiceResult(text.toString(), tokens, Logprob.of(logprobs), last == null ? Finish.ERROR : Finish.of(last.finishReason()),
                    last == null ? null : last.stopReason(), last == null ? 0 : last.promptTokens(), tokens.size(),
                    last == null ? 0 : last.cachedTokens(),
                    last == null || !last.drafts().predicted() ? 0 : (int) last.drafts().accepted(),
                    last == null || !last.drafts().predicted() ? 0 : (int) last.drafts().rejected());
        }
    }
}
