package dev.ortserve.api;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.networknt.schema.JsonSchemaFactory;
import com.networknt.schema.SchemaValidatorsConfig;
import com.networknt.schema.SpecVersion;
import com.openai.client.OpenAIClient;
import com.openai.client.okhttp.OpenAIOkHttpClient;
import com.openai.models.chat.completions.ChatCompletionCreateParams;
import com.openai.models.chat.completions.StructuredChatCompletion;
import com.openai.models.chat.completions.StructuredChatCompletionCreateParams;
import com.openai.models.responses.ResponseCreateParams;
import com.openai.models.responses.StructuredResponse;
import com.openai.models.responses.StructuredResponseCreateParams;
import dev.ortserve.ApiTest;
import dev.ortserve.contract.SseFrames;
import dev.ortserve.service.GenerationModelHost;
import io.quarkus.test.common.http.TestHTTPResource;
import io.quarkus.test.junit.QuarkusTest;
import io.restassured.path.json.JsonPath;
import jakarta.inject.Inject;
import org.junit.jupiter.api.Test;

import java.net.URL;
import java.util.List;
import java.util.Set;

import static org.hamcrest.Matchers.containsString;
import static org.hamcrest.Matchers.equalTo;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Structured outputs over HTTP on the tiny model: chat response_format, Responses text.format, and the SDK helpers. */
@QuarkusTest
class StructuredOutputsTest extends ApiTest {

