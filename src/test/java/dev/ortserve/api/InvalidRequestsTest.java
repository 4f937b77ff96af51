package dev.ortserve.api;

import dev.ortserve.ApiTest;
import dev.ortserve.service.GenerationModelHost;
import io.quarkus.test.junit.QuarkusTest;
import jakarta.inject.Inject;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import java.util.stream.Stream;

import static org.hamcrest.Matchers.equalTo;
import static org.hamcrest.Matchers.not;
import static org.hamcrest.Matchers.containsString;
import static org.hamcrest.Matchers.notNullValue;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.params.provider.Arguments.arguments;

/**
 * Invalid requests across the generation endpoints: each is refused with the OpenAI envelope,
 * the right status and `param`, and none costs a forward pass (the engine's step counter).
 */
@QuarkusTest
class InvalidRequestsTest extends ApiTest {

    @Inject
    GenerationModelHost host;

    private long stepsBefore;

    @BeforeEach
    void countSteps() {
        stepsBefore = host.engine().steps();
    }

    @AfterEach
    void noModelWork() {
        assertEquals(stepsBefore, host.engine().steps(), "a rejected request must not run the model");
    }

    static final String C = "/v1/completions", CHAT = "/v1/chat/completions", R = "/v1/responses", E = "/v1/embeddings";
    static final String M = "\"model\":\"tiny\",";
    static final String MSG = "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]";

