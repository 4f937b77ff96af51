package dev.ortserve.store.record;

import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.regex.Pattern;

/**
 * Response ids carry their conversation: {@code resp_} + 24 hex digits naming the conversation
 * (the root response's own) + 24 hex digits of its own. Any replica can therefore find a
 * conversation's records from nothing but a {@code previous_response_id}, and a store can keep a
 * conversation under one key (one Redis Cluster hash slot).
 */
public final class ResponseIds {

    private static final Pattern RESPONSE_ID = Pattern.compile("resp_[0-9a-f]{48}");
    private static final SecureRandom RANDOM = new SecureRandom();
    private static final HexFormat HEX = HexFormat.of();

    private ResponseIds() {
    }

    public static boolean isResponseId(String id) {
        return id != null && RESPONSE_ID.matcher(id).matches();
    }

    /** A new conversation's first response. */
    public static String newConversation() {
        String conversation = random(12);
        return "resp_" + conversation + random(12);
    }

    /** A response that continues the conversation of {@code previous}. */
    public static String continuing(String previous) {
        return "resp_" + conversationOf(previous) + random(12);
    }

    public static String conversationOf(String responseId) {
        if (!isResponseId(responseId)) {
            throw new IllegalArgumentException("not a response id: " + responseId);
        }
        return responseId.substring(5, 29);
    }

    /** An item id with the given prefix (msg, fc, fco, rs, call). */
    public static String item(String prefix) {
        return prefix + "_" + random(24);
    }

    private static String random(int bytes) {
        byte[] b = new byte[bytes];
        RANDOM.nextBytes(b);
        return HEX.formatHex(b);
    }
}
