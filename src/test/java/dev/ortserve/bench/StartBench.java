package dev.ortserve.bench;

import ai.onnx.proto.OnnxMl.ModelProto;
import ai.onnx.proto.OnnxMl.StringStringEntryProto;
import ai.onnx.proto.OnnxMl.TensorProto;
import com.google.protobuf.CodedInputStream;
import dev.ortserve.engine.EngineOptions;
import dev.ortserve.engine.LoadedModel;
import dev.ortserve.engine.load.ModelLoader;
import dev.ortserve.engine.rewrite.RewriteOptions;
import dev.ortserve.engine.rewrite.WeightPrecision;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;

/**
 * Start cost of a model: ready time (the loader's load, rewrite and load check, until the session
 * to serve is open) and peak RSS (the process's VmHWM), cold (empty rewrite cache) and warm (cache
 * filled), each start in a fresh child JVM so that peaks do not carry over. The served weights'
 * bytes are those the served graph references (the denominator of "x weights").
 *
 * <pre>
 * ./mvnw -q dependency:build-classpath -Dmdep.outputFile=target/cp.txt
 * echo "-cp target/classes:target/test-classes:$(cat target/cp.txt)" > target/cp.args
 * flock /tmp/bigmem.lock java -Xmx8g @target/cp.args dev.ortserve.bench.StartBench &lt;model dir&gt; model|int8|int4 &lt;cache dir&gt; [runs]
 * </pre>
 * (an @argfile: onnxruntime crashed with the 35 KB class path expanded on the command line)
 */
public final class StartBench {

    private StartBench() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length >= 1 && args[0].equals("--child")) {
            child(Path.of(args[1]), WeightPrecision.parse(args[2]), Path.of(args[3]));
            return;
        }
        if (args.length < 3) {
            System.err.println("usage: StartBench <model dir> model|int8|int4 <cache dir> [runs]");
            System.exit(2);
        }
        Path model = Path.of(args[0]);
        String precision = args[1];
        Path cache = Path.of(args[2]);
        int runs = args.length > 3 ? Integer.parseInt(args[3]) : 2;
        Path argFile = Files.createTempFile("startbench", ".args");
        Files.writeString(argFile, "-cp " + System.getProperty("java.class.path"));
        try {
            System.out.printf("| precision | start | ready s | peak RSS GB | served weights GB | peak / weights |%n|---|---|---|---|---|---|%n");
            for (int r = 0; r < runs; r++) {
                deleteTree(cache);
                report(precision, "cold", run(argFile, model, precision, cache));
                report(precision, "warm", run(argFile, model, precision, cache));
            }
        } finally {
            Files.deleteIfExists(argFile);
        }
    }

    private static void report(String precision, String start, double[] r) {
        System.out.printf("| %s | %s | %.1f | %.2f | %.2f | %.2fx |%n", precision, start, r[0], r[1] / 1e9, r[2] / 1e9, r[1] / r[2]);
    }

    /** ready seconds, peak RSS bytes, served weight bytes (from the child's last line). */
    private static double[] run(Path argFile, Path model, String precision, Path cache) throws IOException, InterruptedException {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        List<String> cmd = List.of(java, "-Xmx8g", "@" + argFile, StartBench.class.getName(), "--child", model.toString(), precision, cache.toString());
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String result = null;
        try (BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream()))) {
            for (String line; (line = out.readLine()) != null; ) {
                if (line.startsWith("STARTBENCH ")) result = line;
                else if (line.contains("WARN") || line.contains("ERROR") || line.contains("Rewrote") || line.contains("Loaded")) System.err.println("  " + line);
            }
        }
        if (p.waitFor() != 0 || result == null) throw new IllegalStateException("child failed: " + cmd);
        String[] f = result.split(" ");
        return new double[] {Double.parseDouble(f[1]), Double.parseDouble(f[2]), Double.parseDouble(f[3])};
    }

    private static void child(Path model, WeightPrecision precision, Path cache) throws Exception {
        long start = System.nanoTime();
        EngineOptions options = EngineOptions.defaults().withRewrite(RewriteOptions.defaults(precision), cache);
        double seconds;
        try (LoadedModel loaded = ModelLoader.load(model, options)) {
            seconds = (System.nanoTime() - start) / 1e9;
            // what stays resident once ready: anonymous (packed weights, heap) and file-backed (mapped weights still read)
            System.out.printf("  Loaded and resident: anon %.2f GB, file %.2f GB%n", statusBytes("RssAnon") / 1e9, statusBytes("RssFile") / 1e9);
        }
        long peak = statusBytes("VmHWM");
        System.out.printf("STARTBENCH %.3f %d %d%n", seconds, peak, servedWeights(model, cache));
    }

    /** Bytes of the initializers the served graph references: the newest cache entry's, else the source's. */
    private static long servedWeights(Path model, Path cache) throws IOException {
        Path served = model.resolve("model.onnx");
        if (Files.isDirectory(cache)) {
            try (Stream<Path> entries = Files.list(cache)) {
                served = entries.filter(e -> Files.isRegularFile(e.resolve("model.onnx")))
                        .max(Comparator.comparing(e -> e.toFile().lastModified())).map(e -> e.resolve("model.onnx")).orElse(served);
            }
        }
        ModelProto m;
        try (InputStream in = Files.newInputStream(served)) {
            CodedInputStream c = CodedInputStream.newInstance(in);
            c.setSizeLimit(Integer.MAX_VALUE);
            m = ModelProto.parseFrom(c);
        }
        long bytes = 0;
        for (TensorProto t : m.getGraph().getInitializerList()) {
            bytes += t.getRawData().size();
            for (StringStringEntryProto e : t.getExternalDataList()) if (e.getKey().equals("length")) bytes += Long.parseLong(e.getValue());
        }
        return bytes;
    }

    private static long statusBytes(String field) throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
            if (line.startsWith(field + ":")) return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
        }
        return -1;
    }

    private static void deleteTree(Path dir) throws IOException {
        if (!Files.exists(dir)) return;
        try (Stream<Path> all = Files.walk(dir)) {
            List<Path> paths = new ArrayList<>(all.sorted(Comparator.reverseOrder()).toList());
            for (Path p : paths) Files.deleteIfExists(p);
        }
    }
}
