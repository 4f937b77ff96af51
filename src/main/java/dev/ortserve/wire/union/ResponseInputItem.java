package dev.ortserve.wire.union;

import com.fasterxml.jackson.databind.DeserializationContext;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.annotation.JsonDeserialize;
import dev.ortserve.wire.model.ResponseFunctionCallItem;
import dev.ortserve.wire.model.ResponseFunctionCallOutputItem;
import dev.ortserve.wire.model.ResponseInputMessage;
import dev.ortserve.wire.model.ResponseItemReference;
import dev.ortserve.wire.model.ResponseReasoningItem;

import java.io.IOException;

/** A Responses input item, discriminated by `type`; messages may omit it (it defaults to `message`). */
@JsonDeserialize(using = ResponseInputItem.Reader.class)
public final class ResponseInputItem extends OneOf {

    public ResponseInputItem(Object value) {
        super(value);
    }

    static final class Reader extends OneOf.Reader<ResponseInputItem> {
        Reader() {
            super(ResponseInputItem::new);
        }

        @Override
        Class<?> member(JsonNode node, DeserializationContext ctxt) throws IOException {
            if (!node.isObject()) {
                return UnionReader.fail(ctxt, ResponseInputItem.class, "each input item must be an object, got " + UnionReader.kind(node));
            }
            JsonNode type = node.get("type");
            if (type != null && !type.isTextual()) {
                return UnionReader.fail(ctxt, ResponseInputItem.class, "'type' must be a string");
            }
            String t = type == null ? "message" : type.textValue();
            Class<?> member = switch (t) {
                case "message" -> ResponseInputMessage.class;
                case "function_call" -> ResponseFunctionCallItem.class;
                case "function_call_output" -> ResponseFunctionCallOutputItem.class;
                case "custom_tool_call" -> dev.ortserve.wire.model.ResponseCustomToolCallItem.class;
                case "custom_tool_call_output" -> dev.ortserve.wire.model.ResponseCustomToolCallOutputItem.class;
                case "reasoning" -> ResponseReasoningItem.class;
                case "item_reference" -> ResponseItemReference.class;
                case "compaction" -> dev.ortserve.wire.model.ResponseCompactionItem.class;
                default -> null;
            };
            if (member == null) {
                return UnionReader.fail(ctxt, ResponseInputItem.class, "unsupported input item type '" + t
                        + "' (supported: message, function_call, function_call_output, custom_tool_call, custom_tool_call_output, reasoning, item_reference, compaction)");
            }
            return member;
        }
    }
}
