package dev.ortserve.api;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.ApiTest;
import dev.ortserve.contract.SseFrames;
import dev.ortserve.service.GenerationModelHost;
import io.quarkus.test.junit.QuarkusTest;
import io.restassured.path.json.JsonPath;
import jakarta.inject.Inject;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.equalTo;
import static org.hamcrest.Matchers.matchesPattern;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The Responses API on the tiny model with the embedded (memory) store. */
@QuarkusTest
class ResponsesTest extends ApiTest {

    static final ObjectMapper JSON = new ObjectMapper();

    @Inject
    GenerationModelHost host;

    static JsonPath create(String body) {
        return json().body(body).post("/v1/responses").then().statusCode(200).extract().jsonPath();
    }

    static List<Integer> tokenize(String messages) {
        return json().body("{\"model\":\"tiny\",\"messages\":" + messages + "}").post("/tokenize").then().statusCode(200)
                .extract().jsonPath().getList("tokens", Integer.class);
    }

    static String quoted(String s) {
        try {
            return JSON.writeValueAsString(s);
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    @Test
    void createReturnsAStoredResponseWithStableItemIds() {
        // the raw body, not JsonPath.prettify(): that re-prints strings without escaping control characters
        // greedy: a sampled output may open with the reasoning parser's <think> token (a reasoning item first), a greedy one is fixed
        String created = json().body("{\"model\":\"tiny\",\"input\":\"Hello there\",\"max_output_tokens\":4,\"temperature\":0,\"metadata\":{\"k\":\"v\"}}")
                .post("/v1/responses").then().statusCode(200).extract().asString();
        JsonPath r = new JsonPath(created);
        String id = r.getString("id");
        assertTrue(id.matches("resp_[0-9a-f]{48}"), id);
        assertEquals("response", r.getString("object"));
        assertTrue(List.of("completed", "incomplete").contains(r.getString("status")));
        assertEquals("message", r.getString("output[0].type"));
        assertTrue(r.getString("output[0].id").startsWith("msg_"));
        assertEquals("output_text", r.getString("output[0].content[0].type"));
        assertEquals(tokenize("[{\"role\":\"user\",\"content\":\"Hello there\"}]").size(), r.getInt("usage.input_tokens"));
        assertEquals(r.getInt("usage.input_tokens") + r.getInt("usage.output_tokens"), r.getInt("usage.total_tokens"));
        assertEquals("v", r.getString("metadata.k"));
        assertEquals(true, r.getBoolean("store"));

        String stored = given().get("/v1/responses/" + id).then().statusCode(200).extract().asString();
        assertEquals(tree(created), tree(stored));

        JsonPath items = given().get("/v1/responses/" + id + "/input_items").then().statusCode(200).extract().jsonPath();
        assertEquals("list", items.getString("object"));
        assertEquals(1, items.getList("data").size());
        assertEquals("user", items.getString("data[0].role"));
        assertEquals("Hello there", items.getString("data[0].content[0].text"));
        String itemId = items.getString("data[0].id");
        assertTrue(itemId.startsWith("msg_"));
        assertEquals(itemId, given().get("/v1/responses/" + id + "/input_items").then().extract().jsonPath().getString("data[0].id"));
    }

    static final List<String> RESPONSE_FIELDS = List.of("id", "object", "created_at", "completed_at", "status", "background", "error",
            "incomplete_details", "instructions", "max_output_tokens", "max_tool_calls", "model", "output", "parallel_tool_calls",
            "previous_response_id", "reasoning", "store", "temperature", "top_p", "top_logprobs", "presence_penalty", "frequency_penalty",
            "text", "tool_choice", "tools", "truncation", "usage", "user", "metadata", "service_tier", "safety_identifier", "prompt_cache_key",
            "prompt_cache_retention", "conversation", "prompt", "access_programs");

    @Test
    void everyFieldOfTheResponseObjectIsPresentAndEchoed() throws Exception {
        String body = json().body("{\"model\":\"tiny\",\"input\":\"Hi\",\"max_output_tokens\":3,\"presence_penalty\":0.5,"
                + "\"frequency_penalty\":-0.25,\"max_tool_calls\":2,\"service_tier\":\"flex\",\"safety_identifier\":\"user-hash-1\","
                + "\"prompt_cache_key\":\"conv-7\",\"prompt_cache_retention\":\"24h\"}").post("/v1/responses").then().statusCode(200).extract().asString();
        JsonNode r = JSON.readTree(body);
        List<String> fields = new ArrayList<>();
        r.fieldNames().forEachRemaining(fields::add);
        assertEquals(new java.util.TreeSet<>(RESPONSE_FIELDS), new java.util.TreeSet<>(fields));
        assertEquals(0.5, r.get("presence_penalty").asDouble());
        assertEquals(-0.25, r.get("frequency_penalty").asDouble());
        assertEquals(2, r.get("max_tool_calls").asInt());
        assertEquals(0, r.get("top_logprobs").asInt());
        assertEquals("flex", r.get("service_tier").asText());
        assertEquals("user-hash-1", r.get("safety_identifier").asText());
        assertEquals("conv-7", r.get("prompt_cache_key").asText());
        assertEquals("24h", r.get("prompt_cache_retention").asText());
        assertEquals(false, r.get("background").asBoolean());
        assertTrue(r.get("conversation").isNull() && r.get("prompt").isNull() && r.get("access_programs").isNull());
        long created = r.get("created_at").asLong();
        long completed = r.get("completed_at").asLong();
        assertTrue(completed >= created && completed <= created + 60, body);

        // unset fields are null (or their documented default), still present
        JsonNode plain = JSON.readTree(json().body("{\"model\":\"tiny\",\"input\":\"Hi\",\"max_output_tokens\":1}").post("/v1/responses")
                .then().statusCode(200).extract().asString());
        for (String f : List.of("max_tool_calls", "safety_identifier", "prompt_cache_key", "prompt_cache_retention")) {
            assertTrue(plain.get(f).isNull(), f + " in " + plain);
        }
        // always a string (Open Responses requires one; OpenAI answers "default")
        assertEquals("default", plain.get("service_tier").asText());
        assertEquals(0.0, plain.get("presence_penalty").asDouble());
    }

    @Test
    void presenceAndFrequencyPenaltiesChangeGreedyOutput() {
        String base = "{\"model\":\"tiny\",\"input\":\"Count\",\"max_output_tokens\":48,\"temperature\":0";
        String plain = create(base + "}").getString("output[0].content[0].text");
        assertEquals(plain, create(base + "}").getString("output[0].content[0].text"), "greedy output is reproducible");
        String presence = create(base + ",\"presence_penalty\":2}").getString("output[0].content[0].text");
        String frequency = create(base + ",\"frequency_penalty\":2}").getString("output[0].content[0].text");
        assertNotEquals(plain, presence);
        assertNotEquals(plain, frequency);
    }

    @Test
    void assistantPhaseIsStoredAndListed() {
        String id = create("{\"model\":\"tiny\",\"max_output_tokens\":1,\"input\":[{\"role\":\"user\",\"content\":\"Q\"},"
                + "{\"role\":\"assistant\",\"phase\":\"commentary\",\"content\":\"thinking aloud\"},"
                + "{\"type\":\"message\",\"role\":\"assistant\",\"phase\":\"final_answer\",\"content\":[{\"type\":\"output_text\",\"text\":\"A\"}]},"
                + "{\"role\":\"user\",\"content\":\"more\"}]}").getString("id");
        JsonPath items = given().get("/v1/responses/" + id + "/input_items?order=asc").then().statusCode(200).extract().jsonPath();
        assertEquals(java.util.Arrays.asList(null, "commentary", "final_answer", null), items.getList("data.phase"));
        json().body("{\"model\":\"tiny\",\"input\":[{\"role\":\"assistant\",\"phase\":\"draft\",\"content\":\"x\"}]}").post("/v1/responses")
                .then().statusCode(400).body("error.param", matchesPattern(".*phase.*"));
    }

    @Test
    void compactRefusesBadRequestsBeforeAnyModelWork() {
        json().body("{\"input\":\"x\"}").post("/v1/responses/compact").then().statusCode(400).body("error.param", equalTo("model"));
        json().body("{\"model\":\"tiny\"}").post("/v1/responses/compact").then().statusCode(400).body("error.param", equalTo("input"));
        json().body("{\"model\":\"nope\",\"input\":\"x\"}").post("/v1/responses/compact").then().statusCode(404)
                .body("error.code", equalTo("model_not_found"));
        json().body("{\"model\":\"tiny\",\"previous_response_id\":\"resp_" + "3".repeat(48) + "\"}").post("/v1/responses/compact")
                .then().statusCode(404).body("error.code", equalTo("previous_response_not_found"));
        json().body("{\"model\":\"tiny\",\"input\":[{\"type\":\"compaction\",\"encrypted_content\":\"v1.AAAA\"}]}").post("/v1/responses")
                .then().statusCode(400).body("error.param", equalTo("input[0].encrypted_content"));
        // a short conversation has nothing older than the kept turns: no summary is generated, the items travel as they are
        JsonPath c = json().body("{\"model\":\"tiny\",\"input\":\"only turn\"}").post("/v1/responses/compact").then().statusCode(200)
                .extract().jsonPath();
        assertEquals("response.compaction", c.getString("object"));
        assertEquals(0, c.getInt("usage.output_tokens"));
        assertEquals("compaction", c.getString("output[0].type"));
        String id = create("{\"model\":\"tiny\",\"max_output_tokens\":1,\"input\":[{\"type\":\"compaction\",\"encrypted_content\":"
                + quoted(c.getString("output[0].encrypted_content")) + "}]}").getString("id");
        JsonPath items = given().get("/v1/responses/" + id + "/input_items").then().statusCode(200).extract().jsonPath();
        assertEquals(List.of("only turn"), items.getList("data.content.text.flatten()"));
    }

    @Test
    void maxOutputTokensMakesTheResponseIncomplete() {
        JsonPath r = create("{\"model\":\"tiny\",\"input\":\"Count\",\"max_output_tokens\":1,\"temperature\":0}");
        // one token cannot finish a ChatML turn unless it is the end token itself
        if (r.getInt("usage.output_tokens") == 1 && !r.getString("status").equals("completed")) {
            assertEquals("incomplete", r.getString("status"));
            assertEquals("max_output_tokens", r.getString("incomplete_details.reason"));
            assertEquals("incomplete", r.getString("output[0].status"));
        }
        JsonPath forced = create("{\"model\":\"tiny\",\"input\":[{\"role\":\"user\",\"content\":\"Count\"}],\"max_output_tokens\":2,\"temperature\":0}");
        assertTrue(forced.getInt("usage.output_tokens") <= 2);
    }

    @Test
    void previousResponseIdRebuildsTheConversationWithoutTheOldInstructions() {
        JsonPath first = create("{\"model\":\"tiny\",\"input\":\"My name is Ada.\",\"instructions\":\"Be brief.\",\"max_output_tokens\":3,\"temperature\":0}");
        assertEquals(tokenize("[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"My name is Ada.\"}]").size(),
                first.getInt("usage.input_tokens"));
        String answer = first.getString("output[0].content[0].text");
        JsonPath second = create("{\"model\":\"tiny\",\"input\":\"What is my name?\",\"previous_response_id\":\"" + first.getString("id")
                + "\",\"max_output_tokens\":3,\"temperature\":0}");
        assertEquals(first.getString("id"), second.getString("previous_response_id"));
        assertEquals(first.getString("id").substring(5, 29), second.getString("id").substring(5, 29), "same conversation");
        List<Integer> expected = tokenize("[{\"role\":\"user\",\"content\":\"My name is Ada.\"},{\"role\":\"assistant\",\"content\":" + quoted(answer)
                + "},{\"role\":\"user\",\"content\":\"What is my name?\"}]");
        assertEquals(expected.size(), second.getInt("usage.input_tokens"));
        // input_items lists only this turn's input
        JsonPath items = given().get("/v1/responses/" + second.getString("id") + "/input_items").then().statusCode(200).extract().jsonPath();
        assertEquals(List.of("What is my name?"), items.getList("data.content.text.flatten()"));
    }

    @Test
    void functionCallRoundTripRendersAsToolCallsAndToolMessages() {
        String input = "[{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"
                + "{\"type\":\"function_call\",\"call_id\":\"call_1\",\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"},"
                + "{\"type\":\"function_call_output\",\"call_id\":\"call_1\",\"output\":\"18C\"}]";
        JsonPath r = create("{\"model\":\"tiny\",\"input\":" + input + ",\"max_output_tokens\":2}");
        List<Integer> expected = tokenize("[{\"role\":\"user\",\"content\":\"Weather in Paris?\"},{\"role\":\"assistant\",\"content\":null,"
                + "\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}}]},"
                + "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"18C\"}]");
        assertEquals(expected.size(), r.getInt("usage.input_tokens"));
        JsonPath items = given().queryParam("order", "asc").get("/v1/responses/" + r.getString("id") + "/input_items").then().statusCode(200)
                .extract().jsonPath();
        assertEquals(List.of("message", "function_call", "function_call_output"), items.getList("data.type"));
        assertTrue(items.getString("data[1].id").startsWith("fc_"));
    }

    @Test
    void storeFalseIsNeitherRetrievableNorContinuable() {
        JsonPath r = create("{\"model\":\"tiny\",\"input\":\"x\",\"store\":false,\"max_output_tokens\":2}");
        assertEquals(false, r.getBoolean("store"));
        given().get("/v1/responses/" + r.getString("id")).then().statusCode(404).body("error.code", equalTo("response_not_found"));
        json().body("{\"model\":\"tiny\",\"input\":\"y\",\"previous_response_id\":\"" + r.getString("id") + "\"}").post("/v1/responses")
                .then().statusCode(404).body("error.param", equalTo("previous_response_id")).body("error.code", equalTo("previous_response_not_found"));
    }

    @Test
    void unknownPreviousResponseIsA404BeforeAnyModelWork() {
        long steps = host.engine().steps();
        json().body("{\"model\":\"tiny\",\"input\":\"y\",\"previous_response_id\":\"resp_" + "0".repeat(48) + "\"}").post("/v1/responses")
                .then().statusCode(404).body("error.code", equalTo("previous_response_not_found"));
        json().body("{\"model\":\"tiny\",\"input\":\"y\",\"previous_response_id\":\"nonsense\"}").post("/v1/responses")
                .then().statusCode(404).body("error.param", equalTo("previous_response_id"));
        assertEquals(steps, host.engine().steps());
    }

    @Test
    void deleteIsAtomicAndFinal() throws Exception {
        String id = create("{\"model\":\"tiny\",\"input\":\"x\",\"max_output_tokens\":2}").getString("id");
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try {
            CompletableFuture<Void> gate = new CompletableFuture<>();
            List<Future<Integer>> results = new ArrayList<>();
            for (int i = 0; i < 2; i++) {
                results.add(pool.submit(() -> {
                    gate.join();
                    return given().delete("/v1/responses/" + id).then().extract().statusCode();
                }));
            }
            gate.complete(null);
            List<Integer> codes = new ArrayList<>();
            for (Future<Integer> f : results) codes.add(f.get());
            codes.sort(null);
            assertEquals(List.of(200, 404), codes);
        } finally {
            pool.shutdownNow();
        }
        given().get("/v1/responses/" + id).then().statusCode(404);
        given().delete("/v1/responses/" + id).then().statusCode(404);
        String other = create("{\"model\":\"tiny\",\"input\":\"x\",\"max_output_tokens\":2}").getString("id");
        given().delete("/v1/responses/" + other).then().statusCode(200)
                .body("id", equalTo(other)).body("object", equalTo("response.deleted")).body("deleted", equalTo(true));
    }

    @Test
    void cancelIsRefusedForForegroundResponses() {
        String id = create("{\"model\":\"tiny\",\"input\":\"x\",\"max_output_tokens\":2}").getString("id");
        given().post("/v1/responses/" + id + "/cancel").then().statusCode(400).body("error.message", matchesPattern(".*background.*"));
        given().post("/v1/responses/resp_" + "1".repeat(48) + "/cancel").then().statusCode(404);
    }

    @Test
    void inputItemsPaginate() {
        StringBuilder input = new StringBuilder("[");
        for (int i = 0; i < 5; i++) input.append(i == 0 ? "" : ",").append("{\"role\":\"user\",\"content\":\"m").append(i).append("\"}");
        String id = create("{\"model\":\"tiny\",\"input\":" + input + "],\"max_output_tokens\":1}").getString("id");
        String path = "/v1/responses/" + id + "/input_items";
        JsonPath desc = given().queryParam("limit", 2).get(path).then().statusCode(200).extract().jsonPath();
        assertEquals(List.of("m4", "m3"), desc.getList("data.content.text.flatten()"));
        assertEquals(true, desc.getBoolean("has_more"));
        JsonPath next = given().queryParam("limit", 2).queryParam("after", desc.getString("last_id")).get(path).then().statusCode(200).extract().jsonPath();
        assertEquals(List.of("m2", "m1"), next.getList("data.content.text.flatten()"));
        JsonPath asc = given().queryParam("order", "asc").queryParam("limit", 10).get(path).then().statusCode(200).extract().jsonPath();
        assertEquals(List.of("m0", "m1", "m2", "m3", "m4"), asc.getList("data.content.text.flatten()"));
        assertEquals(false, asc.getBoolean("has_more"));
        assertEquals(asc.getString("data[0].id"), asc.getString("first_id"));
        JsonPath before = given().queryParam("order", "asc").queryParam("before", asc.getString("data[2].id")).get(path).then().extract().jsonPath();
        assertEquals(List.of("m0", "m1"), before.getList("data.content.text.flatten()"));
        given().queryParam("after", "msg_nope").get(path).then().statusCode(400).body("error.param", equalTo("after"));
        given().queryParam("limit", 0).get(path).then().statusCode(400);
    }

    @Test
    void streamingFollowsTheEventSequenceAndEndsWithWhatGetReturns() throws Exception {
        String sse = json().body("{\"model\":\"tiny\",\"input\":\"Tell me\",\"stream\":true,\"max_output_tokens\":6}").post("/v1/responses")
                .then().statusCode(200).extract().asString();
        List<SseFrames.Frame> frames = SseFrames.parse(sse);
        List<String> types = new ArrayList<>();
        StringBuilder text = new StringBuilder();
        for (int i = 0; i < frames.size(); i++) {
            JsonNode payload = JSON.readTree(frames.get(i).data());
            assertEquals(i, payload.get("sequence_number").asInt(), "sequence numbers count from 0 without gaps");
            assertEquals(frames.get(i).event(), payload.get("type").asText());
            types.add(payload.get("type").asText());
            if (payload.get("type").asText().equals("response.output_text.delta")) text.append(payload.get("delta").asText());
        }
        assertEquals(List.of("response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"),
                types.subList(0, 4));
        String last = types.get(types.size() - 1);
        assertTrue(last.equals("response.completed") || last.equals("response.incomplete"), last);
        assertEquals(List.of("response.output_text.done", "response.content_part.done", "response.output_item.done"),
                types.subList(types.size() - 4, types.size() - 1));
        assertTrue(types.stream().noneMatch(t -> t.equals("[DONE]")));
        JsonNode finalResponse = JSON.readTree(frames.get(frames.size() - 1).data()).get("response");
        assertEquals(text.toString(), finalResponse.at("/output/0/content/0/text").asText());
        String stored = given().get("/v1/responses/" + finalResponse.get("id").asText()).then().statusCode(200).extract().asString();
        assertEquals(finalResponse, JSON.readTree(stored));
        assertNotEquals(0, finalResponse.at("/usage/output_tokens").asInt());
    }

    private static JsonNode tree(String json) {
        try {
            return JSON.readTree(json);
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }
}
