package dev.ortserve.protocol.openai.chat;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.wire.model.ChatCompletionChoice;
import dev.ortserve.wire.model.ChatCompletionChunk;
import dev.ortserve.wire.model.ChatCompletionChunkChoice;
import dev.ortserve.wire.model.ChatCompletionLogprobs;
import dev.ortserve.wire.model.ChatCompletionMessageToolCall;
import dev.ortserve.wire.model.ChatCompletionMessageToolCallFunction;
import dev.ortserve.wire.model.ChatCompletionResponseMessage;
import dev.ortserve.wire.model.ChatCompletionStreamDelta;
import dev.ortserve.wire.model.ChatCompletionTokenLogprob;
import dev.ortserve.wire.model.ChatCompletionToolCallDelta;
import dev.ortserve.wire.model.ChatCompletionToolCallDeltaFunction;
import dev.ortserve.wire.model.ChatCompletionTopLogprob;
import dev.ortserve.wire.model.ChatFinishReason;
import dev.ortserve.wire.model.CreateChatCompletionRequest;
import dev.ortserve.wire.model.CreateChatCompletionResponse;
import dev.ortserve.wire.model.ResponseFormatJsonObject;
import dev.ortserve.wire.model.ResponseFormatJsonSchema;
import dev.ortserve.wire.union.StopReason;
import dev.ortserve.wire.union.ToolChoice;
import dev.ortserve.config.OrtserveConfig;
import dev.ortserve.protocol.openai.PredictedOutputs;
import dev.ortserve.protocol.openai.Usages;
import dev.ortserve.protocol.Answer;
import dev.ortserve.service.ServedModel;
import dev.ortserve.service.chat.StartedTurn;
import dev.ortserve.service.chat.ChatTurnRequest;
import dev.ortserve.service.ImageInput;
import dev.ortserve.service.chat.ChatTurnSpec;
import dev.ortserve.service.chat.ChatTurns;
import dev.ortserve.service.error.InvalidRequestException;
import dev.ortserve.service.error.UnsupportedParameterException;
import dev.ortserve.service.generation.ChoiceEvent;
import dev.ortserve.service.generation.ChoiceResult;
import dev.ortserve.service.generation.CompletionCall;
import dev.ortserve.service.generation.CompletionService;
import dev.ortserve.service.generation.Finish;
import dev.ortserve.service.generation.Logprob;
import dev.ortserve.service.generation.SamplingRequest;
import dev.ortserve.parse.ChatDeltaStream;
import dev.ortserve.parse.ChatOutput;
import dev.ortserve.parse.OutputParsers;
import dev.ortserve.parse.ToolCallParser;
import dev.ortserve.service.prompt.ChatPromptRenderer;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;

import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * POST /v1/chat/completions: the request's own checks, the chat turn it asks for (tools, tool_choice,
 * output format, prompt, sampling), and the turn's results as OpenAI's response object or chunks.
 */
@ApplicationScoped
public class ChatCompletionsProtocol {

    @Inject
    CompletionService service;

    @Inject
    ChatTurns turns;

    @Inject
    OrtserveConfig config;

    @Inject
    ObjectMapper mapper;

    public Uni<Answer> create(CreateChatCompletionRequest req) {
        turns.requireModel(req.getModel());
        refuseUnsupported(req);
        boolean hasTools = req.getTools() != null && !req.getTools().isEmpty();
        ToolChoice.Mode choice = req.getToolChoice() == null ? ToolChoice.Mode.AUTO : req.getToolChoice().mode();
        if (!hasTools && (choice == ToolChoice.Mode.REQUIRED || choice == ToolChoice.Mode.FUNCTION)) {
            throw new InvalidRequestException("tool_choice", "'tool_choice' '" + (choice == ToolChoice.Mode.REQUIRED ? "required" : "function")
                    + "' needs 'tools'.");
        }
        int n = req.getN() == null ? 1 : req.getN();
        if (n > config.engine().maxN()) {
            throw new InvalidRequestException("n", "'n' must be at most " + config.engine().maxN() + " on this server (got " + n + ").");
        }
        if (req.getStreamOptions() != null && !Boolean.TRUE.equals(req.getStream())) {
            throw new InvalidRequestException("stream_options", "'stream_options' is only allowed when 'stream' is true.");
        }
        if (req.getTopLogprobs() != null && !Boolean.TRUE.equals(req.getLogprobs())) {
            throw new InvalidRequestException("top_logprobs", "'top_logprobs' needs 'logprobs' set to true.");
        }
        // what needs the model (its parsers, its grammars, its template) once it is loaded
        return turns.run(req.getModel(), req.getKeepAlive(), served -> spec(req, hasTools, choice, n), started -> generate(req, started));
    }

