package dev.ortserve.protocol.openai.responses;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.ortserve.wire.model.CreateResponseRequest;
import dev.ortserve.wire.union.ToolChoice;
import dev.ortserve.parse.ChatOutput;
import dev.ortserve.service.generation.Logprob;
import dev.ortserve.parse.ToolCallParser;
import dev.ortserve.service.responses.BackgroundRuns;
import dev.ortserve.store.record.ResponseIds;

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
    private ResponseTools tools = ResponseTools.NONE;
    private java.util.function.UnaryOperator<String> reasoningSealer;

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

    /** The request's tools, to map the model's calls back to function, namespaced function and custom tool calls. */
    void tools(ResponseTools tools) {
        this.tools = tools;
    }

    /** include reasoning.encrypted_content: finished reasoning items carry their text sealed (to be given back as input). */
    void sealReasoning(java.util.function.UnaryOperator<String> sealer) {
        this.reasoningSealer = sealer;
    }

    /** True when the template function {@code templateName} stands for a custom tool. */
    boolean customTool(String templateName) {
        ResponseTools.Tool tool = tools.called(templateName);
        return tool != null && tool.custom();
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
    List<ObjectNode> items(ChatOutput out, boolean incomplete, List<Logprob> logprobs) {
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
        if (text != null && reasoningSealer != null) item.put("encrypted_content", reasoningSealer.apply(text));
        item.put("status", status);
        return item;
    }

    ObjectNode messageItem(String status, List<ObjectNode> parts) {
        ObjectNode item = mapper.createObjectNode().put("type", "message").put("id", messageId()).put("role", "assistant").put("status", status);
        ArrayNode content = item.putArray("content");
        parts.forEach(content::add);
        return item;
    }

    ObjectNode outputText(String text, List<Logprob> logprobs) {
        ObjectNode part = mapper.createObjectNode().put("type", "output_text").put("text", text);
        part.putArray("annotations");
        // always present (SDKs require it); filled only when the request included logprobs
        part.set("logprobs", withLogprobs ? logprobs(logprobs) : mapper.createArrayNode());
        return part;
    }

    /** Token logprobs in the chat completions form (token, logprob, bytes, top_logprobs). */
    JsonNode logprobs(List<Logprob> logprobs) {
        ArrayNode out = mapper.createArrayNode();
        if (logprobs == null) return out;
        for (Logprob lp : logprobs) {
            ObjectNode token = tokenLogprob(out.addObject(), lp.token(), lp.logprob());
            ArrayNode top = token.putArray("top_logprobs");
            for (Logprob.Top t : lp.top()) tokenLogprob(top.addObject(), t.token(), t.logprob());
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

    /**
     * The output item of the k-th call to template function {@code name}: a {@code function_call}
     * (with its {@code namespace} for a namespaced function), or a {@code custom_tool_call} whose
     * {@code input} is the raw text the model wrote.
     */
    ObjectNode callItem(int k, String name, String arguments, String status) {
        String[] ids = callIds(k);
        ResponseTools.Tool tool = tools.called(name);
        if (tool != null && tool.custom()) {
            ObjectNode item = mapper.createObjectNode().put("type", "custom_tool_call").put("id", ids[0]).put("call_id", ids[1])
                    .put("name", tool.name()).put("input", customInput(arguments));
            item.put("status", status);
            return item;
        }
        ObjectNode item = mapper.createObjectNode().put("type", "function_call").put("id", ids[0]).put("call_id", ids[1])
                .put("name", tool == null ? name : tool.name());
        if (tool != null && tool.namespace() != null) item.put("namespace", tool.namespace());
        return item.put("arguments", arguments).put("status", status);
    }

    /** The own name of template function {@code name} (a namespaced function's name without its namespace). */
    String callName(String name) {
        ResponseTools.Tool tool = tools.called(name);
        return tool == null ? name : tool.name();
    }

    /** A custom tool's raw input: the 'input' string of the arguments the model wrote, or those arguments as they are. */
    String customInput(String arguments) {
        if (arguments == null || arguments.isEmpty()) return "";
        try {
            JsonNode args = mapper.readTree(arguments);
            if (args != null && args.path(ResponseTools.CUSTOM_INPUT).isTextual()) return args.get(ResponseTools.CUSTOM_INPUT).asText();
        } catch (Exception notJson) {
            // an unfinished or free-form call: its text is the input
        }
        return arguments;
    }

    static boolean terminal(String status) {
        return BackgroundRuns.terminal(status);
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
        r.set("reasoning", reasoningEcho());
        r.put("store", store);
        r.put("temperature", temperature);
        r.set("text", textEcho());
        r.set("tool_choice", mapper.valueToTree(request.getToolChoice() == null ? ToolChoice.of(ToolChoice.Mode.AUTO) : request.getToolChoice()));
        r.set("tools", toolsEcho());
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
        // a string always (OpenAI answers "default" when the request named none; Open Responses requires one)
        r.put("service_tier", request.getServiceTier() == null ? "default" : request.getServiceTier().toString());
        r.put("safety_identifier", request.getSafetyIdentifier());
        r.put("prompt_cache_key", request.getPromptCacheKey());
        r.put("prompt_cache_retention", request.getPromptCacheRetention() == null ? null : request.getPromptCacheRetention().toString());
        // stored with the response for whoever reads it back; never part of the prompt
        if (request.getClientMetadata() != null) r.set("client_metadata", mapper.valueToTree(request.getClientMetadata()));
        r.putNull("conversation");
        r.putNull("prompt");
        r.putNull("access_programs");
        return r;
    }

    /** reasoning as the request set it, both fields present (null where unset), or null. */
    private JsonNode reasoningEcho() {
        if (request.getReasoning() == null) return mapper.nullNode();
        ObjectNode out = mapper.createObjectNode();
        out.put("effort", request.getReasoning().getEffort() == null ? null : request.getReasoning().getEffort().toString());
        out.put("summary", request.getReasoning().getSummary() == null ? null : request.getReasoning().getSummary().toString());
        return out;
    }

    /** text: the format with every field of its type (a json_schema's description null and strict a boolean when unset). */
    private JsonNode textEcho() {
        ObjectNode text = mapper.createObjectNode();
        var config = request.getText();
        if (config == null || config.getFormat() == null) {
            text.putObject("format").put("type", "text");
        } else if (config.getFormat() instanceof dev.ortserve.wire.model.ResponseTextFormatJsonSchema js) {
            ObjectNode f = text.putObject("format").put("type", "json_schema").put("name", js.getName());
            f.put("description", js.getDescription());
            f.set("schema", mapper.valueToTree(js.getSchema()));
            f.put("strict", Boolean.TRUE.equals(js.getStrict()));
        } else {
            text.set("format", mapper.valueToTree(config.getFormat()));
        }
        if (config != null && config.getVerbosity() != null) text.put("verbosity", config.getVerbosity().toString());
        return text;
    }

    /** The request's tools as the response reports them: every field of a function tool present, strict a boolean. */
    private JsonNode toolsEcho() {
        ArrayNode out = mapper.createArrayNode();
        if (request.getTools() == null) return out;
        for (dev.ortserve.wire.union.ResponsesTool tool : request.getTools()) out.add(toolEcho(tool.value()));
        return out;
    }

    private ObjectNode toolEcho(Object tool) {
        if (tool instanceof dev.ortserve.wire.model.ResponsesFunctionTool f) {
            ObjectNode t = mapper.createObjectNode().put("type", "function").put("name", f.getName());
            t.put("description", f.getDescription());
            t.set("parameters", mapper.valueToTree(f.getParameters() == null ? java.util.Map.of("type", "object", "properties", java.util.Map.of())
                    : f.getParameters()));
            t.put("strict", Boolean.TRUE.equals(f.getStrict()));
            return t;
        }
        if (tool instanceof dev.ortserve.wire.model.ResponsesNamespaceTool ns) {
            ObjectNode t = mapper.createObjectNode().put("type", "namespace").put("name", ns.getName());
            t.put("description", ns.getDescription());
            ArrayNode inner = t.putArray("tools");
            ns.getTools().forEach(f -> inner.add(toolEcho(f)));
            return t;
        }
        if (tool instanceof dev.ortserve.wire.model.ResponsesCustomTool c) {
            ObjectNode t = mapper.createObjectNode().put("type", "custom").put("name", c.getName());
            t.put("description", c.getDescription());
            if (c.getFormat() == null) t.putObject("format").put("type", "text");
            else t.set("format", mapper.valueToTree(c.getFormat()));
            return t;
        }
        return mapper.valueToTree(tool);
    }

    /** @param cached input tokens whose KV came from the prefix cache */
    ObjectNode usage(int input, int cached, int output, int reasoning) {
        ObjectNode u = mapper.createObjectNode().put("input_tokens", input).put("output_tokens", output).put("total_tokens", input + output);
        u.putObject("input_tokens_details").put("cached_tokens", cached).put("cache_write_tokens", 0);
        u.putObject("output_tokens_details").put("reasoning_tokens", reasoning);
        return u;
    }
}
