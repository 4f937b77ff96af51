package dev.ortserve.api.union;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.databind.DeserializationContext;
import com.fasterxml.jackson.databind.JsonDeserializer;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.JsonSerializer;
import com.fasterxml.jackson.databind.SerializerProvider;
import com.fasterxml.jackson.databind.annotation.JsonDeserialize;
import com.fasterxml.jackson.databind.annotation.JsonSerialize;
import dev.ortserve.api.model.ChatCompletionContentPart;
import jakarta.validation.Valid;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

/** Chat message `content`: a string, or an array of typed content parts (discriminated by `type`). */
@JsonDeserialize(using = MessageContent.Reader.class)
@JsonSerialize(using = MessageContent.Writer.class)
public final class MessageContent {

    private final String text;
    @Valid
    private final List<ChatCompletionContentPart> parts;

    private MessageContent(String text, List<ChatCompletionContentPart> parts) {
        this.text = text;
        this.parts = parts;
    }

    public static MessageContent of(String text) {
        return new MessageContent(text, null);
    }

    public static MessageContent ofParts(List<ChatCompletionContentPart> parts) {
        return new MessageContent(null, List.copyOf(parts));
    }

    public boolean isText() {
        return text != null;
    }

    /** The string form, or null when the content is parts. */
    public String text() {
        return text;
    }

    /** The parts, or null when the content is a string. */
    public List<ChatCompletionContentPart> parts() {
        return parts;
    }

    public static final class Reader extends JsonDeserializer<MessageContent> {
        @Override
        public MessageContent deserialize(JsonParser p, DeserializationContext ctxt) throws IOException {
            JsonNode node = UnionReader.tree(p, ctxt);
            if (node.isTextual()) {
                return of(node.textValue());
            }
            if (node.isArray()) {
                if (node.isEmpty()) {
                    return UnionReader.fail(ctxt, MessageContent.class, "content parts must not be an empty array");
                }
                List<ChatCompletionContentPart> parts = new ArrayList<>(node.size());
                for (JsonNode element : node) {
                    if (!element.isObject()) {
                        return UnionReader.fail(ctxt, MessageContent.class, "each content part must be an object, got " + UnionReader.kind(element));
                    }
                    parts.add(UnionReader.element(ctxt, element, parts.size(), ChatCompletionContentPart.class));
                }
                return ofParts(parts);
            }
            return UnionReader.fail(ctxt, MessageContent.class, "expected a string or an array of content parts, got " + UnionReader.kind(node));
        }
    }

    public static final class Writer extends JsonSerializer<MessageContent> {
        @Override
        public void serialize(MessageContent value, JsonGenerator gen, SerializerProvider serializers) throws IOException {
            if (value.text != null) {
                gen.writeString(value.text);
            } else {
                gen.writeStartArray();
                for (ChatCompletionContentPart part : value.parts) {
                    serializers.defaultSerializeValue(part, gen);
                }
                gen.writeEndArray();
            }
        }
    }
}
