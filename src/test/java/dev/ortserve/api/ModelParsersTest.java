package dev.ortserve.api;

import com.openai.client.OpenAIClient;
import com.openai.client.okhttp.OpenAIOkHttpClient;
import com.openai.core.JsonValue;
import com.openai.core.http.StreamResponse;
import com.openai.helpers.ChatCompletionAccumulator;
import com.openai.models.FunctionDefinition;
import com.openai.models.FunctionParameters;
import com.openai.models.chat.completions.ChatCompletion;
import com.openai.models.chat.completions.ChatCompletionChunk;
import com.openai.models.chat.completions.ChatCompletionCreateParams;
import com.openai.models.chat.completions.ChatCompletionMessageFunctionToolCall;
import com.openai.models.chat.completions.ChatCompletionNamedToolChoice;
import com.openai.models.chat.completions.ChatCompletionToolChoiceOption;
import dev.ortserve.ApiTest;
import dev.ortserve.contract.SseFrames;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import io.restassured.path.json.JsonPath;
import org.junit.jupiter.api.Test;

import java.net.URL;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static org.hamcrest.Matchers.equalTo;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The tiny model with no parser configured: its template writes {@code <tool_call>} and its
 * tokenizer has {@code <think>}, so hermes and qwen3 are picked. Tools, forced calls (required and
 * named, in the official SDK's function-calling shape) and reasoning work with no setting, and
 * streamed calls arrive as a start and then their arguments in pieces.
 */
@QuarkusTest
class ModelParsersTest extends ApiTest {

    @TestHTTPResource
    URL base;

    OpenAIClient client() {
        return OpenAIOkHttpClient.builder().baseUrl(contractChecked(base) + "/v1").apiKey("unused").maxRetries(0).responseValidation(true).build();
    }

    static FunctionDefinition weather() {
        return FunctionDefinition.builder().name("get_weather").description("Current weather in a city")
                .parameters(FunctionParameters.builder()
                        .putAdditionalProperty("type", JsonValue.from("object"))
                        .putAdditionalProperty("properties", JsonValue.from(Map.of("city", Map.of("type", "string", "minLength", 24, "maxLength", 40))))
                        .putAdditionalProperty("required", JsonValue.from(List.of("city")))
                        .putAdditionalProperty("additionalProperties", JsonValue.from(false)).build())
                .build();
    }

    static FunctionDefinition time() {
        return FunctionDefinition.builder().name("get_time").description("Current time in a zone")
                .parameters(FunctionParameters.builder()
                        .putAdditionalProperty("type", JsonValue.from("object"))
                        .putAdditionalProperty("properties", JsonValue.from(Map.of("zone", Map.of("enum", List.of("UTC", "CET")))))
                        .putAdditionalProperty("required", JsonValue.from(List.of("zone"))).build())
                .build();
    }

    @Test
    void modelsShowThePickedParsers() {
        json().get("/v1/models/" + MODEL).then().statusCode(200)
                .body("parsers.tool_call", equalTo("hermes")).body("parsers.reasoning", equalTo("qwen3"));
    }

    @Test
    void forcedCallsWorkWithNoConfigurationAndStreamTheirArgumentsInPieces() {
        for (ChatCompletionToolChoiceOption choice : List.of(ChatCompletionToolChoiceOption.ofAuto(ChatCompletionToolChoiceOption.Auto.REQUIRED),
                ChatCompletionToolChoiceOption.ofNamedToolChoice(ChatCompletionNamedToolChoice.builder()
                        .function(ChatCompletionNamedToolChoice.Function.builder().name("get_weather").build()).build()))) {
            ChatCompletionCreateParams params = ChatCompletionCreateParams.builder().model(MODEL).addUserMessage("What is the weather in Paris?")
                    .addFunctionTool(time()).addFunctionTool(weather()).toolChoice(choice).maxCompletionTokens(120).temperature(0.0).build();
            ChatCompletion whole = client().chat().completions().create(params);
            assertEquals("tool_calls", whole.choices().get(0).finishReason().asString());
            ChatCompletionMessageFunctionToolCall call = whole.choices().get(0).message().toolCalls().orElseThrow().get(0).asFunction();
            if (choice.isNamedToolChoice()) assertEquals("get_weather", call.function().name());
            assertTrue(call.id().startsWith("call_"));

            ChatCompletionAccumulator accumulator = ChatCompletionAccumulator.create();
            int argumentPieces = 0;
            try (StreamResponse<ChatCompletionChunk> stream = client().chat().completions().createStreaming(params)) {
                for (ChatCompletionChunk chunk : (Iterable<ChatCompletionChunk>) stream.stream()::iterator) {
                    accumulator.accumulate(chunk);
                    for (var c : chunk.choices()) {
                        for (var d : c.delta().toolCalls().orElse(List.of())) {
                            if (d.id().isPresent()) {
                                assertEquals(call.function().name(), d.function().orElseThrow().name().orElseThrow(), "the start names the function");
                            } else if (d.function().flatMap(f -> f.arguments()).isPresent()) {
                                argumentPieces++;
                            }
                        }
                    }
                }
            }
            ChatCompletionMessageFunctionToolCall streamed = accumulator.chatCompletion().choices().get(0).message().toolCalls().orElseThrow()
                    .get(0).asFunction();
            assertEquals(call.function().name(), streamed.function().name());
            assertEquals(call.function().arguments(), streamed.function().arguments());
            assertTrue(argumentPieces >= 3, "arguments in " + argumentPieces + " pieces: " + call.function().arguments());
            assertEquals("tool_calls", accumulator.chatCompletion().choices().get(0).finishReason().asString());
        }
    }

    @Test
    void toolsWithAutoAreAcceptedWithNoConfiguration() {
        String body = "{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}],\"max_tokens\":4,"
                + "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}]}";
        json().body(body).post("/v1/chat/completions").then().statusCode(200);
    }

    @Test
    void reasoningIsSplitWithNoConfiguration() {
        // token 259 is <think>: qwen3 reads an output that opens a <think> block (never closed here) as reasoning
        String body = "{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"6*7?\"}],\"max_tokens\":3,\"logit_bias\":{\"259\":100},\"ignore_eos\":true";
        JsonPath r = json().body(body + "}").post("/v1/chat/completions").then().statusCode(200).extract().jsonPath();
        assertEquals("<think><think>", r.getString("choices[0].message.reasoning_content"));
        assertEquals("", r.getString("choices[0].message.content"));
        StringBuilder reasoning = new StringBuilder();
        StringBuilder content = new StringBuilder();
        List<String> payloads = SseFrames.data(json().body(body + ",\"stream\":true}").post("/v1/chat/completions").then().statusCode(200).extract().asString());
        for (String p : payloads.subList(0, payloads.size() - 1)) {
            JsonPath chunk = JsonPath.from(p);
            if (chunk.get("choices[0].delta.content") != null) content.append(chunk.getString("choices[0].delta.content"));
            if (chunk.get("choices[0].delta.reasoning_content") != null) reasoning.append(chunk.getString("choices[0].delta.reasoning_content"));
        }
        assertEquals("<think><think>", reasoning.toString());
        assertEquals("", content.toString());
    }

    @Test
    void streamedLogprobsSurviveTheParsers() {
        // the picked parsers regroup the text; every token's logprob still arrives, in order, on some chunk
        String body = "{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],\"max_tokens\":24,\"temperature\":0,"
                + "\"ignore_eos\":true,\"logprobs\":true,\"top_logprobs\":1";
        JsonPath whole = json().body(body + "}").post("/v1/chat/completions").then().statusCode(200).extract().jsonPath();
        List<String> expected = whole.getList("choices[0].logprobs.content.token");
        assertEquals(24, expected.size());
        List<String> streamed = new ArrayList<>();
        for (String p : SseFrames.data(json().body(body + ",\"stream\":true}").post("/v1/chat/completions").then().statusCode(200).extract().asString())) {
            if (p.equals("[DONE]")) continue;
            List<String> tokens = JsonPath.from(p).getList("choices[0].logprobs.content.token");
            if (tokens != null) streamed.addAll(tokens);
        }
        assertEquals(expected, streamed);
    }

    @Test
    void responsesStreamedLogprobsSurviveTheParsers() {
        String body = "{\"model\":\"tiny\",\"input\":\"Hello\",\"temperature\":0,\"max_output_tokens\":20,\"stream\":true,"
                + "\"include\":[\"message.output_text.logprobs\"],\"top_logprobs\":1}";
        List<String> streamed = new ArrayList<>();
        List<String> completed = null;
        for (SseFrames.Frame f : SseFrames.parse(json().body(body).post("/v1/responses").then().statusCode(200).extract().asString())) {
            JsonPath e = JsonPath.from(f.data());
            if (e.getString("type").equals("response.output_text.delta")) streamed.addAll(e.getList("logprobs.token"));
            if (e.getString("type").equals("response.incomplete")) completed = e.getList("response.output[0].content[0].logprobs.token");
        }
        assertTrue(completed != null && !completed.isEmpty(), "completed: " + completed + " streamed: " + streamed);
        assertEquals(completed, streamed);
    }

    @Test
    void responsesStreamFunctionCallArgumentsInPieces() {
        String body = "{\"model\":\"tiny\",\"input\":\"Weather in Paris?\",\"temperature\":0,\"max_output_tokens\":120,\"tool_choice\":\"required\","
                + "\"tools\":[{\"type\":\"function\",\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":"
                + "{\"type\":\"string\",\"minLength\":24,\"maxLength\":40}},\"required\":[\"city\"],\"additionalProperties\":false}}]";
        JsonPath whole = json().body(body + "}").post("/v1/responses").then().statusCode(200).extract().jsonPath();
        assertEquals("function_call", whole.getString("output[0].type"));
        String arguments = whole.getString("output[0].arguments");
        String sse = json().body(body + ",\"stream\":true}").post("/v1/responses").then().statusCode(200).extract().asString();
        List<String> pieces = new ArrayList<>();
        String done = null;
        JsonPath completed = null;
        for (SseFrames.Frame f : SseFrames.parse(sse)) {
            JsonPath e = JsonPath.from(f.data());
            switch (e.getString("type")) {
                case "response.function_call_arguments.delta" -> pieces.add(e.getString("delta"));
                case "response.function_call_arguments.done" -> done = e.getString("arguments");
                case "response.completed" -> completed = e;
                default -> { }
            }
        }
        assertTrue(pieces.size() >= 3, "pieces: " + pieces);
        assertEquals(arguments, String.join("", pieces));
        assertEquals(arguments, done);
        assertEquals(arguments, completed.getString("response.output[0].arguments"));
    }
}
