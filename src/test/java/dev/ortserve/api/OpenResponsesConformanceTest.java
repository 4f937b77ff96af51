package dev.ortserve.api;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.ApiTest;
import io.quarkus.test.junit.QuarkusTest;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * What the Open Responses specification (and its compliance suite) and agent clients such as
 * Codex CLI require of the Responses API beyond the basics: field types of the response object,
 * the request fields OpenAI accepts, namespace and custom tools, encrypted reasoning.
 */
@QuarkusTest
class OpenResponsesConformanceTest extends ApiTest {

    static final ObjectMapper JSON = new ObjectMapper();

    @io.quarkus.test.common.http.TestHTTPResource
    java.net.URL base;

    static JsonNode post(String path, String body, int status) throws Exception {
        return JSON.readTree(json().body(body).post(path).then().statusCode(status).extract().asString());
    }

    @Test
    void echoedToolsCarryEveryFieldOfTheirType() throws Exception {
        JsonNode r = post("/v1/responses", "{\"model\":\"tiny\",\"input\":\"Hi\",\"max_output_tokens\":2,\"tool_choice\":\"none\","
                + "\"reasoning\":{\"summary\":\"auto\"},\"tools\":[{\"type\":\"function\",\"name\":\"f\"},"
                + "{\"type\":\"function\",\"name\":\"g\",\"description\":\"G\",\"strict\":true,\"parameters\":{\"type\":\"object\"}}]}", 200);
        JsonNode f = r.path("tools").get(0);
        assertTrue(f.has("description") && f.get("description").isNull(), f.toString());
        assertTrue(f.get("strict").isBoolean() && !f.get("strict").asBoolean(), f.toString());
        assertTrue(f.get("parameters").isObject(), f.toString());
        JsonNode g = r.path("tools").get(1);
        assertEquals("G", g.get("description").asText());
        assertTrue(g.get("strict").asBoolean());
        assertEquals("default", r.get("service_tier").asText());
        assertTrue(r.get("reasoning").has("effort") && r.get("reasoning").get("effort").isNull(), r.get("reasoning").toString());
        assertEquals("auto", r.get("reasoning").get("summary").asText());
    }

    @Test
    void jsonSchemaFormatIsEchoedWithStrictAndDescription() throws Exception {
        JsonNode r = post("/v1/responses", "{\"model\":\"tiny\",\"input\":\"Hi\",\"max_output_tokens\":2,\"text\":{\"format\":"
                + "{\"type\":\"json_schema\",\"name\":\"o\",\"schema\":{\"type\":\"object\"}}}}", 200);
        JsonNode format = r.path("text").path("format");
        assertTrue(format.has("description") && format.get("description").isNull(), format.toString());
        assertTrue(format.get("strict").isBoolean(), format.toString());
    }

    @Test
    void compactTakesTheFieldsOpenAiTakes() throws Exception {
        JsonNode r = post("/v1/responses/compact", "{\"model\":\"tiny\",\"input\":\"Hi\",\"prompt_cache_key\":\"k\","
                + "\"prompt_cache_retention\":\"24h\",\"service_tier\":\"auto\",\"prompt_cache_options\":{\"mode\":\"implicit\",\"ttl\":\"30m\"}}", 200);
        assertEquals("response.compaction", r.get("object").asText());
    }

    @Test
    void clientMetadataIsStoredAndEchoedNeverRendered() throws Exception {
        String plain = "{\"model\":\"tiny\",\"input\":\"Hi\",\"max_output_tokens\":1";
        JsonNode with = post("/v1/responses", plain + ",\"client_metadata\":{\"session_id\":\"s-1\",\"x-codex-installation-id\":\"i\"}}", 200);
        JsonNode without = post("/v1/responses", plain + "}", 200);
        assertEquals("s-1", with.path("client_metadata").path("session_id").asText());
        assertEquals(without.path("usage").path("input_tokens").asInt(), with.path("usage").path("input_tokens").asInt(), "not in the prompt");
        JsonNode read = JSON.readTree(io.restassured.RestAssured.given().get("/v1/responses/" + with.get("id").asText()).then().statusCode(200)
                .extract().asString());
        assertEquals("i", read.path("client_metadata").path("x-codex-installation-id").asText());
        assertTrue(!without.has("client_metadata"));

        StringBuilder many = new StringBuilder("{");
        for (int i = 0; i < 17; i++) many.append(i == 0 ? "" : ",").append("\"k").append(i).append("\":\"v\"");
        JsonNode error = post("/v1/responses", plain + ",\"client_metadata\":" + many + "}}", 400);
        assertEquals("client_metadata", error.path("error").path("param").asText());
        error = post("/v1/responses", plain + ",\"client_metadata\":{\"k\":\"" + "x".repeat(8193) + "\"}}", 400);
        assertEquals("client_metadata.k", error.path("error").path("param").asText());
        error = post("/v1/responses", plain + ",\"client_metadata\":{\"k\":1}}", 400);
        assertTrue(error.path("error").path("param").asText().startsWith("client_metadata"), error.toString());
    }

