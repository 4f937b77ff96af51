package dev.ortserve.it;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import net.jqwik.api.Arbitraries;
import dev.ortserve.TinyModelResource;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.BeforeContainer;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Mutation fuzzing of every POST endpoint of the packaged application: valid requests are mutated
 * (fields dropped, duplicated, retyped, nested; huge and negative numbers; long, NUL-laden and
 * invalid UTF-8 strings; deep nesting; giant arrays; wrong content types) by a jqwik property with
 * a fixed seed. Every answer must come within a bound, never be a 5xx, carry the error envelope
 * when it is an error, and a refused request must not have scheduled any sequence (the engine's
 * queue-time count on /q/metrics does not move). A longer run:
 * {@code ./mvnw verify -Dit.test=ApiFuzzIT -Djqwik.tries.default=20000}.
 */
class ApiFuzzIT {

    static final Duration BOUND = Duration.ofSeconds(20);
    static final ObjectMapper JSON = new ObjectMapper();
    static final Map<String, Integer> STATUSES = new java.util.concurrent.ConcurrentSkipListMap<>();
    static PackagedApp app;
    static HttpClient http;

    @BeforeContainer
    static void start() throws Exception {
        // a short context keeps the generations that valid mutations start short
        app = PackagedApp.start("fuzz", Map.of("ORTSERVE_MODEL_PATH", TinyModelResource.directory().toString(), "ORTSERVE_MODEL_NAME", "tiny",
                "ORTSERVE_ENGINE_MAX_MODEL_LEN", "96"));
        http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    }

    @AfterContainer
    static void stop() {
        System.out.println("fuzz statuses: " + STATUSES);
        if (app != null) app.close();
    }

    static final Map<String, String> VALID = Map.of(
            "/v1/completions", "{\"model\":\"tiny\",\"prompt\":\"Hello\",\"max_tokens\":3,\"temperature\":0.5,\"stop\":[\"x\"],\"n\":1,\"logprobs\":1}",
            "/v1/chat/completions", "{\"model\":\"tiny\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief\"},{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Hi\"}]}],"
                    + "\"max_tokens\":3,\"top_p\":0.9,\"logit_bias\":{\"5\":1},\"response_format\":{\"type\":\"text\"},\"stream\":false}",
            "/v1/responses", "{\"model\":\"tiny\",\"input\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"instructions\":\"Be brief\",\"max_output_tokens\":3,"
                    + "\"metadata\":{\"k\":\"v\"},\"store\":false,\"truncation\":\"auto\"}",
            "/v1/embeddings", "{\"model\":\"all-minilm-l6-v2\",\"input\":[\"hello\",\"world\"],\"encoding_format\":\"float\"}",
            "/tokenize", "{\"model\":\"tiny\",\"prompt\":\"Hello world\",\"add_special_tokens\":false}",
            "/detokenize", "{\"model\":\"tiny\",\"tokens\":[72,101,108]}");

    /** One fuzz case: where, what bytes, which content type. */
    record Case(String path, byte[] body, String contentType, String mutation) {
        @Override
        public String toString() {
            return mutation + " on " + path;
        }
    }

