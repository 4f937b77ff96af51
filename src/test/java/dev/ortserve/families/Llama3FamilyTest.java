package dev.ortserve.families;

import com.fasterxml.jackson.databind.JsonNode;
import dev.ortserve.contract.SseFrames;
import io.quarkus.test.junit.QuarkusTest;
import io.quarkus.test.junit.TestProfile;
import io.restassured.path.json.JsonPath;
import org.junit.jupiter.api.Test;

import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;

@QuarkusTest
@TestProfile(Llama3FamilyTest.Profile.class)
class Llama3FamilyTest extends FamilyModelTest {

    @Override
    String family() {
        return "llama3_1";
    }

    @Override
    String expectedToolCallParser() {
        return "none";
    }

    @Override
    String expectedReasoningParser() {
        return "none";
    }

    /**
     * A choice that ends inside a character (one byte-level token holding the first byte of a 4-byte
     * character, forced by logit_bias): the held-back byte is flushed at the end as transformers decodes it
     * (U+FFFD, from detokenize.json), in the non-stream text and in the stream.
     */
    @Test
    void anIncompleteCharacterAtTheEndIsFlushedAsTransformersDecodesIt() throws Exception {
        JsonNode cut = null;
        for (JsonNode rec : JSON.readTree(FamilyFixtures.SOURCE.resolve("detokenize/detokenize.json").toFile()).get("llama3_1")) {
            if (rec.get("kind").asText().equals("cut") && rec.get("ids").size() == 1) cut = rec;
        }
        int id = cut.get("ids").get(0).asInt();
        String expected = cut.get("decode_alone").asText();
        assertEquals("\uFFFD", expected);
        Map<String, Object> body = Map.of("model", family(), "prompt", "Hello", "max_tokens", 1, "temperature", 0,
                "logit_bias", Map.of(String.valueOf(id), 100));
        JsonPath r = post("/v1/completions", body);
        assertEquals(expected, r.getString("choices[0].text"));
        assertEquals("length", r.getString("choices[0].finish_reason"));
        StringBuilder streamed = new StringBuilder();
        Map<String, Object> stream = new java.util.HashMap<>(body);
        stream.put("stream", true);
        for (String data : SseFrames.data(postStream("/v1/completions", stream))) {
            if (data.equals("[DONE]")) continue;
            String text = JsonPath.from(data).getString("choices[0].text");
            if (text != null) streamed.append(text);
        }
        assertEquals(expected, streamed.toString());
    }

    public static class Profile extends NoConfiguration {
        @Override
        String family() {
            return "llama3_1";
        }
    }
}
