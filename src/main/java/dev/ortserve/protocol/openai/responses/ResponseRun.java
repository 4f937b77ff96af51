package dev.ortserve.protocol.openai.responses;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.ortserve.service.error.GenerationFailedException;
import dev.ortserve.service.error.ServiceException;
import dev.ortserve.service.generation.ChoiceEvent;
import dev.ortserve.service.generation.Finish;
import dev.ortserve.service.generation.Logprob;
import dev.ortserve.parse.ChatDeltaStream;
import dev.ortserve.parse.ChatOutput;
import dev.ortserve.parse.OutputParsers;
import dev.ortserve.service.responses.ConnectionTurns;
import dev.ortserve.service.responses.Conversations;
import dev.ortserve.service.responses.ResponseEvent;
import dev.ortserve.store.record.StoredResponse;
import dev.ortserve.service.responses.BackgroundRun;
import dev.ortserve.service.responses.StoreFailures;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;

import java.util.ArrayList;
import java.util.List;

/**
 * A response whose generation has been admitted: it finishes either as one response object or
 * as the Responses event stream, and in both cases is stored (when asked) before the client
 * sees the final object, so a GET right after the last event returns the same object.
 */
public final class ResponseRun implements BackgroundRun {

    private static final org.jboss.logging.Logger LOG = org.jboss.logging.Logger.getLogger(ResponseRun.class);

    private final ResponseDraft draft;
    private final Multi<ChoiceEvent> events;
    private final OutputParsers parsers;
    private final ObjectMapper mapper;
    private final Conversations conversations;
    private final String owner;
    private final ArrayNode input;
    private final java.util.function.ToIntFunction<String> tokenCount;
    private final int promptTokens;
    /** The stream being produced (background runs read what it has generated so far when they are stopped). */
    private volatile StreamState current;
    /** generate: false: the prompt is prefilled, what is generated is dropped, the response completes empty. */
    private boolean warmUp;
    /** A background run whose end another party (a cancel, a lapsed lease, a drain) wrote first. */
    private volatile boolean endedElsewhere;
    /** A background run whose final record this replica wrote (its terminal event may still be on its way to the store). */
    private volatile boolean finishedHere;
    /** A background run that asked the store to record its end (the answer may still be on its way). */
    private volatile boolean finishing;

    ResponseRun(ResponseDraft draft, Multi<ChoiceEvent> events, OutputParsers parsers, ObjectMapper mapper, Conversations conversations,
                String owner, ArrayNode input, java.util.function.ToIntFunction<String> tokenCount, int promptTokens) {
        this.draft = draft;
        this.events = events;
        this.parsers = parsers;
        this.mapper = mapper;
        this.conversations = conversations;
        this.owner = owner;
        this.input = input;
        this.tokenCount = tokenCount;
        this.promptTokens = promptTokens;
    }

    ResponseRun warmUp() {
        this.warmUp = true;
        return this;
    }

    /** Everything one generation produced. */
    private static final class Generated {
        final StringBuilder text = new StringBuilder();
        final List<Logprob> logprobs = new ArrayList<>();
        int tokens;
        int cached;
        Finish finish;

        synchronized void add(ChoiceEvent e) {
            cached = e.cachedTokens();
            text.append(e.textDelta());
            if (e.logprob() != null) logprobs.add(e.logprob());
            tokens++;
            if (e.finish() != null) finish = e.finish();
        }
    }

    /** The finished response object (stored first when the request asked for storage). */
    public Uni<ObjectNode> complete() {
        return events.collect().in(Generated::new, (g, e) -> g.add(e))
                .flatMap(g -> {
                    if (g.finish == Finish.ERROR || g.finish == null) {
                        LOG.warnf("Response %s: generation ended without a result (%d tokens, finish %s)", draft.id, g.tokens, g.finish);
                        return Uni.createFrom().failure(new GenerationFailedException("Generation failed"
                                + (g.finish == null ? ": the generation ended without a finish reason." : ".")));
                    }
                    ObjectNode response = finished(g);
                    return persist(response).replaceWith(response);
                });
    }

