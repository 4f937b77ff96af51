package dev.ortserve.engine;

import java.util.List;
import java.util.Map;

/**
 * Everything that decides how one sequence picks its tokens and when it stops.
 *
 * @param temperature        0 = greedy
 * @param topK               0 or -1 = off
 * @param logitBias          token id to a bias added to its logit
 * @param seed               null = an unseeded generator
 * @param maxTokens          generated tokens at most (the engine also stops at the context length)
 * @param minTokens          EOS and stop token ids are suppressed until this many tokens exist
 * @param stop               stop strings (matched in decoded text, also across tokens)
 * @param stopTokenIds       extra token ids that end generation
 * @param topLogprobs        null = no logprobs; else the chosen token's logprob and this many alternatives
 */
public record SamplingParams(double temperature, double topP, int topK, double minP,
                             double repetitionPenalty, double frequencyPenalty, double presencePenalty,
                             Map<Integer, Float> logitBias, Long seed, int maxTokens, int minTokens, boolean ignoreEos,
                             List<String> stop, List<Integer> stopTokenIds, boolean includeStopStrInOutput,
                             boolean skipSpecialTokens, Integer topLogprobs, TokenConstraint constraint) {

    /** Without a constraint. */
    public SamplingParams(double temperature, double topP, int topK, double minP, double repetitionPenalty, double frequencyPenalty,
                          double presencePenalty, Map<Integer, Float> logitBias, Long seed, int maxTokens, int minTokens, boolean ignoreEos,
                          List<String> stop, List<Integer> stopTokenIds, boolean includeStopStrInOutput, boolean skipSpecialTokens,
                          Integer topLogprobs) {
        this(temperature, topP, topK, minP, repetitionPenalty, frequencyPenalty, presencePenalty, logitBias, seed, maxTokens, minTokens,
                ignoreEos, stop, stopTokenIds, includeStopStrInOutput, skipSpecialTokens, topLogprobs, null);
    }

    public SamplingParams {
        logitBias = logitBias == null ? Map.of() : Map.copyOf(logitBias);
        stop = stop == null ? List.of() : List.copyOf(stop);
        stopTokenIds = stopTokenIds == null ? List.of() : List.copyOf(stopTokenIds);
    }

    public static SamplingParams greedy(int maxTokens) {
        return new SamplingParams(0, 1, 0, 0, 1, 0, 0, Map.of(), null, maxTokens, 0, false,
                List.of(), List.of(), false, true, null);
    }

    public boolean isGreedy() {
        return temperature < 1e-5;
    }

    public SamplingParams withSeed(Long newSeed) {
        return new SamplingParams(temperature, topP, topK, minP, repetitionPenalty, frequencyPenalty, presencePenalty,
                logitBias, newSeed, maxTokens, minTokens, ignoreEos, stop, stopTokenIds, includeStopStrInOutput,
                skipSpecialTokens, topLogprobs, constraint);
    }

    public SamplingParams withStop(List<String> newStop, boolean includeStop) {
        return new SamplingParams(temperature, topP, topK, minP, repetitionPenalty, frequencyPenalty, presencePenalty,
                logitBias, seed, maxTokens, minTokens, ignoreEos, newStop, stopTokenIds, includeStop,
                skipSpecialTokens, topLogprobs, constraint);
    }

    public SamplingParams withMaxTokens(int newMaxTokens) {
        return new SamplingParams(temperature, topP, topK, minP, repetitionPenalty, frequencyPenalty, presencePenalty,
                logitBias, seed, newMaxTokens, minTokens, ignoreEos, stop, stopTokenIds, includeStopStrInOutput,
                skipSpecialTokens, topLogprobs, constraint);
    }

    /**
     * The same sampling restricted by a grammar. Stop strings are dropped (they must not cut a
     * structured value) and special tokens are kept in the text (the grammar saw their bytes).
     */
    public SamplingParams withConstraint(TokenConstraint newConstraint) {
        return new SamplingParams(temperature, topP, topK, minP, repetitionPenalty, frequencyPenalty, presencePenalty,
                logitBias, seed, maxTokens, minTokens, ignoreEos, List.of(), stopTokenIds, includeStopStrInOutput,
                false, topLogprobs, newConstraint);
    }

    public SamplingParams withTopLogprobs(Integer newTopLogprobs) {
        return new SamplingParams(temperature, topP, topK, minP, repetitionPenalty, frequencyPenalty, presencePenalty,
                logitBias, seed, maxTokens, minTokens, ignoreEos, stop, stopTokenIds, includeStopStrInOutput,
                skipSpecialTokens, newTopLogprobs, constraint);
    }
}
