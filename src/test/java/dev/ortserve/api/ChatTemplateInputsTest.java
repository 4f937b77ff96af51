package dev.ortserve.api;

import dev.ortserve.ApiTest;
import io.quarkus.test.junit.QuarkusTest;
import org.junit.jupiter.api.Test;

import java.util.List;

import static org.hamcrest.Matchers.containsString;
import static org.hamcrest.Matchers.equalTo;
import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * vLLM's template inputs on the default server: continue_final_message, documents, and a request
 * template refused while ortserve.allow-request-chat-template is off.
 */
@QuarkusTest
class ChatTemplateInputsTest extends ApiTest {

    static List<Integer> tokensOf(String text) {
        return json().body("{\"prompt\":" + RequestChatTemplateTest.quoted(text) + ",\"add_special_tokens\":false}").post("/tokenize")
                .then().statusCode(200).extract().jsonPath().getList("tokens", Integer.class);
    }

    @Test
    void continueFinalMessageEndsThePromptInsideTheLastMessage() {
        String messages = "[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":\"The answer is\"}]";
        // transformers: the ChatML turn of the last message is left open, without <|im_end|>
        List<Integer> expected = tokensOf("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nThe answer is");
        List<Integer> tokens = json().body("{\"messages\":" + messages + ",\"add_generation_prompt\":false,\"continue_final_message\":true}")
                .post("/tokenize").then().statusCode(200).extract().jsonPath().getList("tokens", Integer.class);
        assertEquals(expected, tokens);
        json().body("{\"model\":\"" + MODEL + "\",\"messages\":" + messages + ",\"add_generation_prompt\":false,"
                        + "\"continue_final_message\":true,\"max_tokens\":2}")
                .post("/v1/chat/completions").then().statusCode(200).body("usage.prompt_tokens", equalTo(expected.size()));
    }

    @Test
    void continueFinalMessageWithAGenerationPromptIs400() {
        json().body("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":\"So\"}],\"continue_final_message\":true}")
                .post("/tokenize").then().statusCode(400).body("error.param", equalTo("continue_final_message"));
    }

    @Test
    void aRequestTemplateIsRefusedWhileTheServerDoesNotAllowIt() {
        json().body("{\"model\":\"" + MODEL + "\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"chat_template\":\"{{ messages[0].content }}\"}")
                .post("/v1/chat/completions").then().statusCode(400).body("error.param", equalTo("chat_template"))
                .body("error.message", containsString("allow-request-chat-template"));
        json().body("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"chat_template\":\"{{ messages[0].content }}\"}")
                .post("/tokenize").then().statusCode(400).body("error.param", equalTo("chat_template"));
    }

    @Test
    void chatTemplateKwargsCannotReplaceTheRequestsOwnVariables() {
        json().body("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"chat_template_kwargs\":{\"messages\":[]}}")
                .post("/tokenize").then().statusCode(400).body("error.param", equalTo("chat_template_kwargs"));
    }
}
