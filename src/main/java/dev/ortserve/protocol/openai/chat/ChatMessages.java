package dev.ortserve.protocol.openai.chat;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.wire.model.ChatCompletionContentPart;
import dev.ortserve.wire.model.ChatCompletionContentPartImage;
import dev.ortserve.wire.model.ChatCompletionContentPartText;
import dev.ortserve.wire.model.ChatCompletionMessageToolCall;
import dev.ortserve.wire.model.ChatCompletionRequestAssistantMessage;
import dev.ortserve.wire.model.ChatCompletionRequestDeveloperMessage;
import dev.ortserve.wire.model.ChatCompletionRequestMessage;
import dev.ortserve.wire.model.ChatCompletionRequestSystemMessage;
import dev.ortserve.wire.model.ChatCompletionRequestToolMessage;
import dev.ortserve.wire.model.ChatCompletionRequestUserMessage;
import dev.ortserve.wire.union.MessageContent;
import dev.ortserve.wire.union.ToolChoice;
import dev.ortserve.service.chat.ChatTurnRequest;
import dev.ortserve.service.ImageInput;
import dev.ortserve.service.error.InvalidRequestException;
import dev.ortserve.service.error.UnsupportedParameterException;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Chat completions messages as the chat template receives them: every field the API accepts, arguments
 * parsed; shared by chat completions and the chat form of /tokenize.
 */
public final class ChatMessages {

    private static final ObjectMapper JSON = new ObjectMapper();

    private ChatMessages() {
    }

    /**
     * The messages as the template receives them; the images of user messages' {@code image_url}
     * parts are added to {@code images} in the order the prompt shows them (the template sees an
     * {@code {"type": "image"}} part in each one's place).
     */
    public static List<Map<String, Object>> templateMessages(List<ChatCompletionRequestMessage> messages, List<ImageInput> images) {
        List<Map<String, Object>> out = new ArrayList<>(messages.size());
        for (int i = 0; i < messages.size(); i++) {
            ChatCompletionRequestMessage message = messages.get(i);
            if (message == null) {
                throw new InvalidRequestException("messages[" + i + "]", "Each message must be an object with a 'role', not null.");
            }
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("role", message.getRole());
            String param = "messages[" + i + "]";
            if (message instanceof ChatCompletionRequestSystemMessage s) {
                m.put("content", text(s.getContent(), param));
                putIfSet(m, "name", s.getName());
            } else if (message instanceof ChatCompletionRequestDeveloperMessage d) {
                m.put("content", text(d.getContent(), param));
                putIfSet(m, "name", d.getName());
            } else if (message instanceof ChatCompletionRequestUserMessage u) {
                m.put("content", userContent(u.getContent(), param, images));
                putIfSet(m, "name", u.getName());
            } else if (message instanceof ChatCompletionRequestAssistantMessage a) {
                boolean calls = a.getToolCalls() != null && !a.getToolCalls().isEmpty();
                if (a.getContent() == null && !calls) {
                    throw new InvalidRequestException(param + ".content", "An assistant message needs 'content' or 'tool_calls'.");
                }
                m.put("content", a.getContent() == null ? null : text(a.getContent(), param));
                putIfSet(m, "name", a.getName());
                putIfSet(m, "reasoning_content", a.getReasoningContent());
                if (calls) {
                    List<Map<String, Object>> toolCalls = new ArrayList<>();
                    for (ChatCompletionMessageToolCall call : a.getToolCalls()) {
                        Map<String, Object> function = new LinkedHashMap<>();
                        function.put("name", call.getFunction().getName());
                        function.put("arguments", arguments(call.getFunction().getArguments()));
                        Map<String, Object> c = new LinkedHashMap<>();
                        c.put("id", call.getId());
                        c.put("type", "function");
                        c.put("function", function);
                        toolCalls.add(c);
                    }
                    m.put("tool_calls", toolCalls);
                }
            } else if (message instanceof ChatCompletionRequestToolMessage t) {
                m.put("content", text(t.getContent(), param));
                m.put("tool_call_id", t.getToolCallId());
                putIfSet(m, "name", t.getName());
            }
            out.add(m);
        }
        return out;
    }

