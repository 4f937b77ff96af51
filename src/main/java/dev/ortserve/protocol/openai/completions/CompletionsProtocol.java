package dev.ortserve.protocol.openai.completions;

import dev.ortserve.wire.model.CompletionChoice;
import dev.ortserve.wire.model.CompletionChunk;
import dev.ortserve.wire.model.CompletionLogprobs;
import dev.ortserve.wire.model.CreateCompletionRequest;
import dev.ortserve.wire.model.CreateCompletionResponse;
import dev.ortserve.wire.union.StopReason;
import dev.ortserve.config.OrtserveConfig;
import dev.ortserve.protocol.openai.PredictedOutputs;
import dev.ortserve.protocol.openai.Usages;
import dev.ortserve.protocol.Answer;
import dev.ortserve.service.GenerationModelHost;
import dev.ortserve.service.ServedModel;
import dev.ortserve.service.generation.ChoiceEvent;
import dev.ortserve.service.generation.ChoiceResult;
import dev.ortserve.service.generation.CompletionCall;
import dev.ortserve.service.generation.CompletionCalls;
import dev.ortserve.service.generation.CompletionService;
import dev.ortserve.service.generation.Finish;
import dev.ortserve.service.generation.Logprob;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;

import java.math.BigDecimal;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;

/** POST /v1/completions: the request's checks, its call, and the generation results in OpenAI's wire format. */
@ApplicationScoped
public class CompletionsProtocol {

    @Inject
    GenerationModelHost host;

    @Inject
    CompletionService service;

    @Inject
    OrtserveConfig config;

    @Inject
    CompletionCalls calls;

    public Uni<Answer> create(CreateCompletionRequest req) {
        host.requireModel(req.getModel());
        return host.using(req.getModel(), req.getKeepAlive(), served -> create(req, served));
    }

    private Uni<Answer> create(CreateCompletionRequest req, ServedModel served) {
        CompletionCall call = CompletionRequests.toCall(req, calls, config.engine().maxN(), served)
                .withPrediction(PredictedOutputs.tokens(req.getPrediction(), served));
        String id = "cmpl-" + UUID.randomUUID().toString().replace("-", "");
        long created = Instant.now().getEpochSecond();
        String model = served.id();
        if (Boolean.TRUE.equals(req.getStream())) {
            Multi<ChoiceEvent> events = service.stream(served, call);
            boolean usage = req.getStreamOptions() != null && Boolean.TRUE.equals(req.getStreamOptions().getIncludeUsage());
            boolean continuous = req.getStreamOptions() != null && Boolean.TRUE.equals(req.getStreamOptions().getContinuousUsageStats());
            return Uni.createFrom().item(Answer.stream(new StreamChunks(call, id, created, model, usage, continuous).chunks(events).map(Answer.Event::data)));
        }
        int bestOf = req.getBestOf() == null ? call.n() : req.getBestOf();
        if (bestOf > call.n()) {
            // best_of: generate best_of candidates per prompt (their token logprobs always computed), keep the n best
            CompletionCall wide = call.candidates(bestOf);
            return service.complete(served, wide).map(results -> {
                int generated = results.stream().mapToInt(ChoiceResult::generatedTokens).sum();
                return Answer.json(response(call, best(results, bestOf, call.n()), id, created, model, generated));
            });
        }
        return service.complete(served, call).map(results -> Answer.json(response(call, results, id, created, model, -1)));
    }

    /** For each prompt, the {@code n} of its {@code bestOf} candidates with the highest mean token log probability, best first. */
    static List<ChoiceResult> best(List<ChoiceResult> results, int bestOf, int n) {
        List<ChoiceResult> out = new ArrayList<>();
        for (int p = 0; p < results.size() / bestOf; p++) {
            List<ChoiceResult> candidates = new ArrayList<>(results.subList(p * bestOf, (p + 1) * bestOf));
            candidates.sort(java.util.Comparator.comparingDouble(CompletionsProtocol::meanLogprob).reversed());
            out.addAll(candidates.subList(0, n));
        }
        return out;
    }

    static double meanLogprob(ChoiceResult r) {
        if (r.logprobs().isEmpty()) return Double.NEGATIVE_INFINITY;
        double sum = 0;
        for (Logprob lp : r.logprobs()) sum += lp.logprob();
        return sum / r.logprobs().size();
    }

