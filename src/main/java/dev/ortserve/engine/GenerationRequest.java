package dev.ortserve.engine;

/**
 * One sequence to generate: its prompt tokens and its sampling.
 *
 * @param prediction the tokens the output is expected to resemble (OpenAI's Predicted Outputs), drafted for speculative
 *                   decoding; null for none
 * @param adapter    the LoRA adapter it runs with, or null for the base model
 * @param images     the features its image tokens take (a vision-language model's), or null for none
 */
public record GenerationRequest(String requestId, int[] promptTokenIds, SamplingParams sampling, int[] prediction, LoraAdapter adapter,
                                PromptImages images) {

    public GenerationRequest(String requestId, int[] promptTokenIds, SamplingParams sampling, int[] prediction, LoraAdapter adapter) {
        this(requestId, promptTokenIds, sampling, prediction, adapter, null);
    }

    public GenerationRequest(String requestId, int[] promptTokenIds, SamplingParams sampling, int[] prediction) {
        this(requestId, promptTokenIds, sampling, prediction, null);
    }

    public GenerationRequest(String requestId, int[] promptTokenIds, SamplingParams sampling) {
        this(requestId, promptTokenIds, sampling, null);
    }
}
