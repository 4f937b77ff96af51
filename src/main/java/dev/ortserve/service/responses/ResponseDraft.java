package dev.ortserve.service.responses;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.ortserve.api.model.CreateResponseRequest;
import dev.ortserve.api.union.ToolChoice;
import dev.ortserve.engine.TokenLogprob;
import dev.ortserve.parse.ChatOutput;
import dev.ortserve.parse.ToolCallParser;
import dev.ortserve.store.ResponseIds;

import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;

/**
 * One response being produced: its id, the request fields it echoes, and the ids of its output
 * items, assigned once so that stream events, the final response and every later read agree.
 * Output order: reasoning, then the message, then function calls.
 */
final class ResponseDraft {

    final String id;
    final long createdAt;
    final String model;
    final CreateResponseRequest request;
    final boolean store;
    final boolean background;
    final double temperature;
    final double topP;
    final double presencePenalty;
    final double frequencyPenalty;
    final boolean withLogprobs;
    private final ObjectMapper mapper;
    private String reasoningId;
    private String messageId;
    private final List<String[]> callIds = new ArrayList<>();

    /** The sampling values the response reports: what the engine used, defaults included. */
    record Sampling(double temperature, double topP, double presencePenalty, double frequencyPenalty) {
    }

    ResponseDraft(ObjectMapper mapper, String id, long createdAt, String model, CreateResponseRequest request, boolean store,
                  Sampling sampling, boolean withLogprobs) {
        this.mapper = mapper;
        this.id = id;
        this.createdAt = createdAt;
        this.model = model;
        this.request = request;
        this.store = store;
        this.background = Boolean.TRUE.equals(request.getBackground());
        this.temperature = sampling.temperature();
        this.topP = sampling.topP();
        this.presencePenalty = sampling.presencePenalty();
        this.frequencyPenalty = sampling.frequencyPenalty();
        this.withLogprobs = withLogprobs;
    }

    /** The response this one continues, or null. */
    String previousResponseId() {
        return request.getPreviousResponseId();
    }

    /** False when the request asked for one call at most ('parallel_tool_calls': false). */
    boolean parallelToolCalls() {
        return !Boolean.FALSE.equals(request.getParallelToolCalls());
    }

    String reasoningId() {
        if (reasoningId == null) reasoningId = ResponseIds.item("rs");
        return reasoningId;
    }

    String messageId() {
        if (messageId == null) messageId = ResponseIds.item("msg");
        return messageId;
    }

    /** {fc item id, call id} of the k-th function call. */
    String[] callIds(int k) {
        while (callIds.size() <= k) callIds.add(new String[] {ResponseIds.item("fc"), ResponseIds.item("call")});
        return callIds.get(k);
    }

    /** The calls this response reports: all of them, the first only when parallel_tool_calls is false, at most max_tool_calls. */
    List<ToolCallParser.ToolCall> calls(ChatOutput out) {
        List<ToolCallParser.ToolCall> calls = out.calls();
        int max = calls.size();
        if (Boolean.FALSE.equals(request.getParallelToolCalls())) max = Math.min(max, 1);
        if (request.getMaxToolCalls() != null) max = Math.min(max, request.getMaxToolCalls());
        return calls.subList(0, max);
    }

    static boolean hasMessage(ChatOutput out, List<ToolCallParser.ToolCall> calls) {
        return (out.content() != null && !out.content().isEmpty()) || calls.isEmpty();
    }

    /** The output items of a finished generation. */
    List<ObjectNode> items(ChatOutput out, boolean incomplete, List<TokenLogprob> logprobs) {
        String status = incomplete ? "incomplete" : "completed";
        List<ObjectNode> items = new ArrayList<>();
        if (out.reasoning() != null && !out.reasoning().isEmpty()) {
            items.add(reasoningItem(out.reasoning(), incomplete && out.content() == null ? "incomplete" : "completed"));
        }
        List<ToolCallParser.ToolCall> calls = calls(out);
        if (hasMessage(out, calls)) items.add(messageItem(status, List.of(outputText(out.content() == null ? "" : out.content(), logprobs))));
        for (int k = 0; k < calls.size(); k++) items.add(callItem(k, calls.get(k).name(), calls.get(k).arguments(), "completed"));
        return items;
    }

    ObjectNode reasoningItem(String text, String status) {
        ObjectNode item = mapper.createObjectNode().put("type", "reasoning").put("id", reasoningId());
        item.putArray("summary");
        ArrayNode content = item.putArray("content");
        if (text != null) content.addObject().put("type", "reasoning_text").put("text", text);
        item.put("status", status);
        return item;
    }

    ObjectNode messageItem(String status, List<ObjectNode> parts) {
        ObjectNode item = mapper.createObjectNode().put("type", "message").put("id", messageId()).put("role", "assistant").put("status", status);
        ArrayNode content = item.putArray("content");
        parts.forEach(content::add);
        return item;
    }

    ObjectNode outputText(String text, List<TokenLogprob> logprobs) {
        ObjectNode part = mapper.createObjectNode().put("type", "output_text").put("text", text);
        part.putArray("annotations");
        // always present (SDKs require it); filled only when the request included logprobs
        part.set("logprobs", withLogprobs ? logprobs(logprobs) : mapper.createArrayNode());
        return part;
    }