    /** The turn the request asks for, as the service takes it. */
    private ChatTurnSpec spec(CreateChatCompletionRequest req, boolean hasTools, ToolChoice.Mode choice, int n) {
        List<Map<String, Object>> tools = hasTools ? mapper.convertValue(req.getTools(), new TypeReference<List<Map<String, Object>>>() { }) : null;
        Map<String, Map<String, Object>> schemas = new LinkedHashMap<>();
        if (hasTools) {
            req.getTools().forEach(t -> schemas.put(t.getFunction().getName(),
                    t.getFunction().getParameters() == null ? Map.of() : t.getFunction().getParameters()));
        }
        List<ImageInput> images = new ArrayList<>();
        List<Map<String, Object>> messages = ChatMessages.templateMessages(req.getMessages(), images);
        ChatTurnRequest turn = new ChatTurnRequest(tools, schemas, ChatMessages.toolChoice(choice),
                choice == ToolChoice.Mode.FUNCTION ? req.getToolChoice().functionName() : null, format(req), images);
        ChatPromptRenderer.Request promptRequest = new ChatPromptRenderer.Request(messages, tools,
                ChatMessages.documents(req.getDocuments()), !Boolean.FALSE.equals(req.getAddGenerationPrompt()),
                Boolean.TRUE.equals(req.getContinueFinalMessage()), req.getChatTemplateKwargs(),
                ChatMessages.requestTemplate(req.getChatTemplate(), config.allowRequestChatTemplate()));
        // a request's own template renders on a worker thread: however long it runs, the I/O thread stays free
        return new ChatTurnSpec(turn, promptRequest, prompt -> sampling(req), n, "messages");
    }

    private static SamplingRequest.Builder sampling(CreateChatCompletionRequest req) {
        boolean completionTokens = req.getMaxCompletionTokens() != null;
        Integer maxTokens = completionTokens ? req.getMaxCompletionTokens() : req.getMaxTokens();
        Integer topLogprobs = Boolean.TRUE.equals(req.getLogprobs()) ? (req.getTopLogprobs() == null ? 0 : req.getTopLogprobs()) : null;
        return SamplingRequest.builder().temperature(req.getTemperature()).topP(req.getTopP()).topK(req.getTopK())
                .minP(req.getMinP()).repetitionPenalty(req.getRepetitionPenalty()).frequencyPenalty(req.getFrequencyPenalty())
                .presencePenalty(req.getPresencePenalty()).logitBias(req.getLogitBias()).seed(req.getSeed())
                .maxTokens(maxTokens, completionTokens ? "max_completion_tokens" : "max_tokens").minTokens(req.getMinTokens())
                .ignoreEos(req.getIgnoreEos()).stop(req.getStop() == null ? null : req.getStop().values()).stopTokenIds(req.getStopTokenIds())
                .includeStopStrInOutput(req.getIncludeStopStrInOutput()).skipSpecialTokens(req.getSkipSpecialTokens()).topLogprobs(topLogprobs);
    }

    private Uni<Answer> generate(CreateChatCompletionRequest req, StartedTurn started) {
        OutputParsers parsing = started.parsers();
        ServedModel served = started.served();
        CompletionCall call = started.call().withPrediction(PredictedOutputs.tokens(req.getPrediction(), served));
        Head head = new Head("chatcmpl-" + UUID.randomUUID().toString().replace("-", ""), Instant.now().getEpochSecond(), served.id());
        if (Boolean.TRUE.equals(req.getStream())) {
            boolean usage = req.getStreamOptions() != null && Boolean.TRUE.equals(req.getStreamOptions().getIncludeUsage());
            return Uni.createFrom().item(Answer.stream(chunks(call, service.stream(served, call), head, usage, parsing).map(Answer.Event::data)));
        }
        return service.complete(served, call).map(results -> Answer.json(response(call, results, head, parsing)));
    }

