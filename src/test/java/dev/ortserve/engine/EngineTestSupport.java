package dev.ortserve.engine;

import dev.ortserve.engine.batching.ContinuousBatchingEngine;

import io.smallrye.mutiny.Multi;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

/** Runs generations to completion and reads their results, for engine tests. */
public final class EngineTestSupport {

    public static final Path REFERENCE = Path.of("src/test/resources/fixtures/reference-llama");
    public static final Path REFERENCE_GENAI = Path.of("src/test/resources/fixtures/reference-llama-genai");
    private static final AtomicInteger IDS = new AtomicInteger();

    public record Result(List<Integer> tokens, String text, FinishReason finish, Object stopReason, List<TokenEvent> events) {
    }

    private EngineTestSupport() {
    }

    public static GenerationRequest request(int[] prompt, SamplingParams params) {
        return new GenerationRequest("test-" + IDS.incrementAndGet(), prompt, params);
    }

    public static Result collect(Multi<TokenEvent> events) {
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

    public static List<Result> concurrently(GenerationEngine engine, List<GenerationRequest> requests) {
        List<Multi<TokenEvent>> streams = new ArrayList<>();
        for (GenerationRequest r : requests) streams.add(engine.generate(r));
        return streams.stream().map(EngineTestSupport::collect).toList();
    }

    /**
     * Checks the KV budget at every engine event (on the engine thread, where the accessors are
     * exact): what is held (running reservations + every prefix-cache block: a block a running sequence
     * references is a second copy of positions its row holds) stays within the budget, unless one sequence
     * alone is over it (then the cache holds nothing unreferenced); the referenced blocks are positions of
     * running sequences (no more than their reservations); the cache never holds more than its cap.
     * The first broken rule is kept, to be asserted by the test thread ({@link #assertHeld}).
     */
    public static final class BudgetWatch implements EngineListener {
        private final java.util.concurrent.atomic.AtomicReference<ContinuousBatchingEngine> engine = new java.util.concurrent.atomic.AtomicReference<>();
        private final java.util.concurrent.atomic.AtomicReference<String> broken = new java.util.concurrent.atomic.AtomicReference<>();
        private final java.util.concurrent.atomic.AtomicLong events = new java.util.concurrent.atomic.AtomicLong();
        private final java.util.concurrent.atomic.AtomicLong mostHeld = new java.util.concurrent.atomic.AtomicLong();

        BudgetWatch watch(ContinuousBatchingEngine e) {
            engine.set(e);
            e.listener(this);
            return this;
        }

        private void check() {
            ContinuousBatchingEngine e = engine.get();
            if (e == null) return;
            events.incrementAndGet();
            long budget = e.kvBudgetBytes(), reserved = e.kvReservedBytes(), held = e.kvHeldBytes();
            PrefixCacheStats p = e.prefixCache();
            long unreferenced = p == null ? 0 : p.unreferencedBytes(), cached = p == null ? 0 : p.bytes();
            mostHeld.accumulateAndGet(held, Math::max);
            String where = " (budget " + budget + ", reserved " + reserved + ", held " + held + ", cache " + p + ")";
            if (held != reserved + cached) broken.compareAndSet(null, "held is not reserved + cached" + where);
            if (held > budget && !(reserved > budget && unreferenced == 0)) broken.compareAndSet(null, "over the budget" + where);
            if (p != null && p.bytes() - p.unreferencedBytes() > reserved) {
                broken.compareAndSet(null, "referenced blocks outside the reservations" + where);
            }
            if (p != null && (p.bytes() > p.budgetBytes() || p.budgetBytes() > budget)) broken.compareAndSet(null, "cache over its cap" + where);
        }

        @Override
        public void scheduled(long queuedNanos) {
            check();
        }

        @Override
        public void stepped(int rows, long kvPositions, long kvCapacity) {
            check();
        }

        /** The largest total held at any event. */
        long mostHeld() {
            return mostHeld.get();
        }

        void assertHeld() {
            org.junit.jupiter.api.Assertions.assertNull(broken.get());
            org.junit.jupiter.api.Assertions.assertTrue(events.get() > 0, "no engine event was watched");
        }
    }

    public static int[] ints(com.fasterxml.jackson.databind.JsonNode array) {
        int[] out = new int[array.size()];
        for (int i = 0; i < out.length; i++) out[i] = array.get(i).asInt();
        return out;
    }
}