    /** Token logprobs in the chat completions form (token, logprob, bytes, top_logprobs). */
    JsonNode logprobs(List<TokenLogprob> logprobs) {
        ArrayNode out = mapper.createArrayNode();
        if (logprobs == null) return out;
        for (TokenLogprob lp : logprobs) {
            ObjectNode token = tokenLogprob(out.addObject(), lp.token(), lp.logprob());
            ArrayNode top = token.putArray("top_logprobs");
            for (TokenLogprob.Top t : lp.top()) tokenLogprob(top.addObject(), t.token(), t.logprob());
        }
        return out;
    }

    private static ObjectNode tokenLogprob(ObjectNode node, String token, float logprob) {
        // -inf (a token masked out) is not JSON: reported as vLLM does
        node.put("token", token).put("logprob", BigDecimal.valueOf(Float.isFinite(logprob) ? logprob : -9999.0f));
        ArrayNode bytes = node.putArray("bytes");
        for (byte b : token.getBytes(StandardCharsets.UTF_8)) bytes.add(b & 0xFF);
        return node;
    }

    ObjectNode callItem(int k, String name, String arguments, String status) {
        String[] ids = callIds(k);
        return mapper.createObjectNode().put("type", "function_call").put("id", ids[0]).put("call_id", ids[1])
                .put("name", name).put("arguments", arguments).put("status", status);
    }

    static boolean terminal(String status) {
        return switch (status) {
            case "completed", "incomplete", "failed", "cancelled" -> true;
            default -> false;
        };
    }

    /**
     * The response object: every field of the 2026 object (OpenAI's and Open Responses'), nulls
     * included, so strict client schemas find what they require; completed_at is set for a final status.
     */
    ObjectNode response(String status, List<ObjectNode> output, ObjectNode usage, String incompleteReason, ObjectNode error) {
        ObjectNode r = mapper.createObjectNode();
        r.put("id", id).put("object", "response").put("created_at", createdAt);
        if (terminal(status)) r.put("completed_at", Instant.now().getEpochSecond());
        else r.putNull("completed_at");
        r.put("status", status).put("background", background);
        r.set("error", error == null ? mapper.nullNode() : error);
        if (incompleteReason == null) r.putNull("incomplete_details");
        else r.putObject("incomplete_details").put("reason", incompleteReason);
        r.put("instructions", request.getInstructions());
        if (request.getMaxOutputTokens() == null) r.putNull("max_output_tokens");
        else r.put("max_output_tokens", request.getMaxOutputTokens());
        r.put("model", model);
        ArrayNode items = r.putArray("output");
        output.forEach(items::add);
        r.put("parallel_tool_calls", !Boolean.FALSE.equals(request.getParallelToolCalls()));
        r.put("previous_response_id", request.getPreviousResponseId());
        r.set("reasoning", request.getReasoning() == null ? mapper.nullNode() : mapper.valueToTree(request.getReasoning()));
        r.put("store", store);
        r.put("temperature", temperature);
        if (request.getText() == null) r.putObject("text").putObject("format").put("type", "text");
        else r.set("text", mapper.valueToTree(request.getText()));
        r.set("tool_choice", mapper.valueToTree(request.getToolChoice() == null ? ToolChoice.of(ToolChoice.Mode.AUTO) : request.getToolChoice()));
        r.set("tools", mapper.valueToTree(request.getTools() == null ? List.of() : request.getTools()));
        r.put("top_p", topP);
        r.put("top_logprobs", request.getTopLogprobs() == null ? 0 : request.getTopLogprobs());
        r.put("presence_penalty", presencePenalty);
        r.put("frequency_penalty", frequencyPenalty);
        if (request.getMaxToolCalls() == null) r.putNull("max_tool_calls");
        else r.put("max_tool_calls", request.getMaxToolCalls());
        r.put("truncation", request.getTruncation() == null ? "disabled" : request.getTruncation().toString());
        r.set("usage", usage == null ? mapper.nullNode() : usage);
        r.put("user", request.getUser());
        r.set("metadata", mapper.valueToTree(request.getMetadata() == null ? java.util.Map.of() : request.getMetadata()));
        r.put("service_tier", request.getServiceTier() == null ? null : request.getServiceTier().toString());
        r.put("safety_identifier", request.getSafetyIdentifier());
        r.put("prompt_cache_key", request.getPromptCacheKey());
        r.put("prompt_cache_retention", request.getPromptCacheRetention() == null ? null : request.getPromptCacheRetention().toString());
        r.putNull("conversation");
        r.putNull("prompt");
        r.putNull("access_programs");
        return r;
    }

    /** @param cached input tokens whose KV came from the prefix cache */
    ObjectNode usage(int input, int cached, int output, int reasoning) {
        ObjectNode u = mapper.createObjectNode().put("input_tokens", input).put("output_tokens", output).put("total_tokens", input + output);
        u.putObject("input_tokens_details").put("cached_tokens", cached).put("cache_write_tokens", 0);
        u.putObject("output_tokens_details").put("reasoning_tokens", reasoning);
        return u;
    }
}
