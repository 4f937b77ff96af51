package dev.ortserve.wire.union;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.databind.DeserializationContext;
import com.fasterxml.jackson.databind.JsonDeserializer;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.JsonSerializer;
import com.fasterxml.jackson.databind.SerializerProvider;
import com.fasterxml.jackson.databind.annotation.JsonDeserialize;
import com.fasterxml.jackson.databind.annotation.JsonSerialize;

import java.io.IOException;
import java.util.Iterator;
import java.util.Set;

/**
 * `tool_choice`: "none" | "auto" | "required", or a named function, written
 * `{"type":"function","function":{"name":...}}` in Chat Completions and
 * `{"type":"function","name":...}` in the Responses API. Written back in the form it came in.
 */
@JsonDeserialize(using = ToolChoice.Reader.class)
@JsonSerialize(using = ToolChoice.Writer.class)
public record ToolChoice(Mode mode, String functionName, boolean responsesForm) {

    public enum Mode { NONE, AUTO, REQUIRED, FUNCTION }

    public static ToolChoice of(Mode mode) {
        return new ToolChoice(mode, null, false);
    }

    public static final class Reader extends JsonDeserializer<ToolChoice> {
        @Override
        public ToolChoice deserialize(JsonParser p, DeserializationContext ctxt) throws IOException {
            JsonNode node = UnionReader.tree(p, ctxt);
            if (node.isTextual()) {
                return switch (node.textValue()) {
                    case "none" -> new ToolChoice(Mode.NONE, null, false);
                    case "auto" -> new ToolChoice(Mode.AUTO, null, false);
                    case "required" -> new ToolChoice(Mode.REQUIRED, null, false);
                    default -> UnionReader.fail(ctxt, ToolChoice.class,
                            "'" + node.textValue() + "' is not one of 'none', 'auto', 'required' or a named function object");
                };
            }
            if (!node.isObject()) {
                return UnionReader.fail(ctxt, ToolChoice.class, "expected a string or an object, got " + UnionReader.kind(node));
            }
            JsonNode type = node.get("type");
            if (type == null || !type.isTextual() || !type.textValue().equals("function")) {
                return UnionReader.fail(ctxt, ToolChoice.class, "a tool choice object must have type 'function'");
            }
            JsonNode function = node.get("function");
            if (function != null) {
                only(ctxt, node, Set.of("type", "function"));
                if (!function.isObject()) {
                    return UnionReader.fail(ctxt, ToolChoice.class, "'function' must be an object with a 'name'");
                }
                only(ctxt, function, Set.of("name"));
                return new ToolChoice(Mode.FUNCTION, name(ctxt, function.get("name")), false);
            }
            only(ctxt, node, Set.of("type", "name"));
            return new ToolChoice(Mode.FUNCTION, name(ctxt, node.get("name")), true);
        }

        private static String name(DeserializationContext ctxt, JsonNode name) throws IOException {
            if (name == null || !name.isTextual() || name.textValue().isEmpty()) {
                return UnionReader.fail(ctxt, ToolChoice.class, "a named tool choice needs a non-empty string 'name'");
            }
            return name.textValue();
        }

        private static void only(DeserializationContext ctxt, JsonNode node, Set<String> allowed) throws IOException {
            for (Iterator<String> it = node.fieldNames(); it.hasNext(); ) {
                String field = it.next();
                if (!allowed.contains(field)) {
                    UnionReader.fail(ctxt, ToolChoice.class, "unrecognized field '" + field + "' in tool_choice");
                }
            }
        }
    }

    public static final class Writer extends JsonSerializer<ToolChoice> {
        @Override
        public void serialize(ToolChoice value, JsonGenerator gen, SerializerProvider serializers) throws IOException {
            if (value.mode != Mode.FUNCTION) {
                gen.writeString(value.mode.name().toLowerCase());
                return;
            }
            gen.writeStartObject();
            gen.writeStringField("type", "function");
            if (value.responsesForm) {
                gen.writeStringField("name", value.functionName);
            } else {
                gen.writeObjectFieldStart("function");
                gen.writeStringField("name", value.functionName);
                gen.writeEndObject();
            }
            gen.writeEndObject();
        }
    }
}
