package dev.ortserve.protocol.openai.responses;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.ortserve.service.error.InvalidRequestException;
import dev.ortserve.service.error.NotFoundException;
import dev.ortserve.service.error.UnsupportedParameterException;
import dev.ortserve.wire.model.CreateResponseRequest;
import dev.ortserve.wire.model.Includable;
import dev.ortserve.wire.model.ResponseFormatText;
import dev.ortserve.wire.union.ToolChoice;
import dev.ortserve.config.OrtserveConfig;
import dev.ortserve.service.responses.BackgroundRuns;
import dev.ortserve.wire.model.ResponseTextFormatJsonSchema;
import dev.ortserve.service.chat.ChatTurn;
import dev.ortserve.service.chat.ChatTurnRequest;
import dev.ortserve.service.chat.StartedTurn;
import dev.ortserve.service.ImageInput;
import dev.ortserve.service.chat.ChatTurns;
import dev.ortserve.service.VisionInput;
import dev.ortserve.service.GenerationModelHost;
import dev.ortserve.service.ServedModel;
import dev.ortserve.service.generation.CompletionCall;
import dev.ortserve.service.generation.CompletionService;
import dev.ortserve.service.generation.SamplingRequest;
import dev.ortserve.parse.OutputParsers;
import dev.ortserve.service.prompt.ChatPromptRenderer;
import dev.ortserve.service.responses.ConnectionTurns;
import dev.ortserve.service.responses.Conversations;
import dev.ortserve.service.responses.ResponseEvent;
import dev.ortserve.service.responses.StoreFailures;
import dev.ortserve.store.record.Conversation;
import dev.ortserve.store.record.ResponseIds;
import dev.ortserve.store.record.StoredResponse;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;

import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The Responses API: checks a request completely, loads the conversation its
 * {@code previous_response_id} names (one store read), renders the whole conversation with the
 * chat template, admits the generation, and stores the finished turn. Reads, deletes and input
 * item listings go straight to the store, scoped to the caller's API key.
 */
@ApplicationScoped
public class ResponsesService {

    static final int METADATA_KEY_MAX = 64;
    static final int METADATA_VALUE_MAX = 512;
    static final int CLIENT_METADATA_KEYS_MAX = 16;
    static final int CLIENT_METADATA_KEY_MAX = 64;
    static final int CLIENT_METADATA_VALUE_MAX = 8192;

    @Inject
    GenerationModelHost host;

    @Inject
    CompletionService completions;

    @Inject
    Conversations conversations;

    @Inject
    OrtserveConfig config;

    @Inject
    ObjectMapper mapper;

    @Inject
    ChatTurns chatTurns;

    @Inject
    BackgroundRuns background;

    @Inject
    ResponseCompaction compaction;

    /** Checks the request, loads its conversation and admits its generation; fails before any model work on bad input. */
    public Uni<ResponseRun> start(CreateResponseRequest req, String owner) {
        return start(req, owner, null);
    }

    /**
     * As {@link #start(CreateResponseRequest, String)}, with turns the caller holds itself (a
     * WebSocket connection's unstored responses): {@code local} is asked for the chain that ends
     * at {@code previous_response_id} first, the store only when it has none.
     */
    public Uni<ResponseRun> start(CreateResponseRequest req, String owner, ConnectionTurns local) {
        return start(req, owner, local, true);
    }

    /**
     * As above; {@code generate} false (the WebSocket warm-up, {@code generate: false}): the request
     * is checked and its prompt prefilled (one token generated and dropped, so the prefix cache holds
     * the prompt for the next request), and the response completes with no output.
     */
    public Uni<ResponseRun> start(CreateResponseRequest req, String owner, ConnectionTurns local, boolean generate) {
        host.requireModel(req.getModel());
        checkRequest(req);
        return host.using(req.getModel(), req.getKeepAlive(), served -> start(served, req, owner, local, generate));
    }

    private Uni<ResponseRun> start(ServedModel served, CreateResponseRequest req, String owner, ConnectionTurns local, boolean generate) {
        String previous = req.getPreviousResponseId();
        if (previous == null) return admitted(served, () -> admit(served, req, owner, null, generate));
        Conversation held = local == null ? null : local.get(previous);
        if (held != null) return admitted(served, () -> admit(served, req, owner, held, generate).continuing(held));
        return conversations.chain(previous, owner).flatMap(conversation -> {
            if (conversation == null) {
                throw new NotFoundException("Previous response with id '" + previous + "' not found.", "previous_response_id",
                        "previous_response_not_found");
            }
            return admitted(served, () -> admit(served, req, owner, conversation, generate).continuing(conversation));
        });
    }

