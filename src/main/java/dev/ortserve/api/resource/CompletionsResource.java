package dev.ortserve.api.resource;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.api.error.ApiException;
import dev.ortserve.api.error.ErrorEnvelope;
import dev.ortserve.api.generated.CompletionsApi;
import dev.ortserve.api.http.SseWriter;
import dev.ortserve.api.model.CompletionChoice;
import dev.ortserve.api.model.CompletionChunk;
import dev.ortserve.api.model.CompletionLogprobs;
import dev.ortserve.api.model.CompletionUsage;
import dev.ortserve.api.model.CompletionUsagePromptTokensDetails;
import dev.ortserve.api.model.CreateCompletionRequest;
import dev.ortserve.api.model.CreateCompletionResponse;
import dev.ortserve.api.union.StopReason;
import dev.ortserve.config.OrtserveConfig;
import dev.ortserve.service.GenerationModelHost;
import dev.ortserve.service.generation.ChoiceEvent;
import dev.ortserve.service.generation.Finish;
import dev.ortserve.service.generation.Logprob;
import dev.ortserve.service.generation.ChoiceResult;
import dev.ortserve.service.generation.CompletionCall;
import dev.ortserve.service.generation.CompletionCalls;
import dev.ortserve.service.generation.CompletionService;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import io.vertx.core.http.HttpServerRequest;
import jakarta.inject.Inject;
import jakarta.ws.rs.core.Context;
import jakarta.ws.rs.core.Response;

import java.math.BigDecimal;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;

/** POST /v1/completions: validation and the mapping of generation results to OpenAI's wire format. */
public class CompletionsResource implements CompletionsApi {

    @Inject
    GenerationModelHost host;

    @Inject
    CompletionService service;

    @Inject
    OrtserveConfig config;

    @Inject
    ObjectMapper mapper;

    @Inject
    ErrorEnvelope errors;

    @Inject
    CompletionCalls calls;

    @Context
    HttpServerRequest http;

    @Override
    public Uni<Response> createCompletion(CreateCompletionRequest req) {
        host.requireModel(req.getModel());
        CompletionCall call = CompletionRequests.toCall(req, calls, config.engine().maxN());
        String id = "cmpl-" + UUID.randomUUID().toString().replace("-", "");
        long created = Instant.now().getEpochSecond();
        String model = host.modelId();
        if (Boolean.TRUE.equals(req.getStream())) {
            Multi<ChoiceEvent> events = service.stream(call);
            boolean usage = req.getStreamOptions() != null && Boolean.TRUE.equals(req.getStreamOptions().getIncludeUsage());
            boolean continuous = req.getStreamOptions() != null && Boolean.TRUE.equals(req.getStreamOptions().getContinuousUsageStats());
            return SseWriter.stream(http.response(), new StreamFrames(call, id, created, model, usage, continuous).frames(events));
        }
        int bestOf = req.getBestOf() == null ? call.n() : req.getBestOf();
        if (bestOf > call.n()) {
            // best_of: generate best_of candidates per prompt (their token logprobs always computed), keep the n best
            CompletionCall wide = call.candidates(bestOf);
            return service.complete(wide).map(results -> {
                int generated = results.stream().mapToInt(ChoiceResult::generatedTokens).sum();
                return Response.ok(response(call, best(results, bestOf, call.n()), id, created, model, generated)).build();
            });
        }
        return service.complete(call).map(results -> Response.ok(response(call, results, id, created, model, -1)).build());
    }

