package dev.ortserve.api;

import dev.ortserve.ApiTest;
import dev.ortserve.contract.SseFrames;
import io.restassured.path.json.JsonPath;
import io.quarkus.test.junit.QuarkusTest;
import org.junit.jupiter.api.Test;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * OpenAI's Predicted Outputs on the served tiny model (fixed prompts: greedy outputs the same every run): a prediction never changes the output (greedy text equal to the
 * request's without one), a matching one is accepted (usage's completion_tokens_details count it) and takes fewer model
 * passes, a wrong one is rejected; streamed usage counts the same; the completions endpoint takes the field too; the
 * access log and the metrics count drafted and accepted tokens.
 */
@QuarkusTest
class PredictedOutputsTest extends ApiTest {

    @jakarta.inject.Inject
    dev.ortserve.service.GenerationModelHost host;

    private static String quote(String s) {
        return com.fasterxml.jackson.databind.node.TextNode.valueOf(s).toString();
    }

    /**
     * The tiny model's random weights also pick lone bytes of UTF-8 characters (byte-fallback tokens 128-255), which come
     * out as U+FFFD and so tokenize back to other tokens: barred here, so that the output text tokenizes back to the
     * generated tokens, as real models' text does.
     */
    static final String NO_STRAY_BYTES;

    static {
        StringBuilder b = new StringBuilder("{");
        for (int i = 128; i < 256; i++) b.append(i > 128 ? "," : "").append('"').append(i).append("\":-100");
        NO_STRAY_BYTES = b.append('}').toString();
    }