    private ObjectNode finished(Generated g) {
        if (warmUp) return draft.response("completed", List.of(), draft.usage(promptTokens, g.cached, 0, 0), null, null);
        ChatOutput out = parsers.parse(g.text.toString());
        boolean incomplete = g.finish == Finish.LENGTH;
        List<ObjectNode> items = draft.items(out, incomplete, g.logprobs);
        int reasoningTokens = out.reasoning() == null || out.reasoning().isEmpty() ? 0 : tokenCount.applyAsInt(out.reasoning());
        return draft.response(incomplete ? "incomplete" : "completed", items, draft.usage(promptTokens, g.cached, g.tokens, reasoningTokens),
                incomplete ? "max_output_tokens" : null, null);
    }

    private Uni<Void> persist(ObjectNode response) {
        if (!draft.store) return Uni.createFrom().voidItem();
        if (draft.background) {
            // the run ends once: a cancel or a lapsed lease may have ended it already
            finishing = true;
            return conversations.finishRun(new StoredResponse(draft.id, draft.previousResponseId(), owner, response, input)).invoke(won -> {
                        endedElsewhere = !won;
                        finishedHere = won;
                    }).replaceWithVoid();
        }
        return conversations.put(new StoredResponse(draft.id, draft.previousResponseId(), owner, response, input));
    }

    /** The final object of the stream once it is built (what a WebSocket connection keeps of the turn). */
    private volatile ObjectNode finalResponse;

    /** The conversation this turn continues (null for a first turn). */
    private volatile dev.ortserve.store.record.Conversation continued;

    ResponseRun continuing(dev.ortserve.store.record.Conversation conversation) {
        this.continued = conversation;
        return this;
    }

    /**
     * Keeps the conversation that ends with this turn in {@code turns}, the final object of its stream as the turn's
     * response: what a WebSocket connection holds of the responses it made to continue them without the store.
     */
    public void keepIn(ConnectionTurns turns) {
        ObjectNode response = finalResponse;
        if (response == null) return;
        List<StoredResponse> chain = new ArrayList<>(continued == null ? List.of() : continued.chain());
        chain.add(new StoredResponse(draft.id, draft.previousResponseId(), owner, response, input));
        turns.keep(draft.id, new dev.ortserve.store.record.Conversation(List.copyOf(chain), continued == null ? 0 : continued.storedBytes()));
    }

    // ------------------------------------------------------------------ streaming

    // ------------------------------------------------------------------ background runs

    @Override
    public String id() {
        return draft.id;
    }

    String owner() {
        return owner;
    }

    boolean background() {
        return draft.background;
    }

    @Override
    public boolean endedElsewhere() {
        return endedElsewhere;
    }

    @Override
    public boolean finishedHere() {
        return finishedHere;
    }

    @Override
    public boolean finishing() {
        return finishing;
    }

    /** The record a background run is stored with before it starts. */
    @Override
    public StoredResponse queued() {
        return new StoredResponse(draft.id, draft.previousResponseId(), owner, draft.response("queued", List.of(), null, null, null), input);
    }

    /** The record of a run stopped before its end (cancelled, failed): what it had generated so far. */
    @Override
    public StoredResponse interrupted(String status, ObjectNode error) {
        StreamState st = current;
        List<ObjectNode> items = List.of();
        int tokens = 0, cached = 0;
        if (st != null) {
            String text;
            List<Logprob> logprobs;
            synchronized (st.generated) {
                text = st.generated.text.toString();
                logprobs = new ArrayList<>(st.generated.logprobs);
                tokens = st.generated.tokens;
                cached = st.generated.cached;
            }
            if (!text.isEmpty()) items = draft.items(parsers.parse(text), true, logprobs);
        }
        ObjectNode response = draft.response(status, items, draft.usage(promptTokens, cached, tokens, 0), null, error);
        return new StoredResponse(draft.id, draft.previousResponseId(), owner, response, input);
    }

    /** Drops an admitted generation that will never be read (its background run could not be stored). */
    @Override
    public void abandon() {
        events.subscribe().with(e -> { }, f -> { }).cancel();
    }

