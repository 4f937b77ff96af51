package dev.ortserve.wire.union;

import com.fasterxml.jackson.databind.DeserializationContext;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.annotation.JsonDeserialize;
import dev.ortserve.wire.model.ResponseFunctionCallItem;
import dev.ortserve.wire.model.ResponseFunctionCallOutputItem;
import dev.ortserve.wire.model.ResponseInputMessage;
import dev.ortserve.wire.model.ResponseOutputMessage;
import dev.ortserve.wire.model.ResponseReasoningItem;

import java.io.IOException;

/** An item as listed by input_items: any input or output item, always with its id. */
@JsonDeserialize(using = ResponseStoredItem.Reader.class)
public final class ResponseStoredItem extends OneOf {

    public ResponseStoredItem(Object value) {
        super(value);
    }

    static final class Reader extends OneOf.Reader<ResponseStoredItem> {
        Reader() {
            super(ResponseStoredItem::new);
        }

        @Override
        Class<?> member(JsonNode node, DeserializationContext ctxt) throws IOException {
            String type = node.path("type").asText("message");
            Class<?> member = switch (type) {
                case "message" -> "assistant".equals(node.path("role").asText()) && node.path("content").isArray()
                        && node.has("status") ? ResponseOutputMessage.class : ResponseInputMessage.class;
                case "function_call" -> ResponseFunctionCallItem.class;
                case "function_call_output" -> ResponseFunctionCallOutputItem.class;
                case "custom_tool_call" -> dev.ortserve.wire.model.ResponseCustomToolCallItem.class;
                case "custom_tool_call_output" -> dev.ortserve.wire.model.ResponseCustomToolCallOutputItem.class;
                case "reasoning" -> ResponseReasoningItem.class;
                default -> null;
            };
            if (member == null) {
                return UnionReader.fail(ctxt, ResponseStoredItem.class, "unknown item type '" + type + "'");
            }
            return member;
        }
    }
}
