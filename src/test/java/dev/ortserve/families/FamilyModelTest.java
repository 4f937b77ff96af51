package dev.ortserve.families;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.ortserve.contract.ContractValidationFilter;
import dev.ortserve.contract.SseFrames;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.restassured.RestAssured;
import io.restassured.path.json.JsonPath;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static io.restassured.RestAssured.given;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A tiny seeded transformers model of a real family (real architecture class, real tokenizer and chat
 * template, Optimum decoder-with-past export; {@code fixtures/families/make_fixtures.py}) served with no
 * configuration but its path: /tokenize gives the tokenizers library's ids and apply_chat_template's ids,
 * and chat completions and completions give transformers' greedy text ({@code generate(do_sample=False)}),
 * alone, batched and streamed.
 */
abstract class FamilyModelTest {

    static final ObjectMapper JSON = new ObjectMapper();

    abstract String family();

    abstract String expectedToolCallParser();

    abstract String expectedReasoningParser();

    JsonNode reference() {
        try {
            return JSON.readTree(FamilyFixtures.SOURCE.resolve(family()).resolve("reference.json").toFile());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @BeforeAll
    static void contract() {
        if (!RestAssured.filters().contains(ContractValidationFilter.get())) RestAssured.filters(ContractValidationFilter.get());
    }

    static JsonPath post(String path, Object body) {
        try {
            return given().contentType("application/json").body(JSON.writeValueAsString(body)).post(path)
                    .then().statusCode(200).extract().jsonPath();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static String postStream(String path, Object body) {
        try {
            return given().contentType("application/json").body(JSON.writeValueAsString(body)).post(path)
                    .then().statusCode(200).extract().asString();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static List<Integer> ids(JsonNode array) {
        List<Integer> out = new ArrayList<>();
        for (JsonNode n : array) out.add(n.asInt());
        return out;
    }

    @Test
    void startsWithNoConfigurationAndPicksTheParsers() {
        JsonPath models = given().get("/v1/models").then().statusCode(200).extract().jsonPath();
        assertEquals(family(), models.getString("data[0].id"));
        assertEquals(expectedToolCallParser(), models.getString("data[0].parsers.tool_call"));
        assertEquals(expectedReasoningParser(), models.getString("data[0].parsers.reasoning"));
    }

    /** The API's shape of a conversation of the reference: assistant tool-call arguments as JSON strings. */
    ObjectNode chatBody(JsonNode chat) {
        ObjectNode body = JSON.createObjectNode();
        body.put("model", family());
        ArrayNode messages = body.putArray("messages");
        for (JsonNode m : chat.get("messages")) {
            ObjectNode copy = m.deepCopy();
            if (copy.has("tool_calls")) {
                for (JsonNode call : copy.get("tool_calls")) {
                    ObjectNode function = (ObjectNode) call.get("function");
                    function.put("arguments", function.get("arguments").toString());
                }
            }
            messages.add(copy);
        }
        if (chat.has("tools")) body.set("tools", chat.get("tools"));
        if (chat.has("chat_template_kwargs")) body.set("chat_template_kwargs", chat.get("chat_template_kwargs"));
        return body;
    }

    @Test
    void tokenizeRendersTheChatTemplateAsTransformers() {
        for (JsonNode chat : reference().get("chats")) {
            JsonPath r = post("/tokenize", chatBody(chat));
            assertEquals(ids(chat.get("prompt_ids")), r.getList("tokens", Integer.class), chat.get("name").asText());
        }
    }

    @Test
    void tokenizeIsTheTokenizersLibrary() {
        for (JsonNode t : reference().get("tokenize")) {
            JsonPath with = post("/tokenize", Map.of("model", family(), "prompt", t.get("prompt").asText()));
            assertEquals(ids(t.get("ids")), with.getList("tokens", Integer.class), t.get("prompt").asText());
            JsonPath without = post("/tokenize", Map.of("model", family(), "prompt", t.get("prompt").asText(), "add_special_tokens", false));
            assertEquals(ids(t.get("ids_without_special")), without.getList("tokens", Integer.class), t.get("prompt").asText());
        }
    }

    @Test
    void chatCompletionsGiveTransformersGreedyText() {
        JsonNode ref = reference();
        int max = ref.get("max_tokens").asInt();
        for (JsonNode chat : ref.get("chats")) {
            String name = chat.get("name").asText();
            ObjectNode body = chatBody(chat);
            body.put("max_tokens", max);
            body.put("temperature", 0);
            JsonPath r = post("/v1/chat/completions", body);
            assertEquals(chat.get("greedy_text").asText(), r.getString("choices[0].message.content"), name);
            assertNull(r.get("choices[0].message.tool_calls"), name);
            assertEquals(chat.get("finish_reason").asText(), r.getString("choices[0].finish_reason"), name);
            assertEquals(chat.get("prompt_ids").size(), r.getInt("usage.prompt_tokens"), name);
            assertEquals(chat.get("greedy_ids").size(), r.getInt("usage.completion_tokens"), name);

            body.put("stream", true);
            StringBuilder streamed = new StringBuilder();
            String finish = null;
            for (String data : SseFrames.data(postStream("/v1/chat/completions", body))) {
                if (data.equals("[DONE]")) continue;
                JsonPath chunk = JsonPath.from(data);
                assertNull(chunk.get("choices[0].delta.tool_calls"), name);
                assertNull(chunk.get("choices[0].delta.reasoning_content"), name);
                if (chunk.get("choices[0].delta.content") != null) streamed.append(chunk.getString("choices[0].delta.content"));
                if (chunk.get("choices[0].finish_reason") != null) finish = chunk.getString("choices[0].finish_reason");
            }
            assertEquals(chat.get("greedy_text").asText(), streamed.toString(), "streamed: " + name);
            assertEquals(chat.get("finish_reason").asText(), finish, "streamed: " + name);
        }
    }

    @Test
    void completionsGiveTransformersGreedyTextAloneBatchedAndStreamed() {
        JsonNode ref = reference();
        int max = ref.get("max_tokens").asInt();
        List<String> prompts = new ArrayList<>();
        for (JsonNode c : ref.get("completions")) prompts.add(c.get("prompt").asText());
        JsonPath batched = post("/v1/completions", Map.of("model", family(), "prompt", prompts, "max_tokens", max, "temperature", 0));
        int i = 0;
        for (JsonNode c : ref.get("completions")) {
            String prompt = c.get("prompt").asText();
            JsonPath alone = post("/v1/completions", Map.of("model", family(), "prompt", prompt, "max_tokens", max, "temperature", 0));
            assertEquals(c.get("greedy_text").asText(), alone.getString("choices[0].text"), prompt);
            assertEquals(c.get("finish_reason").asText(), alone.getString("choices[0].finish_reason"), prompt);
            assertEquals(c.get("prompt_ids").size(), alone.getInt("usage.prompt_tokens"), prompt);
            assertEquals(c.get("greedy_ids").size(), alone.getInt("usage.completion_tokens"), prompt);
            assertEquals(c.get("greedy_text").asText(), batched.getString("choices[" + i + "].text"), "batched: " + prompt);
            i++;

            StringBuilder streamed = new StringBuilder();
            for (String data : SseFrames.data(postStream("/v1/completions",
                    Map.of("model", family(), "prompt", prompt, "max_tokens", max, "temperature", 0, "stream", true)))) {
                if (data.equals("[DONE]")) continue;
                String text = JsonPath.from(data).getString("choices[0].text");
                if (text != null) streamed.append(text);
            }
            assertEquals(c.get("greedy_text").asText(), streamed.toString(), "streamed: " + prompt);
        }
    }

    @Test
    void everyEosIdOfGenerationConfigEndsTheOutput() {
        // generation_config.json lists several EOS ids (Llama 3: three, Gemma 3 and Qwen3: two); pushed to the top by
        // logit_bias, each one ends the choice at once with finish_reason stop and no text
        for (JsonNode eos : reference().get("eos_ids")) {
            JsonPath r = post("/v1/completions", Map.of("model", family(), "prompt", "Hello", "max_tokens", 5, "temperature", 0,
                    "logit_bias", Map.of(eos.asText(), 100)));
            assertEquals("stop", r.getString("choices[0].finish_reason"), "eos " + eos);
            assertEquals("", r.getString("choices[0].text"), "eos " + eos);
            assertEquals(1, r.getInt("usage.completion_tokens"), "eos " + eos);
        }
    }

    @Test
    void theReferencesAreNotDegenerate() {
        // the fixtures are only a test if the greedy text varies: several distinct ids per continuation
        for (JsonNode c : reference().get("completions")) {
            assertTrue(c.get("greedy_ids").size() > 0);
            assertTrue(ids(c.get("greedy_ids")).stream().distinct().count() >= 4, c.get("prompt").asText());
        }
        assertFalse(reference().get("chats").isEmpty());
    }

    /**
     * Only the model's path and id: parsers, template, EOS ids and everything else come from the files. And the model's
     * own (fp32) KV: the reference is transformers' float32 greedy ids, which the default float16 KV (where attention runs
     * as GroupQueryAttention) leaves at near-ties of these random-weight models.
     */
    abstract static class NoConfiguration implements QuarkusTestProfile {
        abstract String family();

        @Override
        public Map<String, String> getConfigOverrides() {
            return Map.of("ortserve.model-path", FamilyFixtures.directory(family()).toString(), "ortserve.model-name", family(),
                    "ortserve.engine.kv-cache-dtype", "model");
        }

        @Override
        public boolean disableGlobalTestResources() {
            return true;
        }
    }
}