    /** A model that reads images admits on a worker thread (a turn's images are read, decoded and encoded as it starts). */
    private static Uni<ResponseRun> admitted(ServedModel served, java.util.function.Supplier<ResponseRun> admit) {
        return served.takesImages() ? dev.ortserve.service.worker.OffIoThread.run(admit) : Uni.createFrom().item(admit);
    }

    private void checkRequest(CreateResponseRequest req) {
        if (req.getInput() == null) {
            throw new InvalidRequestException("input", "'input' is required: a string or an array of input items.");
        }
        if (Boolean.TRUE.equals(req.getBackground()) && Boolean.FALSE.equals(req.getStore())) {
            throw new InvalidRequestException("background", "A background response is stored so that it can be read later: 'background': true needs 'store' true (or unset).");
        }
        if (req.getText() != null && req.getText().getVerbosity() != null) {
            throw new UnsupportedParameterException("text.verbosity", "'text.verbosity' is not supported by this server.");
        }
        if (req.getMetadata() != null) {
            for (Map.Entry<String, String> e : req.getMetadata().entrySet()) {
                if (e.getKey().length() > METADATA_KEY_MAX) {
                    throw new InvalidRequestException("metadata", "Metadata keys can be at most " + METADATA_KEY_MAX
                            + " characters long; got a key of " + e.getKey().length() + ".");
                }
                if (e.getValue() != null && e.getValue().length() > METADATA_VALUE_MAX) {
                    throw new InvalidRequestException("metadata." + e.getKey(), "Metadata values can be at most " + METADATA_VALUE_MAX
                            + " characters long; got " + e.getValue().length() + ".");
                }
            }
        }
        checkClientMetadata(req.getClientMetadata());
        if (req.getConversation() != null) {
            throw new UnsupportedParameterException("conversation", "'conversation' is not supported: this server does not serve the "
                    + "Conversations API. Continue a conversation with 'previous_response_id'.");
        }
        if (req.getPrompt() != null) {
            throw new UnsupportedParameterException("prompt", "'prompt' (a stored prompt template) is not supported by this server: send "
                    + "'instructions' and 'input' instead.");
        }
        if (req.getContextManagement() != null) {
            throw new UnsupportedParameterException("context_management", "'context_management' (server-side compaction) is not supported "
                    + "by this server: compact with POST /v1/responses/compact and send its item as input.");
        }
        // hosted tools, malformed custom formats and duplicate names are refused here, before any model work
        boolean hasTools = !ResponseTools.of(req.getTools()).isEmpty();
        ToolChoice choice = req.getToolChoice();
        if (!hasTools && choice != null && (choice.mode() == ToolChoice.Mode.REQUIRED || choice.mode() == ToolChoice.Mode.FUNCTION)) {
            throw new InvalidRequestException("tool_choice", "A forced 'tool_choice' needs 'tools'.");
        }
    }

    /** client_metadata: a small map of strings about the client, stored with the response, never rendered for the model. */
    static void checkClientMetadata(Map<String, String> metadata) {
        if (metadata == null) return;
        if (metadata.size() > CLIENT_METADATA_KEYS_MAX) {
            throw new InvalidRequestException("client_metadata", "'client_metadata' can have at most " + CLIENT_METADATA_KEYS_MAX
                    + " keys; got " + metadata.size() + ".");
        }
        for (Map.Entry<String, String> e : metadata.entrySet()) {
            if (e.getKey().length() > CLIENT_METADATA_KEY_MAX) {
                throw new InvalidRequestException("client_metadata", "'client_metadata' keys can be at most " + CLIENT_METADATA_KEY_MAX
                        + " characters long; got a key of " + e.getKey().length() + ".");
            }
            if (e.getValue() == null) {
                throw new InvalidRequestException("client_metadata." + e.getKey(), "'client_metadata' values must be strings; '"
                        + e.getKey() + "' is null.");
            }
            if (e.getValue().length() > CLIENT_METADATA_VALUE_MAX) {
                throw new InvalidRequestException("client_metadata." + e.getKey(), "'client_metadata' values can be at most "
                        + CLIENT_METADATA_VALUE_MAX + " characters long; got " + e.getValue().length() + ".");
            }
        }
    }

