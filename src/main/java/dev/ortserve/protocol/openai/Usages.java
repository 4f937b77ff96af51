package dev.ortserve.protocol.openai;

import dev.ortserve.api.model.CompletionUsage;
import dev.ortserve.api.model.CompletionUsagePromptTokensDetails;
import dev.ortserve.service.generation.ChoiceEvent;
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
