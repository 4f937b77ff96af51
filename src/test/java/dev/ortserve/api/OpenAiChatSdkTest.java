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
import com.openai.models.chat.completions.ChatCompletionMessage;
import com.openai.models.chat.completions.ChatCompletionMessageFunctionToolCall;
import com.openai.models.chat.completions.ChatCompletionStreamOptions;
import com.openai.models.chat.completions.ChatCompletionToolChoiceOption;
import com.openai.models.chat.completions.ChatCompletionToolMessageParam;
import dev.ortserve.ApiTest;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.TestProfile;
import org.junit.jupiter.api.Test;

import java.net.URL;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * openai-java drives chat against the server with a tool-call parser (hermes) and a reasoning
 * parser configured: non-stream, stream accumulated by the SDK's own accumulator, and a function
 * call round trip (the model is made to call by tool_choice required, the tool's result goes
 * back as a tool message, and a second turn follows). Strict response validation is on.
 */
@QuarkusTest
@TestProfile(ChatParsersTest.Profile.class)
class OpenAiChatSdkTest extends ApiTest {

    @TestHTTPResource
    URL base;

    OpenAIClient client() {
        return OpenAIOkHttpClient.builder().baseUrl(contractChecked(base) + "/v1").apiKey("unused").maxRetries(0).responseValidation(true).build();
    }

    @Test
    void chatStreamAccumulatesToWhatNonStreamReturns() {
        ChatCompletionCreateParams params = ChatCompletionCreateParams.builder().model(MODEL).addUserMessage("Say something")
                .maxCompletionTokens(12).temperature(0.0).streamOptions(ChatCompletionStreamOptions.builder().includeUsage(true).build()).build();
        ChatCompletionCreateParams plain = params.toBuilder().streamOptions(java.util.Optional.empty()).build();
        ChatCompletion whole = client().chat().completions().create(plain);
        ChatCompletionAccumulator accumulator = ChatCompletionAccumulator.create();
        try (StreamResponse<ChatCompletionChunk> stream = client().chat().completions().createStreaming(params)) {
            stream.stream().forEach(accumulator::accumulate);
        }
        ChatCompletion streamed = accumulator.chatCompletion();
        assertEquals(whole.choices().get(0).message().content(), streamed.choices().get(0).message().content());
        assertEquals(whole.choices().get(0).finishReason(), streamed.choices().get(0).finishReason());
        assertEquals(whole.usage().orElseThrow().completionTokens(), streamed.usage().orElseThrow().completionTokens());
    }

    @Test
    void functionCallRoundTrip() {
        FunctionDefinition weather = FunctionDefinition.builder().name("get_weather").description("Current weather")
                .parameters(FunctionParameters.builder()
                        .putAdditionalProperty("type", JsonValue.from("object"))
                        .putAdditionalProperty("properties", JsonValue.from(Map.of("city", Map.of("type", "string", "maxLength", 16))))
                        .putAdditionalProperty("required", JsonValue.from(List.of("city")))
                        .putAdditionalProperty("additionalProperties", JsonValue.from(false)).build())
                .build();
        int roundTrips = 0;
        for (long seed = 0; seed < 4; seed++) {
            ChatCompletionCreateParams first = ChatCompletionCreateParams.builder().model(MODEL).addUserMessage("What is the weather in Paris?")
                    .addFunctionTool(weather).toolChoice(ChatCompletionToolChoiceOption.Auto.REQUIRED).maxCompletionTokens(80).seed(seed).build();
            ChatCompletion call = client().chat().completions().create(first);
            if (!call.choices().get(0).finishReason().asString().equals("tool_calls")) continue;
            ChatCompletionMessage assistant = call.choices().get(0).message();
            ChatCompletionMessageFunctionToolCall toolCall = assistant.toolCalls().orElseThrow().get(0).asFunction();
            assertEquals("get_weather", toolCall.function().name());
            assertTrue(toolCall.function().arguments().contains("\"city\""), toolCall.function().arguments());
            ChatCompletionCreateParams second = first.toBuilder().toolChoice(ChatCompletionToolChoiceOption.Auto.AUTO).addMessage(assistant)
                    .addMessage(ChatCompletionToolMessageParam.builder().toolCallId(toolCall.id()).content("18C and sunny").build())
                    .maxCompletionTokens(8).build();
            ChatCompletion answer = client().chat().completions().create(second);
            assertTrue(answer.usage().orElseThrow().promptTokens() > call.usage().orElseThrow().promptTokens(), "the tool result was rendered");
            roundTrips++;
        }
        assertTrue(roundTrips >= 2, "round trips: " + roundTrips);
    }
}
