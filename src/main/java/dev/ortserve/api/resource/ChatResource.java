package dev.ortserve.api.resource;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.api.error.ApiException;
import dev.ortserve.api.error.ErrorEnvelope;
import dev.ortserve.api.generated.ChatApi;
import dev.ortserve.api.http.SseWriter;
import dev.ortserve.api.model.ChatCompletionChoice;
import dev.ortserve.api.model.ChatCompletionChunk;
import dev.ortserve.api.model.ChatCompletionChunkChoice;
import dev.ortserve.api.model.ChatCompletionLogprobs;
import dev.ortserve.api.model.ChatCompletionResponseMessage;
import dev.ortserve.api.model.ChatCompletionStreamDelta;
import dev.ortserve.api.model.ChatCompletionTokenLogprob;
import dev.ortserve.api.model.ChatCompletionTopLogprob;
import dev.ortserve.api.model.ChatFinishReason;
import dev.ortserve.api.model.CreateChatCompletionRequest;
import dev.ortserve.api.model.CreateChatCompletionResponse;
import dev.ortserve.api.model.ResponseFormatText;
import dev.ortserve.api.union.StopReason;
import dev.ortserve.api.union.ToolChoice;
import dev.ortserve.config.OrtserveConfig;
import dev.ortserve.engine.FinishReason;
import dev.ortserve.engine.TokenLogprob;
import dev.ortserve.service.GenerationModelHost;
import dev.ortserve.service.completion.ChoiceEvent;
import dev.ortserve.service.completion.ChoiceResult;
import dev.ortserve.service.completion.CompletionCall;
import dev.ortserve.service.completion.CompletionService;
import dev.ortserve.service.prompt.ChatPromptRenderer;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import io.vertx.core.http.HttpServerRequest;
import jakarta.inject.Inject;
import jakarta.ws.rs.core.Context;
import jakarta.ws.rs.core.Response;

import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * POST /v1/chat/completions: the conversation is rendered with the model's chat template and
 * generated like a completion. Tool calling, reasoning parsing and structured outputs are not in
 * this build yet: requests that need them are refused with a clear 400, never ignored.
 */
public class ChatResource implements ChatApi {

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

    @Context
    HttpServerRequest http;

    @Override
    public Uni<Response> createChatCompletion(CreateChatCompletionRequest req) {
        host.requireModel(req.getModel());
        refuseUnsupported(req);
        int n = req.getN() == null ? 1 : req.getN();
        if (n > config.engine().maxN()) {
            throw ApiException.invalidRequest("n", "'n' must be at most " + config.engine().maxN() + " on this server (got " + n + ").");
        }
        if (req.getStreamOptions() != null && !Boolean.TRUE.equals(req.getStream())) {
            throw ApiException.invalidRequest("stream_options", "'stream_options' is only allowed when 'stream' is true.");
        }
        if (req.getTopLogprobs() != null && !Boolean.TRUE.equals(req.getLogprobs())) {
            throw ApiException.invalidRequest("top_logprobs", "'top_logprobs' needs 'logprobs' set to true.");
        }
        ChatPromptRenderer.Prompt prompt = host.chatPrompts().render(ChatRequests.templateMessages(req.getMessages()), null,
                !Boolean.FALSE.equals(req.getAddGenerationPrompt()), req.getChatTemplateKwargs());
        var model = host.model();
        SamplingFields.checkPromptFits(prompt.tokenIds().length, model.spec().maxModelLen(), "messages");
        boolean completionTokens = req.getMaxCompletionTokens() != null;
        Integer maxTokens = completionTokens ? req.getMaxCompletionTokens() : req.getMaxTokens();
        Integer topLogprobs = Boolean.TRUE.equals(req.getLogprobs()) ? (req.getTopLogprobs() == null ? 0 : req.getTopLogprobs()) : null;
        SamplingFields fields = new SamplingFields(req.getTemperature(), req.getTopP(), req.getTopK(), req.getMinP(),
                req.getRepetitionPenalty(), req.getFrequencyPenalty(), req.getPresencePenalty(), req.getLogitBias(), req.getSeed(),
                maxTokens, completionTokens ? "max_completion_tokens" : "max_tokens", req.getMinTokens(), req.getIgnoreEos(),
                req.getStop(), req.getStopTokenIds(), req.getIncludeStopStrInOutput(), req.getSkipSpecialTokens(), topLogprobs);
        CompletionCall call = new CompletionCall(List.of(new CompletionCall.Prompt(prompt.tokenIds(), prompt.text())), n,
                fields.toParams(model.spec(), model.spec().vocabSize(), prompt.tokenIds().length), false, maxTokens != null);
        String id = "chatcmpl-" + UUID.randomUUID().toString().replace("-", "");
        long created = Instant.now().getEpochSecond();
        if (Boolean.TRUE.equals(req.getStream())) {
            Multi<ChoiceEvent> events = service.stream(call);
            boolean usage = req.getStreamOptions() != null && Boolean.TRUE.equals(req.getStreamOptions().getIncludeUsage());
            return SseWriter.stream(http.response(), frames(call, events, id, created, usage));
        }
        return service.complete(call).map(results -> Response.ok(response(call, results, id, created)).build());
    }

