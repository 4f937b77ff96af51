package dev.ortserve.bench;

import dev.ortserve.engine.EngineOptions;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.load.ModelLoader;
import dev.ortserve.modelgen.ModelGenerator;
import dev.ortserve.modelgen.ModelSize;

import java.nio.file.Path;
import java.util.OptionalInt;

/**
 * The serving benchmark split into processes, so the server and the load generator need not
 * share cores (docs/benchmarks.md, "server and load generator apart"):
 * <pre>
 *   generate DIR                                   the bench model into DIR; prints its directory
 *   plain MODEL_DIR THREADS STREAMS PROMPT OUTPUT  the floor: plain ONNX Runtime loop, batch 1 and batch STREAMS
 *   http BASE_URL MODEL VOCAB STREAMS PROMPT OUTPUT  1 and STREAMS streaming clients against a running server
 * </pre>
 * Prompts are the same seeded random ids in every mode. Each mode warms up first and prints table rows.
 */
public final class SplitServingBenchmark {

    private SplitServingBenchmark() {
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "generate" -> System.out.println(ModelGenerator.ensure(ModelSize.BENCH, Path.of(args[1]).toAbsolutePath()));
            case "plain" -> {
                int threads = Integer.parseInt(args[2]), streams = Integer.parseInt(args[3]);
                int prompt = Integer.parseInt(args[4]), output = Integer.parseInt(args[5]);
                // the graph the server serves by default (rewritten on load), so floor and server run the same graph
                EngineOptions options = EngineOptions.builder().intraOpThreads(threads).maxSequences(streams).queueCapacity(4 * streams)
                        .rewrite(new dev.ortserve.engine.rewrite.RewriteOptions(true, dev.ortserve.engine.rewrite.WeightPrecision.MODEL, true))
                        .rewriteCache(Path.of(args[1]).toAbsolutePath().getParent().resolve("rewritten")).build();
                try (LoadedModel model = ModelLoader.load(Path.of(args[1]), options)) {
                    int[][] prompts = DecodeBench.prompts(streams, prompt, model.spec().vocabSize());
                    DecodeBench.plainLoop(model, model.session(), prompts, 1, 8);
                    System.out.print(DecodeBench.TABLE_HEAD);
                    System.out.println(DecodeBench.plainLoop(model, model.session(), prompts, 1, output).row());
                    System.out.println(DecodeBench.plainLoop(model, model.session(), prompts, streams, output).row());
                }
            }
            case "http" -> {
                String base = args[1].endsWith("/") ? args[1] : args[1] + "/";
                int vocab = Integer.parseInt(args[3]), streams = Integer.parseInt(args[4]);
                int prompt = Integer.parseInt(args[5]), output = Integer.parseInt(args[6]);
                int[][] prompts = DecodeBench.prompts(streams, prompt, vocab);
                // a separate server process is cold: one full-length round of each shape first
                DecodeBench.http(base, args[2], prompts, 1, output);
                DecodeBench.http(base, args[2], prompts, streams, output);
                System.out.print(DecodeBench.TABLE_HEAD);
                System.out.println(DecodeBench.http(base, args[2], prompts, 1, output).row());
                System.out.println(DecodeBench.http(base, args[2], prompts, streams, output).row());
            }
            default -> throw new IllegalArgumentException("modes: generate, plain, http");
        }
    }
}
