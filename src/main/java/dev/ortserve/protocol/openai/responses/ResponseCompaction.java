package dev.ortserve.protocol.openai.responses;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.ortserve.service.error.InvalidRequestException;
import dev.ortserve.service.error.NotFoundException;
import dev.ortserve.wire.model.CompactResponseRequest;
import dev.ortserve.config.OrtserveConfig;
import dev.ortserve.service.responses.CompactionSeal;
import dev.ortserve.service.GenerationModelHost;
import dev.ortserve.service.ServedModel;
import dev.ortserve.service.generation.CompletionCall;
import dev.ortserve.service.generation.CompletionService;
import dev.ortserve.parse.ChatOutput;
import dev.ortserve.service.prompt.ChatPromptRenderer;
import dev.ortserve.store.record.ResponseIds;
import dev.ortserve.service.responses.Conversations;
import dev.ortserve.store.record.StoredResponse;
import io.smallrye.mutiny.Uni;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;

import java.io.IOException;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * {@code POST /v1/responses/compact}: the conversation (a stored chain and/or this input) is cut
 * before its last {@code compaction-keep-turns} user turns; the served model summarizes what comes
 * before; the summary and the kept items travel in one sealed {@code compaction} item. Sent back as
 * input, that item opens into a system message with the summary followed by the kept items.
 */
@ApplicationScoped
public class ResponseCompaction {

    static final String SUMMARY_PREFIX = "Summary of the earlier conversation:\n";
    static final String SUMMARY_REQUEST = "Summarize the conversation so far in a few sentences. Keep every name, number, decision and "
            + "open question needed to continue it. Answer with the summary only.";

    @Inject
    GenerationModelHost host;

    @Inject
    CompletionService completions;

    @Inject
    Conversations conversations;

    @Inject
    CompactionSeal seal;

    @Inject
    OrtserveConfig config;

    @Inject
    ObjectMapper mapper;

    /** Opens compaction items sent as input by this owner; a tampered or foreign item is a 400 on {@code param}. */
    ResponseItems.Compactions opener(String owner) {
        return new ResponseItems.Compactions() {
            @Override
            public List<ObjectNode> open(String encrypted, String param) {
                return openCompaction(owner, encrypted, param);
            }

            @Override
            public String openReasoning(String encrypted, String param) {
                try {
                    return seal.openReasoning(encrypted, owner);
                } catch (CompactionSeal.Unreadable e) {
                    throw new InvalidRequestException(param, "This reasoning item's encrypted_content cannot be used: " + e.getMessage()
                            + ". Send it exactly as this server returned it, with the same API key.", "invalid_encrypted_content");
                }
            }
        };
    }

    /** The items a reasoning item's text is sealed for: what {@code include: ["reasoning.encrypted_content"]} puts on reasoning items. */
    java.util.function.UnaryOperator<String> reasoningSealer(String owner) {
        return text -> seal.sealReasoning(text, owner);
    }

    private List<ObjectNode> openCompaction(String owner, String encrypted, String param) {
        {
            String plain;
            try {
                plain = seal.open(encrypted, owner);
            } catch (CompactionSeal.Unreadable e) {
                throw new InvalidRequestException(param, "This compaction item cannot be used: " + e.getMessage()
                        + ". Send the item exactly as /v1/responses/compact returned it, with the same API key.", "invalid_encrypted_content");
            }
            try {
                JsonNode payload = mapper.readTree(plain);
                List<ObjectNode> items = new ArrayList<>();
                String summary = payload.path("summary").asText("");
                if (!summary.isEmpty()) items.add(summaryMessage(summary));
                for (JsonNode i : payload.path("items")) {
                    ObjectNode item = ((ObjectNode) i).deepCopy();
                    // as input, an assistant message has the form an input message gets: parts without logprobs
                    if (item.path("type").asText().equals("message")) item.path("content").forEach(part -> ((ObjectNode) part).remove("logprobs"));
                    items.add(item);
                }
                return items;
            } catch (IOException e) {
                throw new IllegalStateException("a sealed compaction payload is not JSON", e);
            }
        }
    }

    private ObjectNode summaryMessage(String summary) {
        ObjectNode m = mapper.createObjectNode().put("type", "message").put("id", ResponseIds.item("msg")).put("role", "system");
        m.putArray("content").addObject().put("type", "input_text").put("text", SUMMARY_PREFIX + summary);
        return m;
    }

