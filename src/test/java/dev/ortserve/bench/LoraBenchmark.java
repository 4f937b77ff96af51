package dev.ortserve.bench;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.ortserve.engine.EngineOptions;
import dev.ortserve.engine.GenerationRequest;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.LoraAdapter;
import dev.ortserve.engine.SamplingParams;
import dev.ortserve.engine.TokenEvent;
import dev.ortserve.engine.batching.ContinuousBatchingEngine;
import dev.ortserve.engine.load.LoraAdapters;
import dev.ortserve.engine.load.ModelLoader;
import dev.ortserve.engine.rewrite.RewriteOptions;
import dev.ortserve.engine.rewrite.WeightPrecision;
import dev.ortserve.modelgen.ModelGenerator;
import dev.ortserve.modelgen.ModelSize;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;

/**
 * LoRA adapters' cost (issue 34; not part of the test run): the generated model of {@code -Dbench.model} (default
 * qwen3-0.6b: Qwen3-0.6B's shape, random weights, GroupQueryAttention) at {@code -Dbench.precision} (model = fp32, or
 * int4), with two random PEFT adapters written for its shapes (alpha: rank {@code -Dbench.rank}, default 16, on all seven
 * projections; beta: rank 8 on q/v) and converted on load. Decode tokens/s (prompt 64, output {@code -Dbench.output},
 * default 64, greedy) at one stream: the graph without LoRA inputs, the base model on the graph with them, alpha, beta;
 * at four streams: four on the base, and base + alpha + alpha + beta (three passes per step); medians over
 * {@code -Dbench.rounds} (default 3), alternated. Adapter load: cold (converted) and warm (the converted file cached).
 * Run with {@code ./mvnw -Pbench test -Dtest=LoraBenchmark}; report on stdout and target/lora-report.md.
 */
@Tag("bench")
class LoraBenchmark {

    static final int PROMPT = 64;
    static final int OUTPUT = Integer.getInteger("bench.output", 64);
    static final int ROUNDS = Integer.getInteger("bench.rounds", 3);
    static final int RANK = Integer.getInteger("bench.rank", 16);