    static final ObjectMapper JSON = new ObjectMapper();
    static final String SCHEMA = "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":12},"
            + "\"temperature\":{\"type\":\"integer\",\"minimum\":-40,\"maximum\":50},\"sunny\":{\"type\":\"boolean\"},"
            + "\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\"]},\"maxItems\":3}},"
            + "\"required\":[\"city\",\"temperature\",\"sunny\"],\"additionalProperties\":false}";

    @Inject
    GenerationModelHost host;

    @TestHTTPResource
    URL base;

    static void assertValid(String schema, String output) throws Exception {
        var validator = JsonSchemaFactory.getInstance(SpecVersion.VersionFlag.V202012)
                .getSchema(JSON.readTree(schema), SchemaValidatorsConfig.builder().formatAssertionsEnabled(true).build());
        assertEquals(Set.of(), validator.validate(JSON.readTree(output)), output);
    }

    static String chat(String extra) {
        return chat(200, extra);
    }

    static String chat(int maxTokens, String extra) {
        return "{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"Weather as JSON\"}],\"max_tokens\":" + maxTokens + extra + "}";
    }

    @Test
    void jsonSchemaOutputsValidate() throws Exception {
        int stopped = 0;
        for (int seed = 0; seed < 8; seed++) {
            JsonPath r = json().body(chat(",\"seed\":" + seed + ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"w\",\"strict\":true,\"schema\":"
                    + SCHEMA + "}}")).post("/v1/chat/completions").then().statusCode(200).extract().jsonPath();
            if (!r.getString("choices[0].finish_reason").equals("stop")) continue;
            stopped++;
            assertValid(SCHEMA, r.getString("choices[0].message.content"));
        }
        assertTrue(stopped >= 4, "most outputs finish: " + stopped);
    }

    @Test
    void streamedJsonIsTheSameValidJson() throws Exception {
        String sse = json().body(chat(",\"seed\":3,\"stream\":true,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"w\",\"schema\":"
                + SCHEMA + "}}")).post("/v1/chat/completions").then().statusCode(200).extract().asString();
        StringBuilder content = new StringBuilder();
        String finish = null;
        for (String data : SseFrames.data(sse)) {
            if (data.equals("[DONE]")) continue;
            JsonNode chunk = JSON.readTree(data);
            JsonNode c = chunk.at("/choices/0/delta/content");
            if (c.isTextual()) content.append(c.asText());
            if (chunk.at("/choices/0/finish_reason").isTextual()) finish = chunk.at("/choices/0/finish_reason").asText();
        }
        if ("stop".equals(finish)) assertValid(SCHEMA, content.toString());
    }

    @Test
    void jsonObjectModeGivesAnObjectAndStopStringsDoNotCutIt() throws Exception {
        for (int seed = 0; seed < 4; seed++) {
            JsonPath r = json().body(chat(",\"seed\":" + seed + ",\"stop\":[\"\\\"\",\"}\"],\"response_format\":{\"type\":\"json_object\"}"))
                    .post("/v1/chat/completions").then().statusCode(200).extract().jsonPath();
            if (r.getString("choices[0].finish_reason").equals("stop")) {
                assertTrue(JSON.readTree(r.getString("choices[0].message.content")).isObject());
            }
        }
    }

    @Test
    void aTokenLimitMidValueIsFinishReasonLength() {
        json().body(chat(3, ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"w\",\"schema\":" + SCHEMA + "}}"))
                .post("/v1/chat/completions").then().statusCode(200).body("choices[0].finish_reason", equalTo("length"));
    }

    @Test
    void unsupportedSchemasAreRefusedBeforeGeneration() {
        long steps = host.engine().steps();
        json().body(chat(",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"w\",\"schema\":{\"type\":\"array\",\"uniqueItems\":true}}}"))
                .post("/v1/chat/completions").then().statusCode(400).body("error.param", equalTo("response_format.json_schema.schema"))
                .body("error.message", containsString("uniqueItems"));
        json().body("{\"model\":\"tiny\",\"input\":\"x\",\"text\":{\"format\":{\"type\":\"json_schema\",\"name\":\"s\",\"schema\":{\"type\":\"string\",\"format\":\"hostname\"}}}}")
                .post("/v1/responses").then().statusCode(400).body("error.param", equalTo("text.format.schema"))
                .body("error.message", containsString("hostname"));
        assertEquals(steps, host.engine().steps());
    }

    @Test
    void responsesTextFormatJsonSchema() throws Exception {
        JsonPath r = json().body("{\"model\":\"tiny\",\"input\":\"Weather?\",\"max_output_tokens\":200,\"text\":{\"format\":{\"type\":\"json_schema\",\"name\":\"w\",\"schema\":"
                + SCHEMA + "}}}").post("/v1/responses").then().statusCode(200).extract().jsonPath();
        if (r.getString("status").equals("completed")) assertValid(SCHEMA, r.getString("output[0].content[0].text"));
        assertEquals("json_schema", r.getString("text.format.type"));
    }

    /** What openai-java's structured-output helpers derive a schema from. */
    public static class Weather {
        public String city;
        public long temperature;
        public boolean sunny;
    }

    @Test
    void openAiJavaStructuredOutputHelpersParseOurResponses() {
        OpenAIClient client = OpenAIOkHttpClient.builder().baseUrl(contractChecked(base) + "/v1").apiKey("unused").maxRetries(0).build();
        int parsed = 0;
        for (long seed = 0; seed < 4; seed++) {
            StructuredChatCompletionCreateParams<Weather> params = ChatCompletionCreateParams.builder().model(MODEL)
                    .addUserMessage("Weather in Paris as JSON").maxCompletionTokens(200).seed(seed).responseFormat(Weather.class).build();
            StructuredChatCompletion<Weather> completion = client.chat().completions().create(params);
            var choice = completion.choices().get(0);
            if (!choice.finishReason().asString().equals("stop")) continue;
            Weather w = choice.message().content().orElseThrow();
            assertTrue(w.city != null);
            parsed++;
        }
        assertTrue(parsed >= 2, "parsed " + parsed);
        int completed = 0;
        for (String city : List.of("Oslo", "Paris", "Rome", "Lima", "Kyiv", "Baku")) {
            StructuredResponseCreateParams<Weather> rp = ResponseCreateParams.builder().model(MODEL).input("Weather in " + city + " as JSON")
                    .maxOutputTokens(200).text(Weather.class).build();
            StructuredResponse<Weather> response = client.responses().create(rp);
            // an incomplete response holds cut JSON, which the helper rightly cannot parse
            if (!response.status().map(st -> st.asString().equals("completed")).orElse(false)) continue;
            List<Weather> out = response.output().stream().flatMap(i -> i.message().stream())
                    .flatMap(m -> m.content().stream()).flatMap(c -> c.outputText().stream()).toList();
            assertEquals(1, out.size());
            assertTrue(out.get(0).city != null);
            completed++;
        }
        assertTrue(completed >= 1, "no structured response completed");
    }
}