    /** The event stream: each element the events of one step (the lifecycle events, one token's deltas, the end). */
    @Override
    public Multi<List<ResponseEvent>> events() {
        return events(false);
    }

    /**
     * The event stream (see {@link #events()}).
     *
     * @param headWithFirstToken {@code response.created} and {@code response.in_progress} go out with the model's first
     *                           token instead of at once, and a failure before it (the engine's queue timed out: no
     *                           memory for this prompt) fails the stream instead of becoming a {@code response.failed}
     *                           event: an HTTP stream, of which nothing was sent, is then answered with the failure's
     *                           status (503 + Retry-After), as chat's and Messages' streams are
     */
    public Multi<List<ResponseEvent>> events(boolean headWithFirstToken) {
        StreamState st = new StreamState();
        current = st;
        java.util.concurrent.atomic.AtomicBoolean headSent = new java.util.concurrent.atomic.AtomicBoolean(!headWithFirstToken);
        java.util.function.Supplier<List<ResponseEvent>> headEvents = () -> List.of(
                st.event("response.created", lifecycle(draft.response("in_progress", List.of(), null, null, null))),
                st.event("response.in_progress", lifecycle(draft.response("in_progress", List.of(), null, null, null))));
        Multi<List<ResponseEvent>> head = headWithFirstToken ? Multi.createFrom().empty() : Multi.createFrom().item(headEvents);
        java.util.function.Function<List<ResponseEvent>, List<ResponseEvent>> afterHead = events -> {
            if (!headSent.compareAndSet(false, true)) return events;
            List<ResponseEvent> all = new ArrayList<>(headEvents.get());
            all.addAll(events);
            return all;
        };
        Multi<List<ResponseEvent>> body = events.map(e -> {
            List<ResponseEvent> out = afterHead.apply(List.of()); // the head first: its sequence numbers come first
            st.generated.add(e);
            if (warmUp) return out;
            List<ResponseEvent> deltas = st.advance(e.textDelta(), e.isLast(), e.logprob());
            if (out.isEmpty()) return deltas;
            out = new ArrayList<>(out);
            out.addAll(deltas);
            return out;
        }).filter(s -> !s.isEmpty());
        Multi<List<ResponseEvent>> tail = Multi.createFrom().deferred(() -> {
            List<ResponseEvent> before = afterHead.apply(List.of());
            Generated g = st.generated;
            if (g.finish == Finish.ERROR || g.finish == null) {
                return Multi.createFrom().item(concat(before, st.failed("server_error", "Generation failed.")));
            }
            ObjectNode response = finished(g);
            finalResponse = response;
            String done = ResponseEvent.terminalType(response.path("status").asText());
            return Multi.createFrom().uni(persist(response).map(v -> concat(before, st.event(done, lifecycle(response))))
                    .onFailure().recoverWithItem(f -> {
                        Throwable api = StoreFailures.of(f);
                        return concat(before, st.failed(api instanceof ServiceException s && s.code() != null ? s.code() : "server_error", api.getMessage()));
                    }));
        });
        return Multi.createBy().concatenating().streams(head, body, tail)
                .onFailure(f -> headSent.get()).recoverWithItem(f -> {
                    ServiceException api = streamError(f);
                    return List.of(st.failed(api.code() == null ? "server_error" : api.code(), api.getMessage()));
                });
    }

    private static List<ResponseEvent> concat(List<ResponseEvent> first, ResponseEvent last) {
        if (first.isEmpty()) return List.of(last);
        List<ResponseEvent> all = new ArrayList<>(first);
        all.add(last);
        return all;
    }

    /** A failure after the stream started, as the response.failed event reports it (runtime details stay in the log). */
    static ServiceException streamError(Throwable failure) {
        if (failure instanceof ServiceException known) return known;
        LOG.error("A response's generation failed", failure);
        return new GenerationFailedException("The server had an error while generating; the generation was stopped.");
    }

