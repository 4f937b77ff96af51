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
import dev.ortserve.api.union.StopReason;
import dev.ortserve.api.union.ToolChoice;
import dev.ortserve.config.OrtserveConfig;
import dev.ortserve.service.GenerationModelHost;
import dev.ortserve.service.parse.ChatDeltaStream;
import dev.ortserve.service.parse.ChatOutput;
import dev.ortserve.service.parse.OutputParsers;
import dev.ortserve.service.chat.ChatTurn;
import dev.ortserve.service.chat.ChatTurnRequest;
import dev.ortserve.service.chat.ChatTurns;
import dev.ortserve.service.generation.ChoiceEvent;
import dev.ortserve.service.generation.Finish;
import dev.ortserve.service.generation.Logprob;
import dev.ortserve.service.generation.ChoiceResult;
import dev.ortserve.service.generation.CompletionCall;
import dev.ortserve.service.generation.CompletionService;
import dev.ortserve.service.generation.SamplingRequest;
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
    ChatTurns turns;

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
        boolean hasTools = req.getTools() != null && !req.getTools().isEmpty();
        ToolChoice.Mode choice = req.getToolChoice() == null ? ToolChoice.Mode.AUTO : req.getToolChoice().mode();
        // tool_choice none: the tools still reach the template, the output is never parsed
        if (hasTools && choice != ToolChoice.Mode.NONE && host.toolCallParser() == null) {
            throw ApiException.unsupported("tools", host.parsers().toolsRefusal());
        }
        if (!hasTools && (choice == ToolChoice.Mode.REQUIRED || choice == ToolChoice.Mode.FUNCTION)) {
            throw ApiException.invalidRequest("tool_choice", "'tool_choice' '" + (choice == ToolChoice.Mode.REQUIRED ? "required" : "function")
                    + "' needs 'tools'.");
        }
        List<java.util.Map<String, Object>> tools = hasTools ? mapper.convertValue(req.getTools(),
                new com.fasterxml.jackson.core.type.TypeReference<List<java.util.Map<String, Object>>>() { }) : null;
        java.util.Map<String, java.util.Map<String, Object>> schemas = new java.util.LinkedHashMap<>();
        if (hasTools) {
            req.getTools().forEach(t -> schemas.put(t.getFunction().getName(),
                    t.getFunction().getParameters() == null ? java.util.Map.of() : t.getFunction().getParameters()));
        }
        ChatTurn turn = turns.prepare(new ChatTurnRequest(tools, schemas, ChatRequests.toolChoice(choice),
                choice == ToolChoice.Mode.FUNCTION ? req.getToolChoice().functionName() : null, format(req)));
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
        ChatPromptRenderer.Request promptRequest = new ChatPromptRenderer.Request(ChatRequests.templateMessages(req.getMessages()), tools,
                ChatRequests.documents(req.getDocuments()), !Boolean.FALSE.equals(req.getAddGenerationPrompt()),
                Boolean.TRUE.equals(req.getContinueFinalMessage()), req.getChatTemplateKwargs(),
                ChatRequests.requestTemplate(req.getChatTemplate(), config.allowRequestChatTemplate()));
        // a request's own template renders on a worker thread: however long it runs, the I/O thread stays free
        // (the Vert.x response is taken here, on the request's own thread, for the stream written later)
        io.vertx.core.http.HttpServerResponse vertxResponse = http.response();
        return host.chatPrompts().renderOffIoThread(promptRequest).flatMap(prompt -> generate(req, prompt, turn, n, vertxResponse));
    }

    private Uni<Response> generate(CreateChatCompletionRequest req, ChatPromptRenderer.Prompt prompt, ChatTurn turn, int n,
                                   io.vertx.core.http.HttpServerResponse vertxResponse) {
        OutputParsers parsing = turn.parsers();
        boolean completionTokens = req.getMaxCompletionTokens() != null;
        Integer maxTokens = completionTokens ? req.getMaxCompletionTokens() : req.getMaxTokens();
        Integer topLogprobs = Boolean.TRUE.equals(req.getLogprobs()) ? (req.getTopLogprobs() == null ? 0 : req.getTopLogprobs()) : null;
        SamplingRequest.Builder sampling = SamplingRequest.builder().temperature(req.getTemperature()).topP(req.getTopP()).topK(req.getTopK())
                .minP(req.getMinP()).repetitionPenalty(req.getRepetitionPenalty()).frequencyPenalty(req.getFrequencyPenalty())
                .presencePenalty(req.getPresencePenalty()).logitBias(req.getLogitBias()).seed(req.getSeed())
                .maxTokens(maxTokens, completionTokens ? "max_completion_tokens" : "max_tokens").minTokens(req.getMinTokens())
                .ignoreEos(req.getIgnoreEos()).stop(req.getStop() == null ? null : req.getStop().values()).stopTokenIds(req.getStopTokenIds())
                .includeStopStrInOutput(req.getIncludeStopStrInOutput()).skipSpecialTokens(req.getSkipSpecialTokens()).topLogprobs(topLogprobs);
        CompletionCall call = turn.call(prompt, sampling, n, "messages");
        String id = "chatcmpl-" + UUID.randomUUID().toString().replace("-", "");
        long created = Instant.now().getEpochSecond();
        if (Boolean.TRUE.equals(req.getStream())) {
            Multi<ChoiceEvent> events = service.stream(call);
            boolean usage = req.getStreamOptions() != null && Boolean.TRUE.equals(req.getStreamOptions().getIncludeUsage());
            return SseWriter.stream(vertxResponse, frames(call, events, id, created, usage, parsing));
        }
        return service.complete(call).map(results -> Response.ok(response(call, results, id, created, parsing)).build());
    }

    private static void refuseUnsupported(CreateChatCompletionRequest req) {
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

    /** The structured output format the request asks for; null for free text. */
    private static ChatTurnRequest.OutputFormat format(CreateChatCompletionRequest req) {
        if (req.getResponseFormat() instanceof dev.ortserve.api.model.ResponseFormatJsonObject) {
            return ChatTurnRequest.OutputFormat.jsonObject("response_format");
        }
        if (req.getResponseFormat() instanceof dev.ortserve.api.model.ResponseFormatJsonSchema js) {
            return ChatTurnRequest.OutputFormat.jsonSchema("response_format", js.getJsonSchema().getSchema(), "response_format.json_schema.schema");
        }
        return null;
    }

    private CreateChatCompletionResponse response(CompletionCall call, List<ChoiceResult> results, String id, long created, OutputParsers parsing) {
        List<ChatCompletionChoice> choices = new ArrayList<>();
        int completionTokens = 0;
        for (int i = 0; i < results.size(); i++) {
            ChoiceResult r = results.get(i);
            ChatOutput out = parsing.parse(r.text());
            ChatCompletionResponseMessage message = new ChatCompletionResponseMessage().role(ChatCompletionResponseMessage.RoleEnum.ASSISTANT)
                    .content(out.content() == null && !out.calls().isEmpty() ? null : (out.content() == null ? "" : out.content()))
                    .reasoningContent(out.reasoning()).toolCalls(out.calls().isEmpty() ? null : toolCalls(out.calls(), parsing.tools()));
            ChatCompletionChoice choice = new ChatCompletionChoice().index(i).message(message)
                    .finishReason(out.calls().isEmpty() || r.finishReason() != Finish.STOP ? finish(r.finishReason()) : ChatFinishReason.TOOL_CALLS)
                    .stopReason(StopReason.of(r.stopReason()));
            if (call.logprobs()) choice.logprobs(logprobs(r.logprobs()));
            choices.add(choice);
            completionTokens += r.generatedTokens();
        }
        int cachedTokens = results.isEmpty() ? 0 : results.get(0).cachedTokens(); // one prompt: its first choice's
        return new CreateChatCompletionResponse().id(id)._object(CreateChatCompletionResponse.ObjectEnum.CHAT_COMPLETION)
                .created(created).model(host.modelId()).choices(choices)
                .usage(CompletionsResource.usage(CompletionsResource.promptTokens(call), cachedTokens, completionTokens));
    }

    private Multi<String> frames(CompletionCall call, Multi<ChoiceEvent> events, String id, long created, boolean includeUsage, OutputParsers parsing) {
        AtomicInteger completionTokens = new AtomicInteger();
        int promptTokens = CompletionsResource.promptTokens(call);
        CompletionsResource.CachedTokens cached = new CompletionsResource.CachedTokens(call);
        List<String> roles = new ArrayList<>();
        ChatDeltaStream[] streams = new ChatDeltaStream[call.choices()];
        List<List<Logprob>> pendingLogprobs = new ArrayList<>();
        for (int i = 0; i < call.choices(); i++) {
            streams[i] = new ChatDeltaStream(parsing);
            pendingLogprobs.add(new ArrayList<>());
            roles.add(frame(chunk(id, created).choices(List.of(new ChatCompletionChunkChoice().index(i)
                    .delta(new ChatCompletionStreamDelta().role(ChatCompletionStreamDelta.RoleEnum.ASSISTANT).content("").toolCalls(null))))));
        }
        Multi<String> body = events.map(e -> {
            completionTokens.incrementAndGet();
            cached.see(e);
            StringBuilder out = new StringBuilder();
            int index = e.index();
            if (!parsing.active()) {
                boolean withLogprobs = call.logprobs() && e.logprob() != null;
                if (!e.textDelta().isEmpty() || withLogprobs) {
                    ChatCompletionChunkChoice choice = new ChatCompletionChunkChoice().index(index)
                            .delta(new ChatCompletionStreamDelta().content(e.textDelta()).toolCalls(null));
                    if (withLogprobs) choice.logprobs(logprobs(List.of(e.logprob())));
                    out.append(frame(chunk(id, created).choices(List.of(choice))));
                }
            } else {
                // the parser regroups the text: each token's logprob rides on the next chunk that goes out
                if (call.logprobs() && e.logprob() != null) pendingLogprobs.get(index).add(e.logprob());
                out.append(parsedDeltas(streams[index], index, e.textDelta(), e.finish() != null, id, created,
                        pendingLogprobs.get(index)));
            }
            if (e.finish() != null) {
                boolean called = streams[index].called();
                List<Logprob> left = pendingLogprobs.get(index);
                ChatCompletionChunkChoice last = new ChatCompletionChunkChoice().index(index);
                if (!left.isEmpty()) {
                    last.logprobs(logprobs(List.copyOf(left)));
                    left.clear();
                }
                out.append(frame(chunk(id, created).choices(List.of(last
                        .delta(new ChatCompletionStreamDelta().toolCalls(null))
                        .finishReason(called && e.finish() == Finish.STOP ? ChatFinishReason.TOOL_CALLS : finish(e.finish()))
                        .stopReason(StopReason.of(e.stopReason()))))));
            }
            return out.toString();
        }).filter(f -> !f.isEmpty());
        Multi<String> tail = Multi.createFrom().deferred(() -> {
            List<String> end = new ArrayList<>();
            if (includeUsage) end.add(frame(chunk(id, created).choices(List.of()).usage(CompletionsResource.usage(promptTokens, cached.total(), completionTokens.get()))));
            end.add("data: [DONE]\n\n");
            return Multi.createFrom().iterable(end);
        });
        return Multi.createBy().concatenating().streams(Multi.createFrom().iterable(roles), body, tail)
                .onFailure().recoverWithMulti(failure -> Multi.createFrom().items(
                        "data: " + errors.json(CompletionsResource.streamError(failure)) + "\n\n", "data: [DONE]\n\n"));
    }

    /**
     * Reasoning, content and tool-call chunks for one more piece of a choice's text: content as it
     * comes until a call begins, then per call one delta with its index, id, type and name (empty
     * arguments) and its arguments in pieces as they are generated.
     */
    private String parsedDeltas(ChatDeltaStream st, int index, String delta, boolean last, String id, long created, List<Logprob> pending) {
        StringBuilder frames = new StringBuilder();
        for (ChatDeltaStream.Delta d : st.add(delta, last)) {
            ChatCompletionStreamDelta out;
            if (d.reasoning() != null) {
                out = new ChatCompletionStreamDelta().reasoningContent(d.reasoning()).toolCalls(null);
            } else if (d.content() != null) {
                out = new ChatCompletionStreamDelta().content(d.content()).toolCalls(null);
            } else if (d.callStart()) {
                out = new ChatCompletionStreamDelta().toolCalls(List.of(new dev.ortserve.api.model.ChatCompletionToolCallDelta().index(d.callIndex())
                        .id(d.callId()).type(dev.ortserve.api.model.ChatCompletionToolCallDelta.TypeEnum.FUNCTION)
                        .function(new dev.ortserve.api.model.ChatCompletionToolCallDeltaFunction().name(d.name()).arguments(""))));
            } else {
                out = new ChatCompletionStreamDelta().toolCalls(List.of(new dev.ortserve.api.model.ChatCompletionToolCallDelta().index(d.callIndex())
                        .function(new dev.ortserve.api.model.ChatCompletionToolCallDeltaFunction().arguments(d.arguments()))));
            }
            ChatCompletionChunkChoice choice = new ChatCompletionChunkChoice().index(index).delta(out);
            if (!pending.isEmpty()) {
                choice.logprobs(logprobs(List.copyOf(pending)));
                pending.clear();
            }
            frames.append(frame(chunk(id, created).choices(List.of(choice))));
        }
        return frames.toString();
    }

    private static List<dev.ortserve.api.model.ChatCompletionMessageToolCall> toolCalls(List<dev.ortserve.service.parse.ToolCallParser.ToolCall> calls,
                                                                                    dev.ortserve.service.parse.ToolCallParser parser) {
        List<dev.ortserve.api.model.ChatCompletionMessageToolCall> out = new ArrayList<>();
        for (var c : calls) {
            out.add(new dev.ortserve.api.model.ChatCompletionMessageToolCall().id(parser.newCallId())
                    .type(dev.ortserve.api.model.ChatCompletionMessageToolCall.TypeEnum.FUNCTION)
                    .function(new dev.ortserve.api.model.ChatCompletionMessageToolCallFunction().name(c.name()).arguments(c.arguments())));
        }
        return out;
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

    static ChatFinishReason finish(Finish reason) {
        if (reason == null) return null;
        return switch (reason) {
            case STOP -> ChatFinishReason.STOP;
            case LENGTH -> ChatFinishReason.LENGTH;
            default -> null;
        };
    }

    public static ChatCompletionLogprobs logprobs(List<Logprob> logprobs) {
        List<ChatCompletionTokenLogprob> content = new ArrayList<>();
        for (Logprob lp : logprobs) {
            List<ChatCompletionTopLogprob> top = new ArrayList<>();
            for (Logprob.Top t : lp.top()) {
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
