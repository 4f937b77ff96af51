package dev.ortserve.service.responses;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.ortserve.api.error.ApiException;
import dev.ortserve.engine.FinishReason;
import dev.ortserve.engine.TextTokenizer;
import dev.ortserve.engine.TokenEvent;
import dev.ortserve.engine.TokenLogprob;
import dev.ortserve.service.completion.ChoiceEvent;
import dev.ortserve.service.parse.ChatOutput;
import dev.ortserve.service.parse.OutputParsers;
import dev.ortserve.service.parse.ToolCallParser;
import dev.ortserve.store.ConversationFullException;
import dev.ortserve.store.RecordTooLargeException;
import dev.ortserve.store.ResponseStore;
import dev.ortserve.store.StoreUnavailableException;
import dev.ortserve.store.StoredResponse;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;

import java.util.ArrayList;
import java.util.List;

/**
 * A response whose generation has been admitted: it finishes either as one response object or
 * as the Responses event stream, and in both cases is stored (when asked) before the client
 * sees the final object, so a GET right after the last event returns the same object.
 */
public final class ResponseRun {

    private static final org.jboss.logging.Logger LOG = org.jboss.logging.Logger.getLogger(ResponseRun.class);

    private final ResponseDraft draft;
    private final Multi<ChoiceEvent> events;
    private final OutputParsers parsers;
    private final ObjectMapper mapper;
    private final ResponseStore store;
    private final String owner;
    private final ArrayNode input;
    private final TextTokenizer tokenizer;
    private final int promptTokens;
    /** The stream being produced (background runs read what it has generated so far when they are stopped). */
    private volatile StreamState current;
    /** A background run whose end another party (a cancel, a lapsed lease, a drain) wrote first. */
    private volatile boolean endedElsewhere;
    /** A background run whose final record this replica wrote (its terminal event may still be on its way to the store). */
    private volatile boolean finishedHere;

    ResponseRun(ResponseDraft draft, Multi<ChoiceEvent> events, OutputParsers parsers, ObjectMapper mapper, ResponseStore store,
                String owner, ArrayNode input, TextTokenizer tokenizer, int promptTokens) {
        this.draft = draft;
        this.events = events;
        this.parsers = parsers;
        this.mapper = mapper;
        this.store = store;
        this.owner = owner;
        this.input = input;
        this.tokenizer = tokenizer;
        this.promptTokens = promptTokens;
    }

    /** Everything one generation produced. */
    private static final class Generated {
        final StringBuilder text = new StringBuilder();
        final List<TokenLogprob> logprobs = new ArrayList<>();
        int tokens;
        FinishReason finish;

        synchronized void add(TokenEvent e) {
            text.append(e.textDelta());
            if (e.logprob() != null) logprobs.add(e.logprob());
            tokens++;
            if (e.finishReason() != null) finish = e.finishReason();
        }
    }

    /** The finished response object (stored first when the request asked for storage). */
    public Uni<ObjectNode> complete() {
        return events.collect().in(Generated::new, (g, e) -> g.add(e.event()))
                .flatMap(g -> {
                    if (g.finish == FinishReason.ERROR || g.finish == null) {
                        LOG.warnf("Response %s: generation ended without a result (%d tokens, finish %s)", draft.id, g.tokens, g.finish);
                        return Uni.createFrom().failure(new ApiException(500, "server_error", "Generation failed"
                                + (g.finish == null ? ": the generation ended without a finish reason." : "."), null, "generation_failed"));
                    }
                    ObjectNode response = finished(g);
                    return persist(response).replaceWith(response);
                });
    }

    private ObjectNode finished(Generated g) {
        ChatOutput out = parsers.parse(g.text.toString());
        boolean incomplete = g.finish == FinishReason.LENGTH;
        List<ObjectNode> items = draft.items(out, incomplete, g.logprobs);
        int reasoningTokens = out.reasoning() == null || out.reasoning().isEmpty() ? 0 : tokenizer.encode(out.reasoning()).length;
        return draft.response(incomplete ? "incomplete" : "completed", items, draft.usage(promptTokens, g.tokens, reasoningTokens),
                incomplete ? "max_output_tokens" : null, null);
    }

