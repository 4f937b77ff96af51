package dev.ortserve.api.resource;

import dev.ortserve.api.error.ApiException;
import dev.ortserve.api.union.StopSequences;
import dev.ortserve.engine.DecoderSpec;
import dev.ortserve.engine.SamplingParams;

import java.math.BigDecimal;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The sampling fields chat and completions share, checked against the model (what Bean
 * Validation cannot know: vocabulary, context length, defaults) and turned into engine params.
 */
public record SamplingFields(BigDecimal temperature, BigDecimal topP, Integer topK, BigDecimal minP, BigDecimal repetitionPenalty,
                      BigDecimal frequencyPenalty, BigDecimal presencePenalty, Map<String, Integer> logitBias, Long seed,
                      Integer maxTokens, String maxTokensParam, Integer minTokens, Boolean ignoreEos, StopSequences stop,
                      List<Integer> stopTokenIds, Boolean includeStopStrInOutput, Boolean skipSpecialTokens, Integer topLogprobs) {

    public SamplingParams toParams(DecoderSpec spec, int vocab, int longestPrompt) {
        Map<Integer, Float> bias = new HashMap<>();
        if (logitBias != null) {
            for (Map.Entry<String, Integer> e : logitBias.entrySet()) {
                int id;
                try {
                    id = Integer.parseInt(e.getKey());
                } catch (NumberFormatException nfe) {
                    throw ApiException.invalidRequest("logit_bias", "Invalid key in 'logit_bias': '" + e.getKey() + "' is not a token id.");
                }
                if (id < 0 || id >= vocab) {
                    throw ApiException.invalidRequest("logit_bias", "Invalid key in 'logit_bias': token id " + id + " is outside the vocabulary [0, " + vocab + ").");
                }
                if (e.getValue() == null || e.getValue() < -100 || e.getValue() > 100) {
                    throw ApiException.invalidRequest("logit_bias", "Invalid value in 'logit_bias' for token " + id + ": biases must be integers in [-100, 100].");
                }
                bias.put(id, e.getValue().floatValue());
            }
        }
        if (stopTokenIds != null) {
            for (Integer id : stopTokenIds) {
                if (id == null || id < 0 || id >= vocab) {
                    throw ApiException.invalidRequest("stop_token_ids", "Token id " + id + " in 'stop_token_ids' is outside the vocabulary [0, " + vocab + ").");
                }
            }
        }
        int context = spec.maxModelLen();
        int max;
        if (maxTokens != null) {
            if (longestPrompt + maxTokens > context) {
                throw ApiException.invalidRequest(maxTokensParam, "This model's maximum context length is " + context + " tokens. However, you requested "
                        + (longestPrompt + maxTokens) + " tokens (" + longestPrompt + " in the prompt, " + maxTokens
                        + " for the completion). Please reduce the prompt or the completion length.", "context_length_exceeded");
            }
            max = maxTokens;
        } else {
            max = context - longestPrompt;
        }
        int min = minTokens == null ? 0 : minTokens;
        if (min > max) {
            throw ApiException.invalidRequest("min_tokens", "'min_tokens' (" + min + ") must not exceed the maximum number of tokens (" + max + ").");
        }
        DecoderSpec.Defaults defaults = spec.defaults();
        double temp = temperature != null ? temperature.doubleValue() : defaults.temperature() != null ? defaults.temperature() : 1.0;
        double p = topP != null ? topP.doubleValue() : defaults.topP() != null ? defaults.topP() : 1.0;
        int k = topK != null ? topK : defaults.topK() != null ? defaults.topK() : 0;
        double rep = repetitionPenalty != null ? repetitionPenalty.doubleValue() : defaults.repetitionPenalty() != null ? defaults.repetitionPenalty() : 1.0;
        return new SamplingParams(temp, p, Math.max(k, 0), minP == null ? 0 : minP.doubleValue(), rep,
                frequencyPenalty == null ? 0 : frequencyPenalty.doubleValue(), presencePenalty == null ? 0 : presencePenalty.doubleValue(),
                bias, seed, max, min, Boolean.TRUE.equals(ignoreEos), stop == null ? List.of() : stop.values(),
                stopTokenIds, Boolean.TRUE.equals(includeStopStrInOutput), !Boolean.FALSE.equals(skipSpecialTokens), topLogprobs);
    }

    /** Fails when the prompt leaves no room for even one generated token. */
    public static void checkPromptFits(int promptTokens, int context, String param) {
        if (promptTokens >= context) {
            throw ApiException.invalidRequest(param, "This model's maximum context length is " + context + " tokens. However, your prompt has "
                    + promptTokens + " tokens, which leaves no room for the completion.", "context_length_exceeded");
        }
    }
}
