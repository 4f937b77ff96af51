package dev.ortserve.api;

import com.anthropic.client.AnthropicClient;
import com.anthropic.client.okhttp.AnthropicOkHttpClient;
import com.anthropic.core.JsonValue;
import com.anthropic.core.http.StreamResponse;
import com.anthropic.errors.BadRequestException;
import com.anthropic.errors.NotFoundException;
import com.anthropic.helpers.MessageAccumulator;
import com.anthropic.models.messages.ContentBlock;
import com.anthropic.models.messages.ContentBlockParam;
import com.anthropic.models.messages.Message;
import com.anthropic.models.messages.MessageCountTokensParams;
import com.anthropic.models.messages.MessageCreateParams;
import com.anthropic.models.messages.RawMessageStreamEvent;
import com.anthropic.models.messages.StopReason;
import com.anthropic.models.messages.Tool;
import com.anthropic.models.messages.ToolChoiceAny;
import com.anthropic.models.messages.ToolResultBlockParam;
import com.anthropic.models.messages.ToolUseBlock;
import dev.ortserve.ApiTest;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.TestProfile;
import org.junit.jupiter.api.Test;

import java.net.URL;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The official Anthropic Java SDK against the Messages API, on the server with a tool-call parser
 * (hermes) and a reasoning parser (deepseek_r1): create, stream accumulated by the SDK's own
 * accumulator, a tool use round trip, count_tokens, and errors as the SDK's typed exceptions.
 * Every exchange goes through the contract-validating proxy; the SDK validates responses too.
 */
@QuarkusTest
@TestProfile(ChatParsersTest.Profile.class)
class AnthropicMessagesSdkTest extends ApiTest {

    @TestHTTPResource
    URL base;

    AnthropicClient client() {
        return AnthropicOkHttpClient.builder().baseUrl(contractChecked(base)).apiKey("unused").maxRetries(0).responseValidation(true).build();
    }

    static Tool weather() {
        return Tool.builder().name("get_weather").description("Current weather")
                .inputSchema(Tool.InputSchema.builder()
                        .properties(Tool.InputSchema.Properties.builder()
                                .putAdditionalProperty("city", JsonValue.from(Map.of("type", "string", "maxLength", 16))).build())
                        .required(List.of("city")).build())
                .build();
    }

    @Test
    void streamAccumulatesToWhatCreateReturns() {
        MessageCreateParams params = MessageCreateParams.builder().model(MODEL).maxTokens(12).putAdditionalBodyProperty("temperature", JsonValue.from(0))
                .system("Be brief.").addUserMessage("Say something").build();
        Message whole = client().messages().create(params);
        assertEquals(MODEL, whole.model().asString());
        assertEquals(StopReason.MAX_TOKENS, whole.stopReason().orElseThrow());
        assertEquals(12, whole.usage().outputTokens());
        MessageAccumulator accumulator = MessageAccumulator.create();
        List<String> types = new ArrayList<>();
        try (StreamResponse<RawMessageStreamEvent> stream = client().messages().createStreaming(params)) {
            stream.stream().forEach(e -> {
                accumulator.accumulate(e);
                types.add(e.isMessageStart() ? "message_start" : e.isMessageDelta() ? "message_delta" : e.isMessageStop() ? "message_stop" : "block");
            });
        }
        Message streamed = accumulator.message();
        assertEquals(text(whole), text(streamed));
        assertEquals(whole.content().size(), streamed.content().size());
        assertEquals(whole.stopReason(), streamed.stopReason());
        assertEquals(whole.usage().outputTokens(), streamed.usage().outputTokens());
        assertEquals("message_start", types.get(0));
        assertEquals("message_delta", types.get(types.size() - 2));
        assertEquals("message_stop", types.get(types.size() - 1));
    }

    @Test
    void toolUseRoundTrip() {
        MessageCreateParams first = MessageCreateParams.builder().model(MODEL).maxTokens(200).putAdditionalBodyProperty("temperature", JsonValue.from(0))
                .addUserMessage("What is the weather in Paris?").addTool(weather()).toolChoice(ToolChoiceAny.builder().build()).build();
        Message call = client().messages().create(first);
        assertEquals(StopReason.TOOL_USE, call.stopReason().orElseThrow(), call.toString());
        ToolUseBlock use = call.content().stream().filter(ContentBlock::isToolUse).findFirst().orElseThrow().asToolUse();
        assertEquals("get_weather", use.name());
        assertTrue(use.id().startsWith("toolu_"));
        Map<?, ?> input = (Map<?, ?>) use._input().convert(Map.class);
        assertTrue(input.get("city") instanceof String, input.toString());

        MessageCreateParams second = first.toBuilder().toolChoice(com.anthropic.models.messages.ToolChoiceAuto.builder().build())
                .addMessage(call).addUserMessageOfContentBlockParams(List.of(ContentBlockParam.ofToolResult(
                        ToolResultBlockParam.builder().toolUseId(use.id()).content("{\"temperature\": 21}").build())))
                .maxTokens(8).build();
        Message answer = client().messages().create(second);
        assertTrue(answer.usage().outputTokens() > 0);
        // the tool_result reached the prompt: the second turn counts more tokens than the first
        assertTrue(answer.usage().inputTokens() + answer.usage().cacheReadInputTokens().orElse(0L)
                > call.usage().inputTokens() + call.usage().cacheReadInputTokens().orElse(0L));

        // the stream of a forced call: one tool_use block whose input_json_delta pieces make the arguments
        Message streamed;
        MessageAccumulator accumulator = MessageAccumulator.create();
        try (StreamResponse<RawMessageStreamEvent> stream = client().messages().createStreaming(first)) {
            stream.stream().forEach(accumulator::accumulate);
        }
        streamed = accumulator.message();
        assertEquals(StopReason.TOOL_USE, streamed.stopReason().orElseThrow());
        ToolUseBlock streamedUse = streamed.content().stream().filter(ContentBlock::isToolUse).findFirst().orElseThrow().asToolUse();
        assertEquals(input, streamedUse._input().convert(Map.class));
    }

