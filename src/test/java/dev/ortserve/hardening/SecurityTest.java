package dev.ortserve.hardening;

import dev.ortserve.ApiTest;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;
import io.restassured.response.Response;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;

import static io.restassured.RestAssured.given;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** What the server never discloses: API keys and prompts in its log, its software in headers, its API to other origins. */
@QuarkusTest
@TestProfile(SecurityTest.Profile.class)
class SecurityTest extends ApiTest {

    static final String KEY = "sk-never-logged-7f3a9";
    static final String WRONG_KEY = "sk-wrong-also-never-logged-5c1d";
    static final String PROMPT = "my secret prompt 91c2e";
    static final Path LOG = Path.of("target", "security-test.log");

    public static class Profile implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            return Map.of("ortserve.api-keys", KEY, "quarkus.log.file.enabled", "true", "quarkus.log.file.path", LOG.toString());
        }
    }

    @Test
    void keysAndPromptsStayOutOfTheLog() throws Exception {
        given().header("Authorization", "Bearer " + KEY).contentType("application/json")
                .body("{\"model\":\"tiny\",\"prompt\":\"" + PROMPT + "\",\"max_tokens\":2}").post("/v1/completions").then().statusCode(200);
        given().header("Authorization", "Bearer " + KEY).contentType("application/json")
                .body("{\"model\":\"tiny\",\"input\":\"" + PROMPT + "\",\"max_output_tokens\":2}").post("/v1/responses").then().statusCode(200);
        given().header("Authorization", "Bearer " + WRONG_KEY).get("/v1/models").then().statusCode(401);
        given().header("Authorization", "Bearer " + KEY).contentType("application/json")
                .body("{\"model\":\"tiny\",\"prompt\":\"" + PROMPT + "\",\"max_tokens\":-1}").post("/v1/completions").then().statusCode(400);
        Thread.sleep(300); // the file handler flushes asynchronously on some platforms
        String log = Files.readString(LOG);
        assertTrue(log.contains("API key authentication on"), "the log is being written");
        assertFalse(log.contains(KEY), "an API key was logged");
        assertFalse(log.contains(WRONG_KEY), "a presented key was logged");
        assertFalse(log.contains(PROMPT), "a prompt was logged");
    }

    @Test
    void noSoftwareHeadersAndNoCorsUnlessConfigured() {
        Response r = given().header("Authorization", "Bearer " + KEY).get("/v1/models");
        assertNull(r.getHeader("Server"));
        assertNull(r.getHeader("X-Powered-By"));
        Response preflight = given().header("Origin", "https://evil.example").header("Access-Control-Request-Method", "POST")
                .options("/v1/chat/completions");
        assertNull(preflight.getHeader("Access-Control-Allow-Origin"), "CORS is off by default");
        Response cross = given().header("Origin", "https://evil.example").header("Authorization", "Bearer " + KEY).get("/v1/models");
        assertNull(cross.getHeader("Access-Control-Allow-Origin"));
    }
}
