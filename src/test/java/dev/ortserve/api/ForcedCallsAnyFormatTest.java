package dev.ortserve.api;

import dev.ortserve.ApiTest;
import dev.ortserve.contract.SseFrames;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.QuarkusTestProfile;
import io.quarkus.test.junit.TestProfile;
import io.restassured.path.json.JsonPath;
import org.junit.jupiter.api.Test;

import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A format the grammar does not write (mistral, set explicitly here): a forced call is written as
 * a plain JSON call and read back as one, with the format's call ids (nine letters and digits).
 */
@QuarkusTest
@TestProfile(ForcedCallsAnyFormatTest.Profile.class)
class ForcedCallsAnyFormatTest extends ApiTest {

    public static class Profile implements QuarkusTestProfile {
        @Override
        public Map<String, String> getConfigOverrides() {
            return Map.of("ortserve.tool-call-parser", "mistral");
        }
    }

    static final String BODY = "{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}],\"max_tokens\":100,\"temperature\":0,"
            + "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get_weather\"}},\"tools\":[{\"type\":\"function\",\"function\":"
            + "{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"minLength\":12,\"maxLength\":20}},"
            + "\"required\":[\"city\"],\"additionalProperties\":false}}}]";

    @Test
    void aNamedCallIsForcedAndReadBackWithTheFormatsIds() {
        JsonPath r = json().body(BODY + "}").post("/v1/chat/completions").then().statusCode(200).extract().jsonPath();
        assertEquals("tool_calls", r.getString("choices[0].finish_reason"));
        assertEquals("get_weather", r.getString("choices[0].message.tool_calls[0].function.name"));
        assertTrue(r.getString("choices[0].message.tool_calls[0].id").matches("[A-Za-z0-9]{9}"), r.getString("choices[0].message.tool_calls[0].id"));
        String arguments = r.getString("choices[0].message.tool_calls[0].function.arguments");
        assertTrue(arguments.startsWith("{\"city\":\""), arguments);
        StringBuilder streamed = new StringBuilder();
        String id = null;
        for (String p : SseFrames.data(json().body(BODY + ",\"stream\":true}").post("/v1/chat/completions").then().statusCode(200).extract().asString())) {
            JsonPath chunk = JsonPath.from(p);
            if (chunk.get("choices[0].delta.tool_calls[0].id") != null) id = chunk.getString("choices[0].delta.tool_calls[0].id");
            if (chunk.get("choices[0].delta.tool_calls[0].function.arguments") != null) {
                streamed.append(chunk.getString("choices[0].delta.tool_calls[0].function.arguments"));
            }
        }
        assertTrue(id != null && id.matches("[A-Za-z0-9]{9}"), id);
        assertEquals(arguments, streamed.toString());
    }
}
