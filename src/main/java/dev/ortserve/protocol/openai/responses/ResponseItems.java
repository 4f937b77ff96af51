package dev.ortserve.protocol.openai.responses;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.ortserve.service.ImageInput;
import dev.ortserve.service.error.InvalidRequestException;
import dev.ortserve.service.error.UnsupportedParameterException;
import dev.ortserve.wire.model.ResponseCompactionItem;
import dev.ortserve.wire.model.ResponseCustomToolCallItem;
import dev.ortserve.wire.model.ResponseCustomToolCallOutputItem;
import dev.ortserve.wire.model.ResponseContentPart;
import dev.ortserve.wire.model.ResponseFunctionCallItem;
import dev.ortserve.wire.model.ResponseFunctionCallOutputItem;
import dev.ortserve.wire.model.ResponseInputImage;
import dev.ortserve.wire.model.ResponseInputMessage;
import dev.ortserve.wire.model.ResponseInputText;
import dev.ortserve.wire.model.ResponseItemReference;
import dev.ortserve.wire.model.ResponseOutputText;
import dev.ortserve.wire.model.ResponseReasoningItem;
import dev.ortserve.wire.model.ResponseRefusal;
import dev.ortserve.wire.union.ResponseInputItem;
import dev.ortserve.wire.union.ResponsesInput;
import dev.ortserve.store.record.ResponseIds;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

/**
 * Responses items in their stored form (JSON, every item with its id) and their conversion to
 * the chat messages a chat template renders. The same conversion serves this request's input
 * and every earlier turn rebuilt from the store, so a conversation renders the same whichever
 * replica continues it.
 */
final class ResponseItems {

    private final ObjectMapper mapper;

    ResponseItems(ObjectMapper mapper) {
        this.mapper = mapper;
    }

    /**
     * This request's input as stored items: a string is one user message; content strings become
     * text parts; items without an id get one; item references are replaced by the item they name.
     */
    /** Opens a compaction item into the items it stands for (a summary message, then the turns kept verbatim). */
    interface Compactions {
        List<ObjectNode> open(String encryptedContent, String param);

        /** The reasoning text an {@code encrypted_content} of a reasoning item holds; a 400 on {@code param} when it does not open. */
        String openReasoning(String encryptedContent, String param);
    }

    List<ObjectNode> normalize(ResponsesInput input, Function<String, JsonNode> references, Compactions compactions) {
        return normalize(input, references, compactions, callId -> false);
    }

    /**
     * As above; a tool output ({@code function_call_output}, {@code custom_tool_call_output}) must
     * answer a call of this input or of the earlier turns ({@code earlierCall}): an orphan is a 400.
     */
    List<ObjectNode> normalize(ResponsesInput input, Function<String, JsonNode> references, Compactions compactions,
                               java.util.function.Predicate<String> earlierCall) {
        List<ObjectNode> out = new ArrayList<>();
        if (input.isText()) {
            out.add(message(ResponseIds.item("msg"), "user", List.of(textPart("input_text", input.text()))));
            return out;
        }
        List<ResponseInputItem> items = input.items();
        if (items.isEmpty()) {
            throw new InvalidRequestException("input", "'input' must not be an empty array.");
        }
        for (int i = 0; i < items.size(); i++) {
            String param = "input[" + i + "]";
            Object item = items.get(i).value();
            if (item instanceof ResponseInputMessage m) {
                String role = m.getRole().toString();
                String partType = role.equals("assistant") ? "output_text" : "input_text";
                List<ObjectNode> parts = new ArrayList<>();
                if (m.getContent().isText()) {
                    parts.add(textPart(partType, m.getContent().text()));
                } else {
                    List<ResponseContentPart> given = m.getContent().parts();
                    for (int j = 0; j < given.size(); j++) {
                        parts.add(part(given.get(j), partType, param + ".content[" + j + "]"));
                    }
                }
                ObjectNode message = message(idOr(m.getId(), "msg"), role, parts);
                // phase (commentary / final_answer) is kept and listed by input_items; the template sees the text as before
                if (m.getPhase() != null) message.put("phase", m.getPhase().toString());
                out.add(message);
            } else if (item instanceof ResponseFunctionCallItem c) {
                ObjectNode node = mapper.createObjectNode().put("type", "function_call").put("id", idOr(c.getId(), "fc"))
                        .put("call_id", c.getCallId()).put("name", c.getName());
                if (c.getNamespace() != null && !c.getNamespace().isEmpty()) node.put("namespace", c.getNamespace());
                node.put("arguments", c.getArguments()).put("status", "completed");
                out.add(node);
            } else if (item instanceof ResponseCustomToolCallItem c) {
                ObjectNode node = mapper.createObjectNode().put("type", "custom_tool_call").put("id", idOr(c.getId(), "ctc"))
                        .put("call_id", c.getCallId()).put("name", c.getName());
                if (c.getNamespace() != null && !c.getNamespace().isEmpty()) node.put("namespace", c.getNamespace());
                node.put("input", c.getInput()).put("status", "completed");
                out.add(node);
            } else if (item instanceof ResponseCustomToolCallOutputItem o) {
                out.add(mapper.createObjectNode().put("type", "custom_tool_call_output").put("id", idOr(o.getId(), "ctco"))
                        .put("call_id", o.getCallId()).put("output", o.getOutput()).put("status", "completed"));
            } else if (item instanceof ResponseFunctionCallOutputItem o) {
                out.add(mapper.createObjectNode().put("type", "function_call_output").put("id", idOr(o.getId(), "fco"))
                        .put("call_id", o.getCallId()).put("output", o.getOutput()).put("status", "completed"));
            } else if (item instanceof ResponseReasoningItem r) {
                ObjectNode node = mapper.createObjectNode().put("type", "reasoning").put("id", idOr(r.getId(), "rs"));
                node.set("summary", mapper.valueToTree(r.getSummary() == null ? List.of() : r.getSummary()));
                if (r.getEncryptedContent() != null) {
                    // the reasoning this server sealed (include: reasoning.encrypted_content) is restored for the template
                    String text = compactions.openReasoning(r.getEncryptedContent(), param + ".encrypted_content");
                    ArrayNode content = node.putArray("content");
                    if (!text.isEmpty()) content.addObject().put("type", "reasoning_text").put("text", text);
                    node.put("encrypted_content", r.getEncryptedContent());
                } else {
                    node.set("content", mapper.valueToTree(r.getContent() == null ? List.of() : r.getContent()));
                }
                out.add(node);
            } else if (item instanceof ResponseCompactionItem c) {
                out.addAll(compactions.open(c.getEncryptedContent(), param + ".encrypted_content"));
            }
            if (item instanceof ResponseFunctionCallOutputItem || item instanceof ResponseCustomToolCallOutputItem) {
                String callId = out.get(out.size() - 1).path("call_id").asText();
                if (!earlierCall.test(callId) && !callIn(out, callId)) {
                    throw new InvalidRequestException(param + ".call_id", "No tool call found for "
                            + (item instanceof ResponseFunctionCallOutputItem ? "function" : "custom tool") + " call output with call_id '"
                            + callId + "': give the call item before its output (or continue the response that made the call with "
                            + "'previous_response_id').", "tool_call_not_found");
                }
            }
            if (item instanceof ResponseItemReference ref) {
                JsonNode found = references.apply(ref.getId());
                if (found == null) {
                    throw new InvalidRequestException(param + ".id", "Item '" + ref.getId()
                            + "' is not an item of the conversation named by 'previous_response_id'.");
                }
                out.add(found.deepCopy());
            }
        }
        return out;
    }

