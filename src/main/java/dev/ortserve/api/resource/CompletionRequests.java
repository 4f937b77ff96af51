package dev.ortserve.api.resource;

import dev.ortserve.api.error.ApiException;
import dev.ortserve.api.model.CreateCompletionRequest;
import dev.ortserve.api.union.PromptInput;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.TextTokenizer;
import dev.ortserve.service.generation.CompletionCall;
import dev.ortserve.service.generation.SamplingRequest;

import java.util.ArrayList;
import java.util.List;

/** Checks a completions request against the served model and turns it into a {@link CompletionCall}. */
final class CompletionRequests {

    private CompletionRequests() {
    }

    static CompletionCall toCall(CreateCompletionRequest req, LoadedModel model, int maxN, int queueCapacity) {
        if (req.getSuffix() != null) {
            throw ApiException.unsupported("suffix", "'suffix' (insertion) is not supported by this server.");
        }
        int n = req.getN() == null ? 1 : req.getN();
        if (n > maxN) {
            throw ApiException.invalidRequest("n", "'n' must be at most " + maxN + " on this server (got " + n + ").");
        }
        int bestOf = req.getBestOf() == null ? n : req.getBestOf();
        if (bestOf < n) {
            throw ApiException.invalidRequest("best_of", "'best_of' (" + bestOf + ") must be at least 'n' (" + n + ").");
        }
        if (bestOf > n && Boolean.TRUE.equals(req.getStream())) {
            throw ApiException.invalidRequest("best_of", "'best_of' greater than 'n' cannot be used with 'stream'.");
        }
        if (bestOf > maxN) {
            throw ApiException.invalidRequest("best_of", "'best_of' must be at most " + maxN + " on this server (got " + bestOf + ").");
        }
        if (req.getStreamOptions() != null && !Boolean.TRUE.equals(req.getStream())) {
            throw ApiException.invalidRequest("stream_options", "'stream_options' is only allowed when 'stream' is true.");
        }
        if (Boolean.TRUE.equals(req.getEcho()) && req.getLogprobs() != null) {
            throw ApiException.unsupported("echo", "'echo' together with 'logprobs' (prompt logprobs) is not supported by this server.");
        }
        TextTokenizer tokenizer = model.tokenizer();
        int vocab = model.spec().vocabSize();
        PromptInput input = req.getPrompt();
        List<CompletionCall.Prompt> prompts = new ArrayList<>();
        if (input.texts() != null) {
            for (String text : input.texts()) {
                prompts.add(new CompletionCall.Prompt(tokenizer.encode(text, true), text));
            }
        } else {
            for (int[] ids : input.tokenIds()) {
                for (int id : ids) {
                    if (id >= vocab) {
                        throw ApiException.invalidRequest("prompt", "Token id " + id + " in 'prompt' is outside the vocabulary [0, " + vocab + ").");
                    }
                }
                prompts.add(new CompletionCall.Prompt(ids, tokenizer.decode(ids, false)));
            }
        }
        int longest = 0;
        for (CompletionCall.Prompt p : prompts) {
            if (p.tokenIds().length == 0) {
                throw ApiException.invalidRequest("prompt", "The prompt is empty: it must contain at least one token.");
            }
            SamplingRequest.checkPromptFits(p.tokenIds().length, model.spec().maxModelLen(), "prompt");
            longest = Math.max(longest, p.tokenIds().length);
        }
        if ((long) prompts.size() * Math.max(n, bestOf) > queueCapacity) {
            throw ApiException.invalidRequest(bestOf > n ? "best_of" : "n", "This request asks for " + prompts.size() * Math.max(n, bestOf) + " sequences; the server admits at most "
                    + queueCapacity + " at once.");
        }
        SamplingRequest fields = SamplingRequest.builder().temperature(req.getTemperature()).topP(req.getTopP()).topK(req.getTopK())
                .minP(req.getMinP()).repetitionPenalty(req.getRepetitionPenalty()).frequencyPenalty(req.getFrequencyPenalty())
                .presencePenalty(req.getPresencePenalty()).logitBias(req.getLogitBias()).seed(req.getSeed())
                .maxTokens(req.getMaxTokens(), "max_tokens").minTokens(req.getMinTokens()).ignoreEos(req.getIgnoreEos())
                .stop(req.getStop() == null ? null : req.getStop().values()).stopTokenIds(req.getStopTokenIds())
                .includeStopStrInOutput(req.getIncludeStopStrInOutput()).skipSpecialTokens(req.getSkipSpecialTokens())
                .topLogprobs(req.getLogprobs()).build();
        return new CompletionCall(prompts, n, fields.resolve(model.spec(), longest), Boolean.TRUE.equals(req.getEcho()),
                req.getMaxTokens() != null);
    }
}