    @Test
    void openAiFieldsThisServerDoesNotServeAreRefusedByName() throws Exception {
        String plain = "{\"model\":\"tiny\",\"input\":\"Hi\",\"max_output_tokens\":1";
        for (String field : java.util.List.of("conversation\":\"conv_1", "prompt\":{\"id\":\"pmpt_1\"}", "context_management\":[{\"type\":\"compaction\"}]")) {
            String name = field.substring(0, field.indexOf('"'));
            String value = field.substring(field.indexOf(':') + 1);
            if (name.equals("conversation")) value = "\"conv_1\"";
            JsonNode error = post("/v1/responses", plain + ",\"" + name + "\":" + value + "}", 400);
            assertEquals(name, error.path("error").path("param").asText(), error.toString());
        }
        // accepted: stream_options.include_obfuscation (no obfuscation is ever added), prompt_cache_options
        post("/v1/responses", plain + ",\"stream_options\":{\"include_obfuscation\":false},\"prompt_cache_options\":{\"mode\":\"implicit\"}}", 200);
    }

    static final String NAMESPACE = "{\"type\":\"namespace\",\"name\":\"agents\",\"description\":\"Sub-agents.\",\"tools\":["
            + "{\"type\":\"function\",\"name\":\"spawn\",\"description\":\"Spawn one.\",\"strict\":false,\"parameters\":"
            + "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":9}},\"required\":[\"n\"]}}]}";

    // n is one digit and the budget holds the whole forced call (the grammar bounds whitespace): a random
    // model cannot run out of tokens inside the arguments, whatever it samples
    @Test
    void namespaceToolsAreCalledWithTheirNamespace() throws Exception {
        JsonNode r = post("/v1/responses", "{\"model\":\"tiny\",\"input\":\"Hi\",\"max_output_tokens\":256,\"tools\":[" + NAMESPACE
                + "],\"tool_choice\":{\"type\":\"function\",\"name\":\"spawn\"}}", 200);
        JsonNode call = r.path("output").get(r.path("output").size() - 1);
        assertEquals("function_call", call.path("type").asText(), r.toString());
        assertEquals("spawn", call.path("name").asText());
        assertEquals("agents", call.path("namespace").asText());
        assertTrue(JSON.readTree(call.path("arguments").asText()).path("n").isIntegralNumber(), call.toString());
        JsonNode echoed = r.path("tools").get(0);
        assertEquals("namespace", echoed.path("type").asText());
        assertTrue(echoed.path("tools").get(0).path("strict").isBoolean());

        // the call and its output given back (Codex sends 'namespace' on the call item)
        String input = "[{\"role\":\"user\",\"content\":\"Hi\"},{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"spawn\","
                + "\"namespace\":\"agents\",\"arguments\":\"{\\\"n\\\":1}\"},{\"type\":\"function_call_output\",\"call_id\":\"c1\",\"output\":\"ok\"}]";
        // greedy: sampled at the default temperature, the tiny model's first token is now and then its <think> (a reasoning item first)
        JsonNode next = post("/v1/responses", "{\"model\":\"tiny\",\"max_output_tokens\":2,\"temperature\":0,\"tools\":[" + NAMESPACE + "],\"input\":"
                + input + "}", 200);
        assertEquals("assistant", next.path("output").get(0).path("role").asText(), next.toString());
        String stream = json().body("{\"model\":\"tiny\",\"input\":\"Hi\",\"stream\":true,\"max_output_tokens\":256,\"tools\":[" + NAMESPACE
                + "],\"tool_choice\":\"required\"}").post("/v1/responses").then().statusCode(200).extract().asString();
        assertTrue(stream.contains("\"namespace\":\"agents\""), stream);
    }

    static final String CUSTOM = "{\"type\":\"custom\",\"name\":\"code\",\"description\":\"A code.\",\"format\":{\"type\":\"grammar\","
            + "\"syntax\":\"regex\",\"definition\":\"[a-z]{3}-[0-9]{2}\"}}";

    @Test
    void customToolCallsCarryTheRawInputUnderTheirRegexGrammar() throws Exception {
        // greedy: sampled at the default temperature, the tiny model now and then spends the 64 tokens before closing the call
        // (a clean-clone CI once returned {"input":"ewk-96" unclosed)
        JsonNode r = post("/v1/responses", "{\"model\":\"tiny\",\"input\":\"Hi\",\"max_output_tokens\":64,\"temperature\":0,\"tools\":[" + CUSTOM
                + "],\"tool_choice\":\"required\"}", 200);
        JsonNode call = r.path("output").get(r.path("output").size() - 1);
        assertEquals("custom_tool_call", call.path("type").asText(), r.toString());
        assertEquals("code", call.path("name").asText());
        assertTrue(call.path("input").asText().matches("[a-z]{3}-[0-9]{2}"), call.toString());

        String stream = json().body("{\"model\":\"tiny\",\"input\":\"Hi\",\"stream\":true,\"max_output_tokens\":64,\"temperature\":0,\"tools\":[" + CUSTOM
                + "],\"tool_choice\":\"required\"}").post("/v1/responses").then().statusCode(200).extract().asString();
        assertTrue(stream.contains("event: response.custom_tool_call_input.done"), stream);
        assertTrue(stream.contains("event: response.custom_tool_call_input.delta"), stream);
        assertTrue(!stream.contains("function_call_arguments"), stream);

        String input = "[{\"role\":\"user\",\"content\":\"Hi\"},{\"type\":\"custom_tool_call\",\"call_id\":\"c1\",\"name\":\"code\","
                + "\"input\":\"abc-12\"},{\"type\":\"custom_tool_call_output\",\"call_id\":\"c1\",\"output\":\"done\"}]";
        post("/v1/responses", "{\"model\":\"tiny\",\"max_output_tokens\":2,\"tools\":[" + CUSTOM + "],\"input\":" + input + "}", 200);

    }

    /** A Lark grammar in the enforced subset, bounded so that the tiny model always completes it; with a newline and quotes to escape. */
    static final String LARK_GRAMMAR = "start: begin_patch hunk end_patch\n"
            + "begin_patch: \"*** Begin Patch\" LF\n"
            + "hunk: \"*** Delete File: \" NAME LF | \"*** Add File: \" NAME LF \"+\" QUOTED LF\n"
            + "NAME: /[a-z]{1,8}\\.txt/\n"
            + "QUOTED: \"\\\"\" /[a-z ]{0,5}/ \"\\\"\"\n"
            + "end_patch: \"*** End Patch\"\n"
            + "%import common.LF\n";
    static final String LARK_TEXT = "\\*\\*\\* Begin Patch\n(\\*\\*\\* Delete File: [a-z]{1,8}\\.txt\n"
            + "|\\*\\*\\* Add File: [a-z]{1,8}\\.txt\n\\+\"[a-z ]{0,5}\"\n)\\*\\*\\* End Patch";

    static String larkTool(String definition) throws Exception {
        return "{\"type\":\"custom\",\"name\":\"apply_patch\",\"format\":{\"type\":\"grammar\",\"syntax\":\"lark\",\"definition\":"
                + JSON.writeValueAsString(definition) + "}}";
    }

    @Test
    void forcedCustomToolCallsFollowTheirLarkGrammar() throws Exception {
        for (String choice : new String[] {"\"required\"", "{\"type\":\"function\",\"name\":\"apply_patch\"}"}) {
            JsonNode r = post("/v1/responses", "{\"model\":\"tiny\",\"input\":\"Hi\",\"max_output_tokens\":400,\"tools\":["
                    + larkTool(LARK_GRAMMAR) + "],\"tool_choice\":" + choice + "}", 200);
            assertEquals("completed", r.path("status").asText(), r.toString());
            JsonNode call = r.path("output").get(r.path("output").size() - 1);
            assertEquals("custom_tool_call", call.path("type").asText(), r.toString());
            assertEquals("apply_patch", call.path("name").asText());
            assertTrue(call.path("input").asText().matches(LARK_TEXT), call.toString());
        }
        String stream = json().body("{\"model\":\"tiny\",\"input\":\"Hi\",\"stream\":true,\"max_output_tokens\":400,\"tools\":["
                + larkTool(LARK_GRAMMAR) + "],\"tool_choice\":\"required\"}").post("/v1/responses").then().statusCode(200).extract().asString();
        assertTrue(stream.contains("event: response.custom_tool_call_input.done"), stream);

        // Codex's own apply_patch grammar compiles and constrains a forced call
        post("/v1/responses", "{\"model\":\"tiny\",\"input\":\"Hi\",\"max_output_tokens\":8,\"tools\":["
                + larkTool(dev.ortserve.service.structured.LarkGrammarTest.applyPatchGrammar()) + "],\"tool_choice\":\"required\"}", 200);

        // outside the subset: guidance only, so a forced call is refused naming the definition; 'auto' still works
        String recursive = larkTool("start: expr\nexpr: \"(\" expr \")\" | \"x\"");
        JsonNode error = post("/v1/responses", "{\"model\":\"tiny\",\"input\":\"Hi\",\"tools\":[" + CUSTOM + "," + recursive
                + "],\"tool_choice\":\"required\"}", 400);
        assertEquals("tools[1].format.definition", error.path("error").path("param").asText(), error.toString());
        assertTrue(error.path("error").path("message").asText().contains("'expr' is recursive"), error.toString());
        assertTrue(error.path("error").path("message").asText().contains("Supported:"), error.toString());
        post("/v1/responses", "{\"model\":\"tiny\",\"input\":\"Hi\",\"tools\":[" + CUSTOM + "," + recursive
                + "],\"tool_choice\":{\"type\":\"function\",\"name\":\"code\"},\"max_output_tokens\":64}", 200);
        post("/v1/responses", "{\"model\":\"tiny\",\"input\":\"Hi\",\"max_output_tokens\":2,\"tools\":[" + recursive + "]}", 200);
    }

    @Test
    void hostedToolsAreRefusedNamingCodexSetting() throws Exception {
        JsonNode error = post("/v1/responses", "{\"model\":\"tiny\",\"input\":\"Hi\",\"tools\":[{\"type\":\"web_search\",\"external_web_access\":false}]}", 400);
        assertEquals("tools[0].type", error.path("error").path("param").asText());
        assertTrue(error.path("error").path("message").asText().contains("web_search = \"disabled\""), error.toString());
    }

    @Test
    void encryptedReasoningIsIncludedAndAChangedItemRefused() throws Exception {
        post("/v1/responses", "{\"model\":\"tiny\",\"input\":\"Hi\",\"max_output_tokens\":2,\"store\":false,"
                + "\"include\":[\"reasoning.encrypted_content\"]}", 200);
        JsonNode error = post("/v1/responses", "{\"model\":\"tiny\",\"max_output_tokens\":2,\"input\":[{\"role\":\"user\",\"content\":\"Hi\"},"
                + "{\"type\":\"reasoning\",\"summary\":[],\"encrypted_content\":\"v1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\"}]}", 400);
        assertEquals("input[1].encrypted_content", error.path("error").path("param").asText());
        assertEquals("invalid_encrypted_content", error.path("error").path("code").asText());
    }

    @Test
    void aToolOutputWithoutItsCallIsRefused() throws Exception {
        JsonNode error = post("/v1/responses", "{\"model\":\"tiny\",\"input\":[{\"role\":\"user\",\"content\":\"Hi\"},"
                + "{\"type\":\"function_call_output\",\"call_id\":\"nope\",\"output\":\"x\"}]}", 400);
        assertEquals("input[1].call_id", error.path("error").path("param").asText());
        assertTrue(error.path("error").path("message").asText().contains("nope"), error.toString());
        error = post("/v1/responses", "{\"model\":\"tiny\",\"input\":[{\"type\":\"custom_tool_call_output\",\"call_id\":\"c\",\"output\":\"x\"}]}", 400);
        assertEquals("input[0].call_id", error.path("error").path("param").asText());
    }

    @Test
    void aWebSocketWarmUpPrefillsAndCompletesEmpty() throws Exception {
        try (WsClient ws = WsClient.connect(base)) {
            String body = "\"model\":\"tiny\",\"store\":false,\"max_output_tokens\":2,\"input\":\"A prompt to warm up with, long enough.\"";
            ws.send("{\"type\":\"response.create\",\"generate\":false," + body + "}");
            java.util.List<JsonNode> events = ws.events();
            JsonNode done = events.get(events.size() - 1);
            assertEquals("response.completed", done.path("type").asText(), events.toString());
            assertEquals(0, done.at("/response/output").size());
            assertEquals(0, done.at("/response/usage/output_tokens").asInt());
            assertEquals(java.util.List.of("response.created", "response.in_progress", "response.completed"),
                    events.stream().map(e -> e.path("type").asText()).toList());

            // the next request continues the warm-up and finds its prompt in the prefix cache
            ws.send("{\"type\":\"response.create\",\"previous_response_id\":\"" + done.at("/response/id").asText() + "\"," + body + "}");
            java.util.List<JsonNode> next = ws.events();
            JsonNode second = next.get(next.size() - 1);
            assertTrue(second.path("type").asText().startsWith("response."), next.toString());
            assertTrue(second.at("/response/usage/input_tokens_details/cached_tokens").asInt() > 0, second.toString());

            ws.send("{\"type\":\"response.create\",\"generate\":\"no\"," + body + "}");
            assertEquals("generate", ws.error().path("param").asText());
        }
    }
}
