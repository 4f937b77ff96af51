package dev.ortserve.protocol.openai.completions;

import dev.ortserve.service.ServedModel;
import dev.ortserve.wire.model.CreateCompletionRequest;
import dev.ortserve.wire.union.PromptInput;
import dev.ortserve.service.generation.CompletionCall;
import dev.ortserve.service.generation.CompletionCalls;
import dev.ortserve.service.generation.SamplingRequest;
import dev.ortserve.service.error.InvalidRequestException;
import dev.ortserve.service.error.UnsupportedParameterException;

/** Checks a completions request's own fields and hands its prompts and sampling to {@link CompletionCalls}. */
final class CompletionRequests {

    private CompletionRequests() {
    }

    static CompletionCall toCall(CreateCompletionRequest req, CompletionCalls calls, int maxN, ServedModel served) {
        if (req.getSuffix() != null) {
            throw new UnsupportedParameterException("suffix", "'suffix' (insertion) is not supported by this server.");
        }
        int n = req.getN() == null ? 1 : req.getN();
        if (n > maxN) {
            throw new InvalidRequestException("n", "'n' must be at most " + maxN + " on this server (got " + n + ").");
        }
        int bestOf = req.getBestOf() == null ? n : req.getBestOf();
        if (bestOf < n) {
            throw new InvalidRequestException("best_of", "'best_of' (" + bestOf + ") must be at least 'n' (" + n + ").");
        }
        if (bestOf > n && Boolean.TRUE.equals(req.getStream())) {
            throw new InvalidRequestException("best_of", "'best_of' greater than 'n' cannot be used with 'stream'.");
        }
        if (bestOf > maxN) {
            throw new InvalidRequestException("best_of", "'best_of' must be at most " + maxN + " on this server (got " + bestOf + ").");
        }
        if (req.getStreamOptions() != null && !Boolean.TRUE.equals(req.getStream())) {
            throw new InvalidRequestException("stream_options", "'stream_options' is only allowed when 'stream' is true.");
        }
        if (Boolean.TRUE.equals(req.getEcho()) && req.getLogprobs() != null) {
            throw new UnsupportedParameterException("echo", "'echo' together with 'logprobs' (prompt logprobs) is not supported by this server.");
        }
        SamplingRequest fields = SamplingRequest.builder().temperature(req.getTemperature()).topP(req.getTopP()).topK(req.getTopK())
                .minP(req.getMinP()).repetitionPenalty(req.getRepetitionPenalty()).frequencyPenalty(req.getFrequencyPenalty())
                .presencePenalty(req.getPresencePenalty()).logitBias(req.getLogitBias()).seed(req.getSeed())
                .maxTokens(req.getMaxTokens(), "max_tokens").minTokens(req.getMinTokens()).ignoreEos(req.getIgnoreEos())
                .stop(req.getStop() == null ? null : req.getStop().values()).stopTokenIds(req.getStopTokenIds())
                .includeStopStrInOutput(req.getIncludeStopStrInOutput()).skipSpecialTokens(req.getSkipSpecialTokens())
                .topLogprobs(req.getLogprobs()).build();
        PromptInput input = req.getPrompt();
        return calls.prepare(served, input.texts(), input.texts() != null ? null : input.tokenIds(), n, bestOf, fields, Boolean.TRUE.equals(req.getEcho()));
    }
}
