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
import static org.junit.jupiter.api.Assertions.assertTrue;

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

    static final String ARGS_SCHEMA = "{\"type\":\"object\",\"properties\":{\"location\":{\"type\":\"string\",\"maxLength\":20},"
            + "\"days\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":7}},\"required\":[\"location\",\"days\"],\"additionalProperties\":false}";
    static final String FORCED_TOOLS = "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":" + ARGS_SCHEMA + "}},"
            + "{\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"parameters\":{\"type\":\"object\",\"properties\":{\"zone\":{\"enum\":[\"UTC\",\"CET\"]}},\"required\":[\"zone\"]}}}]";

    @Test
    void aRequiredToolChoiceAlwaysYieldsAValidCall() throws Exception {
        int calls = 0;
        for (int seed = 0; seed < 8; seed++) {
            JsonPath r = json().body("{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}],\"tools\":" + FORCED_TOOLS
                    + ",\"tool_choice\":\"required\",\"max_tokens\":120,\"seed\":" + seed + "}").post("/v1/chat/completions")
                    .then().statusCode(200).extract().jsonPath();
            if (r.getString("choices[0].finish_reason").equals("length")) continue;
            assertEquals("tool_calls", r.getString("choices[0].finish_reason"));
            String name = r.getString("choices[0].message.tool_calls[0].function.name");
            String args = r.getString("choices[0].message.tool_calls[0].function.arguments");
            if (name.equals("get_weather")) {
                StructuredOutputsTest.assertValid(ARGS_SCHEMA, args);
            } else {
                assertEquals("get_time", name);
                assertTrue(List.of("UTC", "CET").contains(new com.fasterxml.jackson.databind.ObjectMapper().readTree(args).get("zone").asText()));
            }
            calls++;
        }
        assertTrue(calls >= 4, "calls completed: " + calls);
    }

    @Test
    void aNamedToolChoiceCallsThatFunction() throws Exception {
        for (int seed = 0; seed < 4; seed++) {
            JsonPath r = json().body("{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}],\"tools\":" + FORCED_TOOLS
                    + ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}},\"max_tokens\":120,\"seed\":" + seed + "}")
                    .post("/v1/chat/completions").then().statusCode(200).extract().jsonPath();
            if (r.getString("choices[0].finish_reason").equals("length")) continue;
            assertEquals("get_weather", r.getString("choices[0].message.tool_calls[0].function.name"));
            StructuredOutputsTest.assertValid(ARGS_SCHEMA, r.getString("choices[0].message.tool_calls[0].function.arguments"));
        }
        json().body("{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":" + FORCED_TOOLS
                + ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"nope\"}}}").post("/v1/chat/completions")
                .then().statusCode(400).body("error.param", equalTo("tool_choice"));
    }

    @Test
    void responsesForcedFunctionCallsStreamAndValidate() throws Exception {
        String tools = "[{\"type\":\"function\",\"name\":\"get_weather\",\"parameters\":" + ARGS_SCHEMA + "}]";
        int done = 0;
        for (int i = 0; i < 4; i++) {
            String body = "{\"model\":\"tiny\",\"input\":\"Weather in city " + i + "?\",\"tools\":" + tools + ",\"tool_choice\":\"required\",\"max_output_tokens\":120";
            JsonPath r = json().body(body + "}").post("/v1/responses").then().statusCode(200).extract().jsonPath();
            if (!r.getString("status").equals("completed")) continue;
            List<String> types = r.getList("output.type");
            int at = types.indexOf("function_call");
            assertTrue(at >= 0, types.toString());
            assertEquals("get_weather", r.getString("output[" + at + "].name"));
            StructuredOutputsTest.assertValid(ARGS_SCHEMA, r.getString("output[" + at + "].arguments"));
            // the same through the stream: every event is validated against the contract by the filter
            String sse = json().body(body + ",\"stream\":true}").post("/v1/responses").then().statusCode(200).extract().asString();
            assertTrue(sse.contains("response.function_call_arguments.done"), "streamed call events");
            done++;
        }
        assertTrue(done >= 2, "completed: " + done);
    }
}