    @Property(tries = 2000, seed = "20261123")
    void mutatedRequestsNeverBreakTheServer(@ForAll("cases") Case c) throws Exception {
        double scheduledBefore = scheduled();
        HttpRequest request = HttpRequest.newBuilder(URI.create(app.baseUri() + c.path())).timeout(BOUND)
                .header("Content-Type", c.contentType()).POST(HttpRequest.BodyPublishers.ofByteArray(c.body())).build();
        HttpResponse<String> response = http.send(request, HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8)); // a hang throws after BOUND
        int status = response.statusCode();
        String what = c + ": " + status + " " + abbreviate(response.body());
        STATUSES.merge(c.path() + " " + status, 1, Integer::sum);
        assertTrue(status < 500, what);
        if (status >= 400) {
            JsonNode error = JSON.readTree(response.body()).path("error");
            assertTrue(error.path("message").isTextual() && error.has("type"), "no error envelope: " + what);
            assertEquals(scheduledBefore, scheduled(), "a refused request reached the engine: " + what);
        }
    }

    /** Sequences the engine has scheduled so far (the queue-time histogram's count). */
    static double scheduled() throws Exception {
        String metrics = http.send(HttpRequest.newBuilder(URI.create(app.baseUri() + "/q/metrics")).build(),
                HttpResponse.BodyHandlers.ofString()).body();
        double total = 0;
        for (String line : metrics.split("\n")) {
            if (line.startsWith("ortserve_queue_time_seconds_count")) total += Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
        }
        return total;
    }

    static String abbreviate(String s) {
        return s.length() > 300 ? s.substring(0, 300) + "..." : s;
    }

    // ------------------------------------------------------------------ generators

    @Provide
    Arbitrary<Case> cases() {
        Arbitrary<String> paths = Arbitraries.of(new ArrayList<>(VALID.keySet()));
        return paths.flatMap(path -> Arbitraries.randomValue(r -> mutate(path, r)));
    }

    static Case mutate(String path, Random r) {
        ObjectNode valid;
        try {
            valid = (ObjectNode) JSON.readTree(VALID.get(path));
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
        int kind = r.nextInt(14);
        String json = "application/json";
        switch (kind) {
            case 0 -> {
                return new Case(path, VALID.get(path).getBytes(StandardCharsets.UTF_8), json, "none");
            }
            case 1 -> {
                String field = pick(valid, r);
                valid.remove(field);
                return new Case(path, bytes(valid), json, "drop " + field);
            }
            case 2 -> {
                String field = pick(valid, r);
                String text = valid.toString();
                String dup = text.substring(0, text.length() - 1) + ",\"" + field + "\":" + valid.get(field) + "}";
                return new Case(path, dup.getBytes(StandardCharsets.UTF_8), json, "duplicate " + field);
            }
            case 3 -> {
                String field = pickDeep(valid, r);
                JsonNode replacement = retype(r);
                setDeep(valid, field, replacement);
                return new Case(path, bytes(valid), json, "retype " + field + " to " + abbreviate(replacement.toString()));
            }
            case 4 -> {
                String field = pick(valid, r);
                JsonNode v = valid.get(field);
                ArrayNode wrapped = JSON.createArrayNode().add(v);
                valid.set(field, r.nextBoolean() ? wrapped : JSON.createObjectNode().set("value", v));
                return new Case(path, bytes(valid), json, "nest " + field);
            }
            case 5 -> {
                String field = pickDeep(valid, r);
                String[] numbers = {"1e308", "-1", "9223372036854775808", "-9223372036854775809", "0", "1.5e-320", "12345678901234567890123456789", "-0"};
                String n = numbers[r.nextInt(numbers.length)];
                String text = replaceDeep(valid, field, n);
                return new Case(path, text.getBytes(StandardCharsets.UTF_8), json, "number " + n + " in " + field);
            }
            case 6 -> {
                String field = pickDeep(valid, r);
                setDeep(valid, field, JSON.getNodeFactory().textNode("x".repeat(1 + r.nextInt(200_000))));
                return new Case(path, bytes(valid), json, "long string in " + field);
            }
            case 7 -> {
                String field = pickDeep(valid, r);
                setDeep(valid, field, JSON.getNodeFactory().textNode("a\u0000b\u0000" + "\uFFFF\uD7FF"));
                return new Case(path, bytes(valid), json, "NUL bytes in " + field);
            }
            case 8 -> {
                byte[] body = bytes(valid);
                String text = new String(body, StandardCharsets.UTF_8);
                int at = text.indexOf("\"", text.indexOf(":") + 1) + 1;
                byte[] invalid = new byte[body.length + 3];
                System.arraycopy(body, 0, invalid, 0, at);
                invalid[at] = (byte) 0xC3;
                invalid[at + 1] = (byte) 0x28;
                invalid[at + 2] = (byte) 0xFF;
                System.arraycopy(body, at, invalid, at + 3, body.length - at);
                return new Case(path, invalid, json, "invalid UTF-8");
            }
            case 9 -> {
                int depth = 100 + r.nextInt(20_000);
                String field = pick(valid, r);
                String deep = "[".repeat(depth) + "1" + "]".repeat(depth);
                return new Case(path, replaceDeep(valid, field, deep).getBytes(StandardCharsets.UTF_8), json, "depth " + depth + " in " + field);
            }
            case 10 -> {
                String field = pick(valid, r);
                int n = 1000 + r.nextInt(200_000);
                StringBuilder arr = new StringBuilder("[");
                for (int k = 0; k < n; k++) arr.append(k == 0 ? "" : ",").append(k % 7);
                arr.append(']');
                return new Case(path, replaceDeep(valid, field, arr.toString()).getBytes(StandardCharsets.UTF_8), json, "array of " + n + " in " + field);
            }
            case 11 -> {
                String[] types = {"text/plain", "application/xml", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/json; charset=latin1"};
                String type = types[r.nextInt(types.length)];
                return new Case(path, bytes(valid), type, "content type " + type);
            }
            case 12 -> {
                String[] bodies = {"", "null", "[]", "\"x\"", "{", "{}", "{\"model\":", "[{\"model\":\"tiny\"}]", "{\"model\":\"tiny\"}garbage"};
                String b = bodies[r.nextInt(bodies.length)];
                return new Case(path, b.getBytes(StandardCharsets.UTF_8), json, "body " + b);
            }
            default -> {
                valid.set("unknown_" + r.nextInt(100), JSON.getNodeFactory().numberNode(1));
                return new Case(path, bytes(valid), json, "unknown field");
            }
        }
    }

    static byte[] bytes(JsonNode node) {
        return node.toString().getBytes(StandardCharsets.UTF_8);
    }

    static String pick(ObjectNode node, Random r) {
        List<String> names = new ArrayList<>();
        node.fieldNames().forEachRemaining(names::add);
        return names.get(r.nextInt(names.size()));
    }

    /** A JSON pointer to any value inside the request (fields of nested objects and array elements too). */
    static String pickDeep(JsonNode node, Random r) {
        List<String> pointers = new ArrayList<>();
        collect(node, "", pointers);
        return pointers.get(r.nextInt(pointers.size()));
    }

    static void collect(JsonNode node, String at, List<String> out) {
        if (node.isObject()) {
            for (Iterator<Map.Entry<String, JsonNode>> it = node.fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> e = it.next();
                String p = at + "/" + e.getKey();
                out.add(p);
                collect(e.getValue(), p, out);
            }
        } else if (node.isArray()) {
            for (int i = 0; i < node.size(); i++) {
                out.add(at + "/" + i);
                collect(node.get(i), at + "/" + i, out);
            }
        }
    }

    static void setDeep(ObjectNode root, String pointer, JsonNode value) {
        int slash = pointer.lastIndexOf('/');
        JsonNode parent = slash == 0 ? root : root.at(pointer.substring(0, slash));
        String last = pointer.substring(slash + 1);
        if (parent instanceof ObjectNode o) o.set(last, value);
        else if (parent instanceof ArrayNode a) a.set(Integer.parseInt(last), value);
    }

    /** The request's JSON text with the value at {@code pointer} replaced by raw JSON text. */
    static String replaceDeep(ObjectNode root, String pointer, String raw) {
        String marker = "\"__FUZZ__\"";
        setDeep(root, pointer.startsWith("/") ? pointer : "/" + pointer, JSON.getNodeFactory().textNode("__FUZZ__"));
        return root.toString().replace(marker, raw);
    }

    static JsonNode retype(Random r) {
        return switch (r.nextInt(7)) {
            case 0 -> JSON.getNodeFactory().textNode("1");
            case 1 -> JSON.getNodeFactory().numberNode(r.nextInt(1000) - 500);
            case 2 -> JSON.getNodeFactory().booleanNode(r.nextBoolean());
            case 3 -> JSON.getNodeFactory().nullNode();
            case 4 -> JSON.createArrayNode().add(1).add("a");
            case 5 -> JSON.createObjectNode().put("a", 1);
            default -> JSON.getNodeFactory().numberNode(0.5);
        };
    }
}