    /** The contract's tool_choice mode as a chat turn takes it. */
    public static ChatTurnRequest.ToolChoice toolChoice(ToolChoice.Mode mode) {
        return switch (mode) {
            case NONE -> ChatTurnRequest.ToolChoice.NONE;
            case AUTO -> ChatTurnRequest.ToolChoice.AUTO;
            case REQUIRED -> ChatTurnRequest.ToolChoice.REQUIRED;
            case FUNCTION -> ChatTurnRequest.ToolChoice.FUNCTION;
        };
    }

    /** vLLM's documents, as the template's {@code documents} variable; null when the request has none. */
    public static List<Map<String, Object>> documents(List<Map<String, String>> documents) {
        if (documents == null) return null;
        List<Map<String, Object>> out = new ArrayList<>(documents.size());
        for (Map<String, String> d : documents) out.add(new LinkedHashMap<>(d));
        return out;
    }

    /** The request's own chat template, refused unless the server allows request templates. */
    public static String requestTemplate(String template, boolean allowed) {
        if (template != null && !allowed) {
            throw new InvalidRequestException("chat_template", "This server does not accept a chat template in the request; "
                    + "it uses the model's (set ortserve.allow-request-chat-template to allow it).");
        }
        return template;
    }

    /** Templates expect a mapping; a JSON string that is not an object stays a string. */
    private static Object arguments(String json) {
        try {
            return JSON.readValue(json, new TypeReference<LinkedHashMap<String, Object>>() { });
        } catch (Exception notAnObject) {
            return json;
        }
    }

    /**
     * A user message's content: its text, or, when it holds images, its parts in order (text parts
     * as {@code {"type": "text"}}, each image as {@code {"type": "image"}}), as the Hugging Face
     * processors give vision templates their messages.
     */
    private static Object userContent(MessageContent content, String param, List<ImageInput> images) {
        if (content == null || content.isText() || content.parts().stream().noneMatch(p -> p instanceof ChatCompletionContentPartImage)) {
            return text(content, param);
        }
        List<Map<String, Object>> parts = new ArrayList<>();
        List<ChatCompletionContentPart> given = content.parts();
        for (int j = 0; j < given.size(); j++) {
            String at = param + ".content[" + j + "]";
            if (given.get(j) instanceof ChatCompletionContentPartText t) {
                parts.add(Map.of("type", "text", "text", t.getText()));
            } else if (given.get(j) instanceof ChatCompletionContentPartImage i) {
                images.add(ImageInput.ofUrl(i.getImageUrl().getUrl(), i.getImageUrl().getDetail() == null ? null : i.getImageUrl().getDetail().toString(),
                        at + ".image_url.url"));
                parts.add(ImageInput.templatePart());
            } else {
                throw unsupportedPart(given.get(j), at);
            }
        }
        return parts;
    }

    private static UnsupportedParameterException unsupportedPart(ChatCompletionContentPart part, String param) {
        return new UnsupportedParameterException(param, "Content parts of type '" + part.getType() + "' are not supported"
                + (part instanceof ChatCompletionContentPartImage ? " in this message: images go in user messages." : "."));
    }

    private static String text(MessageContent content, String param) {
        if (content == null) {
            throw new InvalidRequestException(param + ".content", "'content' is required.");
        }
        if (content.isText()) return content.text();
        StringBuilder out = new StringBuilder();
        List<ChatCompletionContentPart> parts = content.parts();
        for (int j = 0; j < parts.size(); j++) {
            if (!(parts.get(j) instanceof ChatCompletionContentPartText t)) {
                throw unsupportedPart(parts.get(j), param + ".content[" + j + "]");
            }
            if (out.length() > 0) out.append('\n');
            out.append(t.getText());
        }
        return out.toString();
    }

    private static void putIfSet(Map<String, Object> m, String key, Object value) {
        if (value != null) m.put(key, value);
    }
}
