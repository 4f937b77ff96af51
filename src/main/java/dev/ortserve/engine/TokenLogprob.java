package dev.ortserve.engine;

import java.util.List;

/** The log-probability of a sampled token and of the most likely alternatives at that step. */
public record TokenLogprob(int tokenId, String token, float logprob, List<Top> top) {

    public record Top(int tokenId, String token, float logprob) {
    }
}
