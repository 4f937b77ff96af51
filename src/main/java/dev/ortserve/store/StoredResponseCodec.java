package dev.ortserve.store;

import dev.ortserve.store.record.StoredResponse;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.IOException;
import java.io.UncheckedIOException;

/**
 * The one serialized form of a stored response, used by every store, so that sizes and caps
 * mean the same bytes whichever store is configured.
 */
public final class StoredResponseCodec {

    private static final ObjectMapper JSON = new ObjectMapper();

    private StoredResponseCodec() {
    }

    public static String encode(StoredResponse r) {
        ObjectNode node = JSON.createObjectNode();
        node.put("id", r.id());
        node.put("prev", r.previousId());
        node.put("owner", r.owner());
        node.set("response", r.response());
        node.set("input", r.input());
        return node.toString();
    }

    public static StoredResponse decode(String json) {
        try {
            JsonNode node = JSON.readTree(json);
            JsonNode prev = node.get("prev");
            return new StoredResponse(node.get("id").asText(), prev == null || prev.isNull() ? null : prev.asText(),
                    node.get("owner").asText(), node.get("response"), node.get("input"));
        } catch (IOException e) {
            throw new UncheckedIOException("a stored response could not be read", e);
        }
    }

    public static int sizeOf(String encoded) {
        int bytes = 0;
        for (int i = 0; i < encoded.length(); i++) {
            char c = encoded.charAt(i);
            if (c < 0x80) bytes++;
            else if (c < 0x800) bytes += 2;
            else if (Character.isHighSurrogate(c)) { bytes += 4; i++; }
            else bytes += 3;
        }
        return bytes;
    }
}
