package dev.ortserve.service.generation;

import dev.ortserve.config.OrtserveConfig;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.TextTokenizer;
import dev.ortserve.service.ServedModel;
import dev.ortserve.service.error.InvalidRequestException;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;

import java.util.ArrayList;
import java.util.List;

/** Turns a completions request's prompts (texts or token ids) and sampling into a {@link CompletionCall} on the served model. */
@ApplicationScoped
public class CompletionCalls {

    @Inject
    OrtserveConfig config;

    /**
     * Tokenizes the texts (or checks the ids against the vocabulary), checks that every prompt
     * leaves room to generate and that the server can admit {@code prompts x max(n, bestOf)}
     * sequences, and resolves the sampling against the model.
     *
     * @param texts    the prompts as text, or null when {@code tokenIds} are given
     * @param tokenIds the prompts as token ids, or null
     */
    public CompletionCall prepare(ServedModel served, List<String> texts, List<int[]> tokenIds, int n, int bestOf, SamplingRequest sampling, boolean echo) {
        LoadedModel model = served.model();
        TextTokenizer tokenizer = model.tokenizer();
        int vocab = model.spec().vocabSize();
        List<CompletionCall.Prompt> prompts = new ArrayList<>();
        if (texts != null) {
            for (String text : texts) {
                prompts.add(new CompletionCall.Prompt(tokenizer.encode(text, true), text));
            }
        } else {
            for (int[] ids : tokenIds) {
                for (int id : ids) {
                    if (id >= vocab) {
                        throw new InvalidRequestException("prompt", "Token id " + id + " in 'prompt' is outside the vocabulary [0, " + vocab + ").");
                    }
                }
                prompts.add(new CompletionCall.Prompt(ids, tokenizer.decode(ids, false)));
            }
        }
        int longest = 0;
        for (CompletionCall.Prompt p : prompts) {
            if (p.tokenIds().length == 0) {
                throw new InvalidRequestException("prompt", "The prompt is empty: it must contain at least one token.");
            }
            SamplingRequest.checkPromptFits(p.tokenIds().length, model.spec().maxModelLen(), "prompt");
            longest = Math.max(longest, p.tokenIds().length);
        }
        int queueCapacity = config.engine().queueCapacity();
        if ((long) prompts.size() * Math.max(n, bestOf) > queueCapacity) {
            throw new InvalidRequestException(bestOf > n ? "best_of" : "n", "This request asks for " + prompts.size() * Math.max(n, bestOf)
                    + " sequences; the server admits at most " + queueCapacity + " at once.");
        }
        return new CompletionCall(prompts, n, sampling.resolve(model.spec(), longest), echo, sampling.maxTokens() != null);
    }
}