    private ObjectNode lifecycle(ObjectNode response) {
        ObjectNode e = mapper.createObjectNode();
        e.set("response", response);
        return e;
    }

    /** What the stream has sent so far. */
    private final class StreamState {
        final Generated generated = new Generated();
        final ChatDeltaStream deltas = new ChatDeltaStream(parsers);
        final StringBuilder reasoning = new StringBuilder();
        final StringBuilder content = new StringBuilder();
        final List<StreamedCall> calls = new ArrayList<>();
        final List<Logprob> pendingLogprobs = new ArrayList<>();
        int sequence;
        int nextOutputIndex;
        int reasoningIndex = -1;
        int messageIndex = -1;
        boolean reasoningClosed;
        boolean messageClosed;

        /** A function call item being streamed: its output index, name and the arguments sent. */
        final class StreamedCall {
            final int outputIndex;
            final int k;
            final String name;
            final StringBuilder arguments = new StringBuilder();
            boolean done;

            StreamedCall(int outputIndex, int k, String name) {
                this.outputIndex = outputIndex;
                this.k = k;
                this.name = name;
            }
        }

        ResponseEvent event(String type, ObjectNode payload) {
            ObjectNode e = mapper.createObjectNode().put("type", type).put("sequence_number", sequence++);
            e.setAll(payload);
            return new ResponseEvent(type, e.toString());
        }

        ResponseEvent failed(String code, String message) {
            ObjectNode error = mapper.createObjectNode().put("code", code).put("message", message);
            return event("response.failed", lifecycle(draft.response("failed", List.of(), null, null, error)));
        }

        ObjectNode at(int outputIndex, String itemId) {
            return mapper.createObjectNode().put("item_id", itemId).put("output_index", outputIndex);
        }

        /** The events for one more piece of text: the same incremental parse as chat's stream. */
        List<ResponseEvent> advance(String delta, boolean last, Logprob logprob) {
            List<ResponseEvent> out = new ArrayList<>();
            boolean cutShort = last && generated.finish == Finish.LENGTH;
            // parsers regroup the text: each token's logprob rides on the next text delta that goes out
            if (draft.withLogprobs && logprob != null) pendingLogprobs.add(logprob);
            for (ChatDeltaStream.Delta d : deltas.add(delta, last)) {
                if (d.reasoning() != null) {
                    if (reasoningClosed) continue;
                    if (reasoningIndex < 0) {
                        reasoningIndex = nextOutputIndex++;
                        out.add(itemAdded(reasoningIndex, draft.reasoningItem(null, "in_progress")));
                    }
                    reasoning.append(d.reasoning());
                    out.add(event("response.reasoning_text.delta", at(reasoningIndex, draft.reasoningId()).put("content_index", 0)
                            .put("delta", d.reasoning())));
                } else if (d.content() != null) {
                    closeReasoning(out, false);
                    if (messageClosed) continue;
                    openMessage(out);
                    content.append(d.content());
                    ObjectNode textDelta = at(messageIndex, draft.messageId()).put("content_index", 0).put("delta", d.content());
                    textDelta.set("logprobs", pendingLogprobs.isEmpty() ? mapper.createArrayNode() : draft.logprobs(List.copyOf(pendingLogprobs)));
                    pendingLogprobs.clear();
                    out.add(event("response.output_text.delta", textDelta));
                } else if (d.callStart()) {
                    // parallel_tool_calls false: the response reports the first call only
                    if (d.callIndex() > 0 && !draft.parallelToolCalls()) continue;
                    closeReasoning(out, false);
                    closeMessage(out, "completed");
                    if (!calls.isEmpty()) closeCall(out, calls.get(calls.size() - 1));
                    StreamedCall call = new StreamedCall(nextOutputIndex++, d.callIndex(), d.name());
                    calls.add(call);
                    out.add(itemAdded(call.outputIndex, draft.callItem(call.k, call.name, "", "in_progress")));
                } else if (d.callIndex() < calls.size()) {
                    StreamedCall call = calls.get(d.callIndex());
                    if (call.done) continue;
                    call.arguments.append(d.arguments());
                    // a custom tool's input is the 'input' string inside the arguments: sent whole once the call is complete
                    if (draft.customTool(call.name)) continue;
                    out.add(event("response.function_call_arguments.delta", at(call.outputIndex, draft.callIds(call.k)[0])
                            .put("delta", d.arguments())));
                }
            }
            if (last) {
                closeReasoning(out, cutShort && content.isEmpty());
                if (calls.isEmpty()) {
                    openMessage(out);
                }
                closeMessage(out, cutShort ? "incomplete" : "completed");
                for (StreamedCall call : calls) closeCall(out, call);
            }
            return out;
        }

