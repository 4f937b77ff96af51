package dev.ortserve.protocol.openai;

import dev.ortserve.wire.model.CompletionUsage;
import dev.ortserve.wire.model.CompletionUsageCompletionTokensDetails;
import dev.ortserve.wire.model.CompletionUsagePromptTokensDetails;
import dev.ortserve.service.generation.ChoiceEvent;
import dev.ortserve.service.generation.ChoiceResult;
import dev.ortserve.service.generation.CompletionCall;

import java.math.BigDecimal;

/** The usage block and the numbers chat and completions write the same way. */
public final class Usages {

    private Usages() {
    }

    public static int promptTokens(CompletionCall call) {
        int total = 0;
        for (CompletionCall.Prompt p : call.prompts()) total += p.tokenIds().length;
        return total;
    }

    /** @param cached prompt tokens whose KV came from the prefix cache */
    public static CompletionUsage usage(int prompt, int cached, int completion) {
        return new CompletionUsage().promptTokens(prompt).completionTokens(completion).totalTokens(prompt + completion)
                .promptTokensDetails(new CompletionUsagePromptTokensDetails().cachedTokens(cached));
    }

    /**
     * With Predicted Outputs: the prediction tokens accepted and rejected, summed over the choices, in
     * completion_tokens_details (as OpenAI reports them); null {@code predictions}: none asked.
     */
    public static CompletionUsage usage(int prompt, int cached, int completion, Predictions predictions) {
        CompletionUsage usage = usage(prompt, cached, completion);
        if (predictions != null) {
            usage.completionTokensDetails(new CompletionUsageCompletionTokensDetails()
                    .acceptedPredictionTokens(predictions.accepted()).rejectedPredictionTokens(predictions.rejected()));
        }
        return usage;
    }

    /** Prediction tokens of a call's choices: each choice's latest counts, summed. */
    public static final class Predictions {
        private final int[] accepted;
        private final int[] rejected;

        /** Null when the call has no prediction. */
        public static Predictions of(CompletionCall call) {
            return call.prediction() == null ? null : new Predictions(call.choices());
        }

        private Predictions(int choices) {
            this.accepted = new int[choices];
            this.rejected = new int[choices];
        }

        public void see(ChoiceEvent e) {
            accepted[e.index()] = e.acceptedPredictionTokens();
            rejected[e.index()] = e.rejectedPredictionTokens();
        }

        public void see(int index, ChoiceResult r) {
            accepted[index] = r.acceptedPredictionTokens();
            rejected[index] = r.rejectedPredictionTokens();
        }

        public int accepted() {
            return java.util.Arrays.stream(accepted).sum();
        }

        public int rejected() {
            return java.util.Arrays.stream(rejected).sum();
        }
    }

    /** A log probability as JSON can carry it: -inf (a token masked out) is reported as vLLM does. */
    public static BigDecimal logprob(float logprob) {
        return BigDecimal.valueOf(Float.isFinite(logprob) ? logprob : -9999.0f);
    }

    /** Cached prompt tokens of a stream: each prompt's first choice reports its own on every event. */
    public static final class CachedTokens {
        private final int[] byPrompt;
        private final int n;

        public CachedTokens(CompletionCall call) {
            this.byPrompt = new int[call.prompts().size()];
            this.n = call.n();
        }

        public void see(ChoiceEvent e) {
            if (e.index() % n == 0) byPrompt[e.index() / n] = e.cachedTokens();
        }

        public int total() {
            int t = 0;
            for (int c : byPrompt) t += c;
            return t;
        }
    }
}
