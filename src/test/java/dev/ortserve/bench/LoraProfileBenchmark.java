package dev.ortserve.bench;

import ai.onnxruntime.OrtEnvironment;
import ai.onnxruntime.OrtSession;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.engine.EngineOptions;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.LoraAdapter;
import dev.ortserve.engine.batching.ContinuousBatchingEngine;
import dev.ortserve.engine.load.LoraAdapters;
import dev.ortserve.engine.load.ModelLoader;
import dev.ortserve.engine.rewrite.RewriteOptions;
import dev.ortserve.engine.rewrite.WeightPrecision;
import dev.ortserve.modelgen.ModelGenerator;
import dev.ortserve.modelgen.ModelSize;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Where a LoRA adapter's decode time goes (not part of the test run): the served graph of {@link LoraBenchmark}'s model
 * and adapters in a session with onnxruntime's profiler; one stream decodes {@code 24} tokens with the base model, then
 * with alpha, then with beta; per run: onnxruntime's own run time (model_run), the kernels of the LoRA side paths
 * (nodes named .../lora_A/MatMul, .../lora_B/MatMul, .../lora/Add) and the other kernels. {@code -Dbench.precision}.
 * Run with {@code ./mvnw -Pbench test -Dtest=LoraProfileBenchmark}.
 */
@Tag("bench")
class LoraProfileBenchmark {

    @Test
    void run() throws Exception {
        ModelSize size = ModelSize.parse(System.getProperty("bench.model", "qwen3-0.6b"));
        WeightPrecision precision = WeightPrecision.parse(System.getProperty("bench.precision", "int4"));
        Path model = ModelGenerator.ensureGroupQueryAttention(size, Path.of("target", "bench-models").toAbsolutePath());
        Path work = Path.of("target", "bench-lora").toAbsolutePath();
        Path alpha = work.resolve(size.id() + "-alpha-r16"), beta = work.resolve(size.id() + "-beta-r8");
        LoraBenchmark.writePeft(alpha, size, 16, List.of("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"), 1);
        LoraBenchmark.writePeft(beta, size, 8, List.of("q_proj", "v_proj"), 2);
        EngineOptions base = EngineOptions.defaults().withPrefixCacheBytes(0).withKvInPlace(true).withLimits(8, 64, 512);
        EngineOptions options = base.withRewrite(RewriteOptions.defaults(precision).withLoraModules(LoraAdapters.targetModules(List.of(alpha, beta))),
                work.resolve("rewrites-" + precision.name().toLowerCase()));
        try (LoadedModel loaded = ModelLoader.load(model, options)) {
            OrtSession.SessionOptions so = ModelLoader.sessionOptions(options);
            Path prefix = Files.createTempDirectory("ort-profile").resolve("lora");
            so.enableProfiling(prefix.toString());
            OrtSession session = OrtEnvironment.getEnvironment().createSession(loaded.servedFile().toString(), so);
            LoadedModel profiled = new LoadedModel(loaded.directory(), loaded.modelFile(), loaded.spec(), loaded.tokenizer(), loaded.environment(), session,
                    loaded.executionProvider(), loaded.chatTemplate(), loaded.specialTokens(), loaded.rewrites(), loaded.servedFile());
            List<int[]> marks = new ArrayList<>();
            try (LoraAdapter a = LoraAdapters.load(loaded, "alpha", alpha, work.resolve("converted-profile"));
                 LoraAdapter b = LoraAdapters.load(loaded, "beta", beta, work.resolve("converted-profile"));
                 ContinuousBatchingEngine engine = new ContinuousBatchingEngine(profiled, base)) {
                for (LoraAdapter adapter : java.util.Arrays.asList(null, a, b)) {
                    long before = engine.steps();
                    LoraBenchmark.rate(engine, java.util.Collections.singletonList(adapter), 24);
                    marks.add(new int[] {(int) before, (int) engine.steps()});
                }
            }
            String file = session.endProfiling();
            session.close();
            JsonNode events = new ObjectMapper().readTree(Path.of(file).toFile());
            List<long[]> runs = new ArrayList<>();
            for (JsonNode e : events) {
                if (e.path("name").asText().equals("model_run")) runs.add(new long[] {e.path("ts").asLong(), e.path("ts").asLong() + e.path("dur").asLong()});
            }
            runs.sort((x, y) -> Long.compare(x[0], y[0]));
            double[][] sums = new double[runs.size()][3]; // run time, LoRA kernels, other kernels (ms)
            for (int r = 0; r < runs.size(); r++) sums[r][0] = (runs.get(r)[1] - runs.get(r)[0]) / 1000.0;
            for (JsonNode e : events) {
                if (!e.path("cat").asText().equals("Node") || !e.path("name").asText().endsWith("_kernel_time")) continue;
                long ts = e.path("ts").asLong();
                int run = -1;
                for (int r = 0; r < runs.size(); r++) if (ts >= runs.get(r)[0] && ts <= runs.get(r)[1]) run = r;
                if (run < 0) continue;
                boolean lora = e.path("name").asText().contains("/lora");
                sums[run][lora ? 1 : 2] += e.path("dur").asDouble() / 1000.0;
            }
            StringBuilder report = new StringBuilder("| " + size.id() + " " + precision.name().toLowerCase()
                    + " decode step | runs | model_run ms | LoRA kernels ms | other kernels ms | outside kernels ms |\n|---|---|---|---|---|---|\n");
            String[] names = {"base", "alpha (r16, 7 projections)", "beta (r8, q/v)"};
            // the warm-up of each round's 1-stream rate is its own pass; decode steps are the runs after the prefill: count the last 16 of each
            for (int k = 0; k < 3; k++) {
                int to = marks.get(k)[1], from = Math.max(marks.get(k)[0] + 4, to - 16);
                double[] t = new double[3];
                int n = 0;
                for (int r = from; r < to && r < runs.size(); r++, n++) for (int c = 0; c < 3; c++) t[c] += sums[r][c];
                report.append(String.format("| %s | %d | %.2f | %.2f | %.2f | %.2f |%n", names[k], n, t[0] / n, t[1] / n, t[2] / n, (t[0] - t[1] - t[2]) / n));
            }
            System.out.println(report);
            Files.writeString(Path.of("target", "lora-profile-report.md"), report.toString());
            Files.deleteIfExists(Path.of(file));
        }
    }
}