    /** For each prompt, the {@code n} of its {@code bestOf} candidates with the highest mean token log probability, best first. */
    static List<ChoiceResult> best(List<ChoiceResult> results, int bestOf, int n) {
        List<ChoiceResult> out = new ArrayList<>();
        for (int p = 0; p < results.size() / bestOf; p++) {
            List<ChoiceResult> candidates = new ArrayList<>(results.subList(p * bestOf, (p + 1) * bestOf));
            candidates.sort(java.util.Comparator.comparingDouble(CompletionsResource::meanLogprob).reversed());
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
    private CreateCompletionResponse response(CompletionCall call, List<ChoiceResult> results, String id, long created, String model,
                                              int generatedTokens) {
        List<CompletionChoice> choices = new ArrayList<>(results.size());
        int completionTokens = 0;
        int cachedTokens = 0;
        for (int i = 0; i < results.size(); i++) {
            ChoiceResult r = results.get(i);
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
                .model(model).choices(choices).usage(usage(promptTokens(call), cachedTokens, generatedTokens >= 0 ? generatedTokens : completionTokens));
    }

    static int promptTokens(CompletionCall call) {
        int total = 0;
        for (CompletionCall.Prompt p : call.prompts()) total += p.tokenIds().length;
        return total;
    }

    /** @param cached prompt tokens whose KV came from the prefix cache */
    static CompletionUsage usage(int prompt, int cached, int completion) {
        return new CompletionUsage().promptTokens(prompt).completionTokens(completion).totalTokens(prompt + completion)
                .promptTokensDetails(new CompletionUsagePromptTokensDetails().cachedTokens(cached));
    }

    /** Cached prompt tokens of a stream: each prompt's first choice reports its own on every event. */
    static final class CachedTokens {
        private final int[] byPrompt;
        private final int n;

        CachedTokens(CompletionCall call) {
            this.byPrompt = new int[call.prompts().size()];
            this.n = call.n();
        }

        void see(ChoiceEvent e) {
            if (e.index() % n == 0) byPrompt[e.index() / n] = e.cachedTokens();
        }

        int total() {
            int t = 0;
            for (int c : byPrompt) t += c;
            return t;
        }
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
            out.getTokenLogprobs().add(number(lp.logprob()));
            Map<String, BigDecimal> top = new LinkedHashMap<>();
            for (Logprob.Top t : lp.top()) top.putIfAbsent(t.token(), number(t.logprob()));
            out.getTopLogprobs().add(top);
            out.getTextOffset().add(offset);
            offset += lp.token().length();
        }
        return out;
    }

    static BigDecimal number(float logprob) {
        // -inf (a token masked out) is not JSON: report it as vLLM does
        return BigDecimal.valueOf(Float.isFinite(logprob) ? logprob : -9999.0f);
    }

    /** Turns merged choice events into completion chunk frames, then usage and [DONE]. */
    private final class StreamFrames {
        private final CompletionCall call;
        private final String id;
        private final long created;
        private final String model;
        private final boolean includeUsage;
        private final boolean continuousUsage;
        private final AtomicInteger completionTokens = new AtomicInteger();
        private final boolean[] started;
        private final int[] offsets;

        StreamFrames(CompletionCall call, String id, long created, String model, boolean includeUsage, boolean continuousUsage) {
            this.call = call;
            this.id = id;
            this.created = created;
            this.model = model;
            this.includeUsage = includeUsage;
            this.continuousUsage = continuousUsage;
            this.started = new boolean[call.choices()];
            this.offsets = new int[call.choices()];
        }

        Multi<String> frames(Multi<ChoiceEvent> events) {
            int promptTokens = promptTokens(call);
            CachedTokens cached = new CachedTokens(call);
            Multi<String> body = events.map(e -> {
                completionTokens.incrementAndGet();
                cached.see(e);
                int index = e.index();
                String text = e.textDelta();
                if (!started[index]) {
                    started[index] = true;
                    if (call.echo()) text = call.prompts().get(index / call.n()).text() + text;
                }
                boolean withLogprobs = call.logprobs() && e.logprob() != null;
                if (text.isEmpty() && e.finish() == null && !withLogprobs) {
                    return "";
                }
                CompletionChoice choice = new CompletionChoice().index(index).text(text)
                        .finishReason(finish(e.finish())).stopReason(StopReason.of(e.stopReason()));
                if (withLogprobs) {
                    choice.logprobs(logprobs(List.of(e.logprob()), offsets[index]));
                    offsets[index] += e.logprob().token().length();
                }
                CompletionChunk chunk = chunk().choices(List.of(choice));
                if (continuousUsage) chunk.usage(usage(promptTokens, cached.total(), completionTokens.get()));
                return frame(chunk);
            }).filter(f -> !f.isEmpty());
            Multi<String> tail = Multi.createFrom().deferred(() -> {
                List<String> end = new ArrayList<>();
                if (includeUsage) end.add(frame(chunk().choices(List.of()).usage(usage(promptTokens, cached.total(), completionTokens.get()))));
                end.add("data: [DONE]\n\n");
                return Multi.createFrom().iterable(end);
            });
            return Multi.createBy().concatenating().streams(body, tail)
                    .onFailure().recoverWithMulti(failure -> Multi.createFrom().items(
                            "data: " + errors.json(streamError(failure)) + "\n\n", "data: [DONE]\n\n"));
        }

        private CompletionChunk chunk() {
            return new CompletionChunk().id(id)._object(CompletionChunk.ObjectEnum.TEXT_COMPLETION).created(created).model(model);
        }

        private String frame(Object payload) {
            try {
                return "data: " + mapper.writeValueAsString(payload) + "\n\n";
            } catch (JsonProcessingException e) {
                throw new IllegalStateException(e);
            }
        }
    }

    public static ApiException streamError(Throwable failure) {
        ApiException api = ApiException.of(failure);
        if (api != null) return api;
        // the details (ONNX Runtime's node names and shapes) are in the server log, not for clients
        return new ApiException(500, "server_error", "The server had an error while generating; the generation was stopped.", null, "generation_failed");
    }
}