    private static void refuseUnsupported(CreateChatCompletionRequest req) {
        if (req.getModalities() != null && req.getModalities().stream().anyMatch(m -> !"text".equals(m.toString()))) {
            throw new UnsupportedParameterException("modalities", "Only the 'text' modality is supported.");
        }
        if (req.getAudio() != null) {
            throw new UnsupportedParameterException("audio", "Audio output is not supported by a text model.");
        }
    }

    /** The structured output format the request asks for; null for free text. */
    private static ChatTurnRequest.OutputFormat format(CreateChatCompletionRequest req) {
        if (req.getResponseFormat() instanceof ResponseFormatJsonObject) {
            return ChatTurnRequest.OutputFormat.jsonObject("response_format");
        }
        if (req.getResponseFormat() instanceof ResponseFormatJsonSchema js) {
            return ChatTurnRequest.OutputFormat.jsonSchema("response_format", js.getJsonSchema().getSchema(), "response_format.json_schema.schema");
        }
        return null;
    }

    private CreateChatCompletionResponse response(CompletionCall call, List<ChoiceResult> results, Head head, OutputParsers parsing) {
        List<ChatCompletionChoice> choices = new ArrayList<>();
        int completionTokens = 0;
        Usages.Predictions predictions = Usages.Predictions.of(call);
        for (int i = 0; i < results.size(); i++) {
            ChoiceResult r = results.get(i);
            if (predictions != null) predictions.see(i, r);
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
        return new CreateChatCompletionResponse().id(head.id())._object(CreateChatCompletionResponse.ObjectEnum.CHAT_COMPLETION)
                .created(head.created()).model(head.model()).choices(choices)
                .usage(Usages.usage(Usages.promptTokens(call), cachedTokens, completionTokens, predictions));
    }

    private Multi<Object> chunks(CompletionCall call, Multi<ChoiceEvent> events, Head head, boolean includeUsage,
                                 OutputParsers parsing) {
        AtomicInteger completionTokens = new AtomicInteger();
        int promptTokens = Usages.promptTokens(call);
        Usages.CachedTokens cached = new Usages.CachedTokens(call);
        Usages.Predictions predictions = Usages.Predictions.of(call);
        List<Object> roles = new ArrayList<>();
        ChatDeltaStream[] streams = new ChatDeltaStream[call.choices()];
        List<List<Logprob>> pendingLogprobs = new ArrayList<>();
        for (int i = 0; i < call.choices(); i++) {
            streams[i] = new ChatDeltaStream(parsing);
            pendingLogprobs.add(new ArrayList<>());
            roles.add(chunk(head).choices(List.of(new ChatCompletionChunkChoice().index(i)
                    .delta(new ChatCompletionStreamDelta().role(ChatCompletionStreamDelta.RoleEnum.ASSISTANT).content("").toolCalls(null)))));
        }
        java.util.concurrent.atomic.AtomicBoolean first = new java.util.concurrent.atomic.AtomicBoolean(true);
        Multi<Object> body = events.onItem().transformToIterable(e -> {
            completionTokens.incrementAndGet();
            cached.see(e);
            if (predictions != null) predictions.see(e);
            List<Object> out = new ArrayList<>();
            // the role chunks go out with the model's first token: a request refused before it (the queue timeout) is
            // then answered with its HTTP status (503 + Retry-After), not a stream that says so
            if (first.compareAndSet(true, false)) out.addAll(roles);
            int index = e.index();
            if (!parsing.active()) {
                boolean withLogprobs = call.logprobs() && e.logprob() != null;
                if (!e.textDelta().isEmpty() || withLogprobs) {
                    ChatCompletionChunkChoice choice = new ChatCompletionChunkChoice().index(index)
                            .delta(new ChatCompletionStreamDelta().content(e.textDelta()).toolCalls(null));
                    if (withLogprobs) choice.logprobs(logprobs(List.of(e.logprob())));
                    out.add(chunk(head).choices(List.of(choice)));
                }
            } else {
                // the parser regroups the text: each token's logprob rides on the next chunk that goes out
                if (call.logprobs() && e.logprob() != null) pendingLogprobs.get(index).add(e.logprob());
                parsedDeltas(streams[index], index, e.textDelta(), e.finish() != null, head, pendingLogprobs.get(index), out);
            }
            if (e.finish() != null) {
                boolean called = streams[index].called();
                List<Logprob> left = pendingLogprobs.get(index);
                ChatCompletionChunkChoice last = new ChatCompletionChunkChoice().index(index);
                if (!left.isEmpty()) {
                    last.logprobs(logprobs(List.copyOf(left)));
                    left.clear();
                }
                out.add(chunk(head).choices(List.of(last
                        .delta(new ChatCompletionStreamDelta().toolCalls(null))
                        .finishReason(called && e.finish() == Finish.STOP ? ChatFinishReason.TOOL_CALLS : finish(e.finish()))
                        .stopReason(StopReason.of(e.stopReason())))));
            }
            return out;
        });
        Multi<Object> tail = Multi.createFrom().deferred(() -> includeUsage
                ? Multi.createFrom().item(chunk(head).choices(List.of())
                        .usage(Usages.usage(promptTokens, cached.total(), completionTokens.get(), predictions)))
                : Multi.createFrom().empty());
        return Multi.createBy().concatenating().streams(body, tail);
    }

    /**
     * Reasoning, content and tool-call chunks for one more piece of a choice's text: content as it
     * comes until a call begins, then per call one delta with its index, id, type and name (empty
     * arguments) and its arguments in pieces as they are generated.
     */
    private void parsedDeltas(ChatDeltaStream st, int index, String delta, boolean last, Head head, List<Logprob> pending,
                              List<Object> out) {
        for (ChatDeltaStream.Delta d : st.add(delta, last)) {
            ChatCompletionStreamDelta wire;
            if (d.reasoning() != null) {
                wire = new ChatCompletionStreamDelta().reasoningContent(d.reasoning()).toolCalls(null);
            } else if (d.content() != null) {
                wire = new ChatCompletionStreamDelta().content(d.content()).toolCalls(null);
            } else if (d.callStart()) {
                wire = new ChatCompletionStreamDelta().toolCalls(List.of(new ChatCompletionToolCallDelta().index(d.callIndex())
                        .id(d.callId()).type(ChatCompletionToolCallDelta.TypeEnum.FUNCTION)
                        .function(new ChatCompletionToolCallDeltaFunction().name(d.name()).arguments(""))));
            } else {
                wire = new ChatCompletionStreamDelta().toolCalls(List.of(new ChatCompletionToolCallDelta().index(d.callIndex())
                        .function(new ChatCompletionToolCallDeltaFunction().arguments(d.arguments()))));
            }
            ChatCompletionChunkChoice choice = new ChatCompletionChunkChoice().index(index).delta(wire);
            if (!pending.isEmpty()) {
                choice.logprobs(logprobs(List.copyOf(pending)));
                pending.clear();
            }
            out.add(chunk(head).choices(List.of(choice)));
        }
    }

    private static List<ChatCompletionMessageToolCall> toolCalls(List<ToolCallParser.ToolCall> calls, ToolCallParser parser) {
        List<ChatCompletionMessageToolCall> out = new ArrayList<>();
        for (var c : calls) {
            out.add(new ChatCompletionMessageToolCall().id(parser.newCallId()).type(ChatCompletionMessageToolCall.TypeEnum.FUNCTION)
                    .function(new ChatCompletionMessageToolCallFunction().name(c.name()).arguments(c.arguments())));
        }
        return out;
    }

    /** What every chunk and the response of one completion carry: its id, its creation time, the model that answered. */
    private record Head(String id, long created, String model) {
    }

    private static ChatCompletionChunk chunk(Head head) {
        return new ChatCompletionChunk().id(head.id())._object(ChatCompletionChunk.ObjectEnum.CHAT_COMPLETION_CHUNK).created(head.created()).model(head.model());
    }

    static ChatFinishReason finish(Finish reason) {
        if (reason == null) return null;
        return switch (reason) {
            case STOP -> ChatFinishReason.STOP;
            case LENGTH -> ChatFinishReason.LENGTH;
            default -> null;
        };
    }

    static ChatCompletionLogprobs logprobs(List<Logprob> logprobs) {
        List<ChatCompletionTokenLogprob> content = new ArrayList<>();
        for (Logprob lp : logprobs) {
            List<ChatCompletionTopLogprob> top = new ArrayList<>();
            for (Logprob.Top t : lp.top()) {
                top.add(new ChatCompletionTopLogprob().token(t.token()).logprob(Usages.logprob(t.logprob())).bytes(bytes(t.token())));
            }
            content.add(new ChatCompletionTokenLogprob().token(lp.token()).logprob(Usages.logprob(lp.logprob()))
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