    private ResponseRun admit(ServedModel served, CreateResponseRequest req, String owner, Conversation conversation, boolean generate) {
        List<StoredResponse> chain = conversation == null ? List.of() : conversation.chain();
        ResponseItems items = new ResponseItems(mapper);
        Map<String, JsonNode> known = new HashMap<>();
        List<List<JsonNode>> turns = new ArrayList<>();
        for (StoredResponse turn : chain) {
            List<JsonNode> turnItems = new ArrayList<>();
            turn.input().forEach(turnItems::add);
            turn.response().path("output").forEach(turnItems::add);
            turnItems.forEach(i -> known.putIfAbsent(i.path("id").asText(), i));
            turns.add(turnItems);
        }
        java.util.Set<String> earlierCalls = new java.util.HashSet<>();
        turns.forEach(t -> earlierCalls.addAll(ResponseItems.callIds(t)));
        List<ObjectNode> input = items.normalize(req.getInput(), known::get, compaction.opener(owner), earlierCalls::contains);
        ArrayNode inputArray = mapper.createArrayNode();
        input.forEach(inputArray::add);

        String previous = req.getPreviousResponseId();
        String id = previous == null ? ResponseIds.newConversation() : ResponseIds.continuing(previous);
        boolean storeIt = !Boolean.FALSE.equals(req.getStore());
        long createdAt = Instant.now().getEpochSecond();
        if (storeIt) {
            // sized with the request's sampling values (the defaults differ by a few bytes at most; put() enforces the exact cap)
            checkFitsStore(new ResponseDraft(mapper, id, createdAt, served.id(), req, true, new ResponseDraft.Sampling(
                    number(req.getTemperature(), 1.0), number(req.getTopP(), 1.0), number(req.getPresencePenalty(), 0), number(req.getFrequencyPenalty(), 0)),
                    false), owner, inputArray, conversation);
        }

        ResponseTools requestTools = ResponseTools.of(req.getTools());
        boolean hasTools = !requestTools.isEmpty();
        List<Map<String, Object>> tools = hasTools ? requestTools.templateTools() : null;
        Map<String, Map<String, Object>> schemas = requestTools.schemas();
        ToolChoice.Mode choice = req.getToolChoice() == null ? ToolChoice.Mode.AUTO : req.getToolChoice().mode();
        String forced = choice == ToolChoice.Mode.FUNCTION ? forcedName(requestTools, schemas, req.getToolChoice().functionName()) : null;
        if (hasTools && (choice == ToolChoice.Mode.REQUIRED || choice == ToolChoice.Mode.FUNCTION)) requestTools.checkForcedCall(forced);
        // the images the prompt may show: the conversation's, then this input's
        List<ImageInput> images = new ArrayList<>();
        turns.forEach(t -> images.addAll(ResponseItems.images(t, "previous_response_id")));
        images.addAll(ResponseItems.images(input, "input"));
        ChatTurn turn = chatTurns.prepare(served, new ChatTurnRequest(tools, schemas, toolChoice(choice), forced, format(req), images));
        OutputParsers parsers = turn.parsers();

        ChatTurns.ExpandedPrompt prompt = render(served, req, items, turns, input, tools);
        boolean logprobs = req.getInclude() != null && req.getInclude().contains(Includable.MESSAGE_OUTPUT_TEXT_LOGPROBS);
        Integer topLogprobs = logprobs ? (req.getTopLogprobs() == null ? 0 : req.getTopLogprobs()) : null;
        if (req.getTopLogprobs() != null && !logprobs) {
            throw new InvalidRequestException("top_logprobs", "'top_logprobs' needs 'include': ['message.output_text.logprobs'].");
        }
        StartedTurn started = chatTurns.start(turn, prompt, SamplingRequest.builder().temperature(req.getTemperature()).topP(req.getTopP())
                .frequencyPenalty(req.getFrequencyPenalty()).presencePenalty(req.getPresencePenalty())
                .maxTokens(generate ? req.getMaxOutputTokens() : Integer.valueOf(1), "max_output_tokens").topLogprobs(topLogprobs), 1, "input");
        CompletionCall call = started.call();
        CompletionCall.Reported sampling = call.reported();
        ResponseDraft draft = new ResponseDraft(mapper, id, createdAt, served.id(), req, storeIt, new ResponseDraft.Sampling(
                sampling.temperature(), sampling.topP(), sampling.presencePenalty(), sampling.frequencyPenalty()), logprobs);
        draft.tools(requestTools);
        if (req.getInclude() != null && req.getInclude().contains(Includable.REASONING_ENCRYPTED_CONTENT)) {
            draft.sealReasoning(compaction.reasoningSealer(owner));
        }
        // admission is the last step: a request refused above never reaches the engine
        var events = completions.stream(served, call);
        ResponseRun run = new ResponseRun(draft, events, parsers, mapper, conversations, owner, inputArray, served::countTokens, started.prompt().tokenIds().length);
        return generate ? run : run.warmUp();
    }

