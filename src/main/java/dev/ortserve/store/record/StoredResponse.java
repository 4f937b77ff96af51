package dev.ortserve.store.record;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * One stored turn of a Responses conversation: the response object as the API returned it, the
 * input items of that request (each with its id), the response it continued, and the digest of
 * the API key that created it ("" on an open server). The store treats the JSON as opaque.
 */
public record StoredResponse(String id, String previousId, String owner, JsonNode response, JsonNode input) {

    public StoredResponse {
        if (!ResponseIds.isResponseId(id)) {
            throw new IllegalArgumentException("not a response id: " + id);
        }
        owner = owner == null ? "" : owner;
    }
}