        private void closeReasoning(List<ResponseEvent> out, boolean cutShort) {
            if (reasoningIndex < 0 || reasoningClosed) return;
            reasoningClosed = true;
            String text = reasoning.toString();
            out.add(event("response.reasoning_text.done", at(reasoningIndex, draft.reasoningId()).put("content_index", 0).put("text", text)));
            out.add(itemDone(reasoningIndex, draft.reasoningItem(text, cutShort ? "incomplete" : "completed")));
        }

        private void openMessage(List<ResponseEvent> out) {
            if (messageIndex >= 0) return;
            messageIndex = nextOutputIndex++;
            out.add(itemAdded(messageIndex, draft.messageItem("in_progress", List.of())));
            out.add(event("response.content_part.added", at(messageIndex, draft.messageId()).put("content_index", 0)
                    .set("part", draft.outputText("", List.of()))));
        }

        private void closeMessage(List<ResponseEvent> out, String status) {
            if (messageIndex < 0 || messageClosed) return;
            messageClosed = true;
            if (!pendingLogprobs.isEmpty()) {
                // tokens whose text never went out on its own (a partial character at the end): their logprobs still do
                ObjectNode rest = at(messageIndex, draft.messageId()).put("content_index", 0).put("delta", "");
                rest.set("logprobs", draft.logprobs(List.copyOf(pendingLogprobs)));
                pendingLogprobs.clear();
                out.add(event("response.output_text.delta", rest));
            }
            String text = content.toString();
            ObjectNode done = at(messageIndex, draft.messageId()).put("content_index", 0).put("text", text);
            done.set("logprobs", draft.withLogprobs ? draft.logprobs(generated.logprobs) : mapper.createArrayNode());
            out.add(event("response.output_text.done", done));
            ObjectNode part = draft.outputText(text, generated.logprobs);
            out.add(event("response.content_part.done", at(messageIndex, draft.messageId()).put("content_index", 0).set("part", part)));
            out.add(itemDone(messageIndex, draft.messageItem(status, List.of(part))));
        }

        private void closeCall(List<ResponseEvent> out, StreamedCall call) {
            if (call.done) return;
            call.done = true;
            String arguments = call.arguments.toString();
            if (draft.customTool(call.name)) {
                String input = draft.customInput(arguments);
                String itemId = draft.callIds(call.k)[0];
                if (!input.isEmpty()) out.add(event("response.custom_tool_call_input.delta", at(call.outputIndex, itemId).put("delta", input)));
                out.add(event("response.custom_tool_call_input.done", at(call.outputIndex, itemId).put("input", input)));
                out.add(itemDone(call.outputIndex, draft.callItem(call.k, call.name, arguments, "completed")));
                return;
            }
            out.add(event("response.function_call_arguments.done", at(call.outputIndex, draft.callIds(call.k)[0])
                    .put("name", draft.callName(call.name)).put("arguments", arguments)));
            out.add(itemDone(call.outputIndex, draft.callItem(call.k, call.name, arguments, "completed")));
        }

        private ResponseEvent itemAdded(int index, ObjectNode item) {
            ObjectNode payload = mapper.createObjectNode().put("output_index", index);
            payload.set("item", item);
            return event("response.output_item.added", payload);
        }

        private ResponseEvent itemDone(int index, ObjectNode item) {
            ObjectNode payload = mapper.createObjectNode().put("output_index", index);
            payload.set("item", item);
            return event("response.output_item.done", payload);
        }
    }
}