    private static boolean callIn(List<ObjectNode> items, String callId) {
        for (ObjectNode i : items) {
            String type = i.path("type").asText();
            if ((type.equals("function_call") || type.equals("custom_tool_call")) && i.path("call_id").asText().equals(callId)) return true;
        }
        return false;
    }

    /** The call ids of the calls among {@code items}. */
    static java.util.Set<String> callIds(Iterable<? extends JsonNode> items) {
        java.util.Set<String> ids = new java.util.HashSet<>();
        for (JsonNode i : items) {
            String type = i.path("type").asText();
            if (type.equals("function_call") || type.equals("custom_tool_call")) ids.add(i.path("call_id").asText());
        }
        return ids;
    }

    private ObjectNode part(ResponseContentPart part, String partType, String param) {
        if (part instanceof ResponseInputText t) return textPart(partType, t.getText());
        if (part instanceof ResponseOutputText t) return textPart(partType, t.getText());
        if (part instanceof ResponseRefusal r) return mapper.createObjectNode().put("type", "refusal").put("refusal", r.getRefusal());
        if (part instanceof ResponseInputImage i && partType.equals("input_text")) {
            if (i.getFileId() != null) {
                throw new UnsupportedParameterException(param + ".file_id", "Images by 'file_id' are not supported: this server has no Files API. "
                        + "Send the image as 'image_url' (a base64 data: URL).");
            }
            if (i.getImageUrl() == null) throw new InvalidRequestException(param + ".image_url", "An input_image needs 'image_url'.");
            ImageInput.ofUrl(i.getImageUrl(), param + ".image_url");
            ObjectNode node = mapper.createObjectNode().put("type", "input_image").put("image_url", i.getImageUrl());
            node.put("detail", i.getDetail() == null ? "auto" : i.getDetail().toString());
            return node;
        }
        throw new UnsupportedParameterException(param, "Content parts of type '" + part.getType() + "' are not supported"
                + (part instanceof ResponseInputImage ? " in this message: images go in user messages." : "."));
    }

    /**
     * The images the message items among {@code items} hold, in order; {@code param} names the field they came from
     * (this request's input, or the conversation it continues).
     */
    static List<ImageInput> images(List<? extends JsonNode> items, String param) {
        List<ImageInput> images = new ArrayList<>();
        for (JsonNode item : items) {
            if (!item.path("type").asText("message").equals("message")) continue;
            for (JsonNode part : item.path("content")) {
                if (part.path("type").asText().equals("input_image")) images.add(ImageInput.ofUrl(part.path("image_url").asText(), part.path("detail").asText(null), param));
            }
        }
        return images;
    }

