package dev.ortserve.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.ortserve.engine.batching.ContinuousBatchingEngine;
import dev.ortserve.engine.EngineOptions;
import dev.ortserve.engine.GenerationRequest;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.load.ModelLoader;
import dev.ortserve.engine.SamplingParams;
import dev.ortserve.engine.TokenEvent;
import dev.ortserve.engine.rewrite.RewriteOptions;
import dev.ortserve.engine.rewrite.WeightPrecision;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * ortserve's greedy ids against transformers' on a real exporter's model directory (one with a
 * reference.json as bench/realsize/export_qwen3_transformers.py writes it: {@code completions[]}
 * with {@code prompt_ids} and {@code greedy_ids}): loaded with the server's default rewrites at
 * model precision and loaded as exported (no rewrites), each prompt decoded alone and then all
 * together (batched, left-padded), through {@link ContinuousBatchingEngine}. Prints one line per
 * prompt and configuration and exits 1 if any ids differ. A check for real-size files, not a unit
 * test (the suite stays on small models).
 *
 * <pre>
 * flock /tmp/bigmem.lock java -Xmx8g @target/cp.args dev.ortserve.bench.RealExportCheck &lt;model dir&gt; &lt;rewrite cache dir&gt; [reference key]
 * </pre>
 * The reference key (default {@code greedy_ids}, transformers' float32 ids) may name another list of each completion,
 * such as {@code onnxruntime_greedy_ids} (onnxruntime Python on the file as exported: the reference for a float16
 * export, whose ids leave float32's at its ties).
 * (target/cp.args as {@link StartBench} makes it)
 */
public final class RealExportCheck {

    private RealExportCheck() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: RealExportCheck <model dir> <rewrite cache dir> [reference key]");
            System.exit(2);
        }
        Path dir = Path.of(args[0]);
        JsonNode reference = new ObjectMapper().readTree(dir.resolve("reference.json").toFile());
        int max = reference.get("max_tokens").asInt();
        List<int[]> prompts = new ArrayList<>();
        List<List<Integer>> expected = new ArrayList<>();
        for (JsonNode ref : reference.get("completions")) {
            int[] p = new int[ref.get("prompt_ids").size()];
            for (int i = 0; i < p.length; i++) p[i] = ref.get("prompt_ids").get(i).asInt();
            prompts.add(p);
            List<Integer> ids = new ArrayList<>();
            ref.get(args.length > 2 ? args[2] : "greedy_ids").forEach(n -> ids.add(n.asInt()));
            expected.add(ids);
        }
        boolean allEqual = true;
        EngineOptions rewritten = EngineOptions.defaults().withRewrite(RewriteOptions.defaults(WeightPrecision.MODEL), Path.of(args[1]));
        allEqual &= check("default rewrites, model precision", dir, rewritten, prompts, expected, max);
        allEqual &= check("no rewrites", dir, EngineOptions.defaults(), prompts, expected, max);
        System.out.println(allEqual ? "REALEXPORTCHECK all equal" : "REALEXPORTCHECK DIFFERS");
        System.exit(allEqual ? 0 : 1);
    }

    private static boolean check(String label, Path dir, EngineOptions options, List<int[]> prompts, List<List<Integer>> expected, int max)
            throws Exception {
        long start = System.nanoTime();
        boolean allEqual = true;
        try (LoadedModel model = ModelLoader.load(dir, options)) {
            System.out.printf("%s: loaded in %.1f s, rewrites %s%n", label, (System.nanoTime() - start) / 1e9,
                    model.rewrites().isEmpty() ? "none" : String.join(", ", model.rewrites()));
            try (ContinuousBatchingEngine engine = new ContinuousBatchingEngine(model, options.withPrefixCacheBytes(0))) {
                List<List<Integer>> alone = new ArrayList<>();
                for (int[] p : prompts) alone.add(tokens(engine.generate(request(p, max))));
                List<io.smallrye.mutiny.Multi<TokenEvent>> streams = new ArrayList<>();
                for (int[] p : prompts) streams.add(engine.generate(request(p, max)));
                List<List<Integer>> together = new ArrayList<>();
                for (var s : streams) together.add(tokens(s));
                for (int i = 0; i < prompts.size(); i++) {
                    boolean a = alone.get(i).equals(expected.get(i)), t = together.get(i).equals(expected.get(i));
                    allEqual &= a && t;
                    System.out.printf("%s: prompt %d (%d tokens): alone %s, batched %s%n", label, i, prompts.get(i).length,
                            a ? "equal" : "DIFFERS " + agreeing(alone.get(i), expected.get(i)) + " " + alone.get(i),
                            t ? "equal" : "DIFFERS " + agreeing(together.get(i), expected.get(i)) + " " + together.get(i));
                }
            }
        }
        return allEqual;
    }

    private static String agreeing(List<Integer> got, List<Integer> expected) {
        int n = 0;
        while (n < Math.min(got.size(), expected.size()) && got.get(n).equals(expected.get(n))) n++;
        return "(first " + n + " of " + expected.size() + " agree)";
    }

    private static int next;

    private static GenerationRequest request(int[] prompt, int max) {
        return new GenerationRequest("check-" + ++next, prompt, SamplingParams.greedy(max));
    }

    private static List<Integer> tokens(io.smallrye.mutiny.Multi<TokenEvent> events) {
        List<Integer> out = new ArrayList<>();
        for (TokenEvent e : events.collect().asList().await().atMost(Duration.ofMinutes(10))) out.add(e.tokenId());
        return out;
    }
}
