package dev.ortserve.service.generation;

import dev.ortserve.engine.DecoderSpec;
import dev.ortserve.engine.SamplingParams;
import dev.ortserve.service.error.InvalidRequestException;

import java.math.BigDecimal;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The sampling a request asks for, as it asks (an unset field is null), for chat completions,
 * completions and Responses alike. {@link #resolve} checks it against the model (what Bean
 * Validation cannot know: vocabulary, context length, the model's defaults) and turns it into
 * engine params. Built with {@link #builder()}: each endpoint sets the fields it has.
 */
public final class SamplingRequest {

    private BigDecimal temperature;
    private BigDecimal topP;
    private Integer topK;
    private BigDecimal minP;
    private BigDecimal repetitionPenalty;
    private BigDecimal frequencyPenalty;
    private BigDecimal presencePenalty;
    private Map<String, Integer> logitBias;
    private Long seed;
    private Integer maxTokens;
    private String maxTokensParam = "max_tokens";
    private Integer minTokens;
    private Boolean ignoreEos;
    private List<String> stop;
    private List<Integer> stopTokenIds;
    private Boolean includeStopStrInOutput;
    private Boolean skipSpecialTokens;
    private Integer topLogprobs;

    private SamplingRequest() {
    }

    public static Builder builder() {
        return new Builder();
    }

    /** The request's generation cap (null: up to the context), named as the endpoint names it. */
    public Integer maxTokens() {
        return maxTokens;
    }

    /** The params of every choice of a call whose longest prompt has {@code longestPrompt} tokens. */
    public SamplingParams resolve(DecoderSpec spec, int longestPrompt) {
        int vocab = spec.vocabSize();
        Map<Integer, Float> bias = new HashMap<>();
        if (logitBias != null) {
            for (Map.Entry<String, Integer> e : logitBias.entrySet()) {
                int id;
                try {
                    id = Integer.parseInt(e.getKey());
                } catch (NumberFormatException nfe) {
                    throw new InvalidRequestException("logit_bias", "Invalid key in 'logit_bias': '" + e.getKey() + "' is not a token id.");
                }
                if (id < 0 || id >= vocab) {
                    throw new InvalidRequestException("logit_bias", "Invalid key in 'logit_bias': token id " + id + " is outside the vocabulary [0, " + vocab + ").");
                }
                if (e.getValue() == null || e.getValue() < -100 || e.getValue() > 100) {
                    throw new InvalidRequestException("logit_bias", "Invalid value in 'logit_bias' for token " + id + ": biases must be integers in [-100, 100].");
                }
                bias.put(id, e.getValue().floatValue());
            }
        }
        if (stopTokenIds != null) {
            for (Integer id : stopTokenIds) {
                if (id == null || id < 0 || id >= vocab) {
                    throw new InvalidRequestException("stop_token_ids", "Token id " + id + " in 'stop_token_ids' is outside the vocabulary [0, " + vocab + ").");
                }
            }
        }
        int context = spec.maxModelLen();
        int max;
        if (maxTokens != null) {
            if (longestPrompt + maxTokens > context) {
                throw new InvalidRequestException(maxTokensParam, "This model's maximum context length is " + context + " tokens. However, you requested "
                        + (longestPrompt + maxTokens) + " tokens (" + longestPrompt + " in the prompt, " + maxTokens
                        + " for the completion). Please reduce the prompt or the completion length.", "context_length_exceeded");
            }
            max = maxTokens;
        } else {
            max = context - longestPrompt;
        }
        DecoderSpec.Defaults defaults = spec.defaults();
        // the model's generation_config.json max_new_tokens caps every request, given or not (vLLM's get_max_tokens)
        if (defaults.maxNewTokens() != null) max = Math.min(max, defaults.maxNewTokens());
        int min = minTokens == null ? 0 : minTokens;
        if (min > max) {
            throw new InvalidRequestException("min_tokens", "'min_tokens' (" + min + ") must not exceed the maximum number of tokens (" + max + ").");
        }
        double temp = temperature != null ? temperature.doubleValue() : defaults.temperature() != null ? defaults.temperature() : 1.0;
        double p = topP != null ? topP.doubleValue() : defaults.topP() != null ? defaults.topP() : 1.0;
        int k = topK != null ? topK : defaults.topK() != null ? defaults.topK() : 0;
        double rep = repetitionPenalty != null ? repetitionPenalty.doubleValue() : defaults.repetitionPenalty() != null ? defaults.repetitionPenalty() : 1.0;
        return new SamplingParams(temp, p, Math.max(k, 0), minP == null ? 0 : minP.doubleValue(), rep,
                frequencyPenalty == null ? 0 : frequencyPenalty.doubleValue(), presencePenalty == null ? 0 : presencePenalty.doubleValue(),
                bias, seed, max, min, Boolean.TRUE.equals(ignoreEos), stop == null ? List.of() : stop,
                stopTokenIds, Boolean.TRUE.equals(includeStopStrInOutput), !Boolean.FALSE.equals(skipSpecialTokens), topLogprobs);
    }

    /** Fails when the prompt leaves no room for even one generated token. */
    public static void checkPromptFits(int promptTokens, int context, String param) {
        if (promptTokens >= context) {
            throw new InvalidRequestException(param, "This model's maximum context length is " + context + " tokens. However, your prompt has "
                    + promptTokens + " tokens, which leaves no room for the completion.", "context_length_exceeded");
        }
    }

    /** Sets what a request has; what it leaves unset takes the model's default (or the engine's) when resolved. */
    public static final class Builder {
        private final SamplingRequest r = new SamplingRequest();

        private Builder() {
        }

        public Builder temperature(BigDecimal v) { r.temperature = v; return this; }
        public Builder topP(BigDecimal v) { r.topP = v; return this; }
        public Builder topK(Integer v) { r.topK = v; return this; }
        public Builder minP(BigDecimal v) { r.minP = v; return this; }
        public Builder repetitionPenalty(BigDecimal v) { r.repetitionPenalty = v; return this; }
        public Builder frequencyPenalty(BigDecimal v) { r.frequencyPenalty = v; return this; }
        public Builder presencePenalty(BigDecimal v) { r.presencePenalty = v; return this; }
        public Builder logitBias(Map<String, Integer> v) { r.logitBias = v; return this; }
        public Builder seed(Long v) { r.seed = v; return this; }

        /** The generation cap and the name of the request field that set it (for its error). */
        public Builder maxTokens(Integer v, String param) {
            r.maxTokens = v;
            r.maxTokensParam = param;
            return this;
        }

        public Builder minTokens(Integer v) { r.minTokens = v; return this; }
        public Builder ignoreEos(Boolean v) { r.ignoreEos = v; return this; }
        public Builder stop(List<String> v) { r.stop = v; return this; }
        public Builder stopTokenIds(List<Integer> v) { r.stopTokenIds = v; return this; }
        public Builder includeStopStrInOutput(Boolean v) { r.includeStopStrInOutput = v; return this; }
        public Builder skipSpecialTokens(Boolean v) { r.skipSpecialTokens = v; return this; }
        public Builder topLogprobs(Integer v) { r.topLogprobs = v; return this; }

        public SamplingRequest build() {
            return r;
        }
    }
}
