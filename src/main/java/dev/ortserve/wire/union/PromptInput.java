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
import java.util.ArrayList;
import java.util.List;

/**
 * Completions `prompt` and embeddings `input`: a string, an array of strings, an array of token
 * ids, or an array of token-id arrays. Exactly one of {@link #texts()} / {@link #tokenIds()} is set.
 */
@JsonDeserialize(using = PromptInput.Reader.class)
@JsonSerialize(using = PromptInput.Writer.class)
public record PromptInput(Shape shape, List<String> texts, List<int[]> tokenIds) {

    public enum Shape { STRING, STRINGS, TOKENS, TOKEN_ARRAYS }

    public int size() {
        return texts != null ? texts.size() : tokenIds.size();
    }

    public static PromptInput ofText(String text) {
        return new PromptInput(Shape.STRING, List.of(text), null);
    }

    public static final class Reader extends JsonDeserializer<PromptInput> {
        @Override
        public PromptInput deserialize(JsonParser p, DeserializationContext ctxt) throws IOException {
            JsonNode node = UnionReader.tree(p, ctxt);
            if (node.isTextual()) {
                return new PromptInput(Shape.STRING, List.of(node.textValue()), null);
            }
            if (!node.isArray()) {
                return UnionReader.fail(ctxt, PromptInput.class,
                        "expected a string, an array of strings, an array of token ids or an array of token-id arrays, got " + UnionReader.kind(node));
            }
            if (node.isEmpty()) {
                return UnionReader.fail(ctxt, PromptInput.class, "must not be an empty array");
            }
            JsonNode first = node.get(0);
            if (first.isTextual()) {
                return new PromptInput(Shape.STRINGS, UnionReader.strings(ctxt, PromptInput.class, node, "an array of strings"), null);
            }
            if (first.isNumber()) {
                return new PromptInput(Shape.TOKENS, null, List.<int[]>of(UnionReader.tokenIds(ctxt, PromptInput.class, node)));
            }
            if (first.isArray()) {
                List<int[]> arrays = new ArrayList<>(node.size());
                for (JsonNode element : node) {
                    if (!element.isArray()) {
                        return UnionReader.fail(ctxt, PromptInput.class, "expected an array of token-id arrays, found an element of type " + UnionReader.kind(element));
                    }
                    if (element.isEmpty()) {
                        return UnionReader.fail(ctxt, PromptInput.class, "token-id arrays must not be empty");
                    }
                    arrays.add(UnionReader.tokenIds(ctxt, PromptInput.class, element));
                }
                return new PromptInput(Shape.TOKEN_ARRAYS, null, arrays);
            }
            return UnionReader.fail(ctxt, PromptInput.class, "array elements must be strings, integers or arrays of integers, got " + UnionReader.kind(first));
        }
    }

    public static final class Writer extends JsonSerializer<PromptInput> {
        @Override
        public void serialize(PromptInput value, JsonGenerator gen, SerializerProvider serializers) throws IOException {
            switch (value.shape) {
                case STRING -> gen.writeString(value.texts.get(0));
                case STRINGS -> gen.writeObject(value.texts);
                case TOKENS -> gen.writeArray(value.tokenIds.get(0), 0, value.tokenIds.get(0).length);
                case TOKEN_ARRAYS -> {
                    gen.writeStartArray();
                    for (int[] ids : value.tokenIds) {
                        gen.writeArray(ids, 0, ids.length);
                    }
                    gen.writeEndArray();
                }
            }
        }
    }
}