    @Test
    void countTokensIsThePromptCreateIsFed() {
        long counted = client().messages().countTokens(MessageCountTokensParams.builder().model(MODEL).system("Be brief.")
                .addUserMessage("What is the weather in Paris?").addTool(weather()).build()).inputTokens();
        Message m = client().messages().create(MessageCreateParams.builder().model(MODEL).maxTokens(2).system("Be brief.")
                .addUserMessage("What is the weather in Paris?").addTool(weather()).build());
        assertEquals(counted, m.usage().inputTokens() + m.usage().cacheReadInputTokens().orElse(0L));
        long withoutTools = client().messages().countTokens(MessageCountTokensParams.builder().model(MODEL).system("Be brief.")
                .addUserMessage("What is the weather in Paris?").build()).inputTokens();
        assertTrue(counted > withoutTools, "tools are part of the rendered prompt");
    }

    @Test
    void errorsAreTheSdksTypedExceptions() {
        NotFoundException unknown = assertThrows(NotFoundException.class, () -> client().messages().create(
                MessageCreateParams.builder().model("no-such-model").maxTokens(4).addUserMessage("hi").build()));
        assertEquals("not_found_error", unknown.errorType().orElseThrow().asString());
        BadRequestException forcedWithoutTools = assertThrows(BadRequestException.class, () -> client().messages().create(
                MessageCreateParams.builder().model(MODEL).maxTokens(4).addUserMessage("hi").toolChoice(ToolChoiceAny.builder().build()).build()));
        assertEquals("invalid_request_error", forcedWithoutTools.errorType().orElseThrow().asString());
        assertFalse(forcedWithoutTools.getMessage().isEmpty());
        // max_tokens is a cap, as Anthropic reads it (Claude Code asks for 32000 whatever the model): lowered to what the context leaves
        Message capped = client().messages().create(MessageCreateParams.builder().model(MODEL).maxTokens(10_000_000).addUserMessage("hi").build());
        assertTrue(capped.usage().outputTokens() > 0);
        BadRequestException budget = assertThrows(BadRequestException.class, () -> client().messages().create(
                MessageCreateParams.builder().model(MODEL).maxTokens(8).enabledThinking(16).addUserMessage("hi").build()));
        assertTrue(budget.getMessage().contains("budget_tokens"), budget.getMessage());
    }

    /**
     * deepseek_r1: the template has opened the reasoning, so without a budget the random model
     * reasons until max_tokens; with budget_tokens 4 the end-of-thinking token is forced after 4
     * reasoning tokens and the rest of the output is the answer.
     */
    @Test
    void thinkingBudgetIsEnforcedInTokens() {
        MessageCreateParams free = MessageCreateParams.builder().model(MODEL).maxTokens(12).addUserMessage("Think")
                .putAdditionalBodyProperty("temperature", JsonValue.from(0)).build();
        Message unbounded = client().messages().create(free);
        assertEquals(1, unbounded.content().size());
        assertTrue(unbounded.content().get(0).isThinking(), unbounded.toString());
        Message bounded = client().messages().create(free.toBuilder().enabledThinking(4).build());
        assertTrue(bounded.content().get(0).isThinking(), bounded.toString());
        String reasoning = bounded.content().get(0).asThinking().thinking();
        assertTrue(bounded.content().size() == 2 || bounded.stopReason().orElseThrow() == StopReason.END_TURN, bounded.toString());
        int reasoningTokens = io.restassured.RestAssured.given().contentType("application/json")
                .body(Map.of("model", MODEL, "prompt", reasoning, "add_special_tokens", false)).post("/tokenize")
                .then().statusCode(200).extract().jsonPath().getInt("count");
        assertTrue(reasoningTokens <= 4, reasoning + " has " + reasoningTokens + " tokens");

        MessageAccumulator accumulator = MessageAccumulator.create();
        try (StreamResponse<RawMessageStreamEvent> stream = client().messages().createStreaming(free.toBuilder().enabledThinking(4).build())) {
            stream.stream().forEach(accumulator::accumulate);
        }
        assertEquals(text(bounded), text(accumulator.message()));

        BadRequestException forced = assertThrows(BadRequestException.class, () -> client().messages().create(free.toBuilder()
                .enabledThinking(4).addTool(weather()).toolChoice(ToolChoiceAny.builder().build()).build()));
        assertTrue(forced.getMessage().contains("tool_choice"), forced.getMessage());
    }

