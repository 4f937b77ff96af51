package dev.ortserve.service;

import dev.ortserve.engine.EngineListener;
import dev.ortserve.engine.TokenEvent;
import dev.ortserve.engine.PrefixCacheStats;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import io.smallrye.mutiny.Multi;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The serving metrics, with fixed names dashboards can rely on (Prometheus names in
 * docs/observability.md) and bounded labels only: model, reason, op. No per-request labels.
 */
@ApplicationScoped
public class ServingMetrics {

    @Inject
    MeterRegistry registry;

    /** Suppliers the meters read (Micrometer holds a meter's state weakly), by model: kept while the model is loaded. */
    private final java.util.Map<String, java.util.List<Object>> readings = new java.util.concurrent.ConcurrentHashMap<>();
    private final java.util.Map<String, AtomicInteger> batchSizes = new java.util.concurrent.ConcurrentHashMap<>();
    private final java.util.Map<String, AtomicReference<Double>> kvUsages = new java.util.concurrent.ConcurrentHashMap<>();
    /** The gauges and function counters read from a loaded model, by model: removed when it unloads (its engine is gone). */
    private final java.util.Map<String, java.util.List<io.micrometer.core.instrument.Meter>> modelMeters = new java.util.concurrent.ConcurrentHashMap<>();

    private static final Duration[] SLO = {Duration.ofMillis(5), Duration.ofMillis(10), Duration.ofMillis(25), Duration.ofMillis(50),
            Duration.ofMillis(100), Duration.ofMillis(250), Duration.ofMillis(500), Duration.ofSeconds(1), Duration.ofSeconds(2),
            Duration.ofSeconds(5), Duration.ofSeconds(10), Duration.ofSeconds(30), Duration.ofSeconds(60)};

    /** Registers the engine's gauges and listens to its scheduling and steps. */
    public EngineListener engineListener(String model) {
        // one state per model however many listeners are made for it (a test's wrapper makes a second): the gauges read it
        AtomicInteger batchSize = batchSizes.computeIfAbsent(model, m -> new AtomicInteger());
        AtomicReference<Double> kvUsage = kvUsages.computeIfAbsent(model, m -> new AtomicReference<>(0.0));
        keep(model, Gauge.builder("ortserve_batch_size", batchSize, AtomicInteger::get)
                .description("Sequences in the last batched decode step").tag("model", model).register(registry));
        keep(model, Gauge.builder("ortserve_kv_cache_usage_ratio", kvUsage, AtomicReference::get)
                .description("KV cache positions held / positions the limits allow (max-sequences x context)").tag("model", model).register(registry));
        Timer queue = timer("ortserve.queue.time", "Time from admission to the start of prefill", model);
        Timer step = timer("ortserve.decode.step", "A batched decode step in all: forward pass, sampling and the per-token callbacks of every stream", model);
        Timer forward = timer("ortserve.decode.forward", "The ONNX Runtime forward pass of a batched decode step", model);
        return new EngineListener() {
            @Override
            public void scheduled(long queuedNanos) {
                queue.record(queuedNanos, TimeUnit.NANOSECONDS);
            }

            @Override
            public void decoded(int rows, long forwardNanos, long stepNanos) {
                forward.record(forwardNanos, TimeUnit.NANOSECONDS);
                step.record(stepNanos, TimeUnit.NANOSECONDS);
            }

            @Override
            public void stepped(int rows, long kvPositions, long kvCapacity) {
                batchSize.set(rows);
                kvUsage.set(kvCapacity == 0 ? 0.0 : (double) kvPositions / kvCapacity);
            }
        };
    }

