package dev.ortserve.engine;

import io.smallrye.mutiny.Multi;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

/** Runs generations to completion and reads their results, for engine tests. */
final class EngineTestSupport {

    static final Path REFERENCE = Path.of("src/test/resources/fixtures/reference-llama");
    static final Path REFERENCE_GENAI = Path.of("src/test/resources/fixtures/reference-llama-genai");
    private static final AtomicInteger IDS = new AtomicInteger();

    record Result(List<Integer> tokens, String text, FinishReason finish, Object stopReason, List<TokenEvent> events) {
    }

    private EngineTestSupport() {
    }

    static GenerationRequest request(int[] prompt, SamplingParams params) {
        return new GenerationRequest("test-" + IDS.incrementAndGet(), prompt, params);
    }

    static Result collect(Multi<TokenEvent> events) {
        List<TokenEvent> list = events.collect().asList().await().atMost(Duration.ofSeconds(60));
        List<Integer> tokens = new ArrayList<>();
        StringBuilder text = new StringBuilder();
        for (TokenEvent e : list) {
            tokens.add(e.tokenId());
            text.append(e.textDelta());
        }
        TokenEvent last = list.get(list.size() - 1);
        return new Result(tokens, text.toString(), last.finishReason(), last.stopReason(), list);
    }

    static List<Result> concurrently(GenerationEngine engine, List<GenerationRequest> requests) {
        List<Multi<TokenEvent>> streams = new ArrayList<>();
        for (GenerationRequest r : requests) streams.add(engine.generate(r));
        return streams.stream().map(EngineTestSupport::collect).toList();
    }

    static int[] ints(com.fasterxml.jackson.databind.JsonNode array) {
        int[] out = new int[array.size()];
        for (int i = 0; i < out.length; i++) out[i] = array.get(i).asInt();
        return out;
    }
}
