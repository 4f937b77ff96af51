package dev.ortserve.service.generation;

import dev.ortserve.engine.SamplingParams;

import java.util.List;

/**
 * A validated completions request in domain terms: the tokenized prompts, how many choices per
 * prompt, and the sampling of every choice. Choice index = prompt index * n + sample index.
 *
 * @param prediction the predicted output's tokens (Predicted Outputs: drafted for speculative decoding), or null
 */
public record CompletionCall(List<Prompt> prompts, int n, SamplingParams sampling, boolean echo,
                             boolean maxTokensGiven, int[] prediction) {

    public CompletionCall(List<Prompt> prompts, int n, SamplingParams sampling, boolean echo, boolean maxTokensGiven) {
        this(prompts, n, sampling, echo, maxTokensGiven, null);
    }

    /** This call with a predicted output (its tokens), or none. */
    public CompletionCall withPrediction(int[] tokens) {
        return new CompletionCall(prompts, n, sampling, echo, maxTokensGiven, tokens);
    }

    /** @param images the features of its image tokens (a vision-language model's prompt), or null */
    public record Prompt(int[] tokenIds, String text, dev.ortserve.engine.PromptImages images) {

        public Prompt(int[] tokenIds, String text) {
            this(tokenIds, text, null);
        }
    }

    /** The sampling values a response object reports back to the client. */
    public record Reported(double temperature, double topP, double presencePenalty, double frequencyPenalty) {
    }

    /** One prompt, one greedy choice of at most {@code maxTokens} (a summary, a warm-up). */
    public static CompletionCall greedy(Prompt prompt, int maxTokens) {
        return new CompletionCall(List.of(prompt), 1, SamplingParams.greedy(maxTokens), false, true);
    }

    public Reported reported() {
        return new Reported(sampling.temperature(), sampling.topP(), sampling.presencePenalty(), sampling.frequencyPenalty());
    }

    public int choices() {
        return prompts.size() * n;
    }

    /** Whether each choice reports its tokens' logprobs. */
    public boolean logprobs() {
        return sampling.topLogprobs() != null;
    }

    /** best_of: {@code bestOf} candidates per prompt, their token logprobs always computed so that they can be ranked. */
    public CompletionCall candidates(int bestOf) {
        return new CompletionCall(prompts, bestOf, logprobs() ? sampling : sampling.withTopLogprobs(0), echo, maxTokensGiven, prediction);
    }
}