    private ObjectNode textPart(String type, String text) {
        ObjectNode node = mapper.createObjectNode().put("type", type).put("text", text);
        if (type.equals("output_text")) node.set("annotations", mapper.createArrayNode());
        return node;
    }

    private ObjectNode message(String id, String role, List<ObjectNode> parts) {
        ObjectNode node = mapper.createObjectNode().put("type", "message").put("id", id).put("role", role);
        if (role.equals("assistant")) node.put("status", "completed");
        ArrayNode content = node.putArray("content");
        parts.forEach(content::add);
        return node;
    }

    private static String idOr(String id, String prefix) {
        return id == null || id.isBlank() ? ResponseIds.item(prefix) : id;
    }

    /**
     * Chat messages for a run of items: function calls join the assistant message they follow
     * (or start one), their outputs become tool messages, and reasoning is carried on the next
     * assistant message as {@code reasoning_content}.
     */
    List<Map<String, Object>> templateMessages(List<? extends JsonNode> items) {
        List<Map<String, Object>> out = new ArrayList<>();
        String pendingReasoning = null;
        Map<String, Object> openAssistant = null;
        for (JsonNode item : items) {
            switch (item.path("type").asText("message")) {
                case "message" -> {
                    Map<String, Object> m = new LinkedHashMap<>();
                    String role = item.path("role").asText();
                    m.put("role", role);
                    m.put("content", content(item.path("content")));
                    if (role.equals("assistant")) {
                        if (pendingReasoning != null) m.put("reasoning_content", pendingReasoning);
                        pendingReasoning = null;
                        openAssistant = m;
                    } else {
                        openAssistant = null;
                    }
                    out.add(m);
                }
                case "function_call", "custom_tool_call" -> {
                    if (openAssistant == null) {
                        openAssistant = new LinkedHashMap<>();
                        openAssistant.put("role", "assistant");
                        openAssistant.put("content", null);
                        if (pendingReasoning != null) openAssistant.put("reasoning_content", pendingReasoning);
                        pendingReasoning = null;
                        out.add(openAssistant);
                    }
                    @SuppressWarnings("unchecked")
                    List<Map<String, Object>> calls = (List<Map<String, Object>>) openAssistant.computeIfAbsent("tool_calls", k -> new ArrayList<>());
                    Map<String, Object> function = new LinkedHashMap<>();
                    // as the template was given the tools: a namespaced function under namespace.name, a custom tool's input as 'input'
                    String namespace = item.path("namespace").isTextual() ? item.path("namespace").asText() : null;
                    function.put("name", ResponseTools.templateName(item.path("name").asText(), namespace));
                    if (item.path("type").asText().equals("custom_tool_call")) {
                        Map<String, Object> input = new LinkedHashMap<>();
                        input.put(ResponseTools.CUSTOM_INPUT, item.path("input").asText());
                        function.put("arguments", input);
                    } else {
                        function.put("arguments", arguments(item.path("arguments").asText()));
                    }
                    Map<String, Object> call = new LinkedHashMap<>();
                    call.put("id", item.path("call_id").asText());
                    call.put("type", "function");
                    call.put("function", function);
                    calls.add(call);
                }
                case "function_call_output", "custom_tool_call_output" -> {
                    Map<String, Object> m = new LinkedHashMap<>();
                    m.put("role", "tool");
                    m.put("tool_call_id", item.path("call_id").asText());
                    m.put("content", item.path("output").asText());
                    out.add(m);
                    openAssistant = null;
                }
                case "reasoning" -> {
                    String text = text(item.path("content"));
                    if (text.isEmpty()) text = text(item.path("summary"));
                    pendingReasoning = pendingReasoning == null ? text : pendingReasoning + "\n" + text;
                }
                default -> throw new IllegalStateException("unexpected stored item type " + item.path("type"));
            }
        }
        return out;
    }

    /** A message's content for the template: its text, or its parts in order when it holds an image ({@link ImageInput#templatePart()}). */
    private static Object content(JsonNode parts) {
        boolean image = false;
        for (JsonNode part : parts) image |= part.path("type").asText().equals("input_image");
        if (!image) return text(parts);
        List<Map<String, Object>> out = new ArrayList<>();
        for (JsonNode part : parts) {
            out.add(part.path("type").asText().equals("input_image") ? ImageInput.templatePart() : Map.of("type", "text", "text", text(part)));
        }
        return out;
    }

    private static String text(JsonNode parts) {
        if (parts.isObject()) return parts.has("text") ? parts.path("text").asText() : parts.path("refusal").asText();
        if (parts.isTextual()) return parts.asText();
        StringBuilder out = new StringBuilder();
        for (JsonNode part : parts) {
            String text = part.has("text") ? part.path("text").asText() : part.path("refusal").asText();
            if (out.length() > 0) out.append('\n');
            out.append(text);
        }
        return out.toString();
    }

    /** Templates expect a mapping; a JSON string that is not an object stays a string. */
    private Object arguments(String json) {
        try {
            return mapper.readValue(json, new TypeReference<LinkedHashMap<String, Object>>() { });
        } catch (Exception notAnObject) {
            return json;
        }
    }
}
