package dev.ortserve.api;

import dev.ortserve.ApiTest;
import dev.ortserve.contract.SseFrames;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;
import io.restassured.path.json.JsonPath;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Map;

import static org.hamcrest.Matchers.equalTo;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

/**
 * Chat with a tool-call parser (hermes) and a reasoning parser (deepseek_r1) configured. The
 * random-weight model is steered with logit_bias onto the markers, so the outputs exercise the
 * paths the parsers must survive: marker soup that is no valid call stays content, and the text
 * after a closing </think> is content.
 */
@QuarkusTest
@TestProfile(ChatParsersTest.Profile.class)
class ChatParsersTest extends ApiTest {

    public static class Profile implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            return Map.of("ortserve.tool-call-parser", "hermes", "ortserve.reasoning-parser", "deepseek_r1");
        }
    }

    static final String TOOLS = "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\",\"properties\":{\"location\":{\"type\":\"string\"}}}}}]";

    @Test
    void unterminatedReasoningHoldsEverythingAndNoCallIsMade() {
        // token 261 is <tool_call>: with deepseek_r1 an output that never closes </think> is all reasoning,
        // and a run of opening tags is no call either way
        String body = "{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}],\"tools\":" + TOOLS
                + ",\"max_tokens\":3,\"logit_bias\":{\"261\":100},\"ignore_eos\":true";
        JsonPath r = json().body(body + "}").post("/v1/chat/completions").then().statusCode(200)
                .body("choices[0].finish_reason", equalTo("length")).extract().jsonPath();
        assertEquals("<tool_call><tool_call><tool_call>", r.getString("choices[0].message.reasoning_content"));
        assertEquals("", r.getString("choices[0].message.content"));
        assertNull(r.get("choices[0].message.tool_calls"));
        String sse = json().body(body + ",\"stream\":true}").post("/v1/chat/completions").then().statusCode(200).extract().asString();
        StringBuilder reasoning = new StringBuilder();
        List<String> payloads = SseFrames.data(sse);
        for (String p : payloads) {
            JsonPath chunk = JsonPath.from(p);
            assertNull(chunk.get("choices[0].delta.tool_calls"));
            if (chunk.get("choices[0].delta.reasoning_content") != null) reasoning.append(chunk.getString("choices[0].delta.reasoning_content"));
        }
        assertEquals("<tool_call><tool_call><tool_call>", reasoning.toString());
    }

    @Test
    void textAfterTheClosingThinkTagIsContent() {
        // token 260 is </think>: the first one closes the (template-opened) reasoning, which is empty
        String body = "{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"6*7?\"}],\"max_tokens\":3,\"logit_bias\":{\"260\":100},\"ignore_eos\":true";
        JsonPath r = json().body(body + "}").post("/v1/chat/completions").then().statusCode(200).extract().jsonPath();
        assertNull(r.get("choices[0].message.reasoning_content"));
        assertEquals("</think></think>", r.getString("choices[0].message.content"));
        String sse = json().body(body + ",\"stream\":true}").post("/v1/chat/completions").then().statusCode(200).extract().asString();
        StringBuilder content = new StringBuilder();
        for (String p : SseFrames.data(sse)) {
            JsonPath chunk = JsonPath.from(p);
            assertNull(chunk.get("choices[0].delta.reasoning_content"));
            if (chunk.get("choices[0].delta.content") != null) content.append(chunk.getString("choices[0].delta.content"));
        }
        assertEquals("</think></think>", content.toString());
    }

    @Test
    void requiredToolChoiceIsRefusedUntilConstrainedDecoding() {
        json().body("{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":" + TOOLS + ",\"tool_choice\":\"required\"}")
                .post("/v1/chat/completions").then().statusCode(400).body("error.param", equalTo("tool_choice"));
    }
}
