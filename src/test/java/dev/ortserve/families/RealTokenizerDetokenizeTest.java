package dev.ortserve.families;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.engine.batching.IncrementalDetokenizer;
import dev.ortserve.engine.TextTokenizer;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Incremental detokenisation on real tokenizers: byte-level BPE (Qwen3 151k, Llama 3 128k) and
 * SentencePiece-style with byte fallback (Gemma 3 262k, Llama 2 32k). For id sequences made by
 * {@code make_fixtures.py detokenize} (real texts, the same cut inside a multi-byte character, seeded
 * random ids with byte pieces), the deltas fed one id at a time plus the final flush equal transformers'
 * decode of the ids in the prompt's context, and the tokenizer's decode of the ids alone equals
 * transformers' decode alone.
 */
class RealTokenizerDetokenizeTest {

    @Test
    void streamedDeltasEqualTransformersDecode() throws Exception {
        JsonNode all = new ObjectMapper().readTree(FamilyFixtures.SOURCE.resolve("detokenize/detokenize.json").toFile());
        int checked = 0, partialAtEnd = 0, heldBack = 0;
        for (String family : new String[] {"qwen3", "llama3_1", "gemma3", "llama2"}) {
            Path json = family.equals("llama2") ? FamilyFixtures.tokenizer("detokenize/llama2-tokenizer.json.gz")
                    : FamilyFixtures.tokenizer(family + "/tokenizer.json.gz");
            try (TextTokenizer tokenizer = TextTokenizer.load(json)) {
                for (JsonNode rec : all.get(family)) {
                    int[] prompt = ints(rec.get("prompt_ids"));
                    int[] ids = ints(rec.get("ids"));
                    String what = family + " " + rec.get("kind").asText() + " " + rec.get("ids");
                    assertEquals(rec.get("decode_alone").asText(), tokenizer.decode(ids, true), what);
                    assertEquals(rec.get("decode_alone_with_special").asText(), tokenizer.decode(ids, false), what);
                    IncrementalDetokenizer detokenizer = new IncrementalDetokenizer(tokenizer, prompt, true);
                    StringBuilder streamed = new StringBuilder();
                    for (int id : ids) {
                        String delta = detokenizer.add(id);
                        assertTrue(!delta.endsWith("\uFFFD") || rec.get("expected").asText().startsWith(streamed + delta), what);
                        streamed.append(delta);
                    }
                    String rest = detokenizer.flush();
                    if (!rest.isEmpty()) heldBack++;
                    streamed.append(rest);
                    assertEquals(rec.get("expected").asText(), streamed.toString(), what);
                    if (rec.get("expected").asText().endsWith("\uFFFD")) partialAtEnd++;
                    checked++;
                }
            }
        }
        assertTrue(checked > 80, "sequences checked: " + checked);
        assertTrue(partialAtEnd >= 8 && heldBack >= 8, "sequences ending inside a character: " + partialAtEnd + ", held back: " + heldBack);
    }

    private static int[] ints(JsonNode array) {
        int[] out = new int[array.size()];
        for (int i = 0; i < out.length; i++) out[i] = array.get(i).asInt();
        return out;
    }
}
