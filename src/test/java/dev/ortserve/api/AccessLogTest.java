package dev.ortserve.api;

import dev.ortserve.ApiTest;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import io.restassured.response.Response;
import org.junit.jupiter.api.Test;

import java.net.URL;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The access log in its default text format: one line per request, with its status, model, tokens and error code. */
@QuarkusTest
class AccessLogTest extends ApiTest {

    @TestHTTPResource
    URL base;

    private static final String CHAT = "{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":5,"
            + "\"temperature\":0,\"ignore_eos\":true";

    @Test
    void aJsonAnswerHasItsModelAndTokens() throws Exception {
        try (AccessLogLines log = new AccessLogLines()) {
            Response r = json().body(CHAT + "}").post("/v1/chat/completions");
            r.then().statusCode(200);
            String id = r.header("x-request-id");
            int prompt = r.jsonPath().getInt("usage.prompt_tokens");
            AccessLogLines.Line line = log.await(m -> m.contains("request_id=" + id));
            assertEquals("POST /v1/chat/completions 200 ", line.message().substring(0, 30), line.message());
            assertTrue(Pattern.compile(" \\d+ms request_id=" + Pattern.quote(id) + " model=tiny prompt_tokens=" + prompt
                    + " completion_tokens=5$").matcher(line.message()).find(), line.message());
            assertEquals(id, line.mdcRequestId(), "the request id is in the line's MDC");
        }
    }

    @Test
    void aStreamIsLoggedWhenItEndsWithItsTokens() throws Exception {
        try (AccessLogLines log = new AccessLogLines()) {
            Response r = json().header("x-request-id", "stream-1").body(CHAT + ",\"stream\":true}").post("/v1/chat/completions");
            r.then().statusCode(200);
            assertTrue(r.asString().contains("[DONE]"));
            String line = log.await(m -> m.contains("request_id=stream-1")).message();
            assertTrue(line.startsWith("POST /v1/chat/completions 200 "), line);
            assertTrue(line.endsWith(" model=tiny prompt_tokens=" + promptTokens(line) + " completion_tokens=5"), line);
        }
    }

    @Test
    void aRefusedRequestHasItsErrorCode() throws Exception {
        try (AccessLogLines log = new AccessLogLines()) {
            json().header("x-request-id", "bad-1").body("{\"model\":\"tiny\",\"messages\":[]}").post("/v1/chat/completions")
                    .then().statusCode(400);
            String line = log.await(m -> m.contains("request_id=bad-1")).message();
            assertTrue(line.startsWith("POST /v1/chat/completions 400 "), line);
            assertTrue(line.contains(" error="), line);
            assertTrue(!line.contains("prompt_tokens"), "no model ran: " + line);

            json().header("x-request-id", "bad-2").body("{\"model\":\"nope\",\"prompt\":\"x\"}").post("/v1/completions")
                    .then().statusCode(404);
            line = log.await(m -> m.contains("request_id=bad-2")).message();
            assertTrue(line.startsWith("POST /v1/completions 404 ") && line.endsWith(" error=model_not_found"), line);
        }
    }

    @Test
    void aResponsesAnswerHasItsTokens() throws Exception {
        try (AccessLogLines log = new AccessLogLines()) {
            Response r = json().header("x-request-id", "resp-1")
                    .body("{\"model\":\"tiny\",\"input\":\"Hello\",\"max_output_tokens\":4,\"temperature\":0}").post("/v1/responses");
            r.then().statusCode(200);
            String line = log.await(m -> m.contains("request_id=resp-1")).message();
            assertTrue(line.startsWith("POST /v1/responses 200 ") && line.endsWith(" model=tiny prompt_tokens="
                    + r.jsonPath().getInt("usage.input_tokens") + " completion_tokens=" + r.jsonPath().getInt("usage.output_tokens")), line);
        }
    }

    @Test
    void embeddingsHaveTheirPromptTokens() throws Exception {
        try (AccessLogLines log = new AccessLogLines()) {
            Response r = json().header("x-request-id", "emb-1").body("{\"model\":\"all-minilm-l6-v2\",\"input\":\"hello world\"}")
                    .post("/v1/embeddings");
            r.then().statusCode(200);
            int prompt = r.jsonPath().getInt("usage.prompt_tokens");
            String line = log.await(m -> m.contains("request_id=emb-1")).message();
            assertTrue(line.startsWith("POST /v1/embeddings 200 ") && line.endsWith(" model=all-minilm-l6-v2 prompt_tokens=" + prompt), line);
        }
    }

    @Test
    void everyResponseCreateOnAWebSocketHasItsLine() throws Exception {
        try (AccessLogLines log = new AccessLogLines(); WsClient ws = WsClient.connect(base)) {
            ws.send("{\"type\":\"response.create\",\"model\":\"tiny\",\"store\":false,\"temperature\":0,\"max_output_tokens\":4,"
                    + "\"input\":\"Hello\"}");
            var events = ws.events();
            var usage = events.get(events.size() - 1).path("response").path("usage");
            ws.send("{\"type\":\"response.create\",\"model\":\"tiny\",\"input\":3}");
            ws.error();
            String upgrade = log.await(m -> m.startsWith("GET /v1/responses 101 ")).message();
            String id = requestId(upgrade);
            String ok = log.await(m -> m.startsWith("WS /v1/responses 200 ") && m.contains("request_id=" + id)).message();
            assertTrue(ok.endsWith(" model=tiny prompt_tokens=" + usage.path("input_tokens").asInt() + " completion_tokens="
                    + usage.path("output_tokens").asInt()), ok + " " + usage);
            String refused = log.await(m -> m.startsWith("WS /v1/responses 400 ") && m.contains("request_id=" + id)).message();
            assertTrue(refused.contains(" error="), refused);
        }
    }

    @Test
    void probesAreNotLogged() throws Exception {
        try (AccessLogLines log = new AccessLogLines()) {
            io.restassured.RestAssured.given().header("x-request-id", "probe-1").get("/q/health/ready");
            io.restassured.RestAssured.given().header("x-request-id", "models-1").get("/v1/models").then().statusCode(200);
            String line = log.await(m -> m.contains("request_id=models-1")).message();
            assertTrue(line.startsWith("GET /v1/models 200 "), line);
            assertNull(log.lines().stream().filter(l -> l.message().contains("probe-1")).findAny().orElse(null));
        }
    }

    static int promptTokens(String line) {
        Matcher m = Pattern.compile("prompt_tokens=(\\d+)").matcher(line);
        assertTrue(m.find(), line);
        return Integer.parseInt(m.group(1));
    }

    static String requestId(String line) {
        Matcher m = Pattern.compile("request_id=(\\S+)").matcher(line);
        assertTrue(m.find(), line);
        return m.group(1);
    }
}
