package dev.ortserve.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.engine.EngineOptions;
import dev.ortserve.engine.GenerationEngine;
import dev.ortserve.engine.GenerationRequest;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.PromptImages;
import dev.ortserve.engine.SamplingParams;
import dev.ortserve.engine.TokenEvent;
import dev.ortserve.engine.VisionEncoder;
import dev.ortserve.engine.batching.ContinuousBatchingEngine;
import dev.ortserve.engine.load.ModelLoader;
import dev.ortserve.engine.rewrite.RewriteOptions;
import dev.ortserve.engine.rewrite.WeightPrecision;
import dev.ortserve.image.Idefics3Processor;
import dev.ortserve.image.ImageDecoder;
import dev.ortserve.image.PixelValues;
import dev.ortserve.image.Placeholders;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * A one-image request on a vision-language model, timed step by step as a served turn runs it: the image decoded and
 * preprocessed (Idefics3: 13 frames of 512 x 512 for a 200 x 120 image), encoded, and the prompt (its ~850 image tokens
 * and the text) prefilled to the first token; then images per second through the encoder with 1 and 4 requests at once.
 * The model: {@code -Dbench.model} (default target/bench-models/smolvlm-256m-random, made by
 * bench/vision/make_smolvlm_256m.py: SmolVLM-256M's shape with random weights), served as exported with the default
 * rewrites, no prefix cache, no drafting.
 * <pre>./mvnw -Pbench test -Dtest=VisionBenchmark [-Dbench.model=DIR] [-Dbench.rounds=3]</pre>
 */
@Tag("bench")
class VisionBenchmark {

    @Test
    void run() throws Exception {
        Path dir = Path.of(System.getProperty("bench.model", "target/bench-models/smolvlm-256m-random")).toAbsolutePath();
        int rounds = Integer.getInteger("bench.rounds", 3);
        ObjectMapper json = new ObjectMapper();
        JsonNode processorConfig = json.readTree(dir.resolve("processor_config.json").toFile());
        Idefics3Processor processor = Idefics3Processor.of(json.readTree(dir.resolve("preprocessor_config.json").toFile()),
                processorConfig.path("image_seq_len").asInt(64));
        byte[] png = Files.readAllBytes(Path.of("src/test/resources/fixtures/images/b_grad_200x120.png"));
        ImageDecoder decoder = new ImageDecoder(25_000_000);
        EngineOptions options = EngineOptions.defaults().withPrefixCacheBytes(0).withBatchWindow(Duration.ZERO)
                .withRewrite(RewriteOptions.defaults(WeightPrecision.MODEL), Path.of("target", "bench-rewrite-cache").toAbsolutePath())
                .withSpeculative(dev.ortserve.engine.speculative.SpeculativeOptions.OFF);
        String template = "<|im_start|>User:<image>What is in this image?<end_of_utterance>\nAssistant:";
        try (LoadedModel model = ModelLoader.load(dir, options);
             GenerationEngine engine = new ContinuousBatchingEngine(model, options)) {
            VisionEncoder encoder = model.vision();
            System.out.printf("vision benchmark: %s, rewrites %s, %d cores%n", dir.getFileName(), model.rewrites(), Runtime.getRuntime().availableProcessors());
            for (int round = 0; round <= rounds; round++) { // round 0 warms up
                long t0 = System.nanoTime();
                PixelValues pv = processor.process(decoder.decode(png));
                long t1 = System.nanoTime();
                VisionEncoder.Features f = encoder.encode(pv.values(), pv.frames(), pv.height(), pv.width());
                long t2 = System.nanoTime();
                int[] ids = model.tokenizer().encode(Placeholders.expand(template, Idefics3Processor.IMAGE_TOKEN, List.of(pv)), false);
                List<Integer> positions = new ArrayList<>();
                for (int i = 0; i < ids.length; i++) if (ids[i] == encoder.imageTokenId()) positions.add(i);
                PromptImages images = new PromptImages(positions.stream().mapToInt(Integer::intValue).toArray(), f.values(), f.hidden(), round);
                TokenEvent first = engine.generate(new GenerationRequest("vision-" + round, ids, SamplingParams.greedy(1), null, null, images))
                        .collect().first().await().atMost(Duration.ofMinutes(5));
                long t3 = System.nanoTime();
                if (round == 0) continue;
                System.out.printf("round %d: %d frames, %d prompt tokens (%d image): preprocess %.0f ms, encode %.0f ms, prefill to first token %.0f ms, "
                                + "time to first token %.0f ms (token %d)%n", round, pv.frames(), ids.length, positions.size(), (t1 - t0) / 1e6,
                        (t2 - t1) / 1e6, (t3 - t2) / 1e6, (t3 - t0) / 1e6, first.tokenId());
            }
            PixelValues pv = processor.process(decoder.decode(png));
            for (int concurrent : new int[] {1, 4}) {
                int images = Math.max(2, concurrent); // SmolVLM-256M's shape: ~1 min an image on 2 cores
                ExecutorService pool = Executors.newFixedThreadPool(concurrent);
                try {
                    long start = System.nanoTime();
                    List<Future<?>> done = new ArrayList<>();
                    for (int i = 0; i < images; i++) {
                        done.add(pool.submit(() -> {
                            PixelValues p = processor.process(decoder.decode(png));
                            return encoder.encode(p.values(), p.frames(), p.height(), p.width());
                        }));
                    }
                    for (Future<?> d : done) d.get();
                    double seconds = (System.nanoTime() - start) / 1e9;
                    System.out.printf("%d at once: %d images (%d frames each) preprocessed and encoded in %.1f s: %.2f images/s%n", concurrent, images,
                            pv.frames(), seconds, images / seconds);
                } finally {
                    pool.shutdown();
                }
            }
        }
    }
}