    private static double number(java.math.BigDecimal value, double unset) {
        return value == null ? unset : value.doubleValue();
    }

    /** The structured output format 'text.format' asks for; null for free text. */
    private static ChatTurnRequest.OutputFormat format(CreateResponseRequest req) {
        if (req.getText() == null || req.getText().getFormat() == null || req.getText().getFormat() instanceof ResponseFormatText) return null;
        if (req.getText().getFormat() instanceof ResponseTextFormatJsonSchema js) {
            return ChatTurnRequest.OutputFormat.jsonSchema("text.format", js.getSchema(), "text.format.schema");
        }
        return ChatTurnRequest.OutputFormat.jsonObject("text.format");
    }

    private static ChatTurnRequest.ToolChoice toolChoice(ToolChoice.Mode mode) {
        return switch (mode) {
            case NONE -> ChatTurnRequest.ToolChoice.NONE;
            case AUTO -> ChatTurnRequest.ToolChoice.AUTO;
            case REQUIRED -> ChatTurnRequest.ToolChoice.REQUIRED;
            case FUNCTION -> ChatTurnRequest.ToolChoice.FUNCTION;
        };
    }

    /** Refuses, before generation, a turn that could not be stored within the caps even with an empty output. */
    private void checkFitsStore(ResponseDraft draft, String owner, ArrayNode input, Conversation conversation) {
        ObjectNode skeleton = draft.response("completed", List.of(), draft.usage(0, 0, 0, 0), null, null);
        conversations.checkFits(new StoredResponse(draft.id, draft.request.getPreviousResponseId(), owner, skeleton, input), conversation);
    }

    /**
     * The prompt for instructions + earlier turns + this input, with the images it shows expanded to their tokens (the
     * length the model reads). With truncation 'auto' the oldest turns are dropped until the prompt leaves room to
     * generate (an image counted as its tokens, not as its placeholder); otherwise a prompt that does not fit is a 400.
     */
    private ChatTurns.ExpandedPrompt render(ServedModel served, CreateResponseRequest req, ResponseItems items, List<List<JsonNode>> turns,
                                             List<ObjectNode> input, List<Map<String, Object>> tools) {
        boolean auto = req.getTruncation() == CreateResponseRequest.TruncationEnum.AUTO;
        int context = served.contextLength();
        int reserve = req.getMaxOutputTokens() == null ? 1 : req.getMaxOutputTokens();
        VisionInput.Prepared prepared = served.takesImages() ? served.vision().prepared() : null;
        for (int skip = 0; ; skip++) {
            List<JsonNode> all = new ArrayList<>();
            for (int t = skip; t < turns.size(); t++) all.addAll(turns.get(t));
            all.addAll(input);
            List<Map<String, Object>> messages = new ArrayList<>();
            if (req.getInstructions() != null) {
                Map<String, Object> system = new LinkedHashMap<>();
                system.put("role", "system");
                system.put("content", req.getInstructions());
                messages.add(system);
            }
            messages.addAll(items.templateMessages(all));
            ChatPromptRenderer.Prompt prompt;
            try {
                prompt = served.chatPrompts().render(messages, tools, true, null);
            } catch (InvalidRequestException e) {
                if (!"messages".equals(e.param())) throw e;
                throw e.withParam("input");
            }
            // the images the prompt shows: the kept turns', then this input's (truncation drops the others with their turns)
            List<ImageInput> images = new ArrayList<>();
            for (int t = skip; t < turns.size(); t++) images.addAll(ResponseItems.images(turns.get(t), "previous_response_id"));
            images.addAll(ResponseItems.images(input, "input"));
            ChatTurns.ExpandedPrompt expanded = chatTurns.expand(served, prompt, images, prepared, "input");
            int length = expanded.prompt().tokenIds().length;
            if (length + reserve <= context || !auto || skip >= turns.size()) {
                SamplingRequest.checkPromptFits(length, context, "input");
                return expanded;
            }
        }
    }

