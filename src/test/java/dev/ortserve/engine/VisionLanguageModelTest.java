package dev.ortserve.engine;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.engine.batching.ContinuousBatchingEngine;
import dev.ortserve.engine.load.ModelLoader;
import dev.ortserve.image.Idefics3Processor;
import dev.ortserve.image.ImageDecoder;
import dev.ortserve.image.PixelValues;
import dev.ortserve.image.Placeholders;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A SmolVLM (Idefics3) export in the onnx-community layout, made with transformers and random weights
 * (fixtures/smolvlm-tiny, scripts/make_smolvlm_tiny.py): detected from its files, its embedding composed into its
 * decoder, its images preprocessed as transformers' processor does (pixel values equal bit for bit), encoded, placed at
 * the image tokens; greedy tokens equal transformers' {@code generate}, each prompt alone, all five in one batch
 * (text-only among them) and prefilled in chunks of 16, and a repeated image prompt reads its cached prefix.
 */
class VisionLanguageModelTest {

    static final Path DIR = Path.of("src/test/resources/fixtures/smolvlm-tiny");
    private static final Path IMAGES = Path.of("src/test/resources/fixtures/images");

    @Test
    void reproducesTransformersGreedyTokensWithImagesAloneAndBatched() throws Exception {
        ObjectMapper json = new ObjectMapper();
        JsonNode reference = json.readTree(DIR.resolve("references.json").toFile());
        Idefics3Processor processor = Idefics3Processor.of(json.readTree(DIR.resolve("preprocessor_config.json").toFile()),
                json.readTree(DIR.resolve("processor_config.json").toFile()).path("image_seq_len").asInt());
        ImageDecoder decoder = new ImageDecoder(1_000_000);
        try (LoadedModel model = ModelLoader.load(DIR, EngineOptions.defaults());
             GenerationEngine engine = new ContinuousBatchingEngine(model, EngineOptions.defaults())) {
            assertNotNull(model.vision(), "detected as a vision-language export");
            assertEquals(476, model.vision().imageTokenId());
            List<GenerationRequest> requests = new ArrayList<>();
            List<List<Integer>> expected = new ArrayList<>();
            for (JsonNode c : reference.path("cases")) {
                List<float[]> features = new ArrayList<>();
                int hidden = 0;
                List<PixelValues> processed = new ArrayList<>();
                int image = 0;
                for (JsonNode file : c.path("images")) {
                    PixelValues pv = processor.process(decoder.decode(Files.readAllBytes(IMAGES.resolve(file.asText()))));
                    assertEquals(c.path("per_image").get(image).path("pixel_values_sha256").asText(), sha256(pv.values()), "pixel values of " + file);
                    VisionEncoder.Features f = model.vision().encode(pv.values(), pv.frames(), pv.height(), pv.width());
                    assertEquals(pv.imageTokens(), f.tokens());
                    features.add(f.values());
                    hidden = f.hidden();
                    processed.add(pv);
                    image++;
                }
                String expanded = Placeholders.expand(c.path("rendered_prompt").asText(), Idefics3Processor.IMAGE_TOKEN, processed);
                assertEquals(c.path("expanded_prompt").asText(), expanded, c.path("name").asText());
                int[] ids = model.tokenizer().encode(expanded, false);
                assertEquals(c.path("input_ids").toString(), json.writeValueAsString(ids), "token ids of " + c.path("name").asText());
                PromptImages images = null;
                if (!features.isEmpty()) {
                    List<Integer> positions = new ArrayList<>();
                    for (int i = 0; i < ids.length; i++) if (ids[i] == model.vision().imageTokenId()) positions.add(i);
                    float[] all = new float[positions.size() * hidden];
                    int at = 0;
                    for (float[] f : features) {
                        System.arraycopy(f, 0, all, at, f.length);
                        at += f.length;
                    }
                    assertEquals(all.length, at);
                    images = new PromptImages(positions.stream().mapToInt(Integer::intValue).toArray(), all, hidden, c.path("name").asText().hashCode());
                }
                requests.add(new GenerationRequest("vlm-" + requests.size(), ids, SamplingParams.greedy(16), null, null, images));
                List<Integer> greedy = new ArrayList<>();
                c.path("greedy_ids").forEach(n -> greedy.add(n.asInt()));
                expected.add(greedy);
            }
            List<EngineTestSupport.Result> alone = new ArrayList<>();
            for (GenerationRequest r : requests) alone.add(EngineTestSupport.collect(engine.generate(r)));
            List<EngineTestSupport.Result> batched = EngineTestSupport.concurrently(engine, requests);
            for (int i = 0; i < requests.size(); i++) {
                assertEquals(expected.get(i), alone.get(i).tokens(), "alone: " + requests.get(i).requestId());
                assertEquals(expected.get(i), batched.get(i).tokens(), "batched: " + requests.get(i).requestId());
            }
            // the batched round read what the alone round cached: the same images, the same prompt
            assertTrue(batched.get(0).events().get(0).cachedTokens() > 0, "a repeated image prompt reads its cached prefix");
            // prefilled in chunks of 16 tokens: each chunk places the image rows that fall in it (a frame's four split across two chunks)
            EngineOptions chunked = EngineOptions.defaults().withLimits(16, 64, 16).withPrefixCacheBytes(0);
            try (GenerationEngine small = new ContinuousBatchingEngine(model, chunked)) {
                for (int i = 0; i < requests.size(); i++) {
                    assertEquals(expected.get(i), EngineTestSupport.collect(small.generate(requests.get(i))).tokens(), "chunked: " + requests.get(i).requestId());
                }
            }
            // the same token ids with other images are another prompt: nothing cached is theirs
            GenerationRequest first = requests.get(0);
            PromptImages other = new PromptImages(first.images().positions(), new float[first.images().features().length], first.images().hidden(), 42);
            EngineTestSupport.Result otherImages = EngineTestSupport.collect(engine.generate(
                    new GenerationRequest("vlm-other", first.promptTokenIds(), SamplingParams.greedy(16), null, null, other)));
            assertEquals(0, otherImages.events().get(0).cachedTokens(), "other images: no cached prefix");
        }
    }

    @Test
    void withoutTilesAnImageIsOneFrameAndItsGlobalTokens() throws Exception {
        ObjectMapper json = new ObjectMapper();
        Idefics3Processor processor = Idefics3Processor.of(json.readTree(DIR.resolve("preprocessor_config.json").toFile()), 4);
        PixelValues pv = processor.process(new ImageDecoder(1_000_000).decode(Files.readAllBytes(IMAGES.resolve("b_grad_200x120.png"))), false);
        assertEquals(1, pv.frames());
        assertEquals(64, pv.width());
        assertEquals(4, pv.imageTokens());
        assertEquals("<fake_token_around_image><global-img>" + "<image>".repeat(4) + "<fake_token_around_image>", pv.promptText());
    }

    static String sha256(float[] values) throws Exception {
        ByteBuffer b = ByteBuffer.allocate(values.length * 4).order(ByteOrder.LITTLE_ENDIAN);
        for (float v : values) b.putFloat(v);
        return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(b.array()));
    }
}
