package dev.ortserve.api;

import dev.ortserve.ApiTest;
import dev.ortserve.contract.SseFrames;
import io.quarkus.test.junit.QuarkusTest;
import io.restassured.path.json.JsonPath;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.containsString;
import static org.hamcrest.Matchers.equalTo;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The Messages API on the wire (every exchange contract-validated): the message and its stream's
 * event sequence, stop sequences, count_tokens against /tokenize, and every client error in
 * Anthropic's envelope with Anthropic's statuses, on the plain tiny model (no parsers).
 */
@QuarkusTest
class AnthropicMessagesTest extends ApiTest {

    @jakarta.inject.Inject
    dev.ortserve.service.GenerationModelHost host;

    @io.quarkus.test.common.http.TestHTTPResource
    java.net.URL base;

    /** Clients that vanish (TCP reset) after a stream's first event cancel their generations, as on the chat routes. */
    @Test
    void disconnectedStreamsAreCancelled() throws Exception {
        String body = "{\"model\":\"" + MODEL + "\",\"max_tokens\":1500,\"temperature\":0,\"stream\":true,"
                + "\"messages\":[{\"role\":\"user\",\"content\":\"A long story\"}]}";
        byte[] request = ("POST /v1/messages HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: "
                + body.getBytes(java.nio.charset.StandardCharsets.UTF_8).length + "\r\n\r\n" + body).getBytes(java.nio.charset.StandardCharsets.UTF_8);
        for (int i = 0; i < 20; i++) {
            try (java.net.Socket socket = new java.net.Socket(base.getHost(), base.getPort())) {
                socket.setSoTimeout(30_000);
                socket.getOutputStream().write(request);
                socket.getOutputStream().flush();
                java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(socket.getInputStream(),
                        java.nio.charset.StandardCharsets.UTF_8));
                for (String line; (line = in.readLine()) != null; ) {
                    if (line.startsWith("event: message_start")) break; // the stream is live: now vanish
                }
                socket.setSoLinger(true, 0);
            }
        }
        awaitIdle();
        json().body(request("")).post("/v1/messages").then().statusCode(200);
    }

    private void awaitIdle() throws InterruptedException {
        long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(10);
        while (host.engine().runningSequences() + host.engine().waitingSequences() > 0) {
            assertTrue(System.nanoTime() < deadline, "sequences left: running " + host.engine().runningSequences());
            Thread.sleep(20);
        }
    }

    static String request(String extra) {
        return "{\"model\":\"" + MODEL + "\",\"max_tokens\":12,\"temperature\":0,\"system\":[{\"type\":\"text\",\"text\":\"Be brief.\","
                + "\"cache_control\":{\"type\":\"ephemeral\"}}],\"messages\":[{\"role\":\"user\",\"content\":\"Say something\"}]" + extra + "}";
    }

    /**
     * The stream's text deltas concatenate to the message's text. The two are separate greedy generations of the
     * plain tiny model, whose next-token logits are nearly flat (top two a few hundredths apart), so both run on the
     * same engine path: alone on an idle engine, after a first request put the prompt in the prefix cache (both
     * reuse the same cached blocks and prefill the same rest). A mismatch says what each request saw.
     */
    @Test
    void messageAndItsStream() throws InterruptedException {
        awaitIdle();
        json().body(request("")).post("/v1/messages").then().statusCode(200);
        awaitIdle();
        JsonPath m = json().header("anthropic-version", "2023-06-01").body(request("")).post("/v1/messages").then().statusCode(200)
                .body("type", equalTo("message")).body("role", equalTo("assistant")).body("stop_reason", equalTo("max_tokens"))
                .body("usage.output_tokens", equalTo(12)).body("content[0].type", equalTo("text")).extract().jsonPath();
        String text = m.getString("content[0].text");
        awaitIdle();
        String sse = json().body(request(",\"stream\":true")).post("/v1/messages").then().statusCode(200).extract().asString();
        List<String> types = new ArrayList<>();
        StringBuilder streamed = new StringBuilder();
        for (SseFrames.Frame f : SseFrames.parse(sse)) {
            types.add(f.event());
            JsonPath p = JsonPath.from(f.data());
            assertEquals(f.event(), p.getString("type"));
            if ("content_block_delta".equals(f.event())) streamed.append(p.getString("delta.text"));
            if ("message_delta".equals(f.event())) {
                assertEquals("max_tokens", p.getString("delta.stop_reason"));
                assertEquals(12, p.getInt("usage.output_tokens"));
            }
        }
        if (!text.equals(streamed.toString())) {
            awaitIdle();
            String again = json().body(request("")).post("/v1/messages").then().extract().jsonPath().getString("content[0].text");
            assertEquals(text, streamed.toString(), "message usage " + m.getMap("usage") + "; stream " + sse + "; the message again: " + again
                    + "; prefix cache " + (host.engine() instanceof dev.ortserve.engine.batching.ContinuousBatchingEngine c ? c.prefixCache() : null));
        }
        assertEquals(List.of("message_start", "ping", "content_block_start"), types.subList(0, 3));
        assertEquals(List.of("content_block_stop", "message_delta", "message_stop"), types.subList(types.size() - 3, types.size()));
        assertTrue(types.subList(3, types.size() - 3).stream().allMatch("content_block_delta"::equals), types.toString());
    }

    @Test
    void stopSequenceEndsTheMessage() {
        String text = json().body(request("")).post("/v1/messages").then().statusCode(200).extract().jsonPath().getString("content[0].text");
        String stop = text.substring(Math.min(3, text.length() - 2), Math.min(3, text.length() - 2) + 2);
        json().body(request(",\"stop_sequences\":[" + quoted(stop) + "]")).post("/v1/messages").then().statusCode(200)
                .body("stop_reason", equalTo("stop_sequence")).body("stop_sequence", equalTo(stop));
    }

    /** What Claude Code sends besides the basics: a system message in the conversation, adaptive thinking, context edits, effort. */
    @Test
    void claudeCodesRequestShape() {
        String body = "{\"model\":\"" + MODEL + "\",\"max_tokens\":32000,\"stream\":true,\"metadata\":{\"user_id\":\"{\\\"session_id\\\":\\\"s\\\"}\"},"
                + "\"system\":[{\"type\":\"text\",\"text\":\"You are a CLI.\"},{\"type\":\"text\",\"text\":\"Be brief.\",\"cache_control\":{\"type\":\"ephemeral\"}}],"
                + "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"say hi\"}]},"
                + "{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":\"Reminder.\",\"cache_control\":{\"type\":\"ephemeral\"}}]}],"
                + "\"tools\":[{\"name\":\"Bash\",\"description\":\"Run\",\"input_schema\":{\"$schema\":\"http://json-schema.org/draft-07/schema#\",\"type\":\"object\","
                + "\"properties\":{\"command\":{\"type\":\"string\"}},\"required\":[\"command\"],\"additionalProperties\":false}}],"
                + "\"thinking\":{\"type\":\"adaptive\"},\"context_management\":{\"edits\":[{\"type\":\"clear_thinking_20251015\",\"keep\":\"all\"}]},"
                + "\"output_config\":{\"effort\":\"high\"}}";
        String sse = given().contentType("application/json").header("anthropic-beta", "claude-code-20250219").queryParam("beta", "true")
                .body(body).post("/v1/messages").then().statusCode(200).extract().asString();
        List<SseFrames.Frame> frames = SseFrames.parse(sse);
        assertEquals("message_stop", frames.get(frames.size() - 1).event(), sse);
    }

    @Test
    void countTokensIsWhatTokenizeRenders() {
        int counted = json().body("{\"model\":\"" + MODEL + "\",\"system\":\"Be brief.\",\"messages\":[{\"role\":\"user\",\"content\":\"Say something\"}]}")
                .post("/v1/messages/count_tokens").then().statusCode(200).extract().jsonPath().getInt("input_tokens");
        int tokenized = json().body("{\"model\":\"" + MODEL + "\",\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                        + "{\"role\":\"user\",\"content\":\"Say something\"}],\"chat_template_kwargs\":{\"enable_thinking\":false}}")
                .post("/tokenize").then().statusCode(200).extract().jsonPath().getInt("count");
        assertEquals(tokenized, counted);
    }

    @Test
    void imagesAreReadUntilATextOnlyModelRefusesThemNamingIt() {
        String png = "{\"type\":\"image\",\"source\":{\"type\":\"base64\",\"media_type\":\"image/png\",\"data\":\"iVBORw0KGgo=\"}}";
        String url = "{\"type\":\"image\",\"source\":{\"type\":\"url\",\"url\":\"https://example.com/a.png\"}}";
        String says = "'" + MODEL + "' takes text only";
        error(400, "invalid_request_error", userBlocks("{\"type\":\"text\",\"text\":\"what is this?\"}," + png), says);
        error(400, "invalid_request_error", userBlocks(url), says);
        // a screenshot in a tool result (Claude Code's Read of an image file)
        error(400, "invalid_request_error", "{\"model\":\"" + MODEL + "\",\"max_tokens\":4,\"messages\":["
                + "{\"role\":\"user\",\"content\":\"look\"},"
                + "{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"read\",\"input\":{}}]},"
                + "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_1\",\"content\":[" + png + "]}]}]}", says);
        error(400, "invalid_request_error", userBlocks("{\"type\":\"image\",\"source\":{\"type\":\"file\",\"file_id\":\"file_1\"}}"), "no Files API");
        error(400, "invalid_request_error", userBlocks("{\"type\":\"image\",\"source\":{\"type\":\"base64\",\"data\":\"AAAA\"}}"), "'media_type'");
        error(400, "invalid_request_error", userBlocks("{\"type\":\"image\",\"source\":{\"type\":\"url\",\"url\":\"file:///etc/passwd\"}}"),
                "http(s) URL");
        error(400, "invalid_request_error", "{\"model\":\"" + MODEL + "\",\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},"
                + "{\"role\":\"assistant\",\"content\":[" + png + "]}]}", "cannot hold a 'image' block");
        // count_tokens counts what /v1/messages would run: the same refusal
        json().body(userBlocks(png).replace("\"max_tokens\":4,", "")).post("/v1/messages/count_tokens").then().statusCode(400)
                .body("error.message", containsString(says));
    }

    private static String userBlocks(String blocks) {
        return "{\"model\":\"" + MODEL + "\",\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":[" + blocks + "]}]}";
    }

    @Test
    void clientErrorsInAnthropicsEnvelope() {
        error(400, "invalid_request_error", "{\"model\":\"" + MODEL + "\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", "max_tokens");
        error(400, "invalid_request_error", request(",\"frequency_penalty\":1"), "frequency_penalty");
        error(400, "invalid_request_error", "{\"model\":", "JSON");
        error(400, "invalid_request_error", "{\"model\":\"" + MODEL + "\",\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\","
                + "\"source\":{\"type\":\"base64\",\"media_type\":\"image/png\",\"data\":\"AAAA\"}}]}]}", "text only");
        error(400, "invalid_request_error", request(",\"tool_choice\":{\"type\":\"any\"}"), "'tool_choice' 'any' needs 'tools'");
        error(400, "invalid_request_error", request(",\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":40}"), "budget_tokens");
        error(400, "invalid_request_error", "{\"model\":\"" + MODEL + "\",\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_use\","
                + "\"id\":\"toolu_1\",\"name\":\"f\",\"input\":{}}]}]}", "cannot hold a 'tool_use' block");
        error(404, "not_found_error", request("").replace("\"" + MODEL + "\"", "\"no-such-model\""), "no-such-model");
        given().contentType("application/json").body(request("")).post("/v1/messages/nope").then().statusCode(404)
                .body("type", equalTo("error")).body("error.type", equalTo("not_found_error"));
        given().get("/v1/messages").then().statusCode(405).body("type", equalTo("error")).body("error.type", equalTo("invalid_request_error"));
        given().contentType("text/plain").body("hi").post("/v1/messages").then().statusCode(415).body("error.type", equalTo("invalid_request_error"));
        // the OpenAI routes keep OpenAI's envelope
        json().body("{\"model\":\"no-such-model\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}").post("/v1/chat/completions")
                .then().statusCode(404).body("error.code", equalTo("model_not_found"));
    }

    private static void error(int status, String type, String body, String says) {
        json().body(body).post("/v1/messages").then().statusCode(status).body("type", equalTo("error"))
                .body("error.type", equalTo(type)).body("error.message", containsString(says));
    }

    private static String quoted(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n") + "\"";
    }
}