    @Test
    void run() throws Exception {
        ModelSize size = ModelSize.parse(System.getProperty("bench.model", "qwen3-0.6b"));
        WeightPrecision precision = WeightPrecision.parse(System.getProperty("bench.precision", "model"));
        Path model = ModelGenerator.ensureGroupQueryAttention(size, Path.of("target", "bench-models").toAbsolutePath());
        Path work = Path.of("target", "bench-lora").toAbsolutePath();
        Path alpha = work.resolve(size.id() + "-alpha-r" + RANK), beta = work.resolve(size.id() + "-beta-r8");
        writePeft(alpha, size, RANK, List.of("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"), 1);
        writePeft(beta, size, 8, List.of("q_proj", "v_proj"), 2);
        Path rewrites = work.resolve("rewrites-" + precision.name().toLowerCase());
        Map<String, List<Double>> cells = new LinkedHashMap<>();
        List<String> loads = new ArrayList<>();
        EngineOptions base = EngineOptions.defaults().withPrefixCacheBytes(0).withKvInPlace(true).withLimits(8, 64, 512);
        for (int round = 0; round < ROUNDS; round++) {
            try (LoadedModel plain = ModelLoader.load(model, base.withRewrite(RewriteOptions.defaults(precision), rewrites));
                 ContinuousBatchingEngine engine = new ContinuousBatchingEngine(plain, base)) {
                rate(engine, single(null), 8); // warm-up
                cells.computeIfAbsent("1 stream, graph without LoRA inputs", k -> new ArrayList<>()).add(rate(engine, single(null), OUTPUT));
                cells.computeIfAbsent("4 streams, graph without LoRA inputs", k -> new ArrayList<>()).add(rate(engine, four(null, null, null, null), OUTPUT));
            }
            Set<String> modules = LoraAdapters.targetModules(List.of(alpha, beta));
            try (LoadedModel lora = ModelLoader.load(model, base.withRewrite(RewriteOptions.defaults(precision).withLoraModules(modules), rewrites))) {
                Path adapters = work.resolve("converted-" + round);
                long t0 = System.nanoTime();
                LoraAdapter a = LoraAdapters.load(lora, "alpha", alpha, adapters);
                long cold = System.nanoTime() - t0;
                a.close();
                t0 = System.nanoTime();
                a = LoraAdapters.load(lora, "alpha", alpha, adapters);
                long warm = System.nanoTime() - t0;
                loads.add(String.format("alpha (rank %d, %d projections, %,d bytes): cold %d ms, warm %d ms", RANK, a.projections(), a.bytes(),
                        cold / 1_000_000, warm / 1_000_000));
                try (LoraAdapter al = a; LoraAdapter be = LoraAdapters.load(lora, "beta", beta, adapters);
                     ContinuousBatchingEngine engine = new ContinuousBatchingEngine(lora, base)) {
                    rate(engine, single(al), 8);
                    cells.computeIfAbsent("1 stream, base model on the LoRA graph", k -> new ArrayList<>()).add(rate(engine, single(null), OUTPUT));
                    cells.computeIfAbsent("1 stream, alpha (rank " + RANK + ", all 7 projections)", k -> new ArrayList<>()).add(rate(engine, single(al), OUTPUT));
                    cells.computeIfAbsent("1 stream, beta (rank 8, q/v)", k -> new ArrayList<>()).add(rate(engine, single(be), OUTPUT));
                    cells.computeIfAbsent("4 streams, base model on the LoRA graph", k -> new ArrayList<>()).add(rate(engine, four(null, null, null, null), OUTPUT));
                    cells.computeIfAbsent("4 streams: base, alpha, alpha, beta", k -> new ArrayList<>()).add(rate(engine, four(null, al, al, be), OUTPUT));
                }
            }
        }
        StringBuilder report = new StringBuilder("| " + size.id() + " " + precision.name().toLowerCase() + " | decode tok/s (median of " + ROUNDS
                + ") | runs |\n|---|---|---|\n");
        for (var e : cells.entrySet()) {
            List<Double> v = new ArrayList<>(e.getValue());
            v.sort(null);
            report.append("| ").append(e.getKey()).append(" | ").append(v.get(v.size() / 2)).append(" | ").append(e.getValue()).append(" |\n");
        }
        report.append("\nAdapter loads: ").append(String.join("; ", loads)).append('\n');
        System.out.println(report);
        Files.writeString(Path.of("target", "lora-report.md"), report.toString());
    }

    private static List<LoraAdapter> single(LoraAdapter a) {
        List<LoraAdapter> out = new ArrayList<>();
        out.add(a);
        return out;
    }

    private static List<LoraAdapter> four(LoraAdapter a, LoraAdapter b, LoraAdapter c, LoraAdapter d) {
        List<LoraAdapter> out = new ArrayList<>();
        out.add(a);
        out.add(b);
        out.add(c);
        out.add(d);
        return out;
    }

    /**
     * One stream per entry (its adapter, or null for the base model), all admitted at once: decode tokens/s over all of
     * them, from the moment every stream has its first token to the last token (prefill left out).
     */
    static double rate(ContinuousBatchingEngine engine, List<LoraAdapter> adapters, int output) throws InterruptedException {
        int n = adapters.size();
        List<GenerationRequest> requests = new ArrayList<>();
        Random random = new Random(7);
        for (int i = 0; i < n; i++) {
            int[] prompt = new int[PROMPT];
            for (int j = 0; j < PROMPT; j++) prompt[j] = 1000 + random.nextInt(20000);
            requests.add(new GenerationRequest("b" + i + "-" + System.nanoTime(), prompt, 
                    new SamplingParams(0, 1, 0, 0, 1, 0, 0, Map.of(), null, output, 0, true, List.of(), List.of(), false, true, null), null,
                    adapters.get(i)));
        }
        AtomicLong firstAll = new AtomicLong(), last = new AtomicLong(), tokens = new AtomicLong();
        CountDownLatch firsts = new CountDownLatch(n), done = new CountDownLatch(n);
        for (var events : engine.generateAll(requests)) {
            boolean[] first = {true};
            events.subscribe().with(e -> {
                if (e.tokenId() < 0) return;
                if (first[0]) {
                    first[0] = false;
                    firstAll.accumulateAndGet(System.nanoTime(), Math::max);
                    firsts.countDown();
                } else {
                    tokens.incrementAndGet();
                }
                last.accumulateAndGet(System.nanoTime(), Math::max);
            }, f -> done.countDown(), done::countDown);
        }
        done.await();
        return Math.round(tokens.get() / ((last.get() - firstAll.get()) / 1e9) * 10) / 10.0;
    }