    private static void refuseUnsupported(CreateChatCompletionRequest req) {
        if (req.getTools() != null && !req.getTools().isEmpty()) {
            throw ApiException.unsupported("tools", "Tool calling is not available in this build of ortserve yet.");
        }
        if (req.getToolChoice() != null && req.getToolChoice().mode() != ToolChoice.Mode.NONE && req.getToolChoice().mode() != ToolChoice.Mode.AUTO) {
            throw ApiException.unsupported("tool_choice", "'tool_choice' other than 'none' or 'auto' needs tools, which this build does not support yet.");
        }
        if (req.getResponseFormat() != null && !(req.getResponseFormat() instanceof ResponseFormatText)) {
            throw ApiException.unsupported("response_format", "Structured outputs (json_object, json_schema) are not available in this build yet.");
        }
        if (req.getModalities() != null && req.getModalities().stream().anyMatch(m -> !"text".equals(m.toString()))) {
            throw ApiException.unsupported("modalities", "Only the 'text' modality is supported.");
        }
        if (req.getAudio() != null) {
            throw ApiException.unsupported("audio", "Audio output is not supported by a text model.");
        }
        if (req.getPrediction() != null) {
            throw ApiException.unsupported("prediction", "Predicted outputs are not supported.");
        }
    }

    private CreateChatCompletionResponse response(CompletionCall call, List<ChoiceResult> results, String id, long created) {
        List<ChatCompletionChoice> choices = new ArrayList<>();
        int completionTokens = 0;
        for (int i = 0; i < results.size(); i++) {
            ChoiceResult r = results.get(i);
            ChatCompletionChoice choice = new ChatCompletionChoice().index(i)
                    .message(new ChatCompletionResponseMessage().role(ChatCompletionResponseMessage.RoleEnum.ASSISTANT).content(r.text()).toolCalls(null))
                    .finishReason(finish(r.finishReason())).stopReason(StopReason.of(r.stopReason()));
            if (call.sampling().topLogprobs() != null) choice.logprobs(logprobs(r.logprobs()));
            choices.add(choice);
            completionTokens += r.generatedTokens();
        }
        return new CreateChatCompletionResponse().id(id)._object(CreateChatCompletionResponse.ObjectEnum.CHAT_COMPLETION)
                .created(created).model(host.modelId()).choices(choices)
                .usage(CompletionsResource.usage(CompletionsResource.promptTokens(call), completionTokens));
    }

