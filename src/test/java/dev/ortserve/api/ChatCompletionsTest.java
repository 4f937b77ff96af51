package dev.ortserve.api;

import dev.ortserve.ApiTest;
import dev.ortserve.contract.SseFrames;
import io.quarkus.test.junit.QuarkusTest;
import io.restassured.path.json.JsonPath;
import org.junit.jupiter.api.Test;

import java.util.List;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.containsString;
import static org.hamcrest.Matchers.equalTo;
import static org.hamcrest.Matchers.hasSize;
import static org.hamcrest.Matchers.startsWith;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** /v1/chat/completions (without tools yet) and the chat form of /tokenize, on the tiny model's ChatML template. */
@QuarkusTest
class ChatCompletionsTest extends ApiTest {

    static final String MESSAGES = "[{\"role\":\"developer\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Hi\"},{\"type\":\"text\",\"text\":\"there\"}]}]";

    @Test
    void tokenizeMessagesIsTheRenderedTemplate() {
        List<Integer> chat = json().body("{\"model\":\"tiny\",\"messages\":" + MESSAGES + "}").post("/tokenize")
                .then().statusCode(200).extract().jsonPath().getList("tokens", Integer.class);
        String expectedText = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi\nthere<|im_end|>\n<|im_start|>assistant\n";
        List<Integer> direct = json().body("{\"model\":\"tiny\",\"prompt\":" + JsonPath.from("{\"p\":\"\"}").getString("p").replace("", "")
                        + "\"" + expectedText.replace("\n", "\\n") + "\",\"add_special_tokens\":false}").post("/tokenize")
                .then().statusCode(200).extract().jsonPath().getList("tokens", Integer.class);
        assertEquals(direct, chat);
        String text = given().contentType("application/json").body("{\"tokens\":" + chat + "}").post("/detokenize")
                .then().statusCode(200).extract().jsonPath().getString("prompt");
        assertEquals(expectedText, text);
    }

    @Test
    void nonStreamChat() {
        JsonPath r = json().body("{\"model\":\"tiny\",\"messages\":" + MESSAGES + ",\"max_completion_tokens\":6,\"temperature\":0,\"ignore_eos\":true,\"logprobs\":true,\"top_logprobs\":2}")
                .post("/v1/chat/completions").then().statusCode(200)
                .body("id", startsWith("chatcmpl-")).body("object", equalTo("chat.completion"))
                .body("choices[0].message.role", equalTo("assistant"))
                .body("choices[0].finish_reason", equalTo("length"))
                .body("choices[0].logprobs.content", hasSize(6))
                .body("choices[0].logprobs.content[0].top_logprobs", hasSize(2))
                .body("usage.completion_tokens", equalTo(6)).extract().jsonPath();
        int prompt = json().body("{\"model\":\"tiny\",\"messages\":" + MESSAGES + "}").post("/tokenize").then().statusCode(200)
                .extract().jsonPath().getInt("count");
        assertEquals(prompt, r.getInt("usage.prompt_tokens"));
        assertNull(r.get("choices[0].message.tool_calls"));
    }

    @Test
    void streamChunksFollowTheOpenAiShape() {
        String body = "{\"model\":\"tiny\",\"messages\":" + MESSAGES + ",\"max_tokens\":8,\"temperature\":0,\"ignore_eos\":true,\"n\":2";
        JsonPath whole = json().body(body + "}").post("/v1/chat/completions").then().statusCode(200).extract().jsonPath();
        String sse = json().body(body + ",\"stream\":true,\"stream_options\":{\"include_usage\":true}}").post("/v1/chat/completions")
                .then().statusCode(200).contentType(startsWith("text/event-stream")).extract().asString();
        List<String> payloads = SseFrames.data(sse);
        StringBuilder[] text = {new StringBuilder(), new StringBuilder()};
        boolean[] roleSeen = new boolean[2];
        String[] finish = new String[2];
        for (String p : payloads.subList(0, payloads.size() - 1)) {
            JsonPath chunk = JsonPath.from(p);
            assertEquals("chat.completion.chunk", chunk.getString("object"));
            int index = chunk.getInt("choices[0].index");
            if (chunk.get("choices[0].delta.role") != null) {
                assertTrue(!roleSeen[index] && text[index].length() == 0, "role comes first, once");
                roleSeen[index] = true;
            }
            assertNull(finish[index], "nothing after the finish chunk");
            if (chunk.get("choices[0].finish_reason") != null) {
                finish[index] = chunk.getString("choices[0].finish_reason");
                assertNull(chunk.get("choices[0].delta.content"), "the finish chunk has an empty delta");
            } else if (chunk.get("choices[0].delta.content") != null) {
                text[index].append(chunk.getString("choices[0].delta.content"));
            }
        }
        JsonPath usage = JsonPath.from(payloads.get(payloads.size() - 1));
        assertEquals(0, usage.getList("choices").size());
        assertEquals(16, usage.getInt("usage.completion_tokens"));
        for (int i = 0; i < 2; i++) {
            assertTrue(roleSeen[i]);
            assertEquals("length", finish[i]);
            assertEquals(whole.getString("choices[" + i + "].message.content"), text[i].toString());
        }
    }

    @Test
    void unsupportedFeaturesAreRefusedNotIgnored() {
        json().body("{\"model\":\"tiny\",\"messages\":" + MESSAGES + ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\",\"schema\":{\"not\":{}}}}}")
                .post("/v1/chat/completions").then().statusCode(400).body("error.param", equalTo("response_format.json_schema.schema"));
        json().body("{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"http://x/y.png\"}}]}]}")
                .post("/v1/chat/completions").then().statusCode(400).body("error.param", equalTo("messages[0].content[0].image_url.url"))
                .body("error.message", containsString("'tiny' takes text only"));
        json().body("{\"model\":\"tiny\",\"messages\":" + MESSAGES + ",\"top_logprobs\":2}").post("/v1/chat/completions")
                .then().statusCode(400).body("error.param", equalTo("top_logprobs"));
    }
}
