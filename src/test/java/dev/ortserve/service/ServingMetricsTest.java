package dev.ortserve.service;

import dev.ortserve.engine.PrefixCacheStats;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.Test;

import java.lang.ref.WeakReference;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The meters read from a loaded model keep reading it after a garbage collection: Micrometer holds a gauge's or
 * function counter's state through a weak reference, so a supplier nothing else holds would read NaN from the first GC
 * on (the soak, issue 51, found the prefix cache's gauges at NaN on every replica within a minute).
 */
class ServingMetricsTest {

    @Test
    void aModelsGaugesAndCountersStillReadAfterAGarbageCollection() {
        ServingMetrics metrics = new ServingMetrics();
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        metrics.registry = registry;
        // suppliers made here and held by nothing but the metrics, as the model host passes them (capturing lambdas: a new
        // object each, where a lambda that captures nothing is one object its class holds forever)
        long bytes = 4096, held = 6144, timeouts = 7, accepted = 9;
        metrics.prefixCache("m", () -> new PrefixCacheStats(bytes, 8192, 2, 5, 40, 16, 1, bytes / 2, 3));
        metrics.kvBudget("m", () -> held, 65536, () -> timeouts);
        metrics.speculativeDecoding("m", () -> accepted + 2, () -> accepted);
        collectWeaklyReachable();
        assertEquals(4096, registry.get("ortserve_prefix_cache_bytes").gauge().value());
        assertEquals(2048, registry.get("ortserve_prefix_cache_unreferenced_bytes").gauge().value());
        assertEquals(2, registry.get("ortserve_prefix_cache_blocks").gauge().value());
        assertEquals(16, registry.get("ortserve_prefix_cache_hit_tokens").functionCounter().count());
        assertEquals(6144, registry.get("ortserve_kv_cache_used_bytes").gauge().value());
        assertEquals(7, registry.get("ortserve_queue_timeouts").functionCounter().count());
        assertEquals(9, registry.get("ortserve_spec_decode_num_accepted_tokens").functionCounter().count());
    }

    /** Collects until a GC has cleared a weak reference to an object nothing holds: one that clears every such reference. */
    static void collectWeaklyReachable() {
        WeakReference<Object> sentinel = new WeakReference<>(new Object());
        for (int i = 0; i < 50 && sentinel.get() != null; i++) {
            System.gc();
            try {
                Thread.sleep(10);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        assertTrue(sentinel.get() == null, "a collection cleared the weak references");
    }
}
