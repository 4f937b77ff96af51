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
import jakarta.validation.Valid;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

/** Responses `input`: a string (one user message) or an array of input items. */
@JsonDeserialize(using = ResponsesInput.Reader.class)
@JsonSerialize(using = ResponsesInput.Writer.class)
public final class ResponsesInput {

    private final String text;
    @Valid
    private final List<ResponseInputItem> items;

    public ResponsesInput(String text, List<ResponseInputItem> items) {
        this.text = text;
        this.items = items == null ? null : List.copyOf(items);
    }

    public String text() {
        return text;
    }

    public List<ResponseInputItem> items() {
        return items;
    }

    public static final class Reader extends JsonDeserializer<ResponsesInput> {
        @Override
        public ResponsesInput deserialize(JsonParser p, DeserializationContext ctxt) throws IOException {
            JsonNode node = UnionReader.tree(p, ctxt);
            if (node.isTextual()) {
                return new ResponsesInput(node.textValue(), null);
            }
            if (node.isArray()) {
                List<ResponseInputItem> items = new ArrayList<>(node.size());
                for (JsonNode element : node) {
                    items.add(UnionReader.element(ctxt, element, items.size(), ResponseInputItem.class));
                }
                return new ResponsesInput(null, items);
            }
            return UnionReader.fail(ctxt, ResponsesInput.class, "expected a string or an array of input items, got " + UnionReader.kind(node));
        }
    }

    public static final class Writer extends JsonSerializer<ResponsesInput> {
        @Override
        public void serialize(ResponsesInput value, JsonGenerator gen, SerializerProvider serializers) throws IOException {
            if (value.text != null) gen.writeString(value.text);
            else serializers.defaultSerializeValue(value.items, gen);
        }
    }
}