    /** The template name a named tool_choice forces: the name itself, or the one namespaced function of that name. */
    private static String forcedName(ResponseTools tools, Map<String, Map<String, Object>> schemas, String name) {
        if (name == null || schemas.containsKey(name)) return name;
        String found = null;
        for (String templateName : schemas.keySet()) {
            if (templateName.endsWith("." + name)) {
                if (found != null) return name; // ambiguous: refused by the grammar as not in 'tools'
                found = templateName;
            }
        }
        return found == null ? name : found;
    }

    // ------------------------------------------------------------------ reads

    /** The stored response object (a running background response with its current status), or a 404. */
    public Uni<JsonNode> get(String id, String owner) {
        return found(id, owner).flatMap(r -> background.settle(r, "failed").onFailure().transform(StoreFailures::of))
                .map(StoredResponse::response);
    }

    /** Starts an admitted background run on this replica: the queued response object, at once. */
    public Uni<ObjectNode> startBackground(ResponseRun run) {
        return background.start(run);
    }

    /** A background response's events after {@code startingAfter}, then the live ones to the terminal event. */
    public Uni<Multi<List<ResponseEvent>>> follow(String id, String owner, long startingAfter) {
        return found(id, owner).map(r -> {
            if (!r.response().path("background").asBoolean()) {
                throw new InvalidRequestException("stream", "Only background responses can be streamed after they were created; response '" + id
                        + "' was not created with 'background': true.");
            }
            return background.follow(r, startingAfter);
        });
    }

    public Uni<ObjectNode> delete(String id, String owner) {
        return conversations.delete(id, owner).map(deleted -> {
            if (!deleted) throw notFound(id);
            return mapper.createObjectNode().put("id", id).put("object", "response.deleted").put("deleted", true);
        });
    }

    /** A page of the input items of a stored response, OpenAI's list object. */
    public Uni<ObjectNode> inputItems(String id, String owner, Integer limit, String order, String after, String before) {
        int pageSize = limit == null ? 20 : limit;
        boolean ascending = "asc".equals(order);
        return found(id, owner).map(r -> {
            List<JsonNode> all = new ArrayList<>();
            r.input().forEach(all::add);
            if (!ascending) java.util.Collections.reverse(all);
            int from = 0;
            int to = all.size();
            if (after != null) from = indexOf(all, after, "after") + 1;
            if (before != null) to = indexOf(all, before, "before");
            List<JsonNode> window = from >= to ? List.of() : all.subList(from, to);
            List<JsonNode> page = window.subList(0, Math.min(pageSize, window.size()));
            ObjectNode list = mapper.createObjectNode().put("object", "list");
            ArrayNode data = list.putArray("data");
            page.forEach(data::add);
            list.put("first_id", page.isEmpty() ? null : page.get(0).path("id").asText());
            list.put("last_id", page.isEmpty() ? null : page.get(page.size() - 1).path("id").asText());
            list.put("has_more", window.size() > page.size());
            return list;
        });
    }

    private static int indexOf(List<JsonNode> items, String id, String param) {
        for (int i = 0; i < items.size(); i++) {
            if (items.get(i).path("id").asText().equals(id)) return i;
        }
        throw new InvalidRequestException(param, "'" + param + "' names no input item of this response: '" + id + "'.");
    }

    /** Cancels a background response (400 for another response, 404 when unknown); one that has ended is returned as it is. */
    public Uni<JsonNode> cancel(String id, String owner) {
        return found(id, owner).flatMap(r -> {
            if (!r.response().path("background").asBoolean()) {
                throw new InvalidRequestException(null, "Only responses created with 'background': true can be cancelled; response '" + id
                        + "' was not.");
            }
            return background.cancel(r).onFailure().transform(StoreFailures::of);
        }).map(StoredResponse::response);
    }

    private Uni<StoredResponse> found(String id, String owner) {
        return conversations.get(id, owner).map(r -> {
            if (r == null) throw notFound(id);
            return r;
        });
    }

    private static NotFoundException notFound(String id) {
        return new NotFoundException("Response with id '" + id + "' not found.", "response_id", "response_not_found");
    }

}
