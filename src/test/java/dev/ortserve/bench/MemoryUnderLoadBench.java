package dev.ortserve.bench;

import dev.ortserve.engine.batching.ContinuousBatchingEngine;
import dev.ortserve.engine.EngineOptions;
import dev.ortserve.engine.GenerationRequest;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.load.ModelLoader;
import dev.ortserve.engine.SamplingParams;
import dev.ortserve.engine.TokenEvent;
import dev.ortserve.engine.rewrite.RewriteOptions;
import dev.ortserve.engine.rewrite.WeightPrecision;
import io.smallrye.mutiny.Multi;

import java.lang.management.BufferPoolMXBean;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Memory while serving long prompts: the engine on a model directory with the server's default rewrites and KV
 * in place, a given KV budget (and the prefix cache inside it, the server's default), N concurrent prompts of P
 * random tokens each decoding O tokens (EOS ignored), submitted at once after a warm-up; resident set (VmRSS),
 * heap used and direct memory sampled every 20 ms. One configuration per JVM (peaks do not carry over):
 * <pre>
 * ./mvnw -q dependency:build-classpath -Dmdep.outputFile=target/cp.txt
 * echo "-cp target/classes:target/test-classes:$(cat target/cp.txt)" > target/cp.args
 * java [-Xmx1g] @target/cp.args dev.ortserve.bench.MemoryUnderLoadBench MODEL_DIR model|int8|int4 KV_BYTES STREAMS [PROMPT=1600] [OUTPUT=32] [KV_DTYPE=model|auto]
 * </pre>
 * {@code -Dbench.native-matmul=false} serves onnxruntime's MatMulNBits instead of the native library's.
 * The KV budget is capped at half of the JVM's direct-memory limit, as the server's memory budget caps it.
 * Prints one line: {@code MEMBENCH streams prompt ready_rss_mb peak_rss_mb peak_heap_used_mb peak_direct_mb failed seconds kv_budget_mb
 * ttft_mean_s ttft_max_s decode_tok_s_per_stream} (time to first token from the submission of all; decode rate of each stream
 * from its first token to its last, averaged).
 */
public final class MemoryUnderLoadBench {

    public static void main(String[] args) throws Exception {
        Path dir = Path.of(args[0]).toAbsolutePath();
        WeightPrecision precision = WeightPrecision.parse(args[1]);
        long kvBytes = Long.parseLong(args[2]);
        int streams = Integer.parseInt(args[3]);
        int prompt = args.length > 4 ? Integer.parseInt(args[4]) : 1600;
        int output = args.length > 5 ? Integer.parseInt(args[5]) : 32;
        dev.ortserve.engine.rewrite.KvCacheDtype kvDtype = dev.ortserve.engine.rewrite.KvCacheDtype.parse(args.length > 6 ? args[6] : "model");
        kvBytes = Math.min(kvBytes, dev.ortserve.engine.memory.ProcessMemory.maxDirect() / 2);
        EngineOptions options = EngineOptions.defaults().withKvInPlace(true).withKvCacheBytes(kvBytes)
                .withRewrite(RewriteOptions.defaults(precision).withKvCacheDtype(kvDtype)
                        .withNativeMatMul(LongContextDecodeBenchmark.nativeMatMul()), Path.of("target", "bench-rewrite-cache").toAbsolutePath());
        try (LoadedModel model = ModelLoader.load(dir, options);
             ContinuousBatchingEngine engine = new ContinuousBatchingEngine(model, options)) {
            run(engine, model, 1, 16, 4); // warm-up
            System.gc();
            long ready = status("VmRSS");
            AtomicBoolean sampling = new AtomicBoolean(true);
            AtomicLong peakRss = new AtomicLong(), peakHeap = new AtomicLong(), peakDirect = new AtomicLong();
            Thread sampler = new Thread(() -> {
                var memory = ManagementFactory.getMemoryMXBean();
                while (sampling.get()) {
                    peakRss.accumulateAndGet(status("VmRSS"), Math::max);
                    peakHeap.accumulateAndGet(memory.getHeapMemoryUsage().getUsed(), Math::max);
                    peakDirect.accumulateAndGet(direct(), Math::max);
                    try {
                        Thread.sleep(20);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            });
            sampler.setDaemon(true);
            sampler.start();
            long start = System.nanoTime();
            Run r = run(engine, model, streams, prompt, output);
            int failed = r.failed();
            double seconds = (System.nanoTime() - start) / 1e9;
            sampling.set(false);
            sampler.join();
            System.out.printf("MEMBENCH %d %d %d %d %d %d %d %.1f %d %.2f %.2f %.2f%n", streams, prompt, ready >> 20, peakRss.get() >> 20, peakHeap.get() >> 20,
                    peakDirect.get() >> 20, failed, seconds, kvBytes >> 20, r.ttftMean(), r.ttftMax(), r.decodeMean());
        }
    }

    /** What one run of N streams gave: failures, time to first token (mean, max) and per-stream decode rate (mean). */
    record Run(int failed, double ttftMean, double ttftMax, double decodeMean) {
    }

    /** Submits the streams at once; each one's first token and last token are timed as they arrive. */
    private static Run run(ContinuousBatchingEngine engine, LoadedModel model, int streams, int prompt, int output) throws InterruptedException {
        SplittableRandom random = new SplittableRandom(streams * 31L + prompt);
        int vocab = model.spec().vocabSize();
        SamplingParams params = new SamplingParams(0, 1, 0, 0, 1, 0, 0, Map.of(), null, output, 0, true, List.of(), List.of(), false, true, null);
        List<GenerationRequest> requests = new ArrayList<>();
        for (int i = 0; i < streams; i++) {
            int[] ids = new int[prompt];
            for (int j = 0; j < prompt; j++) ids[j] = 100 + random.nextInt(vocab - 200);
            requests.add(new GenerationRequest("m-" + i, ids, params));
        }
        AtomicInteger failed = new AtomicInteger();
        long[] first = new long[streams], last = new long[streams];
        int[] tokens = new int[streams];
        java.util.concurrent.CountDownLatch done = new java.util.concurrent.CountDownLatch(streams);
        long submitted = System.nanoTime();
        List<Multi<TokenEvent>> all = engine.generateAll(requests);
        for (int i = 0; i < streams; i++) {
            int k = i;
            all.get(i).subscribe().with(e -> {
                long now = System.nanoTime();
                if (first[k] == 0) first[k] = now;
                last[k] = now;
                tokens[k]++;
            }, f -> {
                failed.incrementAndGet();
                System.out.println("failed: " + f.getMessage());
                done.countDown();
            }, done::countDown);
        }
        done.await(30, java.util.concurrent.TimeUnit.MINUTES);
        double ttftSum = 0, ttftMax = 0, rateSum = 0;
        int rated = 0;
        for (int i = 0; i < streams; i++) {
            if (first[i] == 0) continue;
            double ttft = (first[i] - submitted) / 1e9;
            ttftSum += ttft;
            ttftMax = Math.max(ttftMax, ttft);
            if (tokens[i] > 1 && last[i] > first[i]) {
                rateSum += (tokens[i] - 1) / ((last[i] - first[i]) / 1e9);
                rated++;
            }
        }
        return new Run(failed.get(), ttftSum / Math.max(1, streams - failed.get()), ttftMax, rated == 0 ? 0 : rateSum / rated);
    }

    private static long direct() {
        for (BufferPoolMXBean pool : ManagementFactory.getPlatformMXBeans(BufferPoolMXBean.class)) {
            if (pool.getName().equals("direct")) return pool.getMemoryUsed();
        }
        return 0;
    }

    private static long status(String field) {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (line.startsWith(field + ":")) return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
            }
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
        return -1;
    }
}
