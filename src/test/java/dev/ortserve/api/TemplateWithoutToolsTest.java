package dev.ortserve.api;

import dev.ortserve.ApiTest;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.Map;

import static org.hamcrest.Matchers.containsString;
import static org.hamcrest.Matchers.equalTo;
import static org.hamcrest.Matchers.nullValue;

/**
 * A chat template with no tool support and no parser configured: tools with tool_choice auto or
 * required are refused before any model work, saying the template has no tool calling; with
 * tool_choice none they are accepted (no parser is needed when the output is never parsed).
 */
@QuarkusTest
@TestProfile(TemplateWithoutToolsTest.Profile.class)
class TemplateWithoutToolsTest extends ApiTest {

    public static class Profile implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            return Map.of("ortserve.chat-template", Path.of("src/test/resources/templates/plain-chat.jinja").toAbsolutePath().toString());
        }
    }

    static final String TOOLS = "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}]";
    static final String CHAT = "{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":2," + TOOLS;

    @Test
    void modelsSayNoToolCallParser() {
        json().get("/v1/models/" + MODEL).then().statusCode(200)
                .body("parsers.tool_call", equalTo("none")).body("parsers.reasoning", equalTo("qwen3"));
    }

    @Test
    void toolsWithAutoOrRequiredAreRefused() {
        for (String choice : new String[] {"", ",\"tool_choice\":\"auto\"", ",\"tool_choice\":\"required\"",
                ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}}"}) {
            json().body(CHAT + choice + "}").post("/v1/chat/completions").then().statusCode(400)
                    .body("error.param", equalTo("tools")).body("error.type", equalTo("invalid_request_error"))
                    .body("error.message", containsString("chat template has no tool calling"));
        }
        json().body("{\"model\":\"tiny\",\"input\":\"Hi\",\"tools\":[{\"type\":\"function\",\"name\":\"f\"}]}").post("/v1/responses")
                .then().statusCode(400).body("error.param", equalTo("tools"))
                .body("error.message", containsString("chat template has no tool calling"));
        // the Messages API, count_tokens too: the one refusal in the service's turn preparation, in Anthropic's envelope
        String messages = "{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],"
                + "\"tools\":[{\"name\":\"f\",\"input_schema\":{\"type\":\"object\"}}]";
        json().body(messages + ",\"max_tokens\":2}").post("/v1/messages").then().statusCode(400).body("type", equalTo("error"))
                .body("error.message", containsString("chat template has no tool calling"));
        json().body(messages + "}").post("/v1/messages/count_tokens").then().statusCode(400).body("type", equalTo("error"))
                .body("error.message", containsString("chat template has no tool calling"));
    }

    @Test
    void toolChoiceNoneNeedsNoParser() {
        json().body(CHAT + ",\"tool_choice\":\"none\"}").post("/v1/chat/completions").then().statusCode(200)
                .body("choices[0].message.tool_calls", nullValue());
        json().body("{\"model\":\"tiny\",\"input\":\"Hi\",\"max_output_tokens\":2,\"tool_choice\":\"none\",\"tools\":[{\"type\":\"function\",\"name\":\"f\"}]}")
                .post("/v1/responses").then().statusCode(200);
    }
}
