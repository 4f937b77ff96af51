package dev.ortserve.api;

import dev.ortserve.ApiTest;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

import static org.hamcrest.Matchers.containsString;
import static org.hamcrest.Matchers.equalTo;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** A request's own chat template (vLLM's chat_template field) on a server that allows it, with its limits. */
@QuarkusTest
@TestProfile(RequestChatTemplateTest.Profile.class)
class RequestChatTemplateTest extends ApiTest {

    public static class Profile implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            return Map.of("ortserve.allow-request-chat-template", "true", "ortserve.chat-template-timeout", "6s",
                    "ortserve.chat-template-max-chars", "100000");
        }
    }

    static final String TEMPLATE = "{%- for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}"
            + "{%- if documents %}{{ documents | tojson }}{% endif %}{{ marker }}";
    static final String LOOP = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}";

    static String quoted(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n") + "\"";
    }

    @Test
    void theRequestTemplateRendersWithDocumentsAndKwargsOnChatAndTokenize() {
        String body = "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"chat_template\":" + quoted(TEMPLATE)
                + ",\"documents\":[{\"title\":\"T\",\"text\":\"X\"}],\"chat_template_kwargs\":{\"marker\":\"!\"}";
        // jinja2 renders: [user]hi[{"title": "T", "text": "X"}]!
        List<Integer> expected = ChatTemplateInputsTest.tokensOf("[user]hi[{\"title\": \"T\", \"text\": \"X\"}]!");
        List<Integer> tokens = json().body("{" + body + "}").post("/tokenize").then().statusCode(200)
                .extract().jsonPath().getList("tokens", Integer.class);
        assertEquals(expected, tokens);
        json().body("{\"model\":\"" + MODEL + "\"," + body + ",\"max_tokens\":2}").post("/v1/chat/completions")
                .then().statusCode(200).body("usage.prompt_tokens", equalTo(expected.size()));
        String stream = json().body("{\"model\":\"" + MODEL + "\"," + body + ",\"max_tokens\":2,\"stream\":true,"
                + "\"stream_options\":{\"include_usage\":true}}").post("/v1/chat/completions").then().statusCode(200).extract().asString();
        assertTrue(stream.contains("\"prompt_tokens\":" + expected.size()) && stream.trim().endsWith("data: [DONE]"), stream);
    }

    @Test
    void aTemplateThatDoesNotCompileIs400NamingItsLine() {
        json().body("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"chat_template\":" + quoted("ok\n{% if %}") + "}")
                .post("/tokenize").then().statusCode(400).body("error.param", equalTo("chat_template"))
                .body("error.code", equalTo("chat_template_error")).body("error.message", containsString("line 2"));
    }

    @Test
    void aTemplateThatRaisesIs400WithItsMessage() {
        json().body("{\"model\":\"" + MODEL + "\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"chat_template\":"
                        + quoted("{{ raise_exception('Only one system message, please') }}") + "}")
                .post("/v1/chat/completions").then().statusCode(400).body("error.code", equalTo("chat_template_error"))
                .body("error.message", equalTo("Only one system message, please"));
    }

    @Test
    void aTemplateThatBuildsHugeTextIsCutOffWith400() {
        json().body("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"chat_template\":"
                        + quoted("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s }}") + "}")
                .post("/tokenize").then().statusCode(400).body("error.code", equalTo("chat_template_error"))
                .body("error.message", containsString("100000 characters"));
    }

    @io.quarkus.test.common.http.TestHTTPResource("/tokenize")
    java.net.URI tokenize;

    @Test
    void templatesThatLoopForeverAreCutOffWithoutHoldingUpOtherRequests() {
        // four renders that would run for hours, each stopped by its 6 s deadline on a worker thread
        String plain = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
        json().body(plain).post("/tokenize").then().statusCode(200); // the client side warmed up (contract loaded)
        java.net.http.HttpClient client = java.net.http.HttpClient.newHttpClient();
        java.net.http.HttpRequest loop = java.net.http.HttpRequest.newBuilder(tokenize).header("Content-Type", "application/json")
                .POST(java.net.http.HttpRequest.BodyPublishers.ofString("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"chat_template\":"
                        + quoted(LOOP) + "}")).build();
        List<CompletableFuture<java.net.http.HttpResponse<String>>> loops = new ArrayList<>();
        for (int i = 0; i < 4; i++) loops.add(client.sendAsync(loop, java.net.http.HttpResponse.BodyHandlers.ofString()));
        // meanwhile a plain request is answered (about 0.5 s here with four renders spinning on two cores):
        // the I/O threads are not the ones rendering
        json().body(plain).post("/tokenize").then().statusCode(200);
        assertTrue(loops.stream().noneMatch(CompletableFuture::isDone), "the plain request was answered while the loops still ran");
        for (CompletableFuture<java.net.http.HttpResponse<String>> f : loops) {
            java.net.http.HttpResponse<String> r = f.join();
            assertEquals(400, r.statusCode(), r.body());
            assertTrue(r.body().contains("chat_template_error") && r.body().contains("time limit"), r.body());
        }
    }
}