    static Stream<Arguments> invalid() {
        String tooLong = "[" + "1,".repeat(2100) + "1]";
        String metadata17 = "{" + java.util.stream.IntStream.range(0, 17).mapToObj(i -> "\"k" + i + "\":\"v\"").reduce((a, b) -> a + "," + b).get() + "}";
        return Stream.of(
                arguments(C, "{\"prompt\":\"x\"}", 400, "model", null),
                arguments(C, "{" + M + "\"max_tokens\":3}", 400, "prompt", null),
                arguments(C, "{" + M + "\"prompt\":\"x\",\"temperature\":3}", 400, "temperature", null),
                arguments(C, "{" + M + "\"prompt\":\"x\",\"temperature\":\"1\"}", 400, "temperature", null),
                arguments(C, "{" + M + "\"prompt\":\"x\",\"max_tokens\":1.9}", 400, "max_tokens", null),
                arguments(C, "{" + M + "\"prompt\":\"x\",\"n\":true}", 400, "n", null),
                arguments(C, "{" + M + "\"prompt\":\"x\",\"n\":0}", 400, "n", null),
                arguments(C, "{" + M + "\"prompt\":\"x\",\"top_p\":0}", 400, "top_p", null),
                arguments(C, "{" + M + "\"prompt\":\"x\",\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", 400, "stop", null),
                arguments(C, "{" + M + "\"prompt\":\"x\",\"stop\":7}", 400, "stop", null),
                arguments(C, "{" + M + "\"prompt\":\"x\",\"logprobs\":21}", 400, "logprobs", null),
                arguments(C, "{" + M + "\"prompt\":\"x\",\"foo\":1}", 400, "foo", null),
                arguments(C, "{" + M + "\"prompt\":\"x\",\"logit_bias\":{\"5\":200}}", 400, "logit_bias", null),
                arguments(C, "{" + M + "\"prompt\":\"x\",\"logit_bias\":{\"abc\":1}}", 400, "logit_bias", null),
                arguments(C, "{" + M + "\"prompt\":[]}", 400, "prompt", null),
                arguments(C, "{" + M + "\"prompt\":[99999]}", 400, "prompt", null),
                arguments(C, "{" + M + "\"prompt\":\"x\",\"suffix\":\"y\"}", 400, "suffix", "unsupported_parameter"),
                arguments(C, "{" + M + "\"prompt\":\"x\",\"n\":2,\"best_of\":1}", 400, "best_of", null),
                arguments(C, "{" + M + "\"prompt\":\"x\",\"best_of\":2,\"stream\":true}", 400, "best_of", null),
                arguments(C, "{" + M + "\"prompt\":\"x\",\"stream_options\":{\"include_usage\":true}}", 400, "stream_options", null),
                arguments(C, "{" + M + "\"prompt\":\"x\",\"max_tokens\":5000}", 400, "max_tokens", "context_length_exceeded"),
                arguments(C, "{" + M + "\"prompt\":" + tooLong + "}", 400, "prompt", "context_length_exceeded"),
                arguments(C, "{" + M + "\"prompt\":\"x\",\"frequency_penalty\":-3}", 400, "frequency_penalty", null),
                arguments(C, "{" + M + "\"prompt\":\"x\",\"presence_penalty\":\"x\"}", 400, "presence_penalty", null),
                arguments(C, "{" + M + "\"prompt\":\"x\",\"seed\":1.5}", 400, "seed", null),
                arguments(C, "{" + M + "\"prompt\":\"x\",\"min_p\":2}", 400, "min_p", null),
                arguments(C, "{" + M + "\"prompt\":\"x\",\"top_k\":-2}", 400, "top_k", null),
                arguments(C, "{" + M + "\"prompt\":\"x\",\"ignore_eos\":\"yes\"}", 400, "ignore_eos", null),
                arguments(C, "{" + M + "\"prompt\":\"x\",\"max_tokens\":2,\"min_tokens\":5}", 400, "min_tokens", null),
                arguments(C, "{" + M + "\"prompt\":\"x\",\"stop_token_ids\":[99999]}", 400, "stop_token_ids", null),
                arguments(C, "{" + M + "\"prompt\":\"x\",\"echo\":true,\"logprobs\":2}", 400, "echo", "unsupported_parameter"),
                arguments(C, "{" + M + "\"prompt\":\"x\",\"n\":100}", 400, "n", null),
                arguments(C, "{\"model\":\"gpt-4o\",\"prompt\":\"x\"}", 404, "model", "model_not_found"),
                arguments(CHAT, "{" + M + "\"messages\":[]}", 400, "messages", null),
                arguments(CHAT, "{" + M + "\"messages\":[{\"role\":\"alien\",\"content\":\"x\"}]}", 400, "messages[0]", null),
                arguments(CHAT, "{" + M + MSG + ",\"temperature\":2.5}", 400, "temperature", null),
                arguments(CHAT, "{" + MSG + "}", 400, "model", null),
                arguments(CHAT, "{" + M + "\"messages\":[{\"role\":\"user\"}]}", 400, "messages[0].content", null),
                arguments(CHAT, "{" + M + MSG + ",\"tool_choice\":\"sometimes\"}", 400, "tool_choice", null),
                arguments(CHAT, "{" + M + MSG + ",\"top_logprobs\":30}", 400, "top_logprobs", null),
                arguments(CHAT, "{" + M + MSG + ",\"max_completion_tokens\":0}", 400, "max_completion_tokens", null),
                arguments(CHAT, "{\"model\":\"nope\"," + MSG + "}", 404, "model", "model_not_found"),
                arguments(R, "{" + M + "\"input\":\"x\",\"metadata\":" + metadata17 + "}", 400, "metadata", null),
                arguments(R, "{" + M + "\"input\":[{\"type\":\"computer_call\"}]}", 400, "input[0]", null),
                arguments(R, "{" + M + "\"input\":\"x\",\"temperature\":-1}", 400, "temperature", null),
                arguments(R, "{" + M + "\"input\":\"x\",\"truncation\":\"sometimes\"}", 400, "truncation", null),
                arguments(R, "{" + M + "\"input\":5}", 400, "input", null),
                arguments(R, "{" + M + "\"instructions\":\"x\"}", 400, "input", null),
                arguments(CHAT, "{" + M + "\"messages\":[null]}", 400, "messages[0]", null),
                arguments(CHAT, "{" + M + MSG + ",\"tools\":[null]}", 400, "tools[0]", null),
                arguments(CHAT, "{" + M + "\"messages\":[{\"role\":\"user\",\"content\":[null]}]}", 400, "messages[0].content", null),
                arguments(R, "{" + M + "\"input\":[null]}", 400, "input", null),
                arguments(R, "{" + M + "\"input\":[]}", 400, "input", null),
                arguments(R, "{" + M + "\"input\":\"x\",\"background\":true,\"store\":false}", 400, "background", null),
                arguments(R, "{" + M + "\"input\":\"x\",\"tools\":[{\"type\":\"web_search\"}]}", 400, "tools[0].type", "unsupported_parameter"),
                arguments(R, "{" + M + "\"input\":\"x\",\"tool_choice\":\"required\"}", 400, "tool_choice", null),
                arguments(R, "{" + M + "\"input\":\"x\",\"text\":{\"format\":{\"type\":\"json_schema\",\"name\":\"s\",\"schema\":{\"type\":\"object\",\"patternProperties\":{}}}}}", 400, "text.format.schema", "invalid_json_schema"),
                arguments(R, "{" + M + "\"input\":\"x\",\"include\":[\"file_search_call.results\"]}", 400, "include[0]", null),
                arguments(R, "{" + M + "\"input\":\"x\",\"top_logprobs\":2}", 400, "top_logprobs", null),
                arguments(R, "{" + M + "\"input\":\"x\",\"max_output_tokens\":5000}", 400, "max_output_tokens", "context_length_exceeded"),
                arguments(R, "{" + M + "\"input\":\"x\",\"metadata\":{\"" + "k".repeat(65) + "\":\"v\"}}", 400, "metadata", null),
                arguments(R, "{" + M + "\"input\":\"x\",\"metadata\":{\"k\":\"" + "v".repeat(513) + "\"}}", 400, "metadata.k", null),
                arguments(R, "{" + M + "\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_image\",\"image_url\":\"http://x\"}]}]}", 400, "input", null),
                arguments(R, "{" + M + "\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_image\",\"file_id\":\"file-1\"}]}]}", 400, "input[0].content[0].file_id", "unsupported_parameter"),
                arguments(R, "{" + M + "\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_image\",\"image_url\":\"ftp://x/y.png\"}]}]}", 400, "input[0].content[0].image_url", null),
                arguments(R, "{" + M + "\"input\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"input_image\",\"image_url\":\"http://x\"}]}]}", 400, "input[0].content[0]", "unsupported_parameter"),
                arguments(CHAT, "{" + M + "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:text/plain;base64,QQ==\"}}]}]}", 400, "messages[0].content[0].image_url.url", null),
                arguments(CHAT, "{" + M + "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png,abc\"}}]}]}", 400, "messages[0].content[0].image_url.url", null),
                arguments(CHAT, "{" + M + "\"messages\":[{\"role\":\"system\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,QQ==\"}}]}]}", 400, "messages[0].content[0]", "unsupported_parameter"),
                arguments("/tokenize", "{" + M + "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,QQ==\"}}]}]}", 400, "messages[0].content[0].image_url.url", null),
                arguments(CHAT, "{" + M + "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_audio\",\"input_audio\":{\"data\":\"QQ==\",\"format\":\"wav\"}}]}]}", 400, "messages[0].content[0]", "unsupported_parameter"),
                arguments(R, "{" + M + "\"input\":[{\"type\":\"item_reference\",\"id\":\"msg_1\"}]}", 400, "input[0].id", null),
                arguments(R, "{" + M + "\"input\":[{\"type\":\"reasoning\",\"encrypted_content\":\"abc\"}]}", 400, "input[0].encrypted_content", "invalid_encrypted_content"),
                arguments(R, "{\"model\":\"other\",\"input\":\"x\"}", 404, "model", "model_not_found"),
                arguments(E, "{" + M + "\"input\":\"x\",\"encoding_format\":\"hex\"}", 400, "encoding_format", null),
                arguments(E, "{" + M + "\"input\":[]}", 400, "input", null),
                arguments(E, "{" + M + "\"encoding_format\":\"float\"}", 400, "input", null),
                arguments("/tokenize", "{" + M + "\"prompt\":5}", 400, "prompt", null),
                arguments("/detokenize", "{" + M + "\"tokens\":[\"a\"]}", 400, "tokens[0]", null),
                arguments("/detokenize", "{" + M + "\"tokens\":[99999]}", 400, "tokens", null),
                arguments("/detokenize", "{\"model\":\"other\",\"tokens\":[1]}", 404, "model", "model_not_found"));
    }

    @ParameterizedTest(name = "{0} {1} -> {2} {3}")
    @MethodSource("invalid")
    void refusedWithParam(String path, String body, int status, String param, String code) {
        var response = json().body(body).post(path).then().statusCode(status)
                .body("error.type", notNullValue())
                .body("error.message", not(containsString("Exception")))
                .body("error.param", equalTo(param));
        if (code != null) {
            response.body("error.code", equalTo(code));
        }
    }
}