    private static String chat(String user, String prediction, boolean stream) {
        return "{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":" + quote(user) + "}],\"max_tokens\":48,\"temperature\":0,"
                + "\"ignore_eos\":true,\"skip_special_tokens\":false,\"logit_bias\":" + NO_STRAY_BYTES + (prediction == null ? "" : ",\"prediction\":{\"type\":\"content\",\"content\":" + prediction + "}")
                + (stream ? ",\"stream\":true,\"stream_options\":{\"include_usage\":true}" : "") + "}";
    }

    @Test
    void aMatchingPredictionIsAcceptedAndChangesNothing() {
        String user = "Rewrite this file: predicted outputs, test one.";
        JsonPath plain = json().body(chat(user, null, false)).post("/v1/chat/completions").then().statusCode(200).extract().jsonPath();
        String content = plain.getString("choices[0].message.content");
        assertNull(plain.get("usage.completion_tokens_details.accepted_prediction_tokens"), "no prediction, no prediction counts");

        long steps = host.engine().steps();
        JsonPath predicted = json().body(chat(user, quote(content), false)).post("/v1/chat/completions").then().statusCode(200).extract().jsonPath();
        long predictedSteps = host.engine().steps() - steps;
        assertEquals(content, predicted.getString("choices[0].message.content"));
        assertEquals(plain.getInt("usage.completion_tokens"), predicted.getInt("usage.completion_tokens"));
        int accepted = predicted.getInt("usage.completion_tokens_details.accepted_prediction_tokens");
        // the prefill's token and each pass's own last one are the model's; every drafted token is accepted
        assertTrue(accepted >= 32, "accepted " + accepted + " of 48");
        assertEquals(0, predicted.getInt("usage.completion_tokens_details.rejected_prediction_tokens"));
        assertTrue(predictedSteps < 12, predictedSteps + " model passes for 48 tokens");

        // text parts are joined as they are; streamed usage counts the same
        String parts = "[{\"type\":\"text\",\"text\":" + quote(content.substring(0, content.length() / 2)) + "},{\"type\":\"text\",\"text\":"
                + quote(content.substring(content.length() / 2)) + "}]";
        List<String> frames = SseFrames.data(json().body(chat(user, parts, true)).post("/v1/chat/completions").then().statusCode(200)
                .extract().asString());
        StringBuilder streamed = new StringBuilder();
        JsonPath usage = null;
        for (String f : frames) {
            if (f.equals("[DONE]")) continue;
            JsonPath j = JsonPath.from(f);
            if (j.get("usage") != null) usage = j;
            String delta = j.getString("choices[0].delta.content");
            if (delta != null) streamed.append(delta);
        }
        assertEquals(content, streamed.toString());
        assertEquals(accepted, usage.getInt("usage.completion_tokens_details.accepted_prediction_tokens"));
        assertEquals(0, usage.getInt("usage.completion_tokens_details.rejected_prediction_tokens"));
    }

    @Test
    void aWrongPredictionIsRejectedAndChangesNothing() {
        String user = "Another file: predicted outputs, test two.";
        String content = json().body(chat(user, null, false)).post("/v1/chat/completions").then().statusCode(200).extract().jsonPath()
                .getString("choices[0].message.content");
        JsonPath wrong = json().body(chat(user, quote("Completely unrelated words about gardening and the weather in May."), false))
                .post("/v1/chat/completions").then().statusCode(200).extract().jsonPath();
        assertEquals(content, wrong.getString("choices[0].message.content"));
        assertEquals(0, wrong.getInt("usage.completion_tokens_details.accepted_prediction_tokens"));
        assertTrue(wrong.getInt("usage.completion_tokens_details.rejected_prediction_tokens") > 0, wrong.prettify());
    }

    @Test
    void completionsTakeAPredictionToo() {
        String prompt = "Once upon a time, predicted outputs, test three.";
        String body = "{\"model\":\"tiny\",\"prompt\":" + quote(prompt) + ",\"max_tokens\":32,\"temperature\":0,\"ignore_eos\":true,"
                + "\"logit_bias\":" + NO_STRAY_BYTES;
        JsonPath plain = json().body(body + "}").post("/v1/completions").then().statusCode(200).extract().jsonPath();
        String text = plain.getString("choices[0].text");
        JsonPath predicted = json().body(body + ",\"prediction\":{\"type\":\"content\",\"content\":" + quote(text) + "}}")
                .post("/v1/completions").then().statusCode(200).extract().jsonPath();
        assertEquals(text, predicted.getString("choices[0].text"));
        assertTrue(predicted.getInt("usage.completion_tokens_details.accepted_prediction_tokens") >= 16, predicted.prettify());
        assertEquals(0, predicted.getInt("usage.completion_tokens_details.rejected_prediction_tokens"));
    }

    @Test
    void aJsonSchemaHoldsWithAPrediction() throws Exception {
        // sampled under a grammar (seeded): with the output as prediction, the same tokens are drawn, every one allowed by the schema
        String body = "{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"Weather as JSON, predicted\"}],\"max_tokens\":200,"
                + "\"seed\":5,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"w\",\"strict\":true,\"schema\":"
                + StructuredOutputsTest.SCHEMA + "}}";
        JsonPath plain = json().body(body + "}").post("/v1/chat/completions").then().statusCode(200).extract().jsonPath();
        String content = plain.getString("choices[0].message.content");
        JsonPath predicted = json().body(body + ",\"prediction\":{\"type\":\"content\",\"content\":" + quote(content) + "}}")
                .post("/v1/chat/completions").then().statusCode(200).extract().jsonPath();
        assertEquals(content, predicted.getString("choices[0].message.content"));
        assertEquals(plain.getString("choices[0].finish_reason"), predicted.getString("choices[0].finish_reason"));
        assertTrue(predicted.getInt("usage.completion_tokens_details.accepted_prediction_tokens") > 0, predicted.prettify());
        if ("stop".equals(plain.getString("choices[0].finish_reason"))) StructuredOutputsTest.assertValid(StructuredOutputsTest.SCHEMA, content);
    }

    @Test
    void metricsCountDraftedAndAcceptedTokens() {
        aMatchingPredictionIsAcceptedAndChangesNothing();
        String metrics = io.restassured.RestAssured.get("/q/metrics").then().statusCode(200).extract().asString();
        assertTrue(metrics.contains("ortserve_spec_decode_num_draft_tokens_total{model=\"tiny\"}"), metrics);
        assertTrue(metrics.contains("ortserve_spec_decode_num_accepted_tokens_total{model=\"tiny\"}"), metrics);
    }

    @io.quarkus.test.common.http.TestHTTPResource
    java.net.URL base;

    @Test
    void theOpenAiSdkSendsAPredictionAndReadsItsUsage() {
        // openai-java as the client: its own prediction field and its typed usage details, strict response validation on;
        // the prompt of aMatchingPredictionIsAcceptedAndChangesNothing, whose random-weight output tokenizes back to the
        // generated tokens (other prompts may give non-canonical merges, whose drafts are then rejected and re-aligned)
        com.openai.client.OpenAIClient client = com.openai.client.okhttp.OpenAIOkHttpClient.builder().baseUrl(contractChecked(base) + "/v1")
                .apiKey("unused").maxRetries(0).responseValidation(true).build();
        var bias = com.openai.models.chat.completions.ChatCompletionCreateParams.LogitBias.builder();
        for (int i = 128; i < 256; i++) bias.putAdditionalProperty(Integer.toString(i), com.openai.core.JsonValue.from(-100));
        var plain = com.openai.models.chat.completions.ChatCompletionCreateParams.builder().model(MODEL)
                .addUserMessage("Rewrite this file: predicted outputs, test one.").maxTokens(48).temperature(0.0).logitBias(bias.build())
                .putAdditionalBodyProperty("ignore_eos", com.openai.core.JsonValue.from(true))
                .putAdditionalBodyProperty("skip_special_tokens", com.openai.core.JsonValue.from(false)).build();
        var whole = client.chat().completions().create(plain);
        String content = whole.choices().get(0).message().content().orElseThrow();
        var predicted = client.chat().completions().create(plain.toBuilder()
                .prediction(com.openai.models.chat.completions.ChatCompletionPredictionContent.builder().content(content).build()).build());
        assertEquals(content, predicted.choices().get(0).message().content().orElseThrow());
        var details = predicted.usage().orElseThrow().completionTokensDetails().orElseThrow();
        assertTrue(details.acceptedPredictionTokens().orElseThrow() > 0, details.toString());
        assertEquals(0L, details.rejectedPredictionTokens().orElseThrow());
    }
}
