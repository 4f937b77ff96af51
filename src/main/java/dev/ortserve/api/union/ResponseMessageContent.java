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
import dev.ortserve.api.model.ResponseContentPart;
import jakarta.validation.Valid;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

/** A Responses input message's `content`: a string, or typed parts (input_text, output_text, ...). */
@JsonDeserialize(using = ResponseMessageContent.Reader.class)
@JsonSerialize(using = ResponseMessageContent.Writer.class)
public final class ResponseMessageContent {

    private final String text;
    @Valid
    private final List<ResponseContentPart> parts;

    public ResponseMessageContent(String text, List<ResponseContentPart> parts) {
        this.text = text;
        this.parts = parts == null ? null : List.copyOf(parts);
    }

    public String text() {
        return text;
    }

    public List<ResponseContentPart> parts() {
        return parts;
    }

    public static final class Reader extends JsonDeserializer<ResponseMessageContent> {
        @Override
        public ResponseMessageContent deserialize(JsonParser p, DeserializationContext ctxt) throws IOException {
            JsonNode node = UnionReader.tree(p, ctxt);
            if (node.isTextual()) {
                return new ResponseMessageContent(node.textValue(), null);
            }
            if (node.isArray()) {
                List<ResponseContentPart> parts = new ArrayList<>(node.size());
                for (JsonNode element : node) {
                    if (!element.isObject()) {
                        return UnionReader.fail(ctxt, ResponseMessageContent.class, "each content part must be an object, got " + UnionReader.kind(element));
                    }
                    parts.add(UnionReader.element(ctxt, element, parts.size(), ResponseContentPart.class));
                }
                return new ResponseMessageContent(null, parts);
            }
            return UnionReader.fail(ctxt, ResponseMessageContent.class, "expected a string or an array of content parts, got " + UnionReader.kind(node));
        }
    }

    public static final class Writer extends JsonSerializer<ResponseMessageContent> {
        @Override
        public void serialize(ResponseMessageContent value, JsonGenerator gen, SerializerProvider serializers) throws IOException {
            if (value.text != null) gen.writeString(value.text);
            else serializers.defaultSerializeValue(value.parts, gen);
        }
    }
}