    private Uni<Void> persist(ObjectNode response) {
        if (!draft.store) return Uni.createFrom().voidItem();
        if (draft.background) {
            // the run ends once: a cancel or a lapsed lease may have ended it already
            return store.finishRun(new StoredResponse(draft.id, draft.request.getPreviousResponseId(), owner, response, input), null, false)
                    .onFailure().transform(ResponseRun::storeFailure).invoke(won -> {
                        endedElsewhere = !won;
                        finishedHere = won;
                    }).replaceWithVoid();
        }
        return store.put(new StoredResponse(draft.id, draft.request.getPreviousResponseId(), owner, response, input))
                .onFailure().transform(ResponseRun::storeFailure);
    }

    static Throwable storeFailure(Throwable f) {
        if (f instanceof StoreUnavailableException u) {
            // the store's own words (hosts, ports) go to the log, not to clients
            LOG.warnf("Conversation store unavailable: %s", u.getMessage());
            return ApiException.unavailable("The conversation store is unavailable. Retry shortly, or send 'store': false.", "store_unavailable");
        }
        if (f instanceof RecordTooLargeException r) {
            return ApiException.invalidRequest("store", "The response cannot be stored: " + r.getMessage()
                    + " (ORTSERVE_STORE_MAX_RECORD_BYTES). Lower 'max_output_tokens' or send 'store': false.", "response_too_large");
        }
        if (f instanceof ConversationFullException c) {
            return ApiException.invalidRequest("previous_response_id", "The conversation cannot grow further: " + c.getMessage()
                    + " (ORTSERVE_STORE_MAX_CONVERSATION_BYTES). Start a new conversation.", "conversation_too_large");
        }
        return f;
    }

    // ------------------------------------------------------------------ streaming

    /** Text that might still turn into a marker ({@code </think>}) is held back until it cannot. */
    private static final int MARKER_HOLD_BACK = 16;

    // ------------------------------------------------------------------ background runs

    public String id() {
        return draft.id;
    }

    String owner() {
        return owner;
    }

    boolean background() {
        return draft.background;
    }

    boolean endedElsewhere() {
        return endedElsewhere;
    }

    boolean finishedHere() {
        return finishedHere;
    }

    /** The record a background run is stored with before it starts. */
    StoredResponse queued() {
        return new StoredResponse(draft.id, draft.request.getPreviousResponseId(), owner, draft.response("queued", List.of(), null, null, null), input);
    }

    /** The record of a run stopped before its end (cancelled, failed): what it had generated so far. */
    StoredResponse interrupted(String status, ObjectNode error) {
        StreamState st = current;
        List<ObjectNode> items = List.of();
        int tokens = 0;
        if (st != null) {
            String text;
            List<TokenLogprob> logprobs;
            synchronized (st.generated) {
                text = st.generated.text.toString();
                logprobs = new ArrayList<>(st.generated.logprobs);
                tokens = st.generated.tokens;
            }
            if (!text.isEmpty()) items = draft.items(parsers.parse(text), true, logprobs);
        }
        ObjectNode response = draft.response(status, items, draft.usage(promptTokens, tokens, 0), null, error);
        return new StoredResponse(draft.id, draft.request.getPreviousResponseId(), owner, response, input);
    }

    /** Drops an admitted generation that will never be read (its background run could not be stored). */
    void abandon() {
        events.subscribe().with(e -> { }, f -> { }).cancel();
    }