    private Multi<String> frames(CompletionCall call, Multi<ChoiceEvent> events, String id, long created, boolean includeUsage) {
        AtomicInteger completionTokens = new AtomicInteger();
        int promptTokens = CompletionsResource.promptTokens(call);
        List<String> roles = new ArrayList<>();
        for (int i = 0; i < call.choices(); i++) {
            roles.add(frame(chunk(id, created).choices(List.of(new ChatCompletionChunkChoice().index(i)
                    .delta(new ChatCompletionStreamDelta().role(ChatCompletionStreamDelta.RoleEnum.ASSISTANT).content("").toolCalls(null))))));
        }
        Multi<String> body = events.map(e -> {
            completionTokens.incrementAndGet();
            StringBuilder out = new StringBuilder();
            boolean withLogprobs = call.sampling().topLogprobs() != null && e.event().logprob() != null;
            if (!e.event().textDelta().isEmpty() || withLogprobs) {
                ChatCompletionChunkChoice choice = new ChatCompletionChunkChoice().index(e.index())
                        .delta(new ChatCompletionStreamDelta().content(e.event().textDelta()).toolCalls(null));
                if (withLogprobs) choice.logprobs(logprobs(List.of(e.event().logprob())));
                out.append(frame(chunk(id, created).choices(List.of(choice))));
            }
            if (e.event().finishReason() != null) {
                out.append(frame(chunk(id, created).choices(List.of(new ChatCompletionChunkChoice().index(e.index())
                        .delta(new ChatCompletionStreamDelta().toolCalls(null))
                        .finishReason(finish(e.event().finishReason())).stopReason(StopReason.of(e.event().stopReason()))))));
            }
            return out.toString();
        }).filter(f -> !f.isEmpty());
        Multi<String> tail = Multi.createFrom().deferred(() -> {
            List<String> end = new ArrayList<>();
            if (includeUsage) end.add(frame(chunk(id, created).choices(List.of()).usage(CompletionsResource.usage(promptTokens, completionTokens.get()))));
            end.add("data: [DONE]\n\n");
            return Multi.createFrom().iterable(end);
        });
        return Multi.createBy().concatenating().streams(Multi.createFrom().iterable(roles), body, tail)
                .onFailure().recoverWithMulti(failure -> Multi.createFrom().items(
                        "data: " + errors.json(CompletionsResource.streamError(failure)) + "\n\n", "data: [DONE]\n\n"));
    }

    private ChatCompletionChunk chunk(String id, long created) {
        return new ChatCompletionChunk().id(id)._object(ChatCompletionChunk.ObjectEnum.CHAT_COMPLETION_CHUNK).created(created).model(host.modelId());
    }

    private String frame(Object payload) {
        try {
            return "data: " + mapper.writeValueAsString(payload) + "\n\n";
        } catch (JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
    }

    static ChatFinishReason finish(FinishReason reason) {
        if (reason == null) return null;
        return switch (reason) {
            case STOP -> ChatFinishReason.STOP;
            case LENGTH -> ChatFinishReason.LENGTH;
            default -> null;
        };
    }

    static ChatCompletionLogprobs logprobs(List<TokenLogprob> logprobs) {
        List<ChatCompletionTokenLogprob> content = new ArrayList<>();
        for (TokenLogprob lp : logprobs) {
            List<ChatCompletionTopLogprob> top = new ArrayList<>();
            for (TokenLogprob.Top t : lp.top()) {
                top.add(new ChatCompletionTopLogprob().token(t.token()).logprob(CompletionsResource.number(t.logprob())).bytes(bytes(t.token())));
            }
            content.add(new ChatCompletionTokenLogprob().token(lp.token()).logprob(CompletionsResource.number(lp.logprob()))
                    .bytes(bytes(lp.token())).topLogprobs(top));
        }
        return new ChatCompletionLogprobs().content(content);
    }

    private static List<Integer> bytes(String token) {
        List<Integer> out = new ArrayList<>();
        for (byte b : token.getBytes(StandardCharsets.UTF_8)) out.add(b & 0xFF);
        return out;
    }
}