    public Uni<ObjectNode> compact(CompactResponseRequest req, String owner) {
        host.requireModel(req.getModel());
        if (req.getInput() == null && req.getPreviousResponseId() == null) {
            throw new InvalidRequestException("input", "Nothing to compact: send 'input', 'previous_response_id' or both.");
        }
        String previous = req.getPreviousResponseId();
        Uni<List<JsonNode>> earlier = previous == null ? Uni.createFrom().item(List.of())
                : conversations.chain(previous, owner).map(conversation -> {
                    if (conversation == null) {
                        throw new NotFoundException("Previous response with id '" + previous + "' not found.", "previous_response_id",
                                "previous_response_not_found");
                    }
                    List<JsonNode> all = new ArrayList<>();
                    for (StoredResponse turn : conversation.chain()) {
                        turn.input().forEach(all::add);
                        turn.response().path("output").forEach(all::add);
                    }
                    return all;
                });
        return earlier.flatMap(before -> {
            ResponseItems items = new ResponseItems(mapper);
            Map<String, JsonNode> known = new HashMap<>();
            before.forEach(i -> known.putIfAbsent(i.path("id").asText(), i));
            List<JsonNode> all = new ArrayList<>(before);
            if (req.getInput() != null) all.addAll(items.normalize(req.getInput(), known::get, opener(owner), ResponseItems.callIds(before)::contains));
            int cut = cut(all);
            List<JsonNode> older = all.subList(0, cut);
            List<JsonNode> kept = all.subList(cut, all.size());
            Uni<Summary> summary = older.isEmpty() ? Uni.createFrom().item(new Summary("", 0, 0))
                    : host.using(req.getModel(), served -> summarize(served, req, items, older));
            return summary.map(s -> response(s, kept, owner));
        });
    }

    /** Where the kept turns start: at the k-th last user message (0 when there are no more than k user turns). */
    private int cut(List<JsonNode> items) {
        int keep = Math.max(0, config.compactionKeepTurns());
        int seen = 0;
        for (int i = items.size() - 1; i >= 0; i--) {
            JsonNode item = items.get(i);
            if (item.path("type").asText("message").equals("message") && item.path("role").asText().equals("user")) {
                seen++;
                if (seen == keep) return i;
            }
        }
        return keep == 0 ? items.size() : 0;
    }

    private record Summary(String text, int promptTokens, int outputTokens) {
    }

    private Uni<Summary> summarize(ServedModel served, CompactResponseRequest req, ResponseItems items, List<JsonNode> older) {
        List<Map<String, Object>> messages = new ArrayList<>();
        if (req.getInstructions() != null) messages.add(message("system", req.getInstructions()));
        messages.addAll(items.templateMessages(older));
        messages.add(message("user", SUMMARY_REQUEST));
        ChatPromptRenderer.Prompt prompt;
        try {
            prompt = served.chatPrompts().render(messages, null, true, null);
        } catch (InvalidRequestException e) {
            if (!"messages".equals(e.param())) throw e;
            throw e.withParam("input");
        }
        int context = served.contextLength();
        if (prompt.tokenIds().length >= context) {
            throw new InvalidRequestException("input", "The turns to summarize take " + prompt.tokenIds().length + " tokens, more than this model's "
                    + context + "-token context: compact earlier, or keep fewer turns.", "context_length_exceeded");
        }
        int max = Math.min(config.compactionSummaryMaxTokens(), context - prompt.tokenIds().length);
        CompletionCall call = CompletionCall.greedy(new CompletionCall.Prompt(prompt.tokenIds(), prompt.text()), max);
        return completions.complete(served, call).map(results -> {
            var result = results.get(0);
            // the summary is the answer, not the model's thinking
            ChatOutput out = ChatOutput.of(result.text(), served.reasoningParser(), null, Map.of());
            String text = out.content() == null ? "" : out.content().strip();
            return new Summary(text, prompt.tokenIds().length, result.tokenIds().size());
        });
    }

    private static Map<String, Object> message(String role, String content) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("role", role);
        m.put("content", content);
        return m;
    }

    private ObjectNode response(Summary summary, List<JsonNode> kept, String owner) {
        ObjectNode payload = mapper.createObjectNode().put("v", 1).put("summary", summary.text());
        ArrayNode keptItems = payload.putArray("items");
        kept.forEach(keptItems::add);
        ObjectNode r = mapper.createObjectNode().put("id", ResponseIds.item("cmpr")).put("object", "response.compaction")
                .put("created_at", Instant.now().getEpochSecond());
        r.putArray("output").addObject().put("type", "compaction").put("id", ResponseIds.item("cmp"))
                .put("encrypted_content", seal.seal(payload.toString(), owner));
        ObjectNode usage = r.putObject("usage").put("input_tokens", summary.promptTokens()).put("output_tokens", summary.outputTokens())
                .put("total_tokens", summary.promptTokens() + summary.outputTokens());
        usage.putObject("input_tokens_details").put("cached_tokens", 0).put("cache_write_tokens", 0);
        usage.putObject("output_tokens_details").put("reasoning_tokens", 0);
        return r;
    }
}