    /** The event stream: each element one complete {@code event:}/{@code data:} frame. */
    public Multi<String> frames() {
        StreamState st = new StreamState();
        current = st;
        Multi<String> head = Multi.createFrom().items(() -> java.util.stream.Stream.of(
                st.event("response.created", lifecycle(draft.response("in_progress", List.of(), null, null, null))),
                st.event("response.in_progress", lifecycle(draft.response("in_progress", List.of(), null, null, null)))));
        Multi<String> body = events.map(e -> {
            st.generated.add(e.event());
            return st.advance(e.event().textDelta(), e.event().isLast(), e.event().logprob());
        }).filter(s -> !s.isEmpty());
        Multi<String> tail = Multi.createFrom().deferred(() -> {
            Generated g = st.generated;
            if (g.finish == FinishReason.ERROR || g.finish == null) {
                return Multi.createFrom().item(st.failed("server_error", "Generation failed."));
            }
            ObjectNode response = finished(g);
            String done = response.path("status").asText().equals("incomplete") ? "response.incomplete" : "response.completed";
            return Multi.createFrom().uni(persist(response).map(v -> st.event(done, lifecycle(response)))
                    .onFailure().recoverWithItem(f -> {
                        Throwable api = storeFailure(f);
                        return st.failed(api instanceof ApiException a && a.code() != null ? a.code() : "server_error", api.getMessage());
                    }));
        });
        return Multi.createBy().concatenating().streams(head, body, tail)
                .onFailure().recoverWithItem(f -> {
                    ApiException api = streamError(f);
                    return st.failed(api.code() == null ? "server_error" : api.code(), api.getMessage());
                });
    }

    /** A failure after the stream started, as the response.failed event reports it (runtime details stay in the log). */
    static ApiException streamError(Throwable failure) {
        if (failure instanceof ApiException api) return api;
        LOG.error("A response's generation failed", failure);
        return new ApiException(500, "server_error", "The server had an error while generating; the generation was stopped.", null, "generation_failed");
    }

    private ObjectNode lifecycle(ObjectNode response) {
        ObjectNode e = mapper.createObjectNode();
        e.set("response", response);
        return e;
    }

    /** What the stream has sent so far. */
    private final class StreamState {
        final Generated generated = new Generated();
        final StringBuilder text = new StringBuilder();
        int sequence;
        int nextOutputIndex;
        int reasoningIndex = -1;
        int messageIndex = -1;
        int reasoningSent;
        int contentSent;
        boolean reasoningClosed;

        String event(String type, ObjectNode payload) {
            ObjectNode e = mapper.createObjectNode().put("type", type).put("sequence_number", sequence++);
            e.setAll(payload);
            return "event: " + type + "\ndata: " + e + "\n\n";
        }

        String failed(String code, String message) {
            ObjectNode error = mapper.createObjectNode().put("code", code).put("message", message);
            return event("response.failed", lifecycle(draft.response("failed", List.of(), null, null, error)));
        }

        ObjectNode at(int outputIndex, String itemId) {
            return mapper.createObjectNode().put("item_id", itemId).put("output_index", outputIndex);
        }

