package dev.ortserve.api;

import dev.ortserve.ApiTest;
import dev.ortserve.contract.SseFrames;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.TestProfile;
import io.restassured.path.json.JsonPath;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A forced tool call cut by the token limit (hermes: the grammar writes {@code <tool_call>\n{"name": ...}): the
 * template's markup never reaches the client. The call comes back as a call with the arguments written so far (chat:
 * finish_reason length, as vLLM answers a named call cut short; Responses: a function_call item) or as a tool_use block
 * (Messages: stop_reason max_tokens, its input what parsed, {} here), streamed and not alike. The city must be 200
 * characters, so 60 tokens end inside the arguments once the name is written.
 */
@QuarkusTest
@TestProfile(ChatParsersTest.Profile.class)
class CutForcedCallTest extends ApiTest {

    private static final String TOOL = "{\"name\":\"get_weather\",\"description\":\"Weather\",\"%s\":{\"type\":\"object\",\"properties\":"
            + "{\"city\":{\"type\":\"string\",\"minLength\":200,\"maxLength\":300}},\"required\":[\"city\"],\"additionalProperties\":false}}";
    private static final String CHAT = "{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}],\"temperature\":0,"
            + "\"max_tokens\":60,\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}},"
            + "\"tools\":[{\"type\":\"function\",\"function\":" + TOOL.formatted("parameters") + "}]";
    private static final String MESSAGES = "{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}],\"temperature\":0,"
            + "\"max_tokens\":60,\"tool_choice\":{\"type\":\"tool\",\"name\":\"get_weather\"},\"tools\":[" + TOOL.formatted("input_schema") + "]";
    private static final String RESPONSES = "{\"model\":\"tiny\",\"input\":\"Weather?\",\"temperature\":0,\"max_output_tokens\":60,"
            + "\"tool_choice\":{\"type\":\"function\",\"name\":\"get_weather\"},\"tools\":[{\"type\":\"function\","
            + TOOL.formatted("parameters").substring(1) + "]";

    @Test
    void chatCompletionsAnswerACallWithTheArgumentsSoFar() {
        JsonPath r = json().body(CHAT + "}").post("/v1/chat/completions").then().statusCode(200).extract().jsonPath();
        assertEquals("length", r.getString("choices[0].finish_reason"));
        assertNull(r.get("choices[0].message.content"), r.prettify());
        assertEquals("get_weather", r.getString("choices[0].message.tool_calls[0].function.name"));
        String arguments = r.getString("choices[0].message.tool_calls[0].function.arguments");
        assertTrue(arguments.startsWith("{\"city\""), arguments);

        StringBuilder content = new StringBuilder(), streamed = new StringBuilder();
        String name = null, finish = null;
        for (String p : SseFrames.data(json().body(CHAT + ",\"stream\":true}").post("/v1/chat/completions").then().statusCode(200).extract().asString())) {
            JsonPath chunk = JsonPath.from(p);
            if (chunk.get("choices[0].delta.content") != null) content.append(chunk.getString("choices[0].delta.content"));
            if (chunk.get("choices[0].delta.tool_calls[0].function.name") != null) name = chunk.getString("choices[0].delta.tool_calls[0].function.name");
            if (chunk.get("choices[0].delta.tool_calls[0].function.arguments") != null) {
                streamed.append(chunk.getString("choices[0].delta.tool_calls[0].function.arguments"));
            }
            if (chunk.get("choices[0].finish_reason") != null) finish = chunk.getString("choices[0].finish_reason");
        }
        assertEquals("", content.toString());
        assertEquals("get_weather", name);
        assertEquals(arguments, streamed.toString());
        assertEquals("length", finish);
    }

    @Test
    void messagesAnswerAToolUseBlock() {
        JsonPath r = json().body(MESSAGES + "}").post("/v1/messages").then().statusCode(200).extract().jsonPath();
        assertEquals("max_tokens", r.getString("stop_reason"));
        assertEquals(List.of("tool_use"), r.getList("content.type"), r.prettify());
        assertEquals("get_weather", r.getString("content[0].name"));
        assertEquals(Map.of(), r.getMap("content[0].input"));

        List<String> blocks = new java.util.ArrayList<>();
        StringBuilder text = new StringBuilder();
        String stop = null;
        for (String p : SseFrames.data(json().body(MESSAGES + ",\"stream\":true}").post("/v1/messages").then().statusCode(200).extract().asString())) {
            JsonPath event = JsonPath.from(p);
            switch (event.getString("type")) {
                case "content_block_start" -> blocks.add(event.getString("content_block.type") + ":" + event.getString("content_block.name"));
                case "content_block_delta" -> {
                    if ("text_delta".equals(event.getString("delta.type"))) text.append(event.getString("delta.text"));
                }
                case "message_delta" -> stop = event.getString("delta.stop_reason");
                default -> { }
            }
        }
        assertEquals(List.of("tool_use:get_weather"), blocks);
        assertEquals("", text.toString());
        assertEquals("max_tokens", stop);
    }

    @Test
    void responsesAnswerAFunctionCallItem() {
        JsonPath r = json().body(RESPONSES + "}").post("/v1/responses").then().statusCode(200).extract().jsonPath();
        assertEquals(List.of("function_call"), r.getList("output.type"), r.prettify());
        assertEquals("get_weather", r.getString("output[0].name"));
        assertTrue(r.getString("output[0].arguments").startsWith("{\"city\""), r.getString("output[0].arguments"));

        StringBuilder text = new StringBuilder();
        List<String> items = new java.util.ArrayList<>();
        for (String p : SseFrames.data(json().body(RESPONSES + ",\"stream\":true}").post("/v1/responses").then().statusCode(200).extract().asString())) {
            JsonPath event = JsonPath.from(p);
            if ("response.output_text.delta".equals(event.getString("type"))) text.append(event.getString("delta"));
            if ("response.output_item.done".equals(event.getString("type"))) items.add(event.getString("item.type"));
        }
        assertEquals(List.of("function_call"), items);
        assertFalse(text.toString().contains("<tool_call>"), text.toString());
    }
}