    /**
     * A deferred tool (defer_loading, as Claude Code sends its tool search's placeholders) stays out of the
     * prompt until a tool_reference block in a tool_result loads it; loaded, the prompt is the one it would
     * have been with the tool never deferred. A reference to no tool is a 400 naming the block.
     */
    @Test
    void deferredToolsLoadWhenReferenced() {
        String search = "{\"name\":\"ToolSearch\",\"description\":\"Find tools\",\"input_schema\":{\"type\":\"object\",\"properties\":{\"q\":{\"type\":\"string\"}}}}";
        String weather = "{\"name\":\"get_weather\",\"description\":\"Current weather\",\"input_schema\":{\"type\":\"object\","
                + "\"properties\":{\"city\":{\"type\":\"string\"}}}%s}";
        String deferred = weather.formatted(",\"defer_loading\":true"), plain = weather.formatted("");
        String conversation = "\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Paris?\"},{\"role\":\"assistant\",\"content\":["
                + "{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"ToolSearch\",\"input\":{\"q\":\"weather\"}}]},"
                + "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_1\",\"content\":%s}]}]";
        String referenced = conversation.formatted("[{\"type\":\"tool_reference\",\"tool_name\":\"get_weather\"}]");
        String notYet = conversation.formatted("\"\"");
        int loaded = countTokens(referenced, search + "," + deferred);
        assertEquals(countTokens(referenced, search + "," + plain), loaded, "a referenced deferred tool is in the prompt as any tool");
        int unloaded = countTokens(notYet, search + "," + deferred);
        assertEquals(countTokens(notYet, search), unloaded, "an unreferenced deferred tool is not in the prompt");
        assertTrue(loaded > unloaded);
        io.restassured.RestAssured.given().contentType("application/json")
                .body("{\"model\":\"" + MODEL + "\"," + conversation.formatted("[{\"type\":\"tool_reference\",\"tool_name\":\"nope\"}]")
                        + ",\"tools\":[" + search + "]}")
                .post("/v1/messages/count_tokens").then().statusCode(400).body("type", org.hamcrest.Matchers.equalTo("error"))
                .body("error.message", org.hamcrest.Matchers.containsString("'nope' names no tool"));
        // a tool_reference outside a tool_result has no meaning
        io.restassured.RestAssured.given().contentType("application/json")
                .body("{\"model\":\"" + MODEL + "\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"tool_reference\",\"tool_name\":\"get_weather\"}]}],"
                        + "\"tools\":[" + deferred + "]}")
                .post("/v1/messages/count_tokens").then().statusCode(400).body("error.message", org.hamcrest.Matchers.containsString("tool_reference"));
    }

    private static int countTokens(String messages, String tools) {
        return io.restassured.RestAssured.given().contentType("application/json")
                .body("{\"model\":\"" + MODEL + "\",\"system\":\"Be brief.\"," + messages + ",\"tools\":[" + tools + "]}")
                .post("/v1/messages/count_tokens").then().statusCode(200).extract().jsonPath().getInt("input_tokens");
    }

    /** thinking.display omitted (Claude Code asks for it): the thinking block comes with empty text, streamed without thinking_delta. */
    @Test
    void omittedThinkingDisplayHidesTheReasoning() {
        String body = "{\"model\":\"" + MODEL + "\",\"max_tokens\":12,\"temperature\":0,\"messages\":[{\"role\":\"user\",\"content\":\"Think\"}],"
                + "\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":4,\"display\":\"%s\"}%s}";
        io.restassured.path.json.JsonPath shown = io.restassured.RestAssured.given().contentType("application/json").body(body.formatted("summarized", ""))
                .post("/v1/messages").then().statusCode(200).extract().jsonPath();
        assertEquals("thinking", shown.getString("content[0].type"));
        assertFalse(shown.getString("content[0].thinking").isEmpty());
        io.restassured.path.json.JsonPath omitted = io.restassured.RestAssured.given().contentType("application/json").body(body.formatted("omitted", ""))
                .post("/v1/messages").then().statusCode(200).extract().jsonPath();
        assertEquals("thinking", omitted.getString("content[0].type"));
        assertEquals("", omitted.getString("content[0].thinking"));
        assertEquals(shown.getString("content[1].text"), omitted.getString("content[1].text"), "the answer is the same");
        String sse = io.restassured.RestAssured.given().contentType("application/json").body(body.formatted("omitted", ",\"stream\":true"))
                .post("/v1/messages").then().statusCode(200).extract().asString();
        assertTrue(sse.contains("\"type\":\"thinking\"") && !sse.contains("thinking_delta"), sse);
    }

    private static String text(Message m) {
        StringBuilder out = new StringBuilder();
        for (ContentBlock b : m.content()) {
            if (b.isText()) out.append("text:").append(b.asText().text());
            if (b.isThinking()) out.append("thinking:").append(b.asThinking().thinking());
        }
        return out.toString();
    }
}