        String advance(String delta, boolean last, TokenLogprob logprob) {
            text.append(delta);
            StringBuilder out = new StringBuilder();
            boolean holdAll = parsers.tools() != null && !last;
            if (holdAll && parsers.reasoning() == null) return "";
            ChatOutput parsed = parsers.parse(text.toString());
            String reasoning = parsed.reasoning() == null ? "" : parsed.reasoning();
            String content = parsed.content() == null ? "" : parsed.content();
            int reasoningEnd = last || parsed.content() != null ? reasoning.length() : Math.max(0, reasoning.length() - MARKER_HOLD_BACK);
            if (!parsers.active()) reasoningEnd = 0;
            if (reasoningEnd > reasoningSent && !reasoningClosed) {
                if (reasoningIndex < 0) {
                    reasoningIndex = nextOutputIndex++;
                    out.append(itemAdded(reasoningIndex, draft.reasoningItem(null, "in_progress")));
                }
                out.append(event("response.reasoning_text.delta", at(reasoningIndex, draft.reasoningId()).put("content_index", 0)
                        .put("delta", reasoning.substring(reasoningSent, reasoningEnd))));
                reasoningSent = reasoningEnd;
            }
            if (holdAll) return out.toString();
            int contentEnd = last || !parsers.active() ? content.length() : Math.max(0, content.length() - MARKER_HOLD_BACK);
            if (last || contentEnd > contentSent) {
                closeReasoning(out, reasoning, last && generated.finish == FinishReason.LENGTH && parsed.content() == null);
            }
            if (contentEnd > contentSent) {
                openMessage(out);
                ObjectNode textDelta = at(messageIndex, draft.messageId()).put("content_index", 0).put("delta", content.substring(contentSent, contentEnd));
                // a delta is one token's text only when no parser regroups the text
                boolean ownToken = draft.withLogprobs && !parsers.active() && logprob != null;
                textDelta.set("logprobs", ownToken ? draft.logprobs(List.of(logprob)) : mapper.createArrayNode());
                out.append(event("response.output_text.delta", textDelta));
                contentSent = contentEnd;
            }
            if (last) finish(out, parsed, content);
            return out.toString();
        }

        private void closeReasoning(StringBuilder out, String reasoning, boolean cutShort) {
            if (reasoningIndex < 0 || reasoningClosed) return;
            reasoningClosed = true;
            out.append(event("response.reasoning_text.done", at(reasoningIndex, draft.reasoningId()).put("content_index", 0).put("text", reasoning)));
            out.append(itemDone(reasoningIndex, draft.reasoningItem(reasoning, cutShort ? "incomplete" : "completed")));
        }

        private void openMessage(StringBuilder out) {
            if (messageIndex >= 0) return;
            messageIndex = nextOutputIndex++;
            out.append(itemAdded(messageIndex, draft.messageItem("in_progress", List.of())));
            out.append(event("response.content_part.added", at(messageIndex, draft.messageId()).put("content_index", 0)
                    .set("part", draft.outputText("", List.of()))));
        }

        private void finish(StringBuilder out, ChatOutput parsed, String content) {
            List<ToolCallParser.ToolCall> calls = draft.calls(parsed);
            String status = generated.finish == FinishReason.LENGTH ? "incomplete" : "completed";
            if (ResponseDraft.hasMessage(parsed, calls)) {
                openMessage(out);
                ObjectNode text = at(messageIndex, draft.messageId()).put("content_index", 0).put("text", content);
                text.set("logprobs", draft.withLogprobs ? draft.logprobs(generated.logprobs) : mapper.createArrayNode());
                out.append(event("response.output_text.done", text));
                ObjectNode part = draft.outputText(content, generated.logprobs);
                out.append(event("response.content_part.done", at(messageIndex, draft.messageId()).put("content_index", 0).set("part", part)));
                out.append(itemDone(messageIndex, draft.messageItem(status, List.of(part))));
            }
            for (int k = 0; k < calls.size(); k++) {
                int index = nextOutputIndex++;
                ToolCallParser.ToolCall call = calls.get(k);
                out.append(itemAdded(index, draft.callItem(k, call.name(), "", "in_progress")));
                String itemId = draft.callIds(k)[0];
                out.append(event("response.function_call_arguments.delta", at(index, itemId).put("delta", call.arguments())));
                out.append(event("response.function_call_arguments.done", at(index, itemId).put("name", call.name()).put("arguments", call.arguments())));
                out.append(itemDone(index, draft.callItem(k, call.name(), call.arguments(), "completed")));
            }
        }

        private String itemAdded(int index, ObjectNode item) {
            ObjectNode payload = mapper.createObjectNode().put("output_index", index);
            payload.set("item", item);
            return event("response.output_item.added", payload);
        }

        private String itemDone(int index, ObjectNode item) {
            ObjectNode payload = mapper.createObjectNode().put("output_index", index);
            payload.set("item", item);
            return event("response.output_item.done", payload);
        }
    }
}
