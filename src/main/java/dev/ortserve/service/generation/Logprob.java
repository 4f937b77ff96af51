package dev.ortserve.service.generation;

import dev.ortserve.engine.TokenLogprob;

import java.util.ArrayList;
import java.util.List;

/** A sampled token's log-probability and the most likely alternatives at that step, as a choice reports them. */
public record Logprob(String token, float logprob, List<Top> top) {

    public record Top(String token, float logprob) {
    }

    static Logprob of(TokenLogprob lp) {
        if (lp == null) return null;
        List<Top> top = new ArrayList<>(lp.top().size());
        for (TokenLogprob.Top t : lp.top()) top.add(new Top(t.token(), t.logprob()));
        return new Logprob(lp.token(), lp.logprob(), top);
    }

    static List<Logprob> of(List<TokenLogprob> logprobs) {
        List<Logprob> out = new ArrayList<>(logprobs.size());
        for (TokenLogprob lp : logprobs) out.add(of(lp));
        return out;
    }
}