    /**
     * The prefix cache's gauges (bytes held, cap and unreferenced bytes, blocks) and counters read from it (lookups,
     * prompt tokens looked up, tokens reused, evictions); nothing when the cache is off.
     */
    public void prefixCache(String model, java.util.function.Supplier<PrefixCacheStats> stats) {
        if (stats.get() == null) return;
        keep(model, Gauge.builder("ortserve_prefix_cache_bytes", stats, s -> s.get().bytes())
                .description("Bytes of KV the prefix cache holds (its blocks' native buffers)").tag("model", model).register(registry));
        keep(model, Gauge.builder("ortserve_prefix_cache_budget_bytes", stats, s -> s.get().budgetBytes())
                .description("Bytes the prefix cache may hold (its cap, at most the KV budget it lives in)").tag("model", model).register(registry));
        keep(model, Gauge.builder("ortserve_prefix_cache_unreferenced_bytes", stats, s -> s.get().unreferencedBytes())
                .description("Bytes of prefix-cache blocks no running sequence references (counted against the KV budget, evicted first)")
                .tag("model", model).register(registry));
        keep(model, FunctionCounter.builder("ortserve_prefix_cache_evictions", stats, s -> s.get().evictions())
                .description("Prefix-cache blocks evicted (for its cap or for the KV budget)").tag("model", model).register(registry));
        keep(model, Gauge.builder("ortserve_prefix_cache_blocks", stats, s -> s.get().blocks())
                .description("Blocks (16 tokens each) in the prefix cache").tag("model", model).register(registry));
        keep(model, FunctionCounter.builder("ortserve_prefix_cache_lookups", stats, s -> s.get().lookups())
                .description("Prompts looked up in the prefix cache").tag("model", model).register(registry));
        keep(model, FunctionCounter.builder("ortserve_prefix_cache_prompt_tokens", stats, s -> s.get().promptTokens())
                .description("Prompt tokens looked up in the prefix cache").tag("model", model).register(registry));
        keep(model, FunctionCounter.builder("ortserve_prefix_cache_hit_tokens", stats, s -> s.get().hitTokens())
                .description("Prompt tokens whose KV was reused from the prefix cache").tag("model", model).register(registry));
        // the meters read it through a weak reference: kept here, or they read NaN after the first GC that finds it
        keepReading(model, stats);
    }

    /**
     * The KV budget as a router reads it (vLLM's {@code kv_cache_usage_perc}, the Gateway API Inference Extension's
     * signal): bytes held against the budget (running sequences' reservations and every prefix-cache block),
     * the budget, their ratio; requests failed unstarted after the queue timeout.
     */
    public void kvBudget(String model, java.util.function.LongSupplier held, long budget, java.util.function.LongSupplier timeouts) {
        keep(model, Gauge.builder("ortserve_kv_cache_used_bytes", held, h -> h.getAsLong())
                .description("KV bytes held against the budget: running sequences' reservations and every prefix-cache block")
                .tag("model", model).register(registry));
        keep(model, Gauge.builder("ortserve_kv_cache_budget_bytes", () -> budget)
                .description("The KV budget (ORTSERVE_ENGINE_KV_CACHE_BYTES, or what the memory limit leaves)").tag("model", model).register(registry));
        keep(model, Gauge.builder("ortserve_kv_cache_usage_perc", held, h -> budget <= 0 ? 0.0 : Math.min(1.0, h.getAsLong() / (double) budget))
                .description("KV bytes held / the KV budget, 0-1 (vLLM's kv_cache_usage_perc)").tag("model", model).register(registry));
        keep(model, FunctionCounter.builder("ortserve_queue_timeouts", timeouts, t -> t.getAsLong())
                .description("Requests answered 503 unstarted after waiting the queue timeout for KV budget").tag("model", model)
                .register(registry));
        // the meters read their suppliers through weak references: kept here
        keepReading(model, held);
        keepReading(model, timeouts);
    }

