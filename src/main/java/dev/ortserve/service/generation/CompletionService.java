package dev.ortserve.service.generation;

import dev.ortserve.service.error.OverloadedException;
import dev.ortserve.service.error.UnavailableException;
import dev.ortserve.engine.EngineQueueFullException;
import dev.ortserve.engine.EngineQueueTimeoutException;
import dev.ortserve.engine.GenerationRequest;
import dev.ortserve.engine.SamplingParams;
import dev.ortserve.engine.TokenEvent;
import dev.ortserve.logging.AccessRecord;
import dev.ortserve.service.ServedModel;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;

import java.util.ArrayList;
import java.util.List;
import java.util.UUID;

/**
 * Runs a validated completions call on the engine: one sequence per prompt and sample, all
 * admitted at once (or refused with 429 before anything starts), merged into one stream of
 * choice events, or collected into per-choice results.
 */
@ApplicationScoped
public class CompletionService {

    @Inject
    dev.ortserve.service.ServingMetrics metrics;

    /** Admits every sequence now (so a full queue is a 429 before any header is sent) and returns their merged events. */
    public Multi<ChoiceEvent> stream(ServedModel served, CompletionCall call) {
        List<GenerationRequest> requests = new ArrayList<>(call.choices());
        String base = UUID.randomUUID().toString();
        for (int p = 0; p < call.prompts().size(); p++) {
            for (int i = 0; i < call.n(); i++) {
                int index = p * call.n() + i;
                SamplingParams sampling = call.sampling();
                if (sampling.seed() != null && index > 0) {
                    // n > 1 with a seed: each choice its own reproducible generator
                    sampling = sampling.withSeed(sampling.seed() + index);
                }
                requests.add(new GenerationRequest(base + "-" + index, call.prompts().get(p).tokenIds(), sampling, call.prediction(),
                        served.adapter(), call.prompts().get(p).images()));
            }
        }
        List<Multi<TokenEvent>> streams;
        try {
            streams = served.engine().generateAll(requests);
        } catch (EngineQueueFullException e) {
            throw new OverloadedException("The server is busy: " + e.getMessage() + ". Retry shortly.", 1);
        } catch (dev.ortserve.engine.EngineClosedException e) {
            // unloaded (or the server stopping) between resolving the model and admission: the next try loads it again
            throw new UnavailableException("The model '" + served.id() + "' was unloaded as this request started; retry.", "model_not_ready", 1);
        }
        // the access log's tokens: counted on the engine thread into the record taken here, on the request's thread
        AccessRecord access = AccessRecord.current();
        if (access != null) {
            access.model(served.id());
            access.addCompletionTokens(0);
            for (CompletionCall.Prompt p : call.prompts()) access.addPromptTokens(p.tokenIds().length);
        }
        List<Multi<ChoiceEvent>> indexed = new ArrayList<>(streams.size());
        for (int i = 0; i < streams.size(); i++) {
            int index = i;
            Multi<TokenEvent> observed = metrics.observe(served.id(), streams.get(i))
                    .onFailure(EngineQueueTimeoutException.class).transform(CompletionService::notStarted);
            if (access != null) {
                observed = observed.invoke(e -> {
                    access.addCompletionTokens(1);
                    if (e.isLast()) access.addDraftTokens(e.drafts().drafted(), e.drafts().accepted());
                });
            }
            indexed.add(observed.map(e -> new ChoiceEvent(index, e)));
        }
        return indexed.size() == 1 ? indexed.get(0) : Multi.createBy().merging().streams(indexed);
    }

    /**
     * A request that waited its whole queue timeout for memory (the running sequences' KV filled the budget):
     * 503, to be retried after a quarter of the time it waited (1-30 s), by when running sequences will have
     * given KV back or another replica can take it.
     */
    static UnavailableException notStarted(Throwable failure) {
        long waited = ((EngineQueueTimeoutException) failure).waited().toSeconds();
        int retryAfter = (int) Math.max(1, Math.min(30, waited / 4));
        return new UnavailableException("The server is at its memory limit and could not start this request within "
                + Math.max(1, waited) + " s; retry after " + retryAfter + " s.", "server_busy", retryAfter);
    }

    /** Runs the call to the end and returns each choice's result, in index order. */
    public Uni<List<ChoiceResult>> complete(ServedModel served, CompletionCall call) {
        Multi<ChoiceEvent> events = stream(served, call);
        return events.collect().in(() -> ChoiceResult.accumulators(call.choices()), (acc, e) -> acc.get(e.index()).add(e.event()))
                .map(acc -> acc.stream().map(ChoiceResult.Accumulator::result).toList());
    }
}