    /** A PEFT adapter (adapter_config.json, adapter_model.safetensors) of random weights for the generated model's shapes. */
    static void writePeft(Path dir, ModelSize size, int rank, List<String> modules, long seed) throws IOException {
        if (Files.isRegularFile(dir.resolve("adapter_model.safetensors"))) return;
        Files.createDirectories(dir);
        int h = size.hiddenSize, q = size.heads * size.headDim(), kv = size.kvHeads * size.headDim(), f = size.intermediateSize;
        Map<String, int[]> inOut = Map.of("q_proj", new int[] {h, q}, "k_proj", new int[] {h, kv}, "v_proj", new int[] {h, kv}, "o_proj", new int[] {q, h},
                "gate_proj", new int[] {h, f}, "up_proj", new int[] {h, f}, "down_proj", new int[] {f, h});
        Map<String, float[]> tensors = new LinkedHashMap<>();
        Map<String, int[]> shapes = new LinkedHashMap<>();
        Random random = new Random(seed);
        for (int l = 0; l < size.layers; l++) {
            for (String m : modules) {
                int[] io = inOut.get(m);
                String key = "base_model.model.model.layers." + l + "." + (m.endsWith("_proj") && List.of("q_proj", "k_proj", "v_proj", "o_proj").contains(m)
                        ? "self_attn" : "mlp") + "." + m;
                float[] a = new float[rank * io[0]], b = new float[io[1] * rank];
                for (int i = 0; i < a.length; i++) a[i] = (float) (random.nextGaussian() / Math.sqrt(io[0]));
                for (int i = 0; i < b.length; i++) b[i] = (float) (random.nextGaussian() * 0.01);
                tensors.put(key + ".lora_A.weight", a);
                shapes.put(key + ".lora_A.weight", new int[] {rank, io[0]});
                tensors.put(key + ".lora_B.weight", b);
                shapes.put(key + ".lora_B.weight", new int[] {io[1], rank});
            }
        }
        ObjectMapper json = new ObjectMapper();
        ObjectNode header = json.createObjectNode();
        header.putObject("__metadata__").put("format", "pt");
        long offset = 0;
        for (var e : tensors.entrySet()) {
            ObjectNode t = header.putObject(e.getKey()).put("dtype", "F32");
            for (int d : shapes.get(e.getKey())) t.withArray("shape").add(d);
            t.putArray("data_offsets").add(offset).add(offset + 4L * e.getValue().length);
            offset += 4L * e.getValue().length;
        }
        byte[] h8 = json.writeValueAsString(header).getBytes(StandardCharsets.UTF_8);
        try (var out = Files.newOutputStream(dir.resolve("adapter_model.safetensors"))) {
            out.write(ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(h8.length).array());
            out.write(h8);
            for (float[] v : tensors.values()) {
                ByteBuffer b = ByteBuffer.allocate(4 * v.length).order(ByteOrder.LITTLE_ENDIAN);
                b.asFloatBuffer().put(v);
                out.write(b.array());
            }
        }
        ObjectNode cfg = json.createObjectNode().put("peft_type", "LORA").put("r", rank).put("lora_alpha", 2 * rank).put("bias", "none")
                .put("use_rslora", false).put("use_dora", false).put("fan_in_fan_out", false).put("task_type", "CAUSAL_LM");
        modules.forEach(cfg.putArray("target_modules")::add);
        Files.writeString(dir.resolve("adapter_config.json"), json.writerWithDefaultPrettyPrinter().writeValueAsString(cfg));
    }
}