    /**
     * Speculative decoding (vLLM's {@code spec_decode_num_draft_tokens} and {@code spec_decode_num_accepted_tokens}): draft
     * tokens verified (predicted outputs and prompt lookup) and those accepted; their ratio is the acceptance rate.
     */
    public void speculativeDecoding(String model, java.util.function.LongSupplier drafted, java.util.function.LongSupplier accepted) {
        keep(model, FunctionCounter.builder("ortserve_spec_decode_num_draft_tokens", drafted, d -> d.getAsLong())
                .description("Draft tokens verified by speculative decoding (predicted outputs and prompt lookup)").tag("model", model)
                .register(registry));
        keep(model, FunctionCounter.builder("ortserve_spec_decode_num_accepted_tokens", accepted, a -> a.getAsLong())
                .description("Draft tokens the model accepted (each one a token generated without a pass of its own)").tag("model", model)
                .register(registry));
        keepReading(model, drafted);
        keepReading(model, accepted);
    }

    /** The process's memory budget as split at start, one gauge per part. */
    public void memoryBudget(dev.ortserve.engine.memory.MemoryBudget budget) {
        java.util.Map<String, Long> parts = new java.util.LinkedHashMap<>();
        parts.put("limit", budget.limit());
        parts.put("resident_at_ready", budget.resident());
        parts.put("heap_growth", budget.heapGrowth());
        parts.put("onnxruntime_working", budget.working());
        parts.put("overhead", budget.overhead());
        parts.put("kv", budget.kv());
        parts.forEach((part, bytes) -> Gauge.builder("ortserve_memory_budget_bytes", () -> bytes)
                .description("The memory budget's parts as split at start (ORTSERVE_MEMORY_LIMIT)").tag("part", part).register(registry));
    }

    /** The same events, timed: time to first token, inter-token latency, end to end, and token counts. */
    public Multi<TokenEvent> observe(String model, Multi<TokenEvent> events) {
        Timer ttft = timer("ortserve.time.to.first.token", "Time from admission to the first generated token", model);
        Timer itl = timer("ortserve.inter.token.latency", "Time between consecutive tokens of one sequence", model);
        Timer e2e = timer("ortserve.e2e.request.latency", "Time from admission to the last token of a sequence", model);
        Counter prompt = Counter.builder("ortserve.prompt.tokens").description("Prompt tokens prefilled").tag("model", model).register(registry);
        Counter generated = Counter.builder("ortserve.generation.tokens").description("Tokens generated").tag("model", model).register(registry);
        long start = System.nanoTime();
        long[] last = {0};
        return events.invoke(e -> {
            long now = System.nanoTime();
            if (last[0] == 0) {
                ttft.record(now - start, TimeUnit.NANOSECONDS);
                prompt.increment(e.promptTokens());
            } else {
                itl.record(now - last[0], TimeUnit.NANOSECONDS);
            }
            last[0] = now;
            generated.increment();
            if (e.isLast()) e2e.record(now - start, TimeUnit.NANOSECONDS);
        });
    }

    /** A request refused before any model work, by reason (an error code of this server: a bounded set). */
    public void rejected(String reason) {
        Counter.builder("ortserve.requests.rejected").description("Requests refused, by reason").tag("reason", reason == null ? "other" : reason)
                .register(registry).increment();
    }


    /** A meter read from a loaded model: removed by {@link #forget(String)} when the model unloads. */
    public void keep(String model, io.micrometer.core.instrument.Meter meter) {
        modelMeters.computeIfAbsent(model, m -> new java.util.concurrent.CopyOnWriteArrayList<>()).add(meter);
    }

    private void keepReading(String model, Object reading) {
        readings.computeIfAbsent(model, m -> new java.util.concurrent.CopyOnWriteArrayList<>()).add(reading);
    }

    /**
     * A model unloaded: its gauges and function counters (which read its engine) are removed, to be registered again
     * by its next load; its timers and counters (requests, tokens, latencies) go on counting across loads.
     */
    public void forget(String model) {
        java.util.List<io.micrometer.core.instrument.Meter> meters = modelMeters.remove(model);
        if (meters != null) meters.forEach(registry::remove);
        readings.remove(model);
        batchSizes.remove(model);
        kvUsages.remove(model);
    }

    private Timer timer(String name, String description, String model) {
        return Timer.builder(name).description(description).tag("model", model).serviceLevelObjectives(SLO).register(registry);
    }
}
