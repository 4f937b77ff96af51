package dev.ortserve.service.generation;

import dev.ortserve.engine.SamplingParams;

import java.util.List;

/**
 * A validated completions request in domain terms: the tokenized prompts, how many choices per
 * prompt, and the sampling of every choice. Choice index = prompt index * n + sample index.
 */
public record CompletionCall(List<Prompt> prompts, int n, SamplingParams sampling, boolean echo,
                             boolean maxTokensGiven) {

    public record Prompt(int[] tokenIds, String text) {
    }

    public int choices() {
        return prompts.size() * n;
    }
}