    /** {@code generatedTokens}: all tokens generated for the request (best_of counts every candidate), or -1 to count the choices'. */
    private static CreateCompletionResponse response(CompletionCall call, List<ChoiceResult> results, String id, long created, String model,
                                                     int generatedTokens) {
        List<CompletionChoice> choices = new ArrayList<>(results.size());
        int completionTokens = 0;
        int cachedTokens = 0;
        Usages.Predictions predictions = Usages.Predictions.of(call);
        for (int i = 0; i < results.size(); i++) {
            ChoiceResult r = results.get(i);
            if (predictions != null) predictions.see(i, r);
            CompletionCall.Prompt prompt = call.prompts().get(i / call.n());
            String text = call.echo() ? prompt.text() + r.text() : r.text();
            CompletionChoice choice = new CompletionChoice().index(i).text(text)
                    .finishReason(finish(r.finishReason())).stopReason(StopReason.of(r.stopReason()));
            if (call.logprobs()) {
                choice.logprobs(logprobs(r.logprobs(), 0));
            }
            choices.add(choice);
            completionTokens += r.generatedTokens();
            if (i % call.n() == 0) cachedTokens += r.cachedTokens(); // a prompt counts once, like its tokens
        }
        return new CreateCompletionResponse().id(id)._object(CreateCompletionResponse.ObjectEnum.TEXT_COMPLETION).created(created)
                .model(model).choices(choices)
                .usage(Usages.usage(Usages.promptTokens(call), cachedTokens, generatedTokens >= 0 ? generatedTokens : completionTokens, predictions));
    }

    static CompletionChoice.FinishReasonEnum finish(Finish reason) {
        if (reason == null) return null;
        return switch (reason) {
            case STOP -> CompletionChoice.FinishReasonEnum.STOP;
            case LENGTH -> CompletionChoice.FinishReasonEnum.LENGTH;
            default -> null;
        };
    }

    static CompletionLogprobs logprobs(List<Logprob> logprobs, int offsetStart) {
        CompletionLogprobs out = new CompletionLogprobs().tokens(new ArrayList<>()).tokenLogprobs(new ArrayList<>())
                .topLogprobs(new ArrayList<>()).textOffset(new ArrayList<>());
        int offset = offsetStart;
        for (Logprob lp : logprobs) {
            out.getTokens().add(lp.token());
            out.getTokenLogprobs().add(Usages.logprob(lp.logprob()));
            Map<String, BigDecimal> top = new LinkedHashMap<>();
            for (Logprob.Top t : lp.top()) top.putIfAbsent(t.token(), Usages.logprob(t.logprob()));
            out.getTopLogprobs().add(top);
            out.getTextOffset().add(offset);
            offset += lp.token().length();
        }
        return out;
    }

    /** Turns merged choice events into completion chunks, then the usage chunk. */
    private static final class StreamChunks {
        private final CompletionCall call;
        private final String id;
        private final long created;
        private final String model;
        private final boolean includeUsage;
        private final boolean continuousUsage;
        private final AtomicInteger completionTokens = new AtomicInteger();
        private final boolean[] started;
        private final int[] offsets;

        StreamChunks(CompletionCall call, String id, long created, String model, boolean includeUsage, boolean continuousUsage) {
            this.call = call;
            this.id = id;
            this.created = created;
            this.model = model;
            this.includeUsage = includeUsage;
            this.continuousUsage = continuousUsage;
            this.started = new boolean[call.choices()];
            this.offsets = new int[call.choices()];
        }

        Multi<Object> chunks(Multi<ChoiceEvent> events) {
            int promptTokens = Usages.promptTokens(call);
            Usages.CachedTokens cached = new Usages.CachedTokens(call);
            Usages.Predictions predictions = Usages.Predictions.of(call);
            Multi<Object> body = events.map(e -> {
                completionTokens.incrementAndGet();
                cached.see(e);
                if (predictions != null) predictions.see(e);
                int index = e.index();
                String text = e.textDelta();
                if (!started[index]) {
                    started[index] = true;
                    if (call.echo()) text = call.prompts().get(index / call.n()).text() + text;
                }
                boolean withLogprobs = call.logprobs() && e.logprob() != null;
                if (text.isEmpty() && e.finish() == null && !withLogprobs) {
                    return (Object) Boolean.FALSE; // nothing to send for this token
                }
                CompletionChoice choice = new CompletionChoice().index(index).text(text)
                        .finishReason(finish(e.finish())).stopReason(StopReason.of(e.stopReason()));
                if (withLogprobs) {
                    choice.logprobs(logprobs(List.of(e.logprob()), offsets[index]));
                    offsets[index] += e.logprob().token().length();
                }
                CompletionChunk chunk = chunk().choices(List.of(choice));
                if (continuousUsage) chunk.usage(Usages.usage(promptTokens, cached.total(), completionTokens.get(), predictions));
                return (Object) chunk;
            }).filter(c -> c != Boolean.FALSE);
            Multi<Object> tail = Multi.createFrom().deferred(() -> includeUsage
                    ? Multi.createFrom().item(chunk().choices(List.of()).usage(Usages.usage(promptTokens, cached.total(), completionTokens.get(), predictions)))
                    : Multi.createFrom().empty());
            return Multi.createBy().concatenating().streams(body, tail);
        }

        private CompletionChunk chunk() {
            return new CompletionChunk().id(id)._object(CompletionChunk.ObjectEnum.TEXT_COMPLETION).created(created).model(model);
        }
    }
}
