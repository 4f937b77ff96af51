package dev.ortserve.wire.union;

import com.fasterxml.jackson.databind.DeserializationContext;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.annotation.JsonDeserialize;
import dev.ortserve.wire.model.TokenizeChatRequest;
import dev.ortserve.wire.model.TokenizeCompletionRequest;

import java.io.IOException;

/** /tokenize body: the prompt form or the chat (messages) form. */
@JsonDeserialize(using = TokenizeRequest.Reader.class)
public final class TokenizeRequest extends OneOf {

    public TokenizeRequest(Object value) {
        super(value);
    }

    static final class Reader extends OneOf.Reader<TokenizeRequest> {
        Reader() {
            super(TokenizeRequest::new);
        }

        @Override
        Class<?> member(JsonNode node, DeserializationContext ctxt) throws IOException {
            if (!node.isObject()) {
                return UnionReader.fail(ctxt, TokenizeRequest.class, "The request body must be a JSON object");
            }
            if (node.has("messages") && node.has("prompt")) {
                return UnionReader.fail(ctxt, TokenizeRequest.class, "give either 'prompt' or 'messages', not both");
            }
            return node.has("messages") ? TokenizeChatRequest.class : TokenizeCompletionRequest.class;
        }
    }
}
